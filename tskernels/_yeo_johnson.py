r"""Yeo-Johnson power transform fitted on all features at once.

scikit-learn's ``PowerTransformer`` finds each feature's :math:`\lambda` by its own call of
Brent's method, which takes minutes for the 10,000 random-convolution features. This module
maximises the same profile log-likelihood for every feature together:

.. math::
    \ell(\lambda) = -\tfrac{n}{2} \log \hat\sigma^2_\lambda
                    + (\lambda - 1) \sum_i \operatorname{sign}(x_i) \log(1 + |x_i|),

with :math:`\hat\sigma^2_\lambda` the variance of the transformed feature

.. math::
    \psi_\lambda(x) = \begin{cases}
        ((1 + x)^\lambda - 1)/\lambda & x \ge 0, \lambda \ne 0 \\
        \log(1 + x) & x \ge 0, \lambda = 0 \\
        -((1 - x)^{2 - \lambda} - 1)/(2 - \lambda) & x < 0, \lambda \ne 2 \\
        -\log(1 - x) & x < 0, \lambda = 2,
    \end{cases}

by a grid over [-4, 4] followed by a golden-section search in the best grid cell, vectorised
over features. Inside the search the likelihood is evaluated by a compiled core
(``_yeo_johnson_numba``: no (n, F) temporaries; parallel over features for large n F),
equal bit for bit to the numpy :func:`yeo_johnson_log_likelihood` (for F >= 2). The
transformed features are then standardised (mean 0, variance 1, as
``PowerTransformer(standardize=True)``); constant features map to 0.
"""

from __future__ import annotations

import numpy as np

__all__ = ["YeoJohnson", "yeo_johnson", "yeo_johnson_log_likelihood"]

_GRID = np.linspace(-4.0, 4.0, 33)
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


def _split(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log(1 + |x|), x >= 0): everything psi needs, computed once."""
    return np.log1p(np.abs(X)), X >= 0


def _psi(L: np.ndarray, pos: np.ndarray, lam: np.ndarray) -> np.ndarray:
    r""":math:`\psi_\lambda` from :func:`_split`: :math:`\pm \operatorname{expm1}(c L) / c` with
    :math:`c = \lambda` (x >= 0) or :math:`2 - \lambda` (x < 0), and :math:`\pm L` at c = 0."""
    c = np.where(pos, lam, 2.0 - lam)
    zero = np.abs(c) < 1e-12
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.expm1(c * L) / np.where(zero, 1.0, c)
    out = np.where(zero, L, out)
    return np.where(pos, out, -out)


def yeo_johnson(X: np.ndarray, lam: np.ndarray) -> np.ndarray:
    r""":math:`\psi_\lambda` applied column-wise: X (n, F), lam (F,) -> (n, F)."""
    X = np.asarray(X, dtype=np.float64)
    L, pos = _split(X)
    return _psi(L, pos, np.broadcast_to(np.asarray(lam, dtype=np.float64), X.shape[1:]))


def _log_likelihood(L, pos, S, lam) -> np.ndarray:
    n = L.shape[0]
    psi = _psi(L, pos, lam)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        var = psi.var(axis=0)
        ll = -0.5 * n * np.log(var) + (lam - 1.0) * S
    return np.where(np.isfinite(ll), ll, -np.inf)


def yeo_johnson_log_likelihood(X: np.ndarray, lam: np.ndarray) -> np.ndarray:
    r"""Profile log-likelihood :math:`\ell(\lambda)` of each column, (F,)."""
    X = np.asarray(X, dtype=np.float64)
    L, pos = _split(X)
    S = np.where(pos, L, -L).sum(axis=0)
    lam = np.broadcast_to(np.asarray(lam, dtype=np.float64), X.shape[1:])
    return _log_likelihood(L, pos, S, lam)


def _fused_log_likelihood(X: np.ndarray):
    """``ll(lam)``: :func:`_log_likelihood` on X (n, F) for a vector of lambdas, bit for bit
    (for F >= 2), by the compiled core (``_yeo_johnson_numba``) on feature-major copies of
    L and pos and one reused (F, n) buffer: no (n, F) temporaries per evaluation."""
    from . import _yeo_johnson_numba as core

    n = X.shape[0]
    L, pos = _split(X)
    S = np.where(pos, L, -L).sum(axis=0)
    Lt, post = np.ascontiguousarray(L.T), np.ascontiguousarray(pos.T)
    del L, pos
    E = np.empty_like(Lt)
    var = np.empty(Lt.shape[0])
    scaled_logs, psi_variances = core.cores_for(Lt.size)  # serial or parallel, chosen once

    def ll(lam):
        lam = np.ascontiguousarray(lam, dtype=np.float64)
        scaled_logs(Lt, post, lam, E)
        with np.errstate(over="ignore", invalid="ignore"):
            np.expm1(E, out=E)  # numpy's (vectorised) expm1, as _psi
        psi_variances(E, Lt, post, lam, var)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = -0.5 * n * np.log(var) + (lam - 1.0) * S
        return np.where(np.isfinite(out), out, -np.inf)

    return ll


def _fit_lambdas(X: np.ndarray, tol: float = 1e-7, max_iter: int = 60) -> np.ndarray:
    return _maximise(_fused_log_likelihood(X), X.shape[1], tol, max_iter)


def _maximise(ll, F: int, tol: float = 1e-7, max_iter: int = 60) -> np.ndarray:
    """The lambda of each of the F features maximising ``ll`` (a function of an (F,) array of
    lambdas returning the (F,) log-likelihoods): the best point of ``_GRID``, then a
    golden-section search between its neighbours, never worse than that grid point."""
    grid_ll = np.stack([ll(np.full(F, g)) for g in _GRID])
    best = np.argmax(grid_ll, axis=0)
    lo = _GRID[np.maximum(best - 1, 0)]
    hi = _GRID[np.minimum(best + 1, len(_GRID) - 1)]
    # golden-section search for the maximum in [lo, hi], all features at once
    c = hi - _GOLDEN * (hi - lo)
    d = lo + _GOLDEN * (hi - lo)
    fc, fd = ll(c), ll(d)
    for _ in range(max_iter):
        if float(np.max(hi - lo)) < tol:
            break
        left = fc >= fd  # the maximum lies in [lo, d]
        hi = np.where(left, d, hi)
        lo = np.where(left, lo, c)
        new_c = hi - _GOLDEN * (hi - lo)
        new_d = lo + _GOLDEN * (hi - lo)
        c_next = np.where(left, new_c, d)
        d_next = np.where(left, c, new_d)
        f_eval = ll(np.where(left, new_c, new_d))
        fc, fd = np.where(left, f_eval, fd), np.where(left, fc, f_eval)
        c, d = c_next, d_next
    lam = 0.5 * (lo + hi)
    # never worse than the best grid point (a flat or non-unimodal likelihood)
    worse = ll(lam) < grid_ll[best, np.arange(F)]
    return np.where(worse, _GRID[best], lam)


class YeoJohnson:
    """Yeo-Johnson transform + standardisation fitted on a corpus (all features at once).

    ``fit(X)`` finds :math:`\\lambda` per column by maximum likelihood and the mean and
    standard deviation of the transformed columns; ``transform(X)`` applies both. Equal to
    scikit-learn's ``PowerTransformer(method="yeo-johnson")`` up to the optimiser's tolerance,
    with a log-likelihood at least as high.
    """

    def fit(self, X) -> YeoJohnson:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 2:
            raise ValueError(f"YeoJohnson.fit needs a 2-D array with >= 2 rows, got {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError("YeoJohnson.fit: the features contain NaN or infinite values")
        self.lambdas_ = _fit_lambdas(X)
        psi = yeo_johnson(X, self.lambdas_)
        self.mean_ = psi.mean(axis=0)
        std = psi.std(axis=0)
        self.constant_ = ~(std > 1e-12 * np.maximum(1.0, np.abs(self.mean_)))
        self.scale_ = np.where(self.constant_, 1.0, std)
        return self

    def transform(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.lambdas_.shape[0]:
            raise ValueError(
                f"YeoJohnson.transform: expected (n, {self.lambdas_.shape[0]}) features, "
                f"got {X.shape}"
            )
        Z = (yeo_johnson(X, self.lambdas_) - self.mean_) / self.scale_
        Z[:, self.constant_] = 0.0
        if not np.isfinite(Z).all():
            raise ValueError(
                "YeoJohnson.transform: a transformed feature overflowed (a value far outside "
                "the corpus range)"
            )
        return Z

    def fit_transform(self, X) -> np.ndarray:
        return self.fit(X).transform(X)
