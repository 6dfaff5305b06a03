"""Benchmark of novelty inside long recordings (issue 32): a thin command line over
:mod:`experiments.window_bench`.

    python benchmarks/bench_windows.py run --half tuning [--methods ours,sub-knn,...]
    python benchmarks/bench_windows.py report --half tuning [--vus] [--cd docs/x.png]

``run`` fills the missing (stream, method) cells under ``--out`` (default
results/window_bench/<half>; resumable: a finished cell is never recomputed); ``report``
prints the summary (mean AP, VUS-PR, ROC-AUC, mean rank), the per-stream table and draws the
critical-difference diagram.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.window_bench._methods import CANDIDATES, PEERS  # noqa: E402
from experiments.window_bench._run import report, run  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["run", "report"])
    p.add_argument("--half", choices=["tuning", "confirmation"], required=True)
    p.add_argument(
        "--methods",
        default=None,
        help="comma-separated; default: ours, the candidates (tuning) and the peers",
    )
    p.add_argument(
        "--out", default=None, help="results folder (default results/window_bench/<half>)"
    )
    p.add_argument("--only", default=None, help="comma-separated substrings of stream names")
    p.add_argument("--vus", action="store_true", help="compute VUS-PR (seconds per cell)")
    p.add_argument("--cd", default=None, help="critical-difference diagram (PNG)")
    a = p.parse_args(argv)
    if a.methods:
        which = a.methods.split(",")
    else:
        which = ["ours", *(CANDIDATES if a.half == "tuning" else ()), *PEERS]
    out = Path(a.out or f"results/window_bench/{a.half}")
    if a.action == "run":
        run(
            a.half,
            which,
            out,
            log=lambda s: print(s, flush=True),
            only=a.only.split(",") if a.only else None,
        )
    print(report(a.half, which, out, cd=a.cd, vus=a.vus))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
