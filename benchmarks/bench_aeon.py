"""Our detector against aeon's ROCKAD, both run through aeon's collection anomaly-detection API.

aeon (1.6) ships no harness for collection anomaly detection, so
:mod:`experiments.detector_bench.aeon` is the loop, written in aeon's terms only (its
docstring: data, estimators, adaptations), on the problems of ``benchmarks/bench_detector.py``
(:mod:`experiments.detector_bench.problems`: the same classes, corpus and test indices;
problem seed 0). ``--random-states`` are the estimators' seeds (ours is deterministic at a
given seed; ROCKAD's ROCKET kernels and bootstrap vary with it: ``rockad_mean5`` in the report
is the mean ROC-AUC of seeds 0-4 on each problem).

Results are appended to a JSONL file (``--store``, default ``results/bench_aeon.jsonl``,
git-ignored), one line per (data set, class, method, random state) with the sizes and the
subsampling limits; a rerun skips what is stored (a line made with other limits is ignored).

    python benchmarks/bench_aeon.py run [--datasets BasicMotions ...] [--methods ours rockad]
        [--random-states 0 1 2 3 4]
    python benchmarks/bench_aeon.py report [--compare results/wide.sqlite]
"""

from __future__ import annotations

import argparse

from experiments.detector_bench import aeon as A
from experiments.detector_bench.aeon_report import machine, report_markdown


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="evaluate what the store lacks")
    r.add_argument("--datasets", nargs="+", default=list(A.UEA_SETS))
    r.add_argument("--methods", nargs="+", default=list(A.METHODS), choices=A.METHODS)
    r.add_argument("--random-states", nargs="+", type=int, default=[0], help="ROCKAD's seeds")
    r.add_argument("--data-dir", default=str(A.DEFAULT_DATA))
    r.add_argument("--store", default=str(A.DEFAULT_STORE))
    q = sub.add_parser("report", help="markdown tables of the store")
    q.add_argument("--store", default=str(A.DEFAULT_STORE))
    q.add_argument("--compare", default=None, help="a bench_detector SQLite store to check")
    args = p.parse_args(argv)
    if args.cmd == "run":
        print(f"# {machine()}", flush=True)
        A.run(
            args.datasets, args.methods, args.random_states, args.store, args.data_dir,
            log=lambda s: print(s, flush=True),
        )  # fmt: skip
        return 0
    print(report_markdown(A.read_store(args.store), compare=args.compare))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
