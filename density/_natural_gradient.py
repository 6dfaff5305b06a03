r"""SOSREP coefficients on a Gram matrix by natural gradient (one solver for the whole package).

Minimises :math:`-\frac1N \sum_i \log f(x_i)^2 + \|f\|_H^2` over :math:`f = \sum_i \alpha_i
k(x_i, \cdot)`. The natural-gradient step in the alpha basis is

.. math:: \alpha \leftarrow \alpha - 2\,\mathrm{lr}\,\bigl(\alpha - \tfrac{1}{N}/(K\alpha)\bigr),

which keeps alpha > 0 for an entrywise non-negative K when lr < 1/2. Fixed point:
:math:`\alpha_i (K\alpha)_i = 1/N`. Converged when :math:`\max_i |N \alpha_i (K\alpha)_i - 1|
< \mathrm{tol}`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from sklearn.exceptions import ConvergenceWarning

__all__ = ["SOSREPSolution", "sosrep_solve"]


@dataclass
class SOSREPSolution:
    alpha: torch.Tensor  # (N,) coefficients, > 0
    n_iter: int
    converged: bool
    residual: float  # max_i |N alpha_i (K alpha)_i - 1|


def sosrep_solve(
    K: torch.Tensor,
    *,
    lr: float = 0.1,
    max_iter: int = 10_000,
    tol: float = 1e-6,
    seed: int = 0,
    check_every: int = 10,
) -> SOSREPSolution:
    """Natural-gradient SOSREP on a symmetric Gram ``K`` (N, N); returns the coefficients.

    Initialisation alpha_0 = 0.1 |N(0, 1)| (seeded, drawn on the CPU). Raises when the
    iteration leaves the positive orthant or produces non-finite values (negative or
    non-finite Gram entries); warns with ConvergenceWarning after ``max_iter`` steps.
    """
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"`K` must be a square (N, N) Gram matrix, got shape {tuple(K.shape)}")
    N = K.shape[0]
    if N < 1:
        raise ValueError("`K` is empty: need at least one corpus point")
    if not 0 < lr < 0.5:
        raise ValueError(f"`lr` must be in (0, 1/2) to keep alpha positive, got {lr}")
    if not bool(torch.isfinite(K).all()):
        raise ValueError("`K` contains NaN or infinite entries")
    gen = torch.Generator().manual_seed(seed)
    alpha = (0.1 * torch.randn(N, generator=gen, dtype=torch.float64).abs()).to(K)
    alpha.clamp_min_(1e-12)  # a zero draw would divide by zero in the first step only
    residual = float("inf")
    for it in range(1, max_iter + 1):
        f = K @ alpha
        if bool((f <= 0).any()):
            raise FloatingPointError(
                "SOSREP: f(x_i) = (K alpha)_i became non-positive; the Gram matrix must be "
                "entrywise non-negative with a positive diagonal"
            )
        alpha = alpha - 2.0 * lr * (alpha - (1.0 / N) / f)
        if it % check_every == 0 or it == max_iter:
            residual = float((N * alpha * (K @ alpha) - 1.0).abs().max())
            if residual != residual:
                raise FloatingPointError("SOSREP iteration produced NaN")
            if residual < tol:
                return SOSREPSolution(alpha, it, True, residual)
    warnings.warn(
        f"SOSREP did not converge in {max_iter} iterations (residual {residual:.2e} >= tol "
        f"{tol:.1e}); raise max_iter or lr",
        ConvergenceWarning,
        stacklevel=2,
    )
    return SOSREPSolution(alpha, max_iter, False, residual)
