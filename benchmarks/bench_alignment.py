"""Alignment and reservoir kernels: our GAK against tslearn's ``cdist_gak`` (same inputs,
same sigma, same process, interleaved repeats), and the Volterra reservoir kernel.

    python benchmarks/bench_alignment.py                 # all CPU workloads
    python benchmarks/bench_alignment.py --only gak100   # one workload
    python benchmarks/bench_alignment.py --device cuda   # our kernels on the GPU

Wall time (median and quartiles over interleaved repeats, warm-up outside the timing) and
process CPU time. The T = 1000 workload times tslearn (and ours, for the ratio) on an
``--n-long-peer`` x ``--n-long-peer`` sub-Gram, since tslearn's log-space path takes minutes
on the full 100 x 100; ours is also timed on the full Gram.

``--device cuda`` (default cpu): our kernels run on the GPU (the torch wavefront for GAK, the
torch recursion for the reservoir), the series moved there once outside the timing, and the
GPU is synchronised before and after every timed call. tslearn is CPU only (no CUDA peer; the
single-thread row of ours stays on the CPU as the reference). Without a usable GPU,
``--device cuda`` stops with a one-line error.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from tskernels import GAK, VolterraReservoirKernel

try:  # run as a script: benchmarks/ is on sys.path
    from _device import add_device_argument, check_device, synchronize
except ImportError:  # imported from the repository root
    from benchmarks._device import add_device_argument, check_device, synchronize

#: Device of our kernels in this run ("cpu" or "cuda"), set by ``main``.
DEVICE = "cpu"


def _timed(fn) -> tuple[float, float]:
    synchronize(DEVICE)
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    synchronize(DEVICE)
    return time.perf_counter() - w0, time.process_time() - c0


def interleaved(fns: dict, repeats: int) -> dict:
    """Warm each callable, then run them in turn ``repeats`` times; wall/CPU times."""
    for fn in fns.values():
        fn()
    out = {name: ([], []) for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            w, c = _timed(fn)
            out[name][0].append(w)
            out[name][1].append(c)
    return out


def _stats(ts):
    q1, med, q3 = np.percentile(ts, [25, 50, 75])
    return med, q1, q3


def report(title: str, res: dict, ref: str | None = None) -> None:
    print(f"\n## {title}")
    print(f"{'method':<28}{'wall med':>10}{'q1':>9}{'q3':>9}{'cpu med':>10}{'ratio':>8}")
    ref_med = _stats(res[ref][0])[0] if ref else None
    for name, (wall, cpu) in res.items():
        med, q1, q3 = _stats(wall)
        ratio = f"{med / ref_med:8.3f}" if ref_med else ""
        print(f"{name:<28}{med:10.4f}{q1:9.4f}{q3:9.4f}{np.median(cpu):10.4f}{ratio}")


def bench_gak(n: int, T: int, d: int, repeats: int, device, peer_n: int | None = None) -> None:
    from tslearn.metrics import cdist_gak

    X = np.random.default_rng(0).normal(size=(n, T, d))
    ours = GAK(device=device).fit(X)
    sigma = ours.sigma_
    sub = X if peer_n is None else X[:peer_n]
    X_dev, sub_dev = torch.as_tensor(X, device=device), torch.as_tensor(sub, device=device)
    K = ours.gram(sub_dev).cpu().numpy()
    R = cdist_gak(sub, sigma=sigma)
    err = np.max(np.abs(K - R) / np.abs(R))
    one = GAK(sigma=sigma, n_jobs=1)  # CPU, one thread: the reference of ours
    fns = {
        f"ours GAK ({device})": lambda: ours.gram(sub_dev),
        "ours GAK, 1 thread (cpu)": lambda: one.gram(sub),
        "tslearn cdist_gak n_jobs=1": lambda: cdist_gak(sub, sigma=sigma),
        "tslearn cdist_gak n_jobs=-1": lambda: cdist_gak(sub, sigma=sigma, n_jobs=-1),
    }
    m = len(sub)
    res = interleaved(fns, repeats)
    report(
        f"GAK Gram {m}x{m}, T={T}, d={d}, sigma={sigma:.4g} (median heuristic); "
        f"max relative difference to tslearn {err:.2e}",
        res,
        ref="tslearn cdist_gak n_jobs=1",
    )
    if peer_n is not None:
        res = interleaved({f"ours GAK ({device}) full": lambda: ours.gram(X_dev)}, repeats)
        report(f"GAK Gram {n}x{n}, T={T}, d={d} (ours only)", res)


def bench_vrk(n: int, T: int, d: int, repeats: int, device) -> None:
    X = np.random.default_rng(1).normal(size=(n, T, d))
    tau = 0.25 / np.sqrt(d)  # a grid value of the protocol, times 1/sqrt(d)
    k = VolterraReservoirKernel(tau=tau, lam=0.9, device=device)
    X_dev = torch.as_tensor(X, device=device)
    res = interleaved({f"ours VRK ({device})": lambda: k.gram(X_dev)}, repeats)
    report(f"VRK Gram {n}x{n}, T={T}, d={d}, tau={tau:.4g}, lam=0.9", res)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=5)
    add_device_argument(p)
    p.add_argument("--n-long-peer", type=int, default=12)
    p.add_argument("--only", nargs="*", default=None, help="gak100 gak1000 vrk")
    args = p.parse_args(argv)
    global DEVICE
    DEVICE = check_device(p, args.device)
    import numba

    print(
        f"threads: numba={numba.get_num_threads()} torch={torch.get_num_threads()}; "
        f"float64; device={DEVICE}"
    )
    todo = args.only or ["gak100", "gak1000", "vrk"]
    if "gak100" in todo:
        bench_gak(200, 100, 6, args.repeats, DEVICE)
    if "gak1000" in todo:
        bench_gak(100, 1000, 6, max(1, args.repeats // 2), DEVICE, args.n_long_peer)
    if "vrk" in todo:
        bench_vrk(1000, 100, 6, args.repeats, DEVICE)


if __name__ == "__main__":
    main()
