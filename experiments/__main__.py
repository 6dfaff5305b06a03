"""Command line: ``python -m experiments <command>`` (also the ``tskernels-experiments``
console script).

Commands: ``run`` (the one-versus-rest UEA benchmark, resumable), ``report`` (tables and
plots from a store), ``list`` (data sets, kernels, scorers), ``demo`` (the Gram table of
every kernel) and ``adbench`` (the ADBench tabular benchmark; arguments passed through).
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
from pathlib import Path


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block): ``prog: error: message``."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _number(s: str, what: str) -> int | float:
    s = s.strip()
    if not s:
        raise argparse.ArgumentTypeError(f"{what}: empty value")
    try:
        v = int(s) if s.lstrip("+-").isdigit() else float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: {s!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{what}: {s!r} is not a finite number")
    return v


def _floats(s: str) -> list[float]:
    """1e-8,1e-5 -> [1e-8, 1e-5]; empty items and non-finite values are errors."""
    return [float(_number(v, "--alphas")) for v in s.split(",")]


def _ints(s: str) -> list[int]:
    out = []
    for v in s.split(","):
        n = _number(v, "--levels")
        if not isinstance(n, int):
            raise argparse.ArgumentTypeError(f"--levels: {v!r} is not an integer")
        out.append(n)
    return out


def _grid_arg(s: str) -> tuple[str, str, list]:
    """KERNEL.AXIS=v1,v2 -> (kernel, axis, values)."""
    try:
        lhs, rhs = s.split("=", 1)
        kernel, axis = lhs.split(".", 1)
    except ValueError:
        msg = f"--grid expects KERNEL.AXIS=v1,v2,..., got {s!r}"
        raise argparse.ArgumentTypeError(msg) from None
    return kernel, axis, [_number(v, f"--grid {lhs}") for v in rhs.split(",")]


def _tc(s: str) -> list[bool]:
    choices = {"no": [False], "yes": [True], "both": [False, True]}
    if s not in choices:
        raise argparse.ArgumentTypeError(f"--time-channel must be no, yes or both, got {s!r}")
    return choices[s]


def _parser() -> argparse.ArgumentParser:
    from ._grids import PRESETS, SCORER_NAMES

    parser = _Parser(
        prog="python -m experiments",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run or resume the one-versus-rest UEA benchmark")
    run.add_argument(
        "--dataset",
        "--datasets",
        dest="datasets",
        nargs="+",
        default=None,
        metavar="DATA",
        help="UEA names, or own data: a folder of .ts files, FILE.npz (X, y or X_train, "
        "y_train, X_test, y_test), FILE.csv (long: series id, time, channels..., label) or "
        "sktime:NAME (default: the preset's)",
    )
    run.add_argument(
        "--normal-class",
        dest="normal_classes",
        nargs="+",
        default=None,
        metavar="CLASS",
        help="the classes made normal in turn (default: every class)",
    )
    run.add_argument(
        "--kernels",
        nargs="+",
        default=None,
        help="grid names (default: every kernel with a default grid; the reference's "
        "single-level signature kernels are trunc_sig_linear_single, trunc_sig_rbf_single)",
    )
    run.add_argument(
        "--scorers",
        nargs="+",
        default=list(SCORER_NAMES),
        help=f"from {', '.join(SCORER_NAMES)} (default: all)",
    )
    run.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    run.add_argument("--folds", type=int, default=None, help="CV folds (quick 3, paper 4)")
    run.add_argument("--repeats", type=int, default=None, help="CV repeats (quick 1, paper 10)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--alphas", type=_floats, default=None, help="e.g. 1e-8,1e-5,1e-2")
    run.add_argument("--max-rank", type=int, default=None, help="ranks 1..M (default 50)")
    run.add_argument("--time-channel", type=_tc, default=None, help="no, yes or both")
    run.add_argument(
        "--levels",
        type=_ints,
        default=None,
        help="truncation levels of the signature kernels, e.g. 1,2,3",
    )
    run.add_argument(
        "--grid",
        type=_grid_arg,
        action="append",
        default=[],
        metavar="KERNEL.AXIS=V1,V2",
        help="override one grid axis (repeatable)",
    )
    run.add_argument(
        "--share",
        choices=["fold", "class"],
        default="fold",
        help="fold: pre-processing and Gram per fold (the protocol); class: one "
        "Gram per class shared by all folds (faster)",
    )
    run.add_argument("--store", default="results/experiments.sqlite", help="SQLite file")
    run.add_argument("--data-dir", default=None, help="folder of UEA .ts files (found by name)")
    run.add_argument("--device", default=None, help="torch device of the kernels (cpu, cuda)")
    run.add_argument("--workers", type=int, default=1, help="local worker processes")
    run.add_argument("--threads", type=int, default=None, help="torch threads per worker")
    run.add_argument(
        "--scheduler", default="local", help="'local' or a Dask scheduler address tcp://HOST:PORT"
    )
    run.add_argument(
        "--report",
        default=None,
        metavar="DIR",
        help="write the report to DIR when the run completes",
    )
    run.add_argument("--reference", default=None, help="reference CSV to compare against")
    run.add_argument(
        "--max-cells",
        type=int,
        default=None,
        help="stop after computing this many cells (resume later)",
    )
    run.add_argument(
        "--retry-failed",
        action="store_true",
        help="compute the failed cells of this setting again (and the test cells that "
        "selected from them)",
    )
    run.add_argument("--no-progress", action="store_true")

    rep = sub.add_parser("report", help="tables and plots from a store")
    rep.add_argument("--store", default="results/experiments.sqlite")
    rep.add_argument("--out", default="results/report")
    rep.add_argument("--setting", default=None, help="setting id (default: the latest run's)")
    rep.add_argument("--reference", default=None, help="reference CSV to compare against")
    rep.add_argument("--no-plots", action="store_true")

    lst = sub.add_parser("list", help="data sets, kernels and scorers available")
    lst.add_argument("--data-dir", default=None)
    lst.add_argument(
        "--check",
        action="store_true",
        help="also import the kernels and scorers to say which are usable (slower)",
    )

    demo = sub.add_parser("demo", help="Gram matrices of every kernel on one data set")
    demo.add_argument("--dataset", default="BasicMotions")
    demo.add_argument("--data-dir", default=None)
    demo.add_argument("--device", default=None)

    sub.add_parser("adbench", help="the ADBench benchmark (arguments passed through)",
                   add_help=False)  # fmt: skip
    return parser


def _cmd_run(args) -> int:
    from ._report import print_summary, summary, write_report
    from ._runner import ConfigError, RunInterrupted, RunOptions, run_benchmark
    from ._store import ResultStore

    if args.reference is not None and not Path(args.reference).is_file():
        raise FileNotFoundError(f"--reference {args.reference}: no such file")
    if args.report is not None and Path(args.report).exists() and not Path(args.report).is_dir():
        raise FileExistsError(f"--report {args.report} is a file, not a folder")
    grid: dict = {}
    for kernel, axis, values in args.grid:
        if axis in grid.get(kernel, {}):
            raise ConfigError(f"--grid {kernel}.{axis} is given twice")
        grid.setdefault(kernel, {})[axis] = values
    opts = RunOptions(
        datasets=args.datasets, kernels=args.kernels, scorers=args.scorers, preset=args.preset,
        folds=args.folds, repeats=args.repeats, seed=args.seed, share=args.share,
        alphas=args.alphas, max_rank=args.max_rank, time_channel=args.time_channel, grid=grid,
        levels=args.levels, store=args.store, data_dir=args.data_dir, device=args.device,
        workers=args.workers, threads=args.threads, scheduler=args.scheduler,
        progress=not args.no_progress, max_cells=args.max_cells, retry_failed=args.retry_failed,
        normal_classes=args.normal_classes,
    )  # fmt: skip
    try:
        s = run_benchmark(opts)
    except RunInterrupted as exc:
        s = exc.summary or {}
        print(f"run stopped by {signal.Signals(exc.signum).name}: "
              f"{s.get('cells_computed', 0)} of {s.get('cells_total', '?')} cells computed and "
              "committed; start the same command again to resume", file=sys.stderr)  # fmt: skip
        return 128 + exc.signum
    print(f"{s['cells_computed']} of {s['cells_total']} cells computed in "
          f"{s['wall_seconds']:.1f} s; store {s['store']} (setting {s['setting']})")  # fmt: skip
    if not s["complete"]:
        print("run incomplete: start the same command again to resume")
        return 0
    with ResultStore(args.store, mode="read", check=False) as store:
        print_summary(summary(store, s["setting"], s["datasets"], s["kernels"], s["scorers"]))
    if args.report:
        rep = write_report(args.store, args.report, s["setting"], args.reference)
        print(f"\nreport written: {', '.join(rep['files'])}")
    return 0


def _cmd_list(args) -> int:
    """Multivariate classification data sets, kernel grids and scorers; fast (nothing heavy
    is imported) unless ``--check`` asks which kernels and scorers are usable now."""
    from ._grids import PRESETS, REGISTRY_NAME
    from .data import available_datasets

    if args.data_dir is not None and not Path(args.data_dir).is_dir():
        raise FileNotFoundError(f"--data-dir {args.data_dir}: no such folder")
    print("data sets (multivariate classification):")
    for root, names in available_datasets(args.data_dir, multivariate_classification=True).items():
        print(f"  {root}: {', '.join(names) if names else '(none)'}")
    print("  own data: --dataset FOLDER (of .ts files) | FILE.npz | FILE.csv | sktime:NAME")
    reg = None
    if args.check:
        import tskernels

        reg = tskernels.kernel_registry()
    grids = PRESETS["paper"].grids
    print("kernels (paper grid size)" + (" and registry:" if reg is not None else ":"))
    for name in sorted(set(reg or ()) | set(grids)):
        base = REGISTRY_NAME.get(name, name)
        state = ""
        if reg is not None:
            state = "registered" if base in reg else "not registered yet"
            if base in reg and reg[base].unequal_length:
                state += " unequal-length"
            state += "; "
        if base != name:
            state += f"as {base}, levels='single', run only when named; "
        n = "no grid" if name not in grids else " x ".join(
            f"{a}:{len(v)}" for a, v in grids[name].axes.items()) or "1"  # fmt: skip
        if name in grids and grids[name].levels:
            n += f", levels {grids[name].levels[0]}..{grids[name].levels[-1]} in one pass"
        print(f"  {name:<18} {state}grid {n}")
    print("scorers:")
    from ._grids import SCORER_NAMES

    if args.check:
        from ._scorers import BASELINES, SCORERS, available_scorers

        avail = available_scorers()
        for name, spec in SCORERS.items():
            print(f"  {name:<15} {'available' if avail[name] else 'missing'}: {spec.description}")
        for name in BASELINES:
            print(f"  {name:<15} {'available' if avail[name] else 'missing'}: baseline")
    else:
        print(f"  {', '.join(SCORER_NAMES)} (list --check: which are usable)")
    print("presets: " + ", ".join(
        f"{p.name} ({p.folds}x{p.repeats} CV on {', '.join(p.datasets)})"
        for p in PRESETS.values()))  # fmt: skip
    return 0


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def main(argv: list[str] | None = None) -> int:
    """The command line; a problem with an option, a data set, a store or a file prints one
    line ``error: ...`` on stderr and returns 2 (no traceback)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "adbench":
        try:
            from .adbench import main as adbench_main
        except ImportError as exc:
            print(f"the adbench command is not available: {exc}", file=sys.stderr)
            return 2
        return int(adbench_main(argv[1:]) or 0)
    args = _parser().parse_args(argv)
    try:
        return _command(args)
    except KeyboardInterrupt:  # Ctrl-C before a run started computing (or in another command)
        print("interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except Exception as exc:
        code = _exit_code(exc)
        if code is None:
            raise
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return code


def _exit_code(exc: BaseException) -> int | None:
    """2 for a bad option, data set, store or file, 1 for a run that could not go on, None
    for anything else. The modules defining the errors are looked up, not imported: a
    command that never imported them (``list``) cannot have raised their errors, and stays
    fast."""
    runner = sys.modules.get(f"{__package__ or 'experiments'}._runner")
    store = sys.modules.get(f"{__package__ or 'experiments'}._store")
    usage: tuple = (FileNotFoundError, FileExistsError)
    if runner is not None:
        usage += (runner.ConfigError,)
        if isinstance(exc, runner.RunError):
            return 1
    if store is not None:
        usage += (store.StoreError,)
    return 2 if isinstance(exc, usage) else None


def _command(args) -> int:
    if args.command == "run":
        return _cmd_run(args)
    if args.command == "report":
        from ._report import write_report

        rep = write_report(args.store, args.out, args.setting, args.reference,
                           plots=not args.no_plots)  # fmt: skip
        print(f"report written: {', '.join(rep['files'])}")
        return 0
    if args.command == "list":
        return _cmd_list(args)
    if args.command == "demo":
        from .demo import gram_table, print_table

        print_table(gram_table(args.dataset, args.data_dir, args.device), args.dataset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
