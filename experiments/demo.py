"""The Gram-matrix table: every registered kernel on one UEA data set (BasicMotions default).

Prints kernel, Gram shape, seconds and the smallest eigenvalue of the normalised Gram of the
pre-processed training split.
"""

from __future__ import annotations

import time

import torch

import tskernels
from tskernels.transforms import Preprocessor

from .data import load_uea

__all__ = ["gram_table"]


def gram_table(dataset: str = "BasicMotions", data_dir=None, device=None) -> list[dict]:
    X, _ = load_uea(dataset, "train", data_dir=data_dir)
    X = Preprocessor().fit_transform(X)
    rows = []
    for name, spec in sorted(tskernels.kernel_registry().items()):
        if not spec.unequal_length and isinstance(X, list):
            continue
        kernel = spec.fitted_example(X)  # kernels with data-dependent features: on this split
        if device is not None:
            kernel.set_params(device=device)
        kernel.gram(X[:2])  # warm-up: compilation, CUDA start
        t0 = time.perf_counter()
        K = kernel.gram(X, normalize=True)
        seconds = time.perf_counter() - t0
        lam_min = float(torch.linalg.eigvalsh(K.cpu()).min())
        rows.append(
            {"kernel": name, "shape": tuple(K.shape), "seconds": seconds, "min_eig": lam_min}
        )
    return rows


def print_table(rows: list[dict], dataset: str) -> None:
    print(f"Gram matrices on {dataset} (train split, pre-processed, normalised)")
    print(f"{'kernel':<22}{'shape':>12}{'seconds':>10}{'min eigenvalue':>17}")
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        print(f"{r['kernel']:<22}{shape:>12}{r['seconds']:>10.3f}{r['min_eig']:>17.3e}")
