"""Detector benchmark on 58 data sets: our KernelNoveltyDetector against ROCKAD and PyOD.

The command line of :mod:`experiments.detector_bench`, whose docstring is the protocol (data
sets and their tuning / confirmation halves, problems, methods, metrics, store). ``run`` fills
(or resumes) a SQLite store, ``report`` prints its markdown tables, ``halves`` the split.

    python benchmarks/bench_detector.py run [--half tuning] [--datasets BasicMotions ...]
        [--methods peers] [--extra gak_knn='KernelNoveltyDetector(kernel=GAK(), scorer="knn")']
    python benchmarks/bench_detector.py report --half confirmation [--methods ours_default ...]
        [--write-docs docs/results_detector.md] [--cd docs/cd_confirmation.png]
    python benchmarks/bench_detector.py halves     # the split, one line per data set
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.detector_bench import CLIError
from experiments.detector_bench import problems as P
from experiments.detector_bench.methods import method_order, parse_extra, resolve_methods
from experiments.detector_bench.report import docs_header, report_markdown, write_cd_diagram
from experiments.detector_bench.store import DEFAULT_STORE, fetch_rows, run_benchmark


def build_parser() -> argparse.ArgumentParser:
    import experiments.detector_bench as protocol

    p = argparse.ArgumentParser(
        prog="python benchmarks/bench_detector.py",
        description=__doc__ + "\n" + protocol.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="run (or resume) the benchmark")
    r.add_argument("--datasets", nargs="+", default=None)
    r.add_argument("--half", choices=P.HALVES + ("all",), default="all")
    r.add_argument("--classes", nargs="+", default=None, help="only these classes (labels)")
    r.add_argument("--methods", nargs="+", default=None, help="names or groups (ours, peers)")
    r.add_argument("--extra", action="append", default=[], metavar="NAME=EXPR")
    r.add_argument("--seeds", nargs="+", type=int, default=[0])
    dirs_help = "default $TSKERNELS_DATA, else data/uea data/ucr"
    r.add_argument("--data-dir", nargs="+", default=None, help=dirs_help)
    r.add_argument("--store", default=str(DEFAULT_STORE))
    r.add_argument("--max-corpus", type=int, default=P.MAX_CORPUS)
    r.add_argument("--max-test", type=int, default=P.MAX_TEST)
    r.add_argument("--max-classes", type=int, default=P.MAX_CLASSES)
    r.add_argument("--rerun", nargs="+", default=[], metavar="METHOD")
    r.add_argument("--retry-errors", action="store_true", help="recompute rows that failed")
    r.add_argument("--threads", type=int, default=None, help="torch/numba/BLAS threads")
    q = sub.add_parser("report", help="print the markdown tables")
    q.add_argument("--store", default=str(DEFAULT_STORE))
    q.add_argument("--methods", nargs="+", default=None, help="columns, in this order")
    q.add_argument("--seeds", nargs="+", type=int, default=[0])
    q.add_argument("--half", choices=P.HALVES + ("all",), default="all")
    q.add_argument("--data-dir", nargs="+", default=None, help="where the halves are read from")
    q.add_argument("--failed", choices=("chance", "leave-out"), default="chance")
    q.add_argument("--reference", default="rockad", help="method of the W/T/L row")
    q.add_argument("--cd", default=None, metavar="PNG", help="critical-difference diagram")
    q.add_argument("--write-docs", default=None, metavar="PATH")
    h = sub.add_parser("halves", help="print the tuning / confirmation split")
    h.add_argument("--data-dir", nargs="+", default=None)
    return p


def _data_dirs(args) -> list[Path]:
    return [Path(d) for d in args.data_dir] if args.data_dir else P.default_data_dirs()


def _set_threads(n: int) -> None:
    if n < 1:
        raise CLIError(f"--threads must be >= 1, got {n}")
    import numba
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(n)
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    threadpool_limits(n)


def _cli_run(args) -> None:
    for k in ("max_corpus", "max_test", "max_classes"):
        if getattr(args, k) < 1:
            raise CLIError(f"--{k.replace('_', '-')} must be >= 1, got {getattr(args, k)}")
    if args.threads is not None:
        _set_threads(args.threads)
    data_dirs = _data_dirs(args)
    split = P.half_of(data_dirs)
    available = sorted(split, key=str.lower)
    datasets = args.datasets or available
    missing = [d for d in datasets if d not in available]
    if missing:
        where = ", ".join(str(d) for d in data_dirs)
        raise CLIError(f"unknown data set(s) {missing} in {where}; available: {available}")
    if args.half != "all":
        datasets = [d for d in datasets if split[d] == args.half]
    if not datasets:
        raise CLIError(f"no data sets in {', '.join(str(d) for d in data_dirs)}")
    methods = resolve_methods(args.methods, [parse_extra(e) for e in args.extra])
    limits = {k: getattr(args, k) for k in ("max_corpus", "max_test", "max_classes")}
    n = run_benchmark(
        datasets, methods, args.store, data_dirs, seeds=args.seeds, classes=args.classes,
        rerun=args.rerun, retry_errors=args.retry_errors, **limits,
    )  # fmt: skip
    print(f"{n} row(s) written to {args.store}")


def _cli_report(args, argv: list[str]) -> None:
    rows = fetch_rows(args.store, args.seeds)
    if args.half != "all":
        split = P.half_of(_data_dirs(args))
        rows = [r for r in rows if split.get(r["dataset"]) == args.half]
    if args.methods:
        stored = {r["method"] for r in rows}
        unknown = [m for m in args.methods if m not in stored]
        if unknown:
            raise CLIError(f"no rows for method(s) {unknown} (seeds {args.seeds}) in {args.store}")
    text = report_markdown(rows, args.methods, failed=args.failed, reference=args.reference)
    if args.cd:
        methods = args.methods or method_order({r["method"] for r in rows})
        title = f"{args.half} half" if args.half != "all" else "all data sets"
        text += "\n\n" + write_cd_diagram(rows, methods, args.cd, args.failed, title)
    print(text)
    if args.write_docs:
        datasets = sorted({r["dataset"] for r in rows})
        Path(args.write_docs).write_text(docs_header(argv, datasets) + "\n" + text + "\n")
        print(f"written to {args.write_docs}")


def _cli_halves(args) -> None:
    split = P.half_of(_data_dirs(args))
    for half in P.HALVES:
        names = sorted((d for d, h in split.items() if h == half), key=str.lower)
        print(f"{half} ({len(names)}): {', '.join(names)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        if args.action == "run":
            _cli_run(args)
        elif args.action == "halves":
            _cli_halves(args)
        else:
            _cli_report(args, argv)
    except (CLIError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
