"""Command line: ``python -m experiments <command>`` (also the ``tskernels-experiments``
console script).

Commands: ``run`` (the one-versus-rest UEA benchmark, resumable), ``report`` (tables and
plots from a store), ``list`` (data sets, kernels, scorers), ``demo`` (the Gram table of
every kernel) and ``adbench`` (the ADBench tabular benchmark; arguments passed through).
"""

from __future__ import annotations

import argparse
import sys


def _floats(s: str) -> list[float]:
    return [float(v) for v in s.split(",") if v]


def _grid_arg(s: str) -> tuple[str, str, list]:
    """KERNEL.AXIS=v1,v2 -> (kernel, axis, values)."""
    try:
        lhs, rhs = s.split("=", 1)
        kernel, axis = lhs.split(".", 1)
    except ValueError:
        msg = f"--grid expects KERNEL.AXIS=v1,v2,..., got {s!r}"
        raise argparse.ArgumentTypeError(msg) from None
    values = []
    for v in rhs.split(","):
        values.append(int(v) if v.lstrip("-").isdigit() else float(v))
    return kernel, axis, values


def _tc(s: str) -> list[bool]:
    choices = {"no": [False], "yes": [True], "both": [False, True]}
    if s not in choices:
        raise argparse.ArgumentTypeError(f"--time-channel must be no, yes or both, got {s!r}")
    return choices[s]


def _parser() -> argparse.ArgumentParser:
    from ._grids import PRESETS, SCORER_NAMES

    parser = argparse.ArgumentParser(
        prog="python -m experiments",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run or resume the one-versus-rest UEA benchmark")
    run.add_argument(
        "--dataset",
        "--datasets",
        dest="datasets",
        nargs="+",
        default=None,
        help="UEA data set names (default: the preset's)",
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
        type=lambda s: [int(v) for v in s.split(",")],
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
    run.add_argument("--data-dir", default=None, help="folder of UEA .ts files")
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
    run.add_argument("--no-progress", action="store_true")

    rep = sub.add_parser("report", help="tables and plots from a store")
    rep.add_argument("--store", default="results/experiments.sqlite")
    rep.add_argument("--out", default="results/report")
    rep.add_argument("--setting", default=None, help="setting id (default: the latest run's)")
    rep.add_argument("--reference", default=None, help="reference CSV to compare against")
    rep.add_argument("--no-plots", action="store_true")

    lst = sub.add_parser("list", help="data sets, kernels and scorers available")
    lst.add_argument("--data-dir", default=None)

    demo = sub.add_parser("demo", help="Gram matrices of every kernel on one data set")
    demo.add_argument("--dataset", default="BasicMotions")
    demo.add_argument("--data-dir", default=None)
    demo.add_argument("--device", default=None)

    sub.add_parser("adbench", help="the ADBench benchmark (arguments passed through)",
                   add_help=False)  # fmt: skip
    return parser


def _cmd_run(args) -> int:
    from ._report import print_summary, summary, write_report
    from ._runner import RunOptions, run_benchmark
    from ._store import ResultStore

    grid: dict = {}
    for kernel, axis, values in args.grid:
        grid.setdefault(kernel, {})[axis] = values
    opts = RunOptions(
        datasets=args.datasets, kernels=args.kernels, scorers=args.scorers, preset=args.preset,
        folds=args.folds, repeats=args.repeats, seed=args.seed, share=args.share,
        alphas=args.alphas, max_rank=args.max_rank, time_channel=args.time_channel, grid=grid,
        levels=args.levels, store=args.store, data_dir=args.data_dir, device=args.device,
        workers=args.workers, threads=args.threads, scheduler=args.scheduler,
        progress=not args.no_progress, max_cells=args.max_cells,
    )  # fmt: skip
    s = run_benchmark(opts)
    print(f"{s['cells_computed']} of {s['cells_total']} cells computed in "
          f"{s['wall_seconds']:.1f} s; store {s['store']} (setting {s['setting']})")  # fmt: skip
    if not s["complete"]:
        print("run incomplete: start the same command again to resume")
        return 0
    with ResultStore(args.store) as store:
        print_summary(summary(store, s["setting"], s["datasets"], s["kernels"], s["scorers"]))
    if args.report:
        rep = write_report(args.store, args.report, s["setting"], args.reference)
        print(f"\nreport written: {', '.join(rep['files'])}")
    return 0


def _cmd_list(args) -> int:
    import tskernels

    from ._grids import PRESETS, REGISTRY_NAME
    from ._scorers import BASELINES, SCORERS, available_scorers
    from .data import available_datasets

    print("data sets:")
    for root, names in available_datasets(args.data_dir).items():
        print(f"  {root}: {', '.join(names) if names else '(none)'}")
    reg = tskernels.kernel_registry()
    grids = PRESETS["paper"].grids
    print("kernels (registry; paper grid size):")
    for name in sorted(set(reg) | set(grids)):
        base = REGISTRY_NAME.get(name, name)
        state = "registered" if base in reg else "not registered yet"
        if base != name:
            state += f" (as {base}, levels='single'; run only when named)"
        n = "no grid" if name not in grids else " x ".join(
            f"{a}:{len(v)}" for a, v in grids[name].axes.items()) or "1"  # fmt: skip
        if name in grids and grids[name].levels:
            n += f", levels {grids[name].levels[0]}..{grids[name].levels[-1]} in one pass"
        unequal = " unequal-length" if base in reg and reg[base].unequal_length else ""
        print(f"  {name:<18} {state}{unequal}; grid {n}")
    print("scorers:")
    avail = available_scorers()
    for name, spec in SCORERS.items():
        print(f"  {name:<15} {'available' if avail[name] else 'missing'}: {spec.description}")
    for name in BASELINES:
        print(f"  {name:<15} {'available' if avail[name] else 'missing'}: baseline")
    print("presets: " + ", ".join(
        f"{p.name} ({p.folds}x{p.repeats} CV on {', '.join(p.datasets)})"
        for p in PRESETS.values()))  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "adbench":
        try:
            from .adbench import main as adbench_main
        except ImportError as exc:
            print(f"the adbench command is not available: {exc}", file=sys.stderr)
            return 2
        return int(adbench_main(argv[1:]) or 0)
    args = _parser().parse_args(argv)
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
