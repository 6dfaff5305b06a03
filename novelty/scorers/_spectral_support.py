r"""Spectral Support Estimation (Rudi, Odone, De Vito) on a normalised Gram matrix.

With :math:`(\sigma_j, u_j)` the eigenpairs of :math:`K_n / n` and
:math:`k_x = (K(x_1, x), \dots, K(x_n, x))`,

.. math:: F_n(x) = \frac1n \sum_j g_\lambda(\sigma_j)\,(u_j^\top k_x)^2,

with the spectral filter :math:`g_\lambda`:

- ``"tikhonov"``: :math:`1/(\sigma + \lambda)`, i.e.
  :math:`F_n(x) = k_x^\top (K_n + n\lambda I)^{-1} k_x`;
- ``"tsvd"`` (truncated SVD): :math:`1/\sigma` for :math:`\sigma \ge \lambda`, else 0;
- ``"cutoff"`` (spectral cut-off): :math:`1/\max(\sigma, \lambda)`;
- ``"landweber"``: :math:`(1 - (1 - \eta\sigma)^t)/\sigma` with step :math:`\eta = 1` and
  :math:`t` iterations (default :math:`\lceil 1/\lambda \rceil`);
- ``"nu"`` (nu-method, Engl-Hanke-Neubauer): the polynomial of the accelerated iteration
  applied to :math:`\sigma`, :math:`t` iterations (default :math:`\lceil 1/\sqrt{\lambda}\rceil`).

The step :math:`\eta = 1` is valid because a normalised kernel gives
:math:`\sigma_j \le \operatorname{tr}(K_n)/n = 1`. Novelty score :math:`1 - F_n(x)`
(higher = more novel); the estimated support is :math:`\{F_n \ge 1 - \tau\}`.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import torch

from .._constraints import validate_arguments
from ._gram_scorer import GramScorer, Interval, StrOptions, check_fitted, validate_params
from ._scorer_registry import deferred_class
from ._validation import PSD_RTOL, check_cross_gram, check_test_diag

__all__ = ["SpectralSupport", "spectral_filter"]

FILTERS = ("tikhonov", "tsvd", "cutoff", "landweber", "nu")
_ITERATIVE = ("landweber", "nu")
#: Tolerance on |K(x, x) - 1| for a normalised kernel.
DIAG_TOL = 1e-8


def _nu_coefficients(i: int, nu: float) -> tuple[float, float]:
    """(u_i, omega_i) of the nu-method for i >= 2."""
    u = ((i - 1) * (2 * i - 3) * (2 * i + 2 * nu - 1)) / (
        (i + 2 * nu - 1) * (2 * i + 4 * nu - 1) * (2 * i + 2 * nu - 3)
    )
    omega = 4 * (2 * i + 2 * nu - 1) * (i + nu - 1) / ((i + 2 * nu - 1) * (2 * i + 4 * nu - 1))
    return u, omega


@validate_arguments(
    {
        "filter": [StrOptions(set(FILTERS))],
        "iterations": [None, Interval(Integral, 1, None, closed="left")],
    }
)
def spectral_filter(
    sigma: torch.Tensor, filter: str, lam: float, iterations: int | None = None, nu: float = 1.0
) -> torch.Tensor:
    """g_lambda(sigma) elementwise for the named filter (sigma >= 0)."""
    return _spectral_filter(sigma, filter, lam, iterations, nu)


def _spectral_filter(
    sigma: torch.Tensor, filter: str, lam: float, iterations: int | None = None, nu: float = 1.0
) -> torch.Tensor:
    """:func:`spectral_filter` without its argument checks (``filter`` and ``iterations``
    checked by the caller: :class:`SpectralSupport` declares them as its parameters)."""
    if filter == "tikhonov":
        return 1.0 / (sigma + lam)
    if filter == "tsvd":
        safe = torch.where(sigma >= lam, sigma, torch.ones_like(sigma))
        return torch.where(sigma >= lam, 1.0 / safe, torch.zeros_like(sigma))
    if filter == "cutoff":
        return 1.0 / torch.clamp(sigma, min=lam)
    t = _iterations(filter, lam, iterations)
    if filter == "landweber":
        if bool((sigma > 1.0 + 1e-10).any()):
            raise ValueError(
                "the Landweber filter (step 1) needs the eigenvalues of K/n to be <= 1, got "
                f"{float(sigma.max())}: use a normalised kernel (K(x, x) = 1)"
            )
        small = sigma < 1e-300
        # eigenvalues within rounding above 1 (e.g. 1 + 2e-16 for a constant Gram) are 1
        safe = torch.where(small, torch.ones_like(sigma), sigma).clamp(max=1.0)
        g = -torch.expm1(t * torch.log1p(-safe)) / safe  # (1 - (1 - s)^t) / s, s in (0, 1]
        return torch.where(small, torch.full_like(sigma, float(t)), g)
    if filter == "nu":
        # scalar version of the iteration c_i = c_{i-1} + u_i (c_{i-1} - c_{i-2})
        #                                        + omega_i (1 - sigma c_{i-1})
        g_prev = torch.zeros_like(sigma)
        g = torch.full_like(sigma, (4 * nu + 2) / (4 * nu + 1))
        for i in range(2, t + 1):
            u, omega = _nu_coefficients(i, nu)
            g, g_prev = g + u * (g - g_prev) + omega * (1.0 - sigma * g), g
        return g
    raise ValueError(f"`filter` must be one of {FILTERS}, got {filter!r}")


def filter_iterations(filter: str, lam: float, iterations: int | None) -> int | None:
    """The iterations of the ``"landweber"`` and ``"nu"`` filters (:func:`_iterations`),
    None for the others; ValueError when ``iterations`` is given to another filter."""
    if filter in ("landweber", "nu"):
        return _iterations(filter, lam, iterations)
    if iterations is not None:
        raise ValueError(
            f"`iterations` applies to the 'landweber' and 'nu' filters only, but "
            f"filter={filter!r} was given iterations={iterations!r}"
        )
    return None


def _iterations(filter: str, lam: float, iterations: int | None) -> int:
    if iterations is not None:
        return int(iterations)  # checked: the class's constraint or spectral_filter's
    if filter == "landweber":
        return max(1, math.ceil(1.0 / lam))
    return max(1, math.ceil(1.0 / math.sqrt(lam)))


class SpectralSupport(GramScorer):
    r"""Spectral support estimator; ``score`` = :math:`1 - F_n(x)` (higher = more novel), with
    :math:`F_n(x) = \tfrac1n \sum_j g_\lambda(\sigma_j) (u_j^\top k_x)^2` (module docstring).

    Parameters
    ----------
    filter : {"tikhonov", "tsvd", "cutoff", "landweber", "nu"}
    lam : float > 0, the regularisation parameter :math:`\lambda`.
    iterations : int or None, for "landweber" and "nu" (None: ceil(1/lam), ceil(1/sqrt(lam))).
    nu : float > 0, the qualification of the nu-method (default 1).

    Requires a normalised kernel (K(x, x) = 1, e.g. ``kernel.gram(X, normalize=True)``).

    >>> import torch
    >>> K = torch.eye(3)
    >>> sse = SpectralSupport("tikhonov", 1e-3).fit(K)
    >>> [round(v, 6) for v in sse.score(K, torch.ones(3)).tolist()]  # 1 - 1/(1 + 3e-3)
    [0.002991, 0.002991, 0.002991]

    ``sweep(K_test, diag_test, lams)`` scores every :math:`\lambda` from one eigendecomposition
    (array (n_lam, 1, n_test)).
    """

    _parameter_constraints = {
        "filter": [StrOptions(set(FILTERS))],
        "lam": [Interval(Real, 0, None, closed="neither")],
        "iterations": [None, Interval(Integral, 1, None, closed="left")],
        "nu": [Interval(Real, 0, None, closed="neither")],
    }
    sweep_axis = "lam"
    requires_normalized = True
    name = "sse"
    description = "spectral support estimation, Tikhonov filter (1 - F_n)"
    feature_form = deferred_class("novelty.scorers._feature_scorers:FeatureSpectralSupport")

    def __init__(
        self,
        filter: str = "tikhonov",
        lam: float = 1e-3,
        iterations: int | None = None,
        nu: float = 1.0,
    ):
        self.filter = filter
        self.lam = lam
        self.iterations = iterations
        self.nu = nu

    def _fit(self, K: torch.Tensor) -> None:
        """Eigendecompose K_n / n and store the filtered spectrum."""
        lam = float(self.lam)
        n_iterations = filter_iterations(self.filter, lam, self.iterations)
        _check_unit(torch.diagonal(K), "K_corpus")
        n = K.shape[0]
        sigma, U = torch.linalg.eigh(K / n)
        if float(sigma[0]) < -PSD_RTOL * max(float(sigma[-1]), 0.0):
            raise ValueError(
                f"`K_corpus` is not positive semi-definite: eigenvalue {float(sigma[0]) * n:.3g}"
            )
        sigma = sigma.clamp_min(0.0)  # rounding below zero only (checked above)
        filter_values = _spectral_filter(sigma, self.filter, lam, n_iterations, self.nu)
        if n_iterations is not None:
            self.n_iterations_ = n_iterations
        self.eigenvalues_ = sigma
        self.eigenvectors_ = U
        self.filter_values_ = filter_values

    def support_function(self, K_test_corpus, k_test_diag) -> torch.Tensor:
        """F_n(x) for each test point, Tensor (n_test,)."""
        check_fitted(self)
        validate_params(self)
        device = self.eigenvectors_.device
        Kt = check_cross_gram(K_test_corpus, self.n_corpus_, "K_test_corpus", device)
        diag = check_test_diag(k_test_diag, Kt.shape[0], "k_test_diag", device)
        return self._support(Kt, diag, self.filter_values_)

    def _support(self, Kt: torch.Tensor, diag: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        _check_unit(diag, "k_test_diag")
        return self._filtered(self._projected(Kt), g)

    def _projected(self, Kt: torch.Tensor) -> torch.Tensor:
        """The squared projections (Kt U)^2 of the test rows on the eigenvectors (n_test, n)."""
        return (Kt @ self.eigenvectors_) ** 2

    def _filtered(self, proj2: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """F_n = sum_i g(sigma_i) (k_x . u_i)^2 / n from the squared projections."""
        return (proj2 * g).sum(dim=1) / self.n_corpus_

    def _score(self, Kt: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
        """Novelty score 1 - F_n(x)."""
        return 1.0 - self._support(Kt, dt, self.filter_values_)

    def _sweep(self, Kt, dt, values: list, ranks: None) -> torch.Tensor:
        """1 - F_n for each lambda from the one eigendecomposition and one projection of the
        test rows (the same numbers as one ``score`` per lambda): (n_lam, 1, n_test)."""
        _check_unit(dt, "k_test_diag")
        proj2 = self._projected(Kt)
        rows = []
        for lam in values:  # a few lambdas; each row is one (n_test, n) product and sum
            iterative = self.filter in _ITERATIVE
            t = _iterations(self.filter, lam, self.iterations) if iterative else None
            g = _spectral_filter(self.eigenvalues_, self.filter, float(lam), t, self.nu)
            rows.append(1.0 - self._filtered(proj2, g))
        return torch.stack(rows)[:, None, :]


def _check_unit(diag: torch.Tensor, name: str) -> None:
    if diag.numel() == 0:
        return
    dev = float((diag - 1.0).abs().max())
    if dev > DIAG_TOL:
        raise ValueError(
            f"SpectralSupport needs a normalised kernel, K(x, x) = 1, but `{name}` has a "
            f"diagonal entry {float(diag[(diag - 1.0).abs().argmax()]):.6g}; compute the Gram "
            "with normalize=True, K(x, y) / sqrt(K(x, x) K(y, y))"
        )
