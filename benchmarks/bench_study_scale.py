"""Studies at archive size (issue 25): the experiments CLI timed on one kernel of the paper
preset, before and after a change, alternately.

Each run is ``python -m experiments run --preset paper --dataset DATA --kernels KERNEL
--share class --workers 1`` in a subprocess, started in a code tree given by ``--root`` (an
export of a commit, e.g. ``git archive <rev> | tar -x -C /tmp/before``), on a fresh store. It
prints one markdown row per run: the wall seconds, the CPU seconds of the run (user + system of
the child and its workers, ``resource.getrusage(RUSAGE_CHILDREN)``), the 1-minute load average
before and after, the cells, the sums of the cells' recorded Gram and scoring seconds, and the
number of test rows.

    python benchmarks/make_lsst_like.py /tmp/lsst_like.npz
    python benchmarks/bench_study_scale.py --dataset /tmp/lsst_like.npz --kernel flat_rbf \
        --root before=/tmp/before --root after=/tmp/after --rounds 2 \
        [--grid flat_rbf.sigma=1] [--time-channel no] [--scorers conformance mahalanobis]

On a shared machine the wall seconds are upper bounds that swing with the load; the CPU
seconds are the comparable figure. Rounds alternate the roots, so that before and after see
similar load.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_once(root: Path, args, store: Path) -> dict:
    cmd = [sys.executable, "-m", "experiments", "run", "--preset", "paper",
           "--dataset", args.dataset, "--kernels", args.kernel, "--share", args.share,
           "--workers", str(args.workers), "--store", str(store), "--no-progress"]  # fmt: skip
    if args.scorers:
        cmd += ["--scorers", *args.scorers]
    for g in args.grid or []:
        cmd += ["--grid", g]
    if args.time_channel:
        cmd += ["--time-channel", args.time_channel]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    env = dict(os.environ, PYTHONPATH=str(root))
    load0 = os.getloadavg()[0]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    con = sqlite3.connect(str(store))
    n_cv, gram, score = con.execute(
        "SELECT COUNT(DISTINCT dataset || cls || kernel || params || time_channel), "
        "SUM(gram_seconds), SUM(score_seconds) FROM cv"
    ).fetchone()
    n_test = con.execute("SELECT COUNT(*) FROM test WHERE error IS NULL").fetchone()[0]
    con.close()
    return {"wall": wall, "cpu": cpu, "load0": load0, "load1": os.getloadavg()[0],
            "cv_cells": n_cv, "gram": gram or 0.0, "score": score or 0.0,
            "test_rows": n_test}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True, help="a path the CLI reads (npz, .ts folder)")
    p.add_argument("--kernel", default="flat_rbf")
    p.add_argument("--share", default="class")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--scorers", nargs="+", default=None, help="default: the CLI's (all)")
    p.add_argument("--grid", action="append", help="a --grid override, e.g. flat_rbf.sigma=1")
    p.add_argument("--time-channel", default=None, help="no, yes or both (default: the preset's)")
    p.add_argument("--threads", type=int, default=None, help="threads per worker (default: CLI's)")
    p.add_argument("--root", action="append", required=True, metavar="NAME=DIR",
                   help="a code tree to time (repeatable; rounds alternate them)")  # fmt: skip
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args()
    roots = [r.split("=", 1) for r in args.root]
    print(f"# {args.dataset}, kernel {args.kernel}, --share {args.share}, --workers "
          f"{args.workers}, scorers {' '.join(args.scorers or ['(all)'])}, grid "
          f"{' '.join(args.grid or ['(paper)'])}, time channel {args.time_channel or '(paper)'}, "
          f"threads {args.threads or '(CLI default)'}; {os.cpu_count()} cores")  # fmt: skip
    print(
        "| code | round | wall s | CPU s | load 1 min before / after | CV cells | "
        "Gram s (cells) | scoring s (cells) | test rows |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-study-") as tmp:
        for rnd in range(args.rounds):
            for name, root in roots:
                store = Path(tmp) / f"{name}-{rnd}.sqlite"
                r = run_once(Path(root).resolve(), args, store)
                print(f"| {name} | {rnd + 1} | {r['wall']:.1f} | {r['cpu']:.1f} | "
                      f"{r['load0']:.1f} / {r['load1']:.1f} | {r['cv_cells']} | {r['gram']:.1f} "
                      f"| {r['score']:.1f} | {r['test_rows']} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
