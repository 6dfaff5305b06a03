"""Speed of the shipped default detector (issue 30, item 5): fit on N = 100 random walks and
score 300 new ones, at (T = 500, d = 1) and (T = 36, d = 6), with the random-convolution
features shared between its members (the default) and without (``sharing_features(False)``),
beside ROCKAD's recipe (experiments.peers.RocketRecipe), all in one process.

CPU seconds are ``time.process_time`` (all threads of the process), wall seconds
``time.perf_counter``; the load average (``os.getloadavg``) is printed before each
measurement, since wall time on a shared machine depends on it. Each configuration is run
once after a warm-up fit (numba compiled). The script also checks that the shared and unshared
fits give bit for bit equal scores, p-values and calibration scores.

    python benchmarks/bench_detector_speed.py [--n 100] [--m 300] [--threads 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import time


def _timed(fn, *args):
    load = os.getloadavg()[0]
    c, w = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, {
        "cpu_s": round(time.process_time() - c, 2),
        "wall_s": round(time.perf_counter() - w, 2),
        "load": round(load, 2),
    }


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="corpus series")
    parser.add_argument("--m", type=int, default=300, help="series scored")
    parser.add_argument("--threads", type=int, default=2, help="torch / numba threads")
    parser.add_argument("--shapes", default="500x1,36x6", help="TxD,... shapes")
    parser.add_argument("--out", default=None, help="JSON lines file")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))

    from experiments.peers import RocketRecipe
    from novelty import KernelNoveltyDetector
    from tskernels._random_convolution import sharing_features

    rng = np.random.default_rng(0)
    KernelNoveltyDetector().fit(np.cumsum(rng.normal(size=(12, 20, 2)), axis=1))  # warm-up
    rows = []
    for shape in args.shapes.split(","):
        T, d = (int(v) for v in shape.split("x"))
        rng = np.random.default_rng(0)
        X = np.cumsum(rng.normal(size=(args.n, T, d)), axis=1)
        Y = np.cumsum(rng.normal(size=(args.m, T, d)), axis=1)
        results = {}
        for label, enabled in (("default, unshared", False), ("default, shared", True)):
            with sharing_features(enabled):
                det, fit = _timed(KernelNoveltyDetector().fit, X)
            scores, score = _timed(det.score_samples, Y)
            results[label] = (det, scores)
            rows.append({"method": label, "T": T, "d": d, "fit": fit, "score": score})
            print(json.dumps(rows[-1]), flush=True)
        recipe, fit = _timed(RocketRecipe().fit, X)
        _, score = _timed(recipe.score_samples, Y)
        rows.append({"method": "ROCKAD's recipe", "T": T, "d": d, "fit": fit, "score": score})
        print(json.dumps(rows[-1]), flush=True)
        (a, sa), (b, sb) = results.values()
        equal = (
            np.array_equal(sa, sb)
            and np.array_equal(a.p_values(Y), b.p_values(Y))
            and all(
                np.array_equal(x.calibration_, y.calibration_)
                for x, y in zip(a.members_, b.members_, strict=True)
            )
        )
        print(f"T={T} d={d}: shared == unshared bit for bit: {equal}", flush=True)
        if not equal:
            raise SystemExit("shared and unshared fits differ")
    if args.out:
        with open(args.out, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    return rows


if __name__ == "__main__":
    main()
