"""Benchmark of VarianceNorm: fit on N corpus points + every (alpha, rank 1..M) score.

Speed target (issue 5): N = 1000, 3000 test series, ranks 1..50, three alphas, < 2 s on CPU
(kernel evaluation excluded). The peer is a plain torch implementation of the same formulas
(chunked broadcast, cumulative sum, minimum), timed in the same process, interleaved; the
accuracy of ours is checked against it. Prints median and quartiles of repeats.

    python benchmarks/bench_novelty.py [--n 1000] [--n-test 3000] [--repeats 5]
    python benchmarks/bench_novelty.py --device cuda

``--device cuda`` (default cpu) puts both Gram matrices on the GPU before the timing, so ours
runs its torch path there (the CPU path is the numba loop) and so does the peer; the GPU is
synchronised before and after every timed call. The 2 s target is a CPU target. Without a
usable GPU, ``--device cuda`` stops with a one-line error.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from novelty import VarianceNorm

try:  # run as a script: benchmarks/ is on sys.path
    from _device import add_device_argument, check_device, synchronize
except ImportError:  # imported from the repository root
    from benchmarks._device import add_device_argument, check_device, synchronize

ALPHAS = [1e-8, 1e-5, 1e-2]


def _rbf(A, B, sigma):
    d2 = ((A**2).sum(1)[:, None] + (B**2).sum(1)[None, :] - 2 * A @ B.T).clip(min=0)
    return np.exp(-d2 / (2 * sigma**2))


def peer_all_ranks(K, Kt, max_rank=50, chunk=50):
    """Straightforward torch version of protocol section 1 (no early exit, no numba)."""
    K, Kt = torch.as_tensor(K), torch.as_tensor(Kt)
    N = K.shape[0]
    a = K.mean(0)
    A = (K - a[:, None] - a[None, :] + a.mean()) / N
    s, U = torch.linalg.eigh(A)
    s, U = s.flip(0)[:max_rank], U.flip(1)[:, :max_rank]
    Pm = U / torch.sqrt(N * s)
    E = (K - K.mean(1, keepdim=True)) @ Pm
    P = (Kt - Kt.mean(1, keepdim=True)) @ Pm
    W = torch.stack([s / (s + al) ** 2 for al in ALPHAS])
    maha = torch.cumsum(W[:, :, None] * ((P - E.mean(0)) ** 2).T[None], dim=1).sqrt()
    conf = torch.empty_like(maha)
    for i in range(0, P.shape[0], chunk):
        d2 = (P[i : i + chunk, :, None] - E.T[None]) ** 2
        for ia in range(len(ALPHAS)):
            conf[ia, :, i : i + chunk] = torch.cumsum(d2 * W[ia][None, :, None], 1).amin(2).T.sqrt()
    return maha, conf


def ours_all_ranks(K, Kt):
    vn = VarianceNorm(max_rank=50).fit(K)
    return vn.mahalanobis(Kt, ALPHAS, "all"), vn.conformance(Kt, ALPHAS, "all")


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--n-test", type=int, default=3000)
    p.add_argument("--dim", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    add_device_argument(p)
    args = p.parse_args(argv)
    device = check_device(p, args.device)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n + args.n_test, args.dim))
    sigma = np.sqrt(args.dim)
    K = torch.from_numpy(_rbf(X[: args.n], X[: args.n], sigma)).to(device)
    Kt = torch.from_numpy(_rbf(X[args.n :], X[: args.n], sigma)).to(device)
    ours_all_ranks(K, Kt[:10])  # warm-up: numba compilation / cache load / CUDA start
    synchronize(device)
    m_ref, c_ref = peer_all_ranks(K, Kt)
    m, c = ours_all_ranks(K, Kt)
    err_m = float((m - m_ref).abs().max() / m_ref.abs().max())
    err_c = float((c - c_ref).abs().max() / c_ref.abs().max())
    t_ours, t_peer = [], []
    for _ in range(args.repeats):  # interleaved
        for fn, times in ((ours_all_ranks, t_ours), (peer_all_ranks, t_peer)):
            synchronize(device)
            t0 = time.perf_counter()
            fn(K, Kt)
            synchronize(device)
            times.append(time.perf_counter() - t0)
    q = lambda t: np.percentile(t, [25, 50, 75])  # noqa: E731
    print(
        f"VarianceNorm fit N={args.n} + Mahalanobis and conformance for {args.n_test} tests, "
        f"ranks 1..50, {len(ALPHAS)} alphas, {torch.get_num_threads()} torch threads, "
        f"device={device}"
    )
    print(f"{'impl':<22}{'q25 s':>9}{'median s':>10}{'q75 s':>9}")
    for name, t in (("ours (VarianceNorm)", t_ours), ("peer (plain torch)", t_peer)):
        a, b, c_ = q(t)
        print(f"{name:<22}{a:>9.3f}{b:>10.3f}{c_:>9.3f}")
    print(f"speed-up (median peer / median ours): {np.median(t_peer) / np.median(t_ours):.1f}x")
    print(f"max relative difference to peer: Mahalanobis {err_m:.1e}, conformance {err_c:.1e}")
    print(f"target < 2 s: {'met' if np.median(t_ours) < 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
