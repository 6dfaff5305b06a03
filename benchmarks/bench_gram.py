"""Time `gram` for every registered kernel on one workload, optionally beside peers.

    python benchmarks/bench_gram.py --n 200 --T 100 --d 6 [--kernels flat_rbf gak] [--repeats 5]

Warm-up (compilation) outside the timing; prints median and quartiles of the wall time.
Peers: modules in benchmarks/ register a callable in PEERS (name -> fn(X) -> Gram), timed on
the same inputs in the same run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

import tskernels

PEERS: dict[str, Callable[[np.ndarray], object]] = {}


def time_call(fn: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    q1, med, q3 = np.percentile(times, [25, 50, 75])
    return float(med), float(q1), float(q3)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--T", type=int, default=100)
    parser.add_argument("--d", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernels", nargs="*", default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--peers", nargs="*", default=[])
    args = parser.parse_args(argv)
    X = 0.3 * np.random.default_rng(0).normal(size=(args.n, args.T, args.d))
    print(
        f"workload: n={args.n} T={args.T} d={args.d}, symmetric Gram, float64, "
        f"threads={torch.get_num_threads()}"
    )
    print(f"{'kernel':<22}{'median s':>10}{'q1':>10}{'q3':>10}")
    registry = tskernels.kernel_registry()
    for name in args.kernels or sorted(registry):
        kernel = registry[name].example()
        if args.device:
            kernel.set_params(device=args.device)
        med, q1, q3 = time_call(lambda k=kernel: k.gram(X), args.repeats)
        print(f"{name:<22}{med:>10.4f}{q1:>10.4f}{q3:>10.4f}")
    for peer in args.peers:
        med, q1, q3 = time_call(lambda p=PEERS[peer]: p(X), args.repeats)
        print(f"{'peer:' + peer:<22}{med:>10.4f}{q1:>10.4f}{q3:>10.4f}")


if __name__ == "__main__":
    main()
