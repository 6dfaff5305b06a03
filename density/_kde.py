r"""Kernel density estimate on the density kernels (the SOSREP baseline).

.. math:: \hat p(x) = \frac{1}{N\,Z}\sum_i k(x_i, x), \qquad Z = \int k(0, x)\,dx,

normalised (Z = 1 for the SDO kernel, :math:`(2\pi\sigma^2)^{d/2}` for the Gaussian).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from ._kernels import VectorKernel
from ._sosrep import KERNEL, FittedExpansionEstimator, _fit_kernel, to_numpy
from ._validation import DEVICE, validate_estimator

__all__ = ["KDE"]


class KDE(FittedExpansionEstimator):
    r"""Kernel density estimate :math:`\hat p(x) = \frac{1}{NZ}\sum_i k(x_i, x)`.

    ``score_samples`` returns :math:`\log \hat p(x)`; log-sum-exp for the non-negative exact
    kernels. A random-feature (SDO) estimate can be zero or negative at a point (the SDO
    kernel itself takes negative values and its features add Monte-Carlo error): the
    log-density there is ``-inf`` (stated, not clamped); ``density`` returns the signed
    :math:`\hat p` itself, which ranks such points among themselves.
    """

    _parameter_constraints = {"kernel": KERNEL, "device": DEVICE}

    def __init__(self, kernel: VectorKernel, device=None):
        self.kernel = kernel
        self.device = device

    def fit(self, X, y=None) -> KDE:
        """Fit on X (n, d), n >= 1; returns self."""
        validate_estimator(self)
        t0 = time.perf_counter()
        self.kernel_, Xt = _fit_kernel(self.kernel, X, self.device, min_samples=1)
        N = Xt.shape[0]
        w = torch.full((N,), 1.0, dtype=Xt.dtype, device=Xt.device)
        self.expansion_ = self.kernel_.expansion(
            Xt, w, log_weight_scale=-math.log(N) - self.kernel_.log_integral()
        )
        self.n_features_in_ = Xt.shape[1]
        self.fit_time_ = time.perf_counter() - t0
        return self

    def score_samples(self, X) -> np.ndarray:
        r""":math:`\log \hat p(x)`, float64 numpy (n,); ``-inf`` where a random-feature
        estimate is <= 0. A random-feature estimate is capped by what the exact kernel allows
        far from the data (:meth:`density._kernels.Expansion.log_abs_value`), so that it
        decreases with the distance to the data instead of staying at the features' noise."""
        X = self._check_X(X)
        e = self.expansion_
        if e.kernel.random_features:
            raw = e.raw_value(X)
            out = torch.full_like(raw, -math.inf)
            pos = raw > 0
            out[pos] = raw[pos].log()
            if hasattr(e.kernel, "log_envelope"):
                cap = e._log_tail_bound(X) - e.kernel.log_scale_
                out[pos] = torch.minimum(out[pos], cap[pos])
            out[pos] += e.log_factor
            return to_numpy(out)
        return to_numpy(e.log_abs_value(X))

    def density(self, X) -> np.ndarray:
        r"""The signed estimate :math:`\hat p(x)`, float64 numpy (n,) (may underflow far from
        the data)."""
        X = self._check_X(X)
        return to_numpy(self.expansion_.value(X))
