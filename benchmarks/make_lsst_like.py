"""A seeded synthetic data set of LSST's shape, written as an npz that the experiments CLI reads
(``--dataset path.npz``): X_train (2459, 36, 6), y_train, X_test, y_test (issue 25, studies at
archive size). LSST itself is not in the shared data.

Class sizes: 14 classes of 20 to 600 training series, a geometric spread
(``round(geomspace(20, 600, 14))``, the largest inner sizes adjusted so the total is 2,459; LSST's
own class sizes are not stated here). The test part has the same class proportions and
2,466 series (LSST's test size).

Each class c has a signature the scorers can tell apart: per channel j a sine of frequency
``f_c (1 + 0.15 j)`` cycles per series (f_c from 0.6 to 3.2 cycles), a per-class amplitude
profile over the channels, a per-class linear trend and a noise level; each series draws its
phase uniformly, its amplitude from 1 +- 0.2 and adds Gaussian noise. Classes with nearby
frequencies overlap, so ROC-AUCs are neither all 1 nor 0.5.

    python benchmarks/make_lsst_like.py /tmp/lsst_like.npz [--seed 0]

Never commit the npz (data stay out of git).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

N_TRAIN, N_TEST, T, D, N_CLASSES = 2459, 2466, 36, 6, 14


def class_sizes(total: int, n_classes: int = N_CLASSES, low: int = 20, high: int = 600):
    """Geometric spread from ``low`` to ``high``, ends kept, the largest inner sizes nudged so the
    sizes sum to ``total``."""
    sizes = np.round(np.geomspace(low, high, n_classes)).astype(int)
    diff = total - int(sizes.sum())
    while diff != 0:  # one series at a time on the largest inner class (ends kept)
        i = 1 + int(np.argmax(sizes[1:-1]))
        step = 1 if diff > 0 else -1
        sizes[i] += step
        diff -= step
    return sizes


def make(seed: int = 0, n_train: int = N_TRAIN, n_test: int = N_TEST, T: int = T, d: int = D):
    """(X_train, y_train, X_test, y_test): float64 (n, T, d) and string labels."""
    rng = np.random.default_rng(seed)
    k = N_CLASSES
    freqs = np.linspace(0.6, 3.2, k)[rng.permutation(k)]
    profiles = rng.uniform(0.3, 1.5, size=(k, d))
    trends = rng.normal(0, 0.6, size=(k, d))
    noise = rng.uniform(0.15, 0.5, size=k)
    t = np.linspace(0, 1, T)
    labels = np.array([f"c{c:02d}" for c in range(k)])

    def draw(sizes):
        y = np.repeat(np.arange(k), sizes)
        n = y.size
        phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1))
        amp = 1 + 0.2 * rng.normal(size=(n, 1, 1))
        f = freqs[y][:, None, None] * (1 + 0.15 * np.arange(d))[None, None, :]
        X = amp * profiles[y][:, None, :] * np.sin(2 * np.pi * f * t[None, :, None] + phase)
        X += trends[y][:, None, :] * t[None, :, None]
        X += noise[y][:, None, None] * rng.normal(size=(n, T, d))
        order = rng.permutation(n)
        return X[order], labels[y][order]

    train = class_sizes(n_train)
    test = np.round(train * n_test / n_train).astype(int)
    test[np.argmax(test)] += n_test - int(test.sum())
    Xtr, ytr = draw(train)
    Xte, yte = draw(test)
    return Xtr, ytr, Xte, yte


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="the npz to write (e.g. /tmp/lsst_like.npz)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    Xtr, ytr, Xte, yte = make(args.seed)
    np.savez(Path(args.path), X_train=Xtr, y_train=ytr, X_test=Xte, y_test=yte)
    sizes = dict(zip(*np.unique(ytr, return_counts=True)))
    print(f"{args.path}: train {Xtr.shape}, test {Xte.shape}; train class sizes "
          f"{', '.join(f'{c}={n}' for c, n in sizes.items())}")  # fmt: skip


if __name__ == "__main__":
    main()
