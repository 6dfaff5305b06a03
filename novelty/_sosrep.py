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

import torch

from density import sosrep_solve

from ._validation import check_corpus_gram, check_cross_gram, check_int, check_positive

__all__ = ["SOSREPScorer"]


class SOSREPScorer:
    r"""SOSREP pre-density on a Gram matrix; ``score`` = :math:`-\log f(x)^2` (higher = more
    novel), ``log_density`` = :math:`\log f(x)^2` (higher = more normal).

    Parameters
    ----------
    lr : float in (0, 1/2), natural-gradient step.
    max_iter : int, iteration cap (a ConvergenceWarning is raised when reached).
    tol : float, convergence threshold on :math:`\max_i |N\alpha_i (K\alpha)_i - 1|`.
    seed : int >= 0, seed of the positive initialisation.

    The corpus needs at least two points (the rule of every scorer).

    Warns (UserWarning) when the Gram has negative entries: the iteration then may leave the
    positive orthant, in which case the solver raises.

    >>> import torch
    >>> K = torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    >>> s = SOSREPScorer(tol=1e-10).fit(K)
    >>> round(float(s.alpha_[0] * (K @ s.alpha_)[0]), 8)
    0.5
    """

    def __init__(self, lr: float = 0.1, max_iter: int = 10_000, tol: float = 1e-6, seed: int = 0):
        self.lr = lr
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed

    def fit(self, K_corpus) -> SOSREPScorer:
        """Solve for alpha on the corpus Gram (N, N)."""
        lr = check_positive(self.lr, "lr")
        if lr >= 0.5:
            raise ValueError(f"`lr` must be in (0, 1/2) to keep alpha positive, got {self.lr!r}")
        max_iter = check_int(self.max_iter, "max_iter")
        tol = check_positive(self.tol, "tol")
        seed = check_int(self.seed, "seed", minimum=0)
        K = check_corpus_gram(K_corpus, "K_corpus")
        if bool((torch.diagonal(K) <= 0).any()):
            raise ValueError("SOSREP needs K(x, x) > 0 on the corpus; the Gram has a zero diagonal")
        if bool((K < 0).any()):
            warnings.warn(
                f"the corpus Gram has negative entries (min {float(K.min()):.3g}); SOSREP's "
                "positivity argument needs an entrywise non-negative kernel (e.g. RBF, "
                "Laplacian, or a normalised signature kernel)",
                UserWarning,
                stacklevel=2,
            )
        sol = sosrep_solve(K, lr=lr, max_iter=max_iter, tol=tol, seed=seed)
        self.alpha_ = sol.alpha
        self.n_iter_ = sol.n_iter
        self.converged_ = sol.converged
        self.residual_ = sol.residual
        self.n_corpus_ = K.shape[0]
        return self

    def log_density(self, K_test_corpus) -> torch.Tensor:
        """log f(x)^2 for each test point, Tensor (n_test,); -inf where f(x) = 0."""
        if not hasattr(self, "alpha_"):
            raise RuntimeError("this SOSREPScorer is not fitted yet: call fit(K_corpus) first")
        Kt = check_cross_gram(K_test_corpus, self.n_corpus_, "K_test_corpus", self.alpha_.device)
        return 2.0 * torch.log(torch.abs(Kt @ self.alpha_))

    def score(self, K_test_corpus, k_test_diag=None) -> torch.Tensor:
        """Novelty score -log f(x)^2, Tensor (n_test,) (``k_test_diag`` is not used)."""
        return -self.log_density(K_test_corpus)

    def __repr__(self) -> str:
        return (
            f"SOSREPScorer(lr={self.lr!r}, max_iter={self.max_iter!r}, tol={self.tol!r}, "
            f"seed={self.seed!r})"
        )
