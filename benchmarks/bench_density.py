"""Benchmarks of the density package (interleaved with peers, median of repeats).

1. SOSREP solver with random features: feature form K a = Phi (Phi^T a) (ours) vs forming
   K = Phi Phi^T once and iterating on it (peer); same alpha checked.
2. Gaussian KDE log-density: density.KDE vs sklearn.neighbors.KernelDensity (exact peer);
   same values checked.
3. ``--adbench NAME ...``: end-to-end SOSREP-SDO of the ADBench evaluation on one data set
   (subsample to 10,000 rows, 70 % train; nn-spacing, 4-value Fisher-divergence selection,
   refit, scoring), seconds per run, with ``--threads`` torch threads.

    python benchmarks/bench_density.py [--quick] [--lr 0.1] [--adbench 1_ALOI 24_mnist]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch


def _median_time(fns: dict, repeats: int) -> dict:
    times = {k: [] for k in fns}
    for _ in range(repeats):  # interleaved
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {
        k: (float(np.median(v)), float(np.quantile(v, 0.25)), float(np.quantile(v, 0.75)))
        for k, v in times.items()
    }


def bench_solver(sizes, n_features, repeats, lr=0.1):
    from density import FeatureGram, SDOKernel, sosrep_solve

    print(f"## SOSREP solver, SDO features D={n_features}, d=10, lr={lr:.3g} (s, median [q1, q3])")
    print("| N | feature form (ours) | dense Gram (peer) | peer/ours | max rel. diff alpha |")
    print("|---|---|---|---|---|")
    for N in sizes:
        X = torch.tensor(np.random.default_rng(0).random((N, 10)))
        k = SDOKernel(a=0.5**12, n_features=n_features, seed=0).fit(X)
        Phi = k._features(X)
        out = {}

        def ours(Phi=Phi, out=out):
            out["ours"] = sosrep_solve(FeatureGram(Phi), lr=lr, require_positive=False).alpha

        def peer(Phi=Phi, out=out):
            out["peer"] = sosrep_solve(Phi @ Phi.T, lr=lr, require_positive=False).alpha

        t = _median_time({"ours": ours, "peer": peer}, repeats)
        diff = float(((out["ours"] - out["peer"]).abs() / out["peer"].abs()).max())
        print(
            f"| {N} | {t['ours'][0]:.3f} [{t['ours'][1]:.3f}, {t['ours'][2]:.3f}] | "
            f"{t['peer'][0]:.3f} [{t['peer'][1]:.3f}, {t['peer'][2]:.3f}] | "
            f"{t['peer'][0] / t['ours'][0]:.2f} | {diff:.1e} |"
        )


def bench_kde(sizes, repeats):
    from sklearn.neighbors import KernelDensity

    from density import KDE, GaussianKernel

    print("\n## Gaussian KDE log-density, d=10, 2000 query points (seconds)")
    print("| N | density.KDE (ours) | sklearn KernelDensity (peer) | peer/ours | max abs diff |")
    print("|---|---|---|---|---|")
    for N in sizes:
        rng = np.random.default_rng(1)
        X, Y = rng.random((N, 10)), rng.random((2000, 10))
        out = {}

        def ours(X=X, Y=Y, out=out):
            out["ours"] = KDE(GaussianKernel(0.3)).fit(X).score_samples(Y)

        def peer(X=X, Y=Y, out=out):
            kd = KernelDensity(kernel="gaussian", bandwidth=0.3)  # exact (rtol = atol = 0)
            out["peer"] = kd.fit(X).score_samples(Y)

        t = _median_time({"ours": ours, "peer": peer}, repeats)
        diff = float(np.abs(out["ours"] - out["peer"]).max())
        print(
            f"| {N} | {t['ours'][0]:.3f} | {t['peer'][0]:.3f} | "
            f"{t['peer'][0] / t['ours'][0]:.2f} | {diff:.1e} |"
        )


def bench_adbench(names, repeats):
    from experiments.adbench import METHODS, data_dir, load_split

    print("\n## ADBench SOSREP-SDO end to end (fit + select + score), seconds")
    print("| data set | n_train | d | seconds (median) | AUC-ROC |")
    print("|---|---|---|---|---|")
    from sklearn.metrics import roc_auc_score

    for name in names:
        Xtr, Xte, _, yte = load_split(data_dir() / f"{name}.npz", 0)
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            score, _info = METHODS["SOSREP-SDO"](Xtr, Xte, 0)
            ts.append(time.perf_counter() - t0)
        auc = roc_auc_score(yte, score)
        print(f"| {name} | {len(Xtr)} | {Xtr.shape[1]} | {np.median(ts):.1f} | {auc:.3f} |")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--adbench", nargs="*", default=None)
    p.add_argument("--repeats", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.adbench:
        bench_adbench(a.adbench, a.repeats)
    elif a.quick:
        bench_solver([500, 2000], 4000, 3, a.lr)
        bench_kde([2000], 3)
    else:
        bench_solver([1000, 3000, 7000], 10_000, 3, a.lr)
        bench_kde([2000, 7000], 5)


if __name__ == "__main__":
    main()
