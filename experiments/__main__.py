"""Command line: ``python -m experiments <command>`` (also the ``tskernels-experiments``
console script).

Commands: ``run`` (the one-versus-rest UEA benchmark, resumable), ``report`` (tables and
plots from a store), ``list`` (data sets, kernels, scorers), ``demo`` (the Gram table of
every kernel), ``adbench`` (the ADBench tabular benchmark) and ``mauceri`` (the published
one-class protocol of Mauceri et al.); the last two pass their arguments through.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    from ._options import Parser, RunOptions, add_arguments

    parser = Parser(
        prog="python -m experiments",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    run = sub.add_parser("run", help="run or resume the one-versus-rest UEA benchmark")
    add_arguments(run, RunOptions)  # one argument per field of RunOptions

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
    sub.add_parser("mauceri", help="the published one-class protocol of Mauceri et al. "
                   "(arguments passed through)", add_help=False)  # fmt: skip
    return parser


def _check_names(opts) -> None:
    """Kernel and scorer names and data files, checked before anything heavy is imported (a
    mistyped option is answered at once; the full checks follow in the runner)."""
    import os

    from ._grids import PRESETS, scorer_names
    from ._options import ConfigError

    grids = {name: None for preset in PRESETS.values() for name in preset.grids}
    for n in opts.kernels or []:
        if n not in grids:
            raise ConfigError(f"unknown kernel {n!r}; kernels with grids: {', '.join(grids)}")
    scorers = scorer_names()  # the registry's, and "baselines"
    for n in opts.scorers or []:
        if n not in scorers:
            raise ConfigError(f"unknown scorer {n!r}; choose from {', '.join(scorers)}")
    for spec in opts.datasets or []:
        path = Path(spec)
        looks_like_path = path.suffix.lower() in (".csv", ".npz", ".ts") or os.sep in spec
        if looks_like_path and not path.exists():
            raise FileNotFoundError(f"--dataset {spec}: no such file or folder")


def _cmd_run(args) -> int:
    from ._options import RunOptions, from_namespace

    opts = from_namespace(RunOptions, args)
    _check_names(opts)
    from ._report import print_summary, run_notes, summary, write_report
    from ._runner import RunInterrupted, run_benchmark
    from ._store import ResultStore

    if opts.reference is not None:  # checked now, not after every cell was computed
        if not Path(opts.reference).is_file():
            raise FileNotFoundError(f"--reference {opts.reference}: no such file")
        from ._report import read_reference

        read_reference(opts.reference)
    if opts.report is not None and Path(opts.report).exists() and not Path(opts.report).is_dir():
        raise FileExistsError(f"--report {opts.report} is a file, not a folder")
    try:
        s = run_benchmark(opts)
    except RunInterrupted as exc:
        return exc.report("cells")
    print(f"{s['cells_computed']} of {s['cells_total']} cells computed in "
          f"{s['wall_seconds']:.1f} s; store {s['store']} (setting {s['setting']}, "
          f"preset {s['preset']})")  # fmt: skip
    if not s["complete"]:
        print("run incomplete: start the same command again to resume")
        return 0
    with ResultStore(opts.store, mode="read", check=False) as store:
        res = summary(store, s["setting"], s["datasets"], s["kernels"], s["scorers"])
        print_summary(res, notes=run_notes(store, s["setting"], res))
    if opts.report:
        rep = write_report(opts.store, opts.report, s["setting"], opts.reference)
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
            state = "registered" + (" unequal-length" if reg[base].unequal_length else "") + "; "
        if base != name:
            state += f"builds {base}; "
        if name in grids and not grids[name].default:
            state += "run only when named; "
        n = "no grid" if name not in grids else " x ".join(
            f"{a}:{len(v)}" for a, v in grids[name].axes.items()) or "1"  # fmt: skip
        if name in grids and grids[name].levels:
            n += f", levels {grids[name].levels[0]}..{grids[name].levels[-1]} in one pass"
        print(f"  {name:<24} {state}grid {n}")
    print("scorers:")
    from ._grids import scorer_names, scorer_setup

    if args.check:
        import novelty

        for name, cls in novelty.scorer_registry().items():
            print(f"  {name:<15} {scorer_setup(cls).family}: {cls.description}")
        print("  baselines       every scorer of the baseline family")
    else:
        print(f"  {', '.join(scorer_names())} (list --check: families and descriptions)")
    print("presets: " + ", ".join(
        f"{p.name} ({p.folds}x{p.repeats} CV on {', '.join(p.datasets) or 'your --dataset'})"
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
    if argv and argv[0] == "mauceri":  # the published one-class protocol (Mauceri et al.)
        from .mauceri import main as mauceri_main

        return int(mauceri_main(argv[1:]) or 0)
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
    package = __package__ or "experiments"
    options = sys.modules.get(f"{package}._options")
    executor = sys.modules.get(f"{package}._executor")
    store = sys.modules.get(f"{package}._store")
    usage: tuple = (FileNotFoundError, FileExistsError)
    if options is not None:
        usage += (options.ConfigError,)
    if executor is not None and isinstance(exc, executor.RunError):
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
        from ._recorder import check_device
        from .demo import gram_table, print_table

        if args.data_dir is not None and not Path(args.data_dir).is_dir():
            raise FileNotFoundError(f"--data-dir {args.data_dir}: no such folder")
        check_device(args.device)  # ConfigError: one line, exit 2

        print_table(gram_table(args.dataset, args.data_dir, args.device), args.dataset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
