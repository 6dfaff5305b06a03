"""Benchmark of novelty inside long recordings (issue 32): a thin command line over
:mod:`experiments.window_bench`.

    python benchmarks/bench_windows.py run --half tuning|confirmation|fresh [--methods ours,...]
    python benchmarks/bench_windows.py report --half tuning [--vus] [--cd docs/x.png]
    python benchmarks/bench_windows.py speed [--max-memory BYTES]

``--half`` is ``tuning``, ``confirmation`` or ``fresh`` (the third stream set of session 16,
:mod:`experiments.window_bench._data`). ``run`` fills the missing (stream, method) cells under
``--out`` (default results/window_bench/<half>; resumable: a finished cell is never
recomputed) and then prints the report, except on the fresh set, where it prints only the
cells' counts, errors and seconds (no accuracy: the fresh set is judged blind, by
``report``); ``report`` prints the summary (mean AP, VUS-PR, ROC-AUC, mean rank), the
per-stream table and draws the critical-difference diagram. ``speed`` fits on a 100,000-step,
6-channel recording (six noisy sines of periods 60 to 95) and scores another one with the
defaults, and prints the wall and CPU seconds of each and the peak RSS (the issue's speed
target: fit + score <= 60 s on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.window_bench._methods import CANDIDATES, PEERS  # noqa: E402
from experiments.window_bench._run import census, report, run  # noqa: E402


def speed(max_memory=None) -> str:
    import resource
    import time

    import numpy as np

    from novelty import WindowNoveltyDetector

    def rec(seed, T=100_000):
        rng = np.random.default_rng(seed)
        t = np.arange(T)[:, None]
        periods = np.array([60, 67, 74, 81, 88, 95])
        return np.sin(2 * np.pi * t / periods) + 0.2 * rng.normal(size=(T, 6))

    normal, new = rec(0), rec(1)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    c0, w0 = time.process_time(), time.perf_counter()
    det = WindowNoveltyDetector(max_memory=max_memory).fit(normal)
    c1, w1 = time.process_time(), time.perf_counter()
    det.score_samples(new)
    c2, w2 = time.process_time(), time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (
        f"window {det.window_}, members' windows {det.member_windows_}, detector "
        f"{det.detector_}, {len(det.reference_)} reference windows per member, "
        f"{len(det.calibration_scores_)} calibration steps\n"
        f"fit {w1 - w0:.1f} s wall / {c1 - c0:.1f} s CPU; score {w2 - w1:.1f} s wall / "
        f"{c2 - c1:.1f} s CPU; fit + score {w2 - w0:.1f} s wall / {c2 - c0:.1f} s CPU; "
        f"peak RSS {peak / 1024:.0f} MiB ({(peak - base) / 1024:.0f} MiB above the data)"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["run", "report", "speed"])
    p.add_argument("--half", choices=["tuning", "confirmation", "fresh"])
    p.add_argument("--max-memory", type=int, default=None, help="speed: max_memory (bytes)")
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
    if a.action == "speed":
        print(speed(a.max_memory))
        return 0
    if a.half is None:
        p.error("--half is required for run and report")
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
        if a.half == "fresh":  # blind: no accuracy until the report is asked for
            print(census(a.half, which, out))
            return 0
    print(report(a.half, which, out, cd=a.cd, vus=a.vus))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
