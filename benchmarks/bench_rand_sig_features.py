"""The randomized signature's feature solve: the step-by-step path (``_euler``, the former CPU
path, kept for other devices) against the CPU path (``_euler_cpu``), in one process, one torch
thread, alternately, on random walks of given sizes (issue 34, item 1).

    python benchmarks/bench_rand_sig_features.py [--sizes 300,144,9 69,73,10 8,73,10] \
        [--features 10 50 200] [--time-channel]

Prints CPU and wall milliseconds a solve (median of the repeats) and the largest relative
difference of the features. Record ``uptime`` beside the numbers on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial

import numpy as np
import torch

from tskernels import RandomizedSignatureKernel
from tskernels.validation import as_series_batch


def _time(f, seconds: float) -> tuple[float, float]:
    f()
    cpu, wall = [], []
    t_end = time.process_time() + seconds
    while time.process_time() < t_end or len(cpu) < 3:
        c0, w0 = time.process_time(), time.perf_counter()
        f()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return float(np.median(cpu)), float(np.median(wall))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", nargs="+", default=["300,144,9", "69,73,10", "8,73,10", "45,52,26"])
    p.add_argument("--features", nargs="+", type=int, default=[10, 25, 50, 100, 200])
    p.add_argument("--scale", type=float, default=0.0072)
    p.add_argument("--seconds", type=float, default=0.5, help="CPU seconds per timing")
    p.add_argument("--time-channel", action="store_true", help="add a time channel (d + 1)")
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"load average before: {os.getloadavg()}")
    rng = np.random.default_rng(0)
    for spec in args.sizes:
        n, T, d = (int(v) for v in spec.split(","))
        X = np.cumsum(rng.normal(size=(n, T, d)), axis=1) * 0.3
        if args.time_channel:
            X = np.concatenate(
                [X, np.broadcast_to(np.linspace(0, 1, T)[None, :, None], (n, T, 1))], 2
            )
        Xb = as_series_batch(X)
        for M in args.features:
            k = RandomizedSignatureKernel(n_features=M, scale=args.scale, seed=0)
            A, b, z0 = k._draw(Xb.d)
            ref = k._euler(Xb, A, b, z0)
            new = k._euler_cpu(Xb, A, b, z0)
            rel = float((new - ref).abs().max() / ref.abs().max())
            c_old, w_old = _time(partial(k._euler, Xb, A, b, z0), args.seconds)
            c_new, w_new = _time(partial(k._euler_cpu, Xb, A, b, z0), args.seconds)
            print(
                f"n={n} T={T} d={Xb.d} M={M}: step-by-step {1e3 * c_old:.2f} ms CPU "
                f"({1e3 * w_old:.2f} wall), CPU path {1e3 * c_new:.2f} ms CPU "
                f"({1e3 * w_new:.2f} wall): {c_old / c_new:.2f}x; max rel diff {rel:.1e}",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
