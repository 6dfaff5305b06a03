r"""SOSREP: the Sobolev-space regularised pre-density estimator (Kozdoba, Perets, Mannor 2024).

.. math::

    f = \sum_i \alpha_i k(x_i, \cdot), \qquad
    \min_f\; -\frac1N \sum_i \log f(x_i)^2 + \|f\|_H^2,

solved by the package's natural-gradient solver (:func:`density.sosrep_solve`) from a
non-negative initialisation, to :math:`\max_i |N\alpha_i f(x_i) - 1| < \mathrm{tol}`. The
pre-density is :math:`f^2` (unnormalised) and ``score_samples`` returns :math:`\log f(x)^2`.
"""

from __future__ import annotations

import math
import time
from numbers import Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from ._kernels import Expansion, VectorKernel
from ._natural_gradient import FeatureGram, sosrep_solve
from ._validation import (
    COUNT,
    DEVICE,
    POSITIVE,
    SEED,
    Interval,
    IsInstance,
    as_data,
    resolve_device,
    validate_estimator,
)

__all__ = ["SOSREP"]

#: Random-feature Gram: forming K = Phi Phi^T once (2 N^2 D flops, a compute-bound GEMM) beats
#: applying K alpha = Phi (Phi^T alpha) per step (two memory-bound passes over Phi) while
#: N <= DENSE_GRAM_N_PER_STEP x (expected steps); measured crossover with D = 10,000 on 1-2
#: CPU cores: N ~ 3000-4000 at lr = 0.1 (~60-80 steps), i.e. ~50 points per step
#: (benchmarks/bench_density.py).
DENSE_GRAM_N_PER_STEP = 50


def expected_steps(lr: float, tol: float) -> int:
    """Steps to reach ``tol`` at the linearised contraction rho = max(|1 - s|, |1 - 2s|), s = 2 lr.

    Near the fixed point the error along an eigenvector of N diag(alpha) K diag(alpha) with
    eigenvalue l in [0, 1] is multiplied by 1 - s(1 + l) per step; rho is the worst case.
    """
    s = 2.0 * lr
    rho = max(abs(1.0 - s), abs(1.0 - 2.0 * s), 1e-3)
    return max(1, math.ceil(math.log(min(tol, 0.5)) / math.log(rho)))


def use_dense_gram(n: int, lr: float, tol: float) -> bool:
    """Whether forming the (n, n) random-feature Gram is expected to be faster."""
    return n <= DENSE_GRAM_N_PER_STEP * expected_steps(lr, tol)


#: The ``kernel`` parameter of the estimators.
KERNEL = [
    IsInstance(VectorKernel, "a density kernel (GaussianKernel, LaplacianKernel or SDOKernel)")
]


def _fit_kernel(kernel: VectorKernel, X, device, min_samples: int):
    """(the fitted clone of ``kernel``, X as its tensor); the parameters are checked."""
    kernel_ = clone(kernel)
    if device is not None:
        kernel_.set_params(device=resolve_device(device))
    Xt = as_data(X, "X", min_samples=min_samples)
    kernel_.fit(Xt)
    return kernel_, Xt.to(device=kernel_.device_, dtype=kernel_.dtype_)


class FittedExpansionEstimator(BaseEstimator):
    """Base of the density estimators whose fit leaves a kernel expansion ``expansion_``."""

    def _check_X(self, X) -> torch.Tensor:
        check_is_fitted(self, "expansion_")
        k = self.kernel_
        return as_data(X, "X", dtype=k.dtype_, device=k.device_, n_features=self.n_features_in_)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A float64 numpy array on the CPU: what the estimators facing scikit-learn return."""
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


class SOSREP(FittedExpansionEstimator):
    r"""SOSREP pre-density :math:`f^2`, :math:`f = \sum_i \alpha_i k(x_i, \cdot)`.

    Parameters
    ----------
    kernel : GaussianKernel, LaplacianKernel or SDOKernel (cloned at fit).
    lr : natural-gradient step in (0, 1/2).
    max_iter, tol : iteration cap and the convergence threshold on
        :math:`\max_i |N\alpha_i f(x_i) - 1|`.
    device : torch device for the fit and scoring (overrides the kernel's); "cuda" works.
    seed : seed of the initialisation :math:`\alpha_0 = 0.1|N(0, 1)|`.

    Random-feature kernels use :math:`K\alpha = \Phi(\Phi^\top\alpha)` (K never formed) when
    that is expected to be faster than forming K once (:func:`use_dense_gram`) and
    their Gram can hold negative entries, so alpha and f(x_i) may change sign there (the
    objective sees f only through f^2); with a non-negative exact kernel alpha stays > 0.

    Fitted attributes: ``alpha_`` (N,) coefficients of the kernel as defined (a ValueError
    where they overflow float64: random-feature kernels at large d), ``alpha_normalized_`` and
    ``log_alpha_scale_`` (``alpha_ = alpha_normalized_ * exp(log_alpha_scale_)``), ``kernel_``,
    ``n_iter_``, ``converged_``, ``residual_``, ``fit_time_`` (seconds).

    ``score_samples(X)`` is :math:`\log f(x)^2 = 2\log|f(x)|`: log-sum-exp over the centres for
    an exact kernel (alpha > 0, no underflow far from the data). For random-feature kernels f
    may be negative at a point (f^2 is still the pre-density) and is exactly 0 only with
    probability zero; where it is 0 the score is ``-inf`` (the log of a zero pre-density), never
    clamped to a small number.
    """

    _parameter_constraints = {
        "kernel": KERNEL,
        "lr": [Interval(Real, 0, 0.5, closed="neither")],
        "max_iter": COUNT,
        "tol": POSITIVE,
        "device": DEVICE,
        "seed": SEED,
    }

    def __init__(
        self,
        kernel: VectorKernel,
        lr: float = 0.1,
        max_iter: int = 10_000,
        tol: float = 1e-6,
        device=None,
        seed: int = 0,
    ):
        self.kernel = kernel
        self.lr = lr
        self.max_iter = max_iter
        self.tol = tol
        self.device = device
        self.seed = seed

    def fit(self, X, y=None) -> SOSREP:
        """Fit on X (n, d), n >= 2; returns self."""
        validate_estimator(self)
        t0 = time.perf_counter()
        self.kernel_, Xt = _fit_kernel(self.kernel, X, self.device, min_samples=2)
        k = self.kernel_
        if k.random_features:
            Phi = k._features(Xt)
            if not bool(torch.isfinite(Phi).all()):
                raise FloatingPointError("SDO features are not finite; check `a` and the data")
            op = FeatureGram(Phi)
            sol = sosrep_solve(
                op.dense() if use_dense_gram(Phi.shape[0], self.lr, self.tol) else op,
                lr=self.lr,
                max_iter=int(self.max_iter),
                tol=self.tol,
                seed=self.seed,
                require_positive=False,
            )
            del Phi, op
            # solved for the normalised kernel k / C; alpha for k itself is alpha / sqrt(C)
            log_w = -0.5 * k.log_scale_
        else:
            K = k._log_k(Xt, Xt).exp()
            sol = sosrep_solve(
                K,
                lr=self.lr,
                max_iter=int(self.max_iter),
                tol=self.tol,
                seed=self.seed,
                require_positive=k.nonnegative,
            )
            del K
            log_w = 0.0
        self.n_iter_ = sol.n_iter
        self.converged_ = sol.converged
        self.residual_ = sol.residual
        self.expansion_: Expansion = k.expansion(Xt, sol.alpha, log_weight_scale=log_w)
        # alpha for the kernel as defined is alpha_normalized_ * exp(log_alpha_scale_); the
        # factor over- or underflows float64 for large d (SDO, d >= ~450): kept in log space
        self.alpha_normalized_ = sol.alpha
        self.log_alpha_scale_ = float(log_w)
        self.n_features_in_ = Xt.shape[1]
        self.fit_time_ = time.perf_counter() - t0
        return self

    @property
    def alpha_(self) -> torch.Tensor:
        """Coefficients (N,) of the kernel as defined: ``alpha_normalized_ *
        exp(log_alpha_scale_)``, computed in log space; a ValueError where they lie outside
        the float64 range (the SDO scale at large d), never inf or 0 in their place."""
        check_is_fitted(self, "expansion_")
        a, log_w = self.alpha_normalized_, self.log_alpha_scale_
        if log_w == 0.0:
            return a
        out = torch.sign(a) * torch.exp(torch.log(torch.abs(a)) + log_w)
        if not bool(torch.isfinite(out).all()) or bool(((out == 0) & (a != 0)).any()):
            raise ValueError(
                f"alpha_ is outside the float64 range (the kernel's scale factor is "
                f"exp({log_w:.6g}) at d={self.n_features_in_}): use alpha_normalized_ and "
                "log_alpha_scale_ (score_samples works in log space)"
            )
        return out

    def score_samples(self, X) -> np.ndarray:
        r""":math:`\log f(x)^2` for each row of X: float64 numpy array (n,) (higher = more
        normal), computed on the estimator's device."""
        X = self._check_X(X)
        return to_numpy(2.0 * self.expansion_.log_abs_value(X))

    def f(self, X) -> np.ndarray:
        """The signed function f(X), float64 numpy (n,); may overflow for large d, prefer
        score_samples."""
        X = self._check_X(X)
        return to_numpy(self.expansion_.value(X))
