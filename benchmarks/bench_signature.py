"""Benchmark the signature kernels against pysiglib on the same inputs, in the same process.

Workloads (CPU, float64, symmetric Gram of n paths, T steps, d channels; defaults of the
issue: n = 200, T = 100, d = 6): PDE kernel with linear lift at dyadic orders 0 and 2, with
RBF lift at dyadic order 2 (and 0), truncated kernel with linear lift at level 4 (peer:
pysiglib signatures + a matrix product), randomized signature (no peer). Ours and the peer
are timed interleaved, after a warm-up, with the same thread count (``--threads``, default
2); the table reports medians, quartiles, the ratio ours / pysiglib and the largest relative
difference between the two Grams. ``--memory`` also measures the peak resident memory of a
1000 x 1000 PDE Gram in a fresh subprocess.

``--device cuda`` runs the same workloads with the paths on the GPU: ours with
``device="cuda"``, pysiglib on the same CUDA tensors (pysiglib has no device argument: it
computes where its input lives, on the GPU only in a CUDA build, ``pysiglib.BUILT_WITH_CUDA``;
otherwise the CUDA rows have no peer and say so). Every timed call is followed by
``torch.cuda.synchronize()``. Without a usable GPU, ``--device cuda`` stops with a one-line
error.

    python benchmarks/bench_signature.py [--n 200 --T 100 --d 6 --repeats 5 --memory]
    python benchmarks/bench_signature.py --device cuda
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import torch

from tskernels import (
    RBF,
    Linear,
    RandomizedSignatureKernel,
    SignaturePDEKernel,
    TruncatedSignatureKernel,
)

try:  # run as a script: benchmarks/ is on sys.path
    from _device import add_device_argument, check_device, synchronize, timed
except ImportError:  # imported from the repository root
    from benchmarks._device import add_device_argument, check_device, synchronize, timed


def make_paths(n: int, T: int, d: int, seed: int = 0) -> np.ndarray:
    """Random walks with N(0, 0.3^2 / d) steps (a z-scored series scaled by 0.3/sqrt(d))."""
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)) * 0.3 / np.sqrt(d), axis=1)


def _as_np(K) -> np.ndarray:
    return K.detach().cpu().numpy() if isinstance(K, torch.Tensor) else np.asarray(K)


def compare(name, ours, peer, repeats, device: str = "cpu"):
    """Interleave ours and the peer ``repeats`` times after one warm-up call of each."""
    if device == "cuda" and not _peer_has_cuda():
        peer = None
    ours(), peer() if peer else None
    synchronize(device)
    t_ours, t_peer = [], []
    K_ours = K_peer = None
    for _ in range(repeats):
        ts, K_ours = timed(ours, 1, device)
        t_ours += ts
        if peer:
            ts, K_peer = timed(peer, 1, device)
            t_peer += ts
    row = {"workload": name, "ours": np.median(t_ours), "ours_q": np.percentile(t_ours, [25, 75])}
    if peer:
        a, b = _as_np(K_ours), _as_np(K_peer)
        row.update(
            peer=np.median(t_peer),
            peer_q=np.percentile(t_peer, [25, 75]),
            ratio=np.median(t_ours) / np.median(t_peer),
            rel_err=float(np.abs(a - b).max() / np.abs(b).max()),
        )
    return row


def _peer_has_cuda() -> bool:
    import pysiglib

    return bool(pysiglib.BUILT_WITH_CUDA)


def _fmt(row) -> str:
    o = f"{row['ours']:.3f} [{row['ours_q'][0]:.3f}, {row['ours_q'][1]:.3f}]"
    if "peer" not in row:
        return f"| {row['workload']} | {o} | - | - | - |"
    p = f"{row['peer']:.3f} [{row['peer_q'][0]:.3f}, {row['peer_q'][1]:.3f}]"
    return f"| {row['workload']} | {o} | {p} | {row['ratio']:.3f} | {row['rel_err']:.1e} |"


def run(n: int, T: int, d: int, repeats: int, threads: int, device: str) -> list[dict]:
    import pysiglib

    torch.set_num_threads(threads)
    X = make_paths(n, T, d)
    Xt = torch.as_tensor(X, device=device)
    rows = []
    cpu = device == "cpu"
    # CPU: same thread count as the peer; CUDA: larger blocks of pairs per wavefront
    mem = {} if cpu else {"max_memory": 8 * 2**30}
    jobs = {"n_jobs": threads} if cpu else mem
    if not cpu and not pysiglib.BUILT_WITH_CUDA:
        print(f"(pysiglib has no CUDA build: {device} rows have no peer)")
    for lam in (0, 2):
        ours = SignaturePDEKernel(Linear(), 1.0, lam, device=device, **jobs)
        rows.append(
            compare(
                f"PDE linear, dyadic {lam} ({device})",
                lambda ours=ours: ours.gram(Xt),
                lambda lam=lam: pysiglib.sig_kernel_gram(Xt, Xt, dyadic_order=lam, n_jobs=threads),
                repeats,
                device,
            )
        )
    for lam in (0, 2):
        sigma = 1.0
        ours = SignaturePDEKernel(RBF(sigma), 1.0, lam, device=device, **jobs)
        peer_static = pysiglib.RBFKernel(2 * sigma**2)
        rows.append(
            compare(
                f"PDE RBF, dyadic {lam} ({device})",
                lambda ours=ours: ours.gram(Xt),
                lambda lam=lam, st=peer_static: pysiglib.sig_kernel_gram(
                    Xt, Xt, dyadic_order=lam, static_kernel=st, n_jobs=threads
                ),
                repeats,
                device,
            )
        )

    def peer_trunc():
        S = pysiglib.sig(Xt, 4, scalar_term=True, n_jobs=threads)
        return S @ S.T

    trunc = TruncatedSignatureKernel(Linear(), 4, device=device, **mem)
    rows.append(
        compare(
            f"truncated linear, level 4 ({device})",
            lambda: trunc.gram(Xt),
            peer_trunc,
            repeats,
            device,
        )
    )
    rs = RandomizedSignatureKernel(100, 0.1, device=device, **mem)
    rows.append(
        compare(
            f"randomized signature, M=100 ({device})", lambda: rs.gram(Xt), None, repeats, device
        )
    )
    return rows


def peak_memory(n: int, T: int, d: int, lam: int) -> float:
    """Peak resident memory (GiB) of one n x n PDE Gram, measured in a fresh subprocess."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        f"import sys; sys.path.insert(0, {root!r}); "
        "from benchmarks.bench_signature import make_paths; "
        "from tskernels import SignaturePDEKernel, Linear; "
        f"X = make_paths({n}, {T}, {d}); "
        f"SignaturePDEKernel(Linear(), 1.0, {lam}).gram(X); "
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss of the forking parent across exec
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 2**20


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--d", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory", action="store_true", help="peak memory of a 1000 x 1000 Gram")
    add_device_argument(ap)
    args = ap.parse_args(argv)
    device = check_device(ap, args.device)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    print(
        f"n={args.n} T={args.T} d={args.d} float64, device={device}, {args.threads} threads, "
        f"median [q25, q75] of {args.repeats} interleaved runs (seconds)\n"
    )
    print("| workload | ours (s) | pysiglib (s) | ours / pysiglib | max rel. diff |")
    print("|---|---|---|---|---|")
    for row in run(args.n, args.T, args.d, args.repeats, args.threads, device):
        print(_fmt(row), flush=True)
    if args.memory:
        for lam in (0, 2):
            gib = peak_memory(1000, args.T, args.d, lam)
            print(
                f"\npeak resident memory, PDE Gram 1000 x 1000 (T={args.T}, d={args.d}, "
                f"dyadic {lam}, linear lift): {gib:.2f} GiB"
            )


if __name__ == "__main__":
    main()
