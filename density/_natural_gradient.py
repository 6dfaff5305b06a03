r"""SOSREP coefficients on a Gram matrix by natural gradient (one solver for the whole package).

Minimises :math:`-\frac1N \sum_i \log f(x_i)^2 + \|f\|_H^2` over :math:`f = \sum_i \alpha_i
k(x_i, \cdot)`. The natural-gradient step in the alpha basis is

.. math:: \alpha \leftarrow \alpha - 2\,\mathrm{lr}\,\bigl(\alpha - \tfrac{1}{N}/(K\alpha)\bigr),

which keeps alpha > 0 for an entrywise non-negative K when lr < 1/2. Fixed point:
:math:`\alpha_i (K\alpha)_i = 1/N`. Converged when :math:`\max_i |N \alpha_i (K\alpha)_i - 1|
< \mathrm{tol}`.

``K`` is a dense (N, N) tensor or a :class:`FeatureGram` :math:`K = c\,\Phi\Phi^\top` that
applies :math:`K\alpha = c\,\Phi(\Phi^\top\alpha)` without forming K (O(ND) per step instead of
O(N^2 D) once plus O(N^2) per step).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from numbers import Real

import torch
from sklearn.exceptions import ConvergenceWarning

from ._validation import COUNT, POSITIVE, SEED, Interval, validate_params

__all__ = ["SOSREPSolution", "sosrep_solve", "FeatureGram"]


@dataclass
class SOSREPSolution:
    alpha: torch.Tensor  # (N,) coefficients, > 0
    n_iter: int
    converged: bool
    residual: float  # max_i |N alpha_i (K alpha)_i - 1|


class FeatureGram:
    r"""The Gram matrix :math:`K = c\,\Phi\Phi^\top` of features ``Phi`` (N, D), as an operator.

    Supports ``K @ alpha`` for a vector alpha (N,), ``shape``, ``dtype``, ``device``.
    """

    def __init__(self, Phi: torch.Tensor, scale: float = 1.0):
        if Phi.ndim != 2:
            raise ValueError(f"`Phi` must be a 2-D (N, D) feature matrix, got {tuple(Phi.shape)}")
        self.Phi = Phi
        self.scale = float(scale)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.Phi.shape[0], self.Phi.shape[0])

    @property
    def ndim(self) -> int:
        return 2

    @property
    def dtype(self) -> torch.dtype:
        return self.Phi.dtype

    @property
    def device(self) -> torch.device:
        return self.Phi.device

    def __matmul__(self, alpha: torch.Tensor) -> torch.Tensor:
        return self.scale * (self.Phi @ (self.Phi.T @ alpha))

    def dense(self) -> torch.Tensor:
        """The (N, N) matrix itself."""
        return self.scale * (self.Phi @ self.Phi.T)


@validate_params(
    {
        "lr": [Interval(Real, 0, 0.5, closed="neither")],
        "max_iter": COUNT,
        "tol": POSITIVE,
        "seed": SEED,
        "check_every": COUNT,
        "require_positive": ["boolean"],
    }
)
def sosrep_solve(
    K: torch.Tensor | FeatureGram,
    *,
    lr: float = 0.1,
    max_iter: int = 10_000,
    tol: float = 1e-6,
    seed: int = 0,
    check_every: int = 1,
    require_positive: bool = True,
) -> SOSREPSolution:
    """Natural-gradient SOSREP on a symmetric Gram ``K`` (N, N) or a :class:`FeatureGram`.

    Initialisation alpha_0 = 0.1 |N(0, 1)| (seeded, drawn on the CPU, float64). The residual
    of the current alpha is read off the matrix-vector product the step needs anyway, so it is
    tested every ``check_every`` steps at no extra cost; the returned ``residual`` is that of
    the returned ``alpha``. Raises when f(x_i) = (K alpha)_i becomes non-positive (a Gram with
    negative entries) or non-finite; warns with ConvergenceWarning after ``max_iter`` steps.

    ``require_positive=False`` (for random-feature Grams, whose entries can be negative) lets
    alpha and f(x_i) change sign: the objective depends on f only through f^2, and the same
    fixed point alpha_i f(x_i) = 1/N is the stationarity condition; only f(x_i) = 0 raises.
    """
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"`K` must be a square (N, N) Gram matrix, got shape {tuple(K.shape)}")
    N = K.shape[0]
    if N < 1:
        raise ValueError("`K` is empty: need at least one corpus point")
    dense = K.Phi if isinstance(K, FeatureGram) else K
    if not bool(torch.isfinite(dense).all()):
        raise ValueError("`K` contains NaN or infinite entries")
    gen = torch.Generator().manual_seed(seed)
    alpha = (0.1 * torch.randn(N, generator=gen, dtype=torch.float64).abs()).to(
        dtype=K.dtype, device=K.device
    )
    alpha.clamp_min_(1e-12)  # a zero draw would divide by zero in the first step only
    residual = float("inf")
    step = 2.0 * lr
    for it in range(max_iter + 1):
        f = K @ alpha
        if it % check_every == 0 or it == max_iter:
            residual = float((N * alpha * f - 1.0).abs().max())
            if residual != residual:
                raise FloatingPointError("SOSREP iteration produced NaN")
            if residual < tol:
                return SOSREPSolution(alpha, it, True, residual)
        if it == max_iter:
            break
        if bool((f == 0).any()) or (require_positive and bool((f <= 0).any())):
            raise FloatingPointError(
                "SOSREP: f(x_i) = (K alpha)_i became non-positive; the Gram matrix must be "
                "entrywise non-negative with a positive diagonal (a random-feature kernel can "
                "violate this: pass require_positive=False)"
            )
        alpha = (1.0 - step) * alpha + step / (N * f)
    warnings.warn(
        f"SOSREP did not converge in {max_iter} iterations (residual {residual:.2e} >= tol "
        f"{tol:.1e}); raise max_iter or lr",
        ConvergenceWarning,
        stacklevel=3,  # the caller's line: validate_params wraps this function
    )
    return SOSREPSolution(alpha, max_iter, False, residual)
