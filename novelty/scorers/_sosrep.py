r"""SOSREP as a novelty scorer on any entrywise non-negative Gram matrix.

Fits :math:`f = \sum_i \alpha_i k(x_i, \cdot)` with the package's one natural-gradient solver
(:func:`density.sosrep_solve`: positive initialisation, step
:math:`\alpha \leftarrow \alpha - 2\,\mathrm{lr}(\alpha - \tfrac1N / (K\alpha))`, stop when
:math:`\max_i |N \alpha_i (K\alpha)_i - 1| <` ``tol``). The pre-density of a point is
:math:`f(x)^2`, :math:`f(x) = \sum_i \alpha_i k(x, x_i)`; scores are returned in log space,
:math:`\log f(x)^2 = 2 \log |f(x)|`.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import torch

from density import sosrep_solve

from ._gram_scorer import GramScorer, Interval, check_fitted, validate_params
from ._validation import check_cross_gram

__all__ = ["SOSREPScorer"]


class SOSREPScorer(GramScorer):
    r"""SOSREP pre-density on a Gram matrix; ``score`` = :math:`-\log f(x)^2` (higher = more
    novel), ``log_density`` = :math:`\log f(x)^2` (higher = more normal).

    Parameters
    ----------
    lr : float in (0, 1/2), natural-gradient step.
    max_iter : int, iteration cap (a ConvergenceWarning is raised when reached).
    tol : float, convergence threshold on :math:`\max_i |N\alpha_i (K\alpha)_i - 1|`.
    seed : int >= 0, seed of the positive initialisation.

    The corpus needs at least two points (the rule of every scorer). A corpus Gram that is
    diagonal (every off-diagonal entry 0: a kernel that underflows, bandwidth too small) raises
    a ValueError: its log f would be -inf away from each corpus point.

    A Gram with negative entries (a linear kernel, random features) warns (UserWarning) and is
    fitted with the signs free (:func:`density.sosrep_solve` with ``require_positive=False``):
    the objective sees f only through :math:`f^2`, so the same step and the same fixed point
    :math:`\alpha_i f(x_i) = 1/N` hold with some :math:`\alpha_i` and :math:`f(x_i)` negative
    (with a non-negative Gram the iteration stays in the positive orthant). Only an exact
    :math:`f(x_i) = 0` raises. On BasicMotions (the quick study's flattened linear and
    random-signature cells) every fold then converges in 41-86 steps.

    >>> import torch
    >>> K = torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    >>> s = SOSREPScorer(tol=1e-10).fit(K)
    >>> round(float(s.alpha_[0] * (K @ s.alpha_)[0]), 8)
    0.5
    """

    _parameter_constraints = {
        "lr": [Interval(Real, 0, 0.5, closed="neither")],  # (0, 1/2) keeps alpha positive
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "seed": [Interval(Integral, 0, None, closed="left")],
    }
    requires_diag = False
    name = "sosrep"
    description = "SOSREP density f(x)^2 in the kernel's RKHS"
    feature_form = None  # approximation= not supported

    def __init__(self, lr: float = 0.1, max_iter: int = 10_000, tol: float = 1e-6, seed: int = 0):
        self.lr = lr
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed

    def _fit(self, K: torch.Tensor) -> None:
        """Solve for alpha on the corpus Gram (N, N)."""
        lr, tol = float(self.lr), float(self.tol)
        max_iter, seed = int(self.max_iter), int(self.seed)
        if bool((torch.diagonal(K) <= 0).any()):
            raise ValueError("SOSREP needs K(x, x) > 0 on the corpus; the Gram has a zero diagonal")
        off_diagonal = K - torch.diag(torch.diagonal(K))
        if K.shape[0] >= 2 and not bool(off_diagonal.any()):
            raise ValueError(
                "the kernel underflows on the corpus: its Gram is diagonal (the identity, "
                "normalised) to machine precision (every K(x_i, x_j), i != j, is 0), so "
                "SOSREP's f is 0 away from each "
                "corpus point and every held-out score is +inf; the bandwidth is too small for "
                "these data (use a larger one)"
            )
        nonnegative = not bool((K < 0).any())
        if not nonnegative:
            warnings.warn(
                f"the corpus Gram has negative entries (min {float(K.min()):.3g}); SOSREP's "
                "positivity argument needs an entrywise non-negative kernel (e.g. RBF, "
                "Laplacian, or a normalised signature kernel), so alpha and f(x_i) are left "
                "free to change sign (the objective sees f only through f^2)",
                UserWarning,
                stacklevel=3,  # the caller of GramScorer.fit
            )
        sol = sosrep_solve(
            K, lr=lr, max_iter=max_iter, tol=tol, seed=seed, require_positive=nonnegative
        )
        self.alpha_ = sol.alpha
        self.n_iter_ = sol.n_iter
        self.converged_ = sol.converged
        self.residual_ = sol.residual

    def log_density(self, K_test_corpus) -> torch.Tensor:
        """log f(x)^2 for each test point, Tensor (n_test,); -inf where f(x) = 0."""
        check_fitted(self)
        validate_params(self)
        Kt = check_cross_gram(K_test_corpus, self.n_corpus_, "K_test_corpus", self.alpha_.device)
        return self._log_density(Kt)

    def _log_density(self, Kt: torch.Tensor) -> torch.Tensor:
        return 2.0 * torch.log(torch.abs(Kt @ self.alpha_))

    def _score(self, Kt: torch.Tensor, dt: torch.Tensor | None) -> torch.Tensor:
        """Novelty score -log f(x)^2 (``diag_test`` is not used)."""
        return -self._log_density(Kt)
