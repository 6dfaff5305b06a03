"""A large Gram matrix on a Dask LocalCluster against the local ``kernel.gram``, checked tile
for tile (issue 15, item 2).

    nice -n 10 python benchmarks/bench_dask_gram.py --n 20000 --T 50 --d 3 --tile 2500

The kernel is a registered one (default ``flat_rbf``: RBF with sigma 10 on the flattened
series, one matrix product per tile). Local: ``kernel.gram(X)`` with torch's threads. Dask:
``tskernels.compute_gram`` on a LocalCluster of ``--workers`` worker processes with one thread
each (dask's nanny starts them with OMP_NUM_THREADS=1), kernel and data scattered once, the
tiles on and above the diagonal computed there and written into one matrix on the driver.
The cluster start and a small warm-up run (imports in the workers) are outside the timing.
Then every tile of the Dask result is compared with the same slice of the local one: the
largest absolute difference and the count of tiles that are bitwise equal. Prints one
markdown row per run with the load average before and after (``os.getloadavg``).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

import tskernels


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def compare_tiles(A: np.ndarray, B: np.ndarray, tile: int) -> tuple[float, int, int]:
    """(largest |A - B| over all tiles, tiles bitwise equal, tiles in all)."""
    worst, equal, total = 0.0, 0, 0
    n, m = A.shape
    for i in range(0, n, tile):
        for j in range(0, m, tile):
            a, b = A[i : i + tile, j : j + tile], B[i : i + tile, j : j + tile]
            worst = max(worst, float(np.abs(a - b).max()))
            equal += bool(np.array_equal(a, b))
            total += 1
    return worst, equal, total


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--T", type=int, default=50)
    p.add_argument("--d", type=int, default=3)
    p.add_argument("--tile", type=int, default=2500)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--kernel", default="flat_rbf")
    p.add_argument("--skip-local", action="store_true", help="time the Dask run only")
    args = p.parse_args(argv)

    from distributed import Client, LocalCluster

    X = np.random.default_rng(0).normal(size=(args.n, args.T, args.d))
    kernel = tskernels.make_kernel(args.kernel)
    print(
        f"workload: {args.kernel} ({kernel!r}), n={args.n} T={args.T} d={args.d}, symmetric "
        f"Gram float64 ({args.n**2 * 8 / 2**30:.2f} GiB), tile={args.tile}, "
        f"{os.cpu_count()} cores, torch threads={torch.get_num_threads()}"
    )
    load_before = _load()
    K_local = None
    t_local = float("nan")
    if not args.skip_local:
        kernel.gram(X[:50])  # warm-up
        t0 = time.perf_counter()
        K_local = kernel.gram(X).numpy()
        t_local = time.perf_counter() - t0
        print(f"local kernel.gram: {t_local:.2f} s (load {_load()})")

    with (
        LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        tskernels.compute_gram(kernel, X[:200], tile=100, client=client)  # warm-up
        out = np.empty((args.n, args.n))
        t0 = time.perf_counter()
        tskernels.compute_gram(kernel, X, tile=args.tile, client=client, out=out)
        t_dask = time.perf_counter() - t0
        print(f"dask compute_gram ({args.workers} workers x 1 thread): {t_dask:.2f} s")
        # the lazy array on the same cluster, on a slice (the whole would be gathered twice)
        n_lazy = min(args.n, 4 * args.tile)
        A = tskernels.gram_tiles(kernel, X[:n_lazy], tile=args.tile, client=client)
        lazy = client.compute(A).result()
    load_after = _load()
    assert np.array_equal(out, out.T), "the Dask Gram is not exactly symmetric"
    if K_local is None:
        print(f"load average before / after: {load_before} | {load_after}")
        return
    worst, equal, total = compare_tiles(out, K_local, args.tile)
    worst_lazy, _, _ = compare_tiles(lazy, K_local[:n_lazy, :n_lazy], args.tile)
    print(
        f"tile for tile: max |dask - local| = {worst:.3g}, {equal} of {total} tiles bitwise "
        f"equal; gram_tiles on the first {n_lazy} series: max |diff| = {worst_lazy:.3g}"
    )
    print(
        f"| kernel | n | T x d | tile | local gram (s) | dask, {args.workers} workers (s) | "
        "max abs diff | tiles bitwise equal | load avg before | load avg after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.kernel} | {args.n} | {args.T} x {args.d} | {args.tile} | {t_local:.1f} | "
        f"{t_dask:.1f} | {worst:.2g} | {equal} / {total} | {load_before} | {load_after} |"
    )


if __name__ == "__main__":
    main()
