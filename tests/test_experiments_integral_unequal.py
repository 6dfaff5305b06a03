"""The experiments' integral kernels on unequal-length data: one quadrature grid for every
pair (``n_grid`` = the corpus's longest series), so the Gram is positive semi-definite; on
equal-length data the kernel is the one without a grid, to the bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from experiments._grids import build_kernel
from tskernels import RBF, Polynomial, make_kernel


def _centred_eigenvalues(K) -> np.ndarray:
    K = np.asarray(K, dtype=np.float64)
    H = np.eye(len(K)) - 1.0 / len(K)
    return np.linalg.eigvalsh(H @ K @ H)


def _walks(lengths, d, seed=0):
    rng = np.random.default_rng(seed)
    return [np.cumsum(rng.normal(size=(int(L), d)), axis=0) / 5 for L in lengths]


@pytest.mark.parametrize("sigma", [math.e**2, math.e])
def test_integral_rbf_gram_psd_on_unequal_lengths(sigma):
    d = 12
    X = _walks(np.random.default_rng(1).integers(7, 30, size=60), d)
    T = max(len(x) for x in X)
    built = build_kernel("integral_rbf", {"sigma": sigma}, d, T)
    per_pair = make_kernel("integral_rbf", static=RBF(sigma=sigma * math.sqrt(d)))
    e_built = _centred_eigenvalues(built.gram(X, normalize=True))
    e_pair = _centred_eigenvalues(per_pair.gram(X, normalize=True))
    # the per-pair quadrature (the kernel's default) is not PSD on this batch: the check bites
    assert e_pair.min() < -1e-4 * e_pair.max()
    assert e_built.min() > -1e-12 * e_built.max()


@pytest.mark.parametrize(
    "name, point", [("integral_rbf", {"sigma": 1.0}), ("integral_poly", {"p": 2, "c": 1.0})]
)
def test_integral_kernels_unchanged_on_equal_lengths(name, point):
    d, T = 3, 25
    X = np.stack(_walks([T] * 12, d, seed=2))
    Y = np.stack(_walks([T] * 5, d, seed=3))
    built = build_kernel(name, point, d, T)
    static = (
        RBF(sigma=point["sigma"] * math.sqrt(d))
        if name == "integral_rbf"
        else Polynomial(degree=point["p"], c=point["c"], scale=1.0 / d)
    )
    plain = make_kernel(name, static=static)
    assert torch.equal(torch.as_tensor(built.gram(X, Y)), torch.as_tensor(plain.gram(X, Y)))
