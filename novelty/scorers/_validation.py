"""Input checks shared by the novelty scorers: Gram matrices and their parameters.

Corpus Grams must be square, finite, symmetric (to a relative tolerance) and hold at least
two points: one rule for every scorer (a single point has no spread, so VarianceNorm cannot
whiten it, and the distance-type scores of one point say nothing a constant would not). Cross
Grams (test x corpus) must match the corpus size; an empty test set (0, N) gives empty scores.
numpy or torch in, float64 torch out (on the input's device for torch inputs). These are data
checks; the scorers' parameters and method arguments are declared constraints
(:mod:`novelty._constraints`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np
import scipy.linalg
import torch

from tskernels import validation as _tv

__all__ = [
    "as_gram",
    "check_corpus_gram",
    "check_psd",
    "psd_checks_shared",
    "pow2_scale",
    "check_cross_gram",
    "check_test_diag",
    "as_alphas",
]

#: Relative asymmetry max|K - K^T| / max|K| tolerated (and then symmetrised away).
SYMMETRY_RTOL = 1e-8
#: Relative negative eigenvalue -lambda_min / lambda_max tolerated as rounding or as the
#: discretisation error of approximate kernels (PDE signature kernels reach ~3e-6).
PSD_RTOL = 1e-4


def as_gram(K, name: str, device: torch.device | None = None) -> torch.Tensor:
    """A float64 torch tensor from a numpy array or torch tensor; checks it is real and finite
    (:func:`tskernels.validation.as_gram`)."""
    return _tv.as_gram(K, name=name, device=device)


def check_corpus_gram(K, name: str = "K", min_points: int = 2) -> torch.Tensor:
    """Square, symmetric, finite corpus Gram with at least ``min_points`` points."""
    t = as_gram(K, name)
    if t.ndim != 2 or t.shape[0] != t.shape[1]:
        raise ValueError(
            f"`{name}` must be a square (N, N) Gram matrix, got shape {tuple(t.shape)}"
        )
    N = t.shape[0]
    if N == 0:
        raise ValueError(f"`{name}` is empty: the corpus needs at least {min_points} points")
    if N < min_points:
        raise ValueError(
            f"`{name}` holds {'a single corpus point' if N == 1 else f'{N} corpus points'} "
            f"(shape {tuple(t.shape)}); this novelty scorer needs at least {min_points} corpus "
            "points"
        )
    scale = float(t.abs().max())
    asym = float((t - t.T).abs().max())
    if asym > SYMMETRY_RTOL * max(scale, 1e-300):
        raise ValueError(
            f"`{name}` is not symmetric: max |K - K^T| = {asym:.3g} (max |K| = {scale:.3g}); "
            "pass the Gram of the corpus with itself, k(x_i, x_j)"
        )
    return t.mul(0.5).add_(t.T, alpha=0.5)  # = (K + K^T) / 2 exactly, never overflows


#: The extreme eigenvalues computed inside :func:`psd_checks_shared` (per thread).
_PSD_MEMO = threading.local()


@contextmanager
def psd_checks_shared():
    """Inside the block, :func:`check_psd` computes the eigenvalues of one tensor once: a
    second check of the same tensor object, unchanged since (torch's version counter), reuses
    the extreme eigenvalues of the first, so its verdict and message are those a fresh
    computation gives (the internal path of the experiments, where the mean-embedding and
    one-class SVM scorers of a fold are fitted on one checked corpus Gram)."""
    previous = getattr(_PSD_MEMO, "entries", None)
    _PSD_MEMO.entries = []
    try:
        yield
    finally:
        _PSD_MEMO.entries = previous


def _extreme_eigenvalues(K: torch.Tensor) -> tuple[float, float]:
    entries = getattr(_PSD_MEMO, "entries", None)
    if entries is not None:
        for t, version, lo, hi in entries:
            if t is K and t._version == version:
                return lo, hi
    if K.device.type == "cpu":
        s = scipy.linalg.eigh(K.numpy(), eigvals_only=True, driver="evd", check_finite=False)
    else:
        s = torch.linalg.eigvalsh(K)
    lo, hi = float(s[0]), float(s[-1])
    if entries is not None:
        entries.append((K, K._version, lo, hi))
    return lo, hi


def check_psd(K: torch.Tensor, name: str, scorer: str) -> None:
    """Raise when the symmetric ``K`` has an eigenvalue below -PSD_RTOL x its largest one."""
    if K.shape[0] == 0:
        return
    lo, hi = _extreme_eigenvalues(K)
    if lo < -PSD_RTOL * max(hi, 0.0) or (hi <= 0 and lo < 0):
        raise ValueError(
            f"`{name}` is not positive semi-definite: eigenvalue {lo:.3g} (largest {hi:.3g}); "
            f"{scorer} needs the Gram of a positive-definite kernel: check the kernel, its "
            "parameters, or a non-kernel similarity"
        )


def pow2_scale(*tensors: torch.Tensor) -> float:
    """1.0 while the largest magnitude m of the tensors is below 2^500 (the sums and
    differences of the scorers stay finite); else an even power of two 4^-k bringing m near 1
    (exact: scaled results are the same bits, and square roots scale by 2^-k exactly)."""
    m = max((float(t.abs().max()) for t in tensors if t.numel()), default=0.0)
    if m < 2.0**500:
        return 1.0
    e = math.frexp(m)[1]
    return 2.0 ** -(e + (e & 1))


def check_cross_gram(K, n_corpus: int, name: str, device: torch.device) -> torch.Tensor:
    """Test-by-corpus Gram (n_test, N)."""
    t = as_gram(K, name, device)
    if t.ndim != 2:
        hint = " (reshape a single test point to (1, N))" if t.ndim == 1 else ""
        raise ValueError(
            f"`{name}` must be a 2-D (n_test, N) matrix of k(test, corpus), got shape "
            f"{tuple(t.shape)}{hint}"
        )
    if t.shape[1] != n_corpus:
        raise ValueError(
            f"`{name}` has {t.shape[1]} columns but the scorer was fitted on a corpus of "
            f"N={n_corpus} points; pass k(test, corpus) of shape (n_test, {n_corpus})"
        )
    return t


def check_test_diag(k_diag, n_test: int, name: str, device: torch.device) -> torch.Tensor:
    t = as_gram(k_diag, name, device).reshape(-1)
    if t.shape[0] != n_test:
        raise ValueError(
            f"`{name}` must hold one k(x, x) per test point ({n_test}), got {t.shape[0]}"
        )
    return t


def as_alphas(alpha) -> tuple[list[float], bool]:
    """(alphas, is_scalar) of a checked ``alpha`` (:data:`novelty._constraints.ALPHAS`): a
    positive float or a non-empty sequence of them, as a list of floats."""
    if isinstance(alpha, (Sequence, np.ndarray, torch.Tensor)):
        return [float(a.item() if hasattr(a, "item") else a) for a in list(alpha)], False
    return [float(alpha)], True
