"""Time `gram` for every registered kernel on one workload, optionally beside peers.

    python benchmarks/bench_gram.py --n 200 --T 100 --d 6 [--kernels flat_rbf gak] [--repeats 5]
    python benchmarks/bench_gram.py --device cuda   # the kernels that run on a GPU, on it

Warm-up (compilation, CUDA start) outside the timing; prints median and quartiles of the
wall time. ``--device cuda``: the series are moved to the GPU once, outside the timing, every
call is followed by ``torch.cuda.synchronize()``, and kernels registered without GPU support
are skipped (said in the output); it fails with a one-line error when torch has no GPU.
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

try:  # run as a script: benchmarks/ is on sys.path
    from _device import add_device_argument, check_device, synced
except ImportError:  # imported from the repository root
    from benchmarks._device import add_device_argument, check_device, synced

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
    add_device_argument(parser)
    parser.add_argument("--peers", nargs="*", default=[])
    args = parser.parse_args(argv)
    device = check_device(parser, args.device)
    X = 0.3 * np.random.default_rng(0).normal(size=(args.n, args.T, args.d))
    Xd = torch.as_tensor(X, device=device)  # moved once, outside the timing
    print(
        f"workload: n={args.n} T={args.T} d={args.d}, symmetric Gram, float64, "
        f"threads={torch.get_num_threads()}, device={device}"
    )
    print(f"{'kernel':<22}{'median s':>10}{'q1':>10}{'q3':>10}")
    registry = tskernels.kernel_registry()
    for name in args.kernels or sorted(registry):
        if device != "cpu" and not registry[name].get_tag("gpu"):
            print(f"{name:<22}{'(no GPU support: skipped)':>30}")
            continue
        kernel = registry[name].fitted_example(Xd).set_params(device=device)
        med, q1, q3 = time_call(synced(lambda k=kernel: k.gram(Xd), device), args.repeats)
        print(f"{name:<22}{med:>10.4f}{q1:>10.4f}{q3:>10.4f}")
    for peer in args.peers:
        med, q1, q3 = time_call(synced(lambda p=PEERS[peer]: p(X), device), args.repeats)
        print(f"{'peer:' + peer:<22}{med:>10.4f}{q1:>10.4f}{q3:>10.4f}")


if __name__ == "__main__":
    main()
