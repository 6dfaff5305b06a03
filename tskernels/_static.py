r"""Static kernels on R^d: the building blocks lifted to series by the other kernels.

Each static kernel evaluates batched point Grams: ``cross(x, y)`` maps x of shape
(..., p, d) and y of shape (..., q, d) to (..., p, q) with entries k(x_a, y_b), computed
from one batched matrix product. ``gram(X, Y)`` is the plain (n, d) x (m, d) -> (n, m)
Gram for vector data.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from numbers import Integral, Real

import torch

from ._constraints import Interval
from ._params import Parametrized
from .validation import as_points

__all__ = ["StaticKernel", "Linear", "RBF", "Polynomial", "Laplacian", "sqdist", "exact_dist"]


#: Squared distances come from the matrix-product expansion |x|^2 + |y|^2 - 2 <x, y>, whose
#: absolute error is ~ eps * radius^2, as long as (radius / length scale)^2 stays below
#: ``EXPANSION_MAX_RATIO`` (the exponent of a radial kernel is then off by at most ~1e-8).
#: The points are used as given up to ``CENTRE_ABOVE_RATIO`` (error ~1e-12: data on the
#: kernel's scale, bitwise as before) and centred on a common shift beyond it.
EXPANSION_MAX_RATIO = 1e8
CENTRE_ABOVE_RATIO = 1e4


def _centred(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x and y shifted by one common point (the mean of all their points, per leading index):
    distances are unchanged, and the squared-norm expansion no longer cancels the offset."""
    n_pts = x.shape[-2] + y.shape[-2]
    c = (x.sum(-2, keepdim=True) + y.sum(-2, keepdim=True)) / n_pts
    if not bool(torch.isfinite(c).all()):  # the sum overflowed: centre on the scaled data
        c = (x / n_pts).sum(-2, keepdim=True) + (y / n_pts).sum(-2, keepdim=True)
    return x - c, y - c


def sqdist(x: torch.Tensor, y: torch.Tensor, length_scale: float = 1.0) -> torch.Tensor:
    r"""Squared Euclidean distances between two batched point sets, public as
    ``tskernels.sqdist``:

    .. math:: D[..., a, b] = \lVert x_{..., a} - y_{..., b} \rVert^2
              = \sum_{c=1}^{d} (x_{..., a, c} - y_{..., b, c})^2,

    for x of shape (..., p, d) and y of shape (..., q, d) with the same leading axes, giving
    (..., p, q) in the dtype and on the device of the inputs (not checked: pass finite
    tensors of one dtype); every entry is >= 0 (rounding below 0 is set to 0).
    ``length_scale`` (> 0) does not scale the result: it is the scale on which the caller's
    kernel reads the distances (a radial kernel's bandwidth) and only picks the numerical
    route below.

    Translation invariant at any offset and exact at any magnitude: points far from the origin
    on the scale of ``length_scale`` (|x|^2 / l^2 > ``CENTRE_ABOVE_RATIO``) are first centred
    on a common shift; the distances then come from one matrix product,
    |x|^2 + |y|^2 - 2 <x, y>, while the radius R satisfies R^2 / l^2 <=
    ``EXPANSION_MAX_RATIO`` (always so for data on the kernel's scale), and from the
    differences themselves beyond it (distances whose square overflows are +inf).
    """
    if x.numel() == 0 or y.numel() == 0:
        return x.new_zeros(x.shape[:-1] + y.shape[-2:-1])
    l2 = length_scale * length_scale
    xx = (x * x).sum(-1)
    yy = (y * y).sum(-1)
    r2 = float(torch.maximum(xx.amax(), yy.amax()))
    if r2 > CENTRE_ABOVE_RATIO * l2:
        x, y = _centred(x, y)
        xx = (x * x).sum(-1)
        yy = (y * y).sum(-1)
        r2 = float(torch.maximum(xx.amax(), yy.amax()))
    if r2 <= EXPANSION_MAX_RATIO * l2:
        d2 = xx[..., :, None] + yy[..., None, :] - 2.0 * (x @ y.transpose(-1, -2))
        return d2.clamp_min_(0.0)  # rounding only: |x-y|^2 >= 0 exactly
    return exact_dist(x, y) ** 2


def exact_dist(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """|x_a - y_b| from the differences (no matrix-product expansion), (..., p, q); points
    of magnitude beyond 2^(+-400) are scaled by a power of two first (exact), so the squares
    inside neither overflow nor underflow."""
    m = float(torch.maximum(x.abs().amax(), y.abs().amax())) if x.numel() and y.numel() else 0.0
    if m == 0.0 or 2.0**-400 < m < 2.0**400:
        return torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist")
    scale = 2.0 ** -math.frexp(m)[1]
    return torch.cdist(x * scale, y * scale, compute_mode="donot_use_mm_for_euclid_dist") / scale


class StaticKernel(Parametrized, ABC):
    """A positive-definite kernel on points of R^d.

    Parameters are declared in ``_parameter_constraints`` and checked at construction and at
    every use (``gram``, or the use by a series kernel), so ``set_params`` cannot slip past.
    ``cross``/``pointwise`` assume checked parameters.
    """

    #: True when k(x, y) depends on x, y only through <x, y> (the signature kernels use it).
    is_dot_product: bool = False

    def check_params(self) -> StaticKernel:
        """Validate the parameters against their declared constraints; returns self."""
        self._check_parameters()
        return self

    @abstractmethod
    def cross(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """k(x_a, y_b): (..., p, d) x (..., q, d) -> (..., p, q)."""

    @abstractmethod
    def pointwise(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """k(x_a, y_a) for aligned points: (..., d) x (..., d) -> (...)."""

    def self_values(self, x: torch.Tensor) -> torch.Tensor:
        """k(x_a, x_a): (..., d) -> (...)."""
        return self.pointwise(x, x)

    def gram(self, X, Y=None, *, dtype=torch.float64, device="cpu") -> torch.Tensor:
        """Gram matrix of 2-D point sets, (n, d) x (m, d) -> Tensor (n, m)."""
        self.check_params()
        x = as_points(X, name="X", dtype=dtype, device=device)
        y = x if Y is None else as_points(Y, name="Y", dtype=dtype, device=device)
        if x.shape[1] != y.shape[1]:
            raise ValueError(f"channel mismatch: `X` has d={x.shape[1]}, `Y` has d={y.shape[1]}")
        K = self.cross(x, y)
        if Y is None:
            from ._base import mirror_upper_

            mirror_upper_(K)
        return K

    __call__ = gram


class Linear(StaticKernel):
    r"""Linear kernel :math:`k(x, y) = s \langle x, y \rangle` (``scale`` = s)."""

    is_dot_product = True
    _parameter_constraints = {"scale": [Interval(Real, 0, None, closed="neither")]}

    def __init__(self, scale: float = 1.0):
        self.scale = scale
        self.check_params()

    def cross(self, x, y):
        K = x @ y.transpose(-1, -2)
        return K if self.scale == 1 else K.mul_(self.scale)

    def pointwise(self, x, y):
        return self.scale * (x * y).sum(-1)


class Polynomial(StaticKernel):
    r"""Polynomial kernel :math:`k(x, y) = (s \langle x, y \rangle + c)^p`."""

    is_dot_product = True
    _parameter_constraints = {
        "degree": [Interval(Integral, 1, None, closed="left")],
        "c": [Interval(Real, 0, None, closed="left")],
        "scale": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, degree: int = 2, c: float = 1.0, scale: float = 1.0):
        self.degree = degree
        self.c = c
        self.scale = scale
        self.check_params()

    def cross(self, x, y):
        K = (x @ y.transpose(-1, -2)).mul_(self.scale).add_(self.c)
        return K.pow_(self.degree)

    def pointwise(self, x, y):
        return (self.scale * (x * y).sum(-1) + self.c) ** self.degree


class RBF(StaticKernel):
    r"""Gaussian kernel :math:`k(x, y) = \exp(-|x - y|^2 / (2 \sigma^2))`.

    Bandwidth convention: ``sigma`` is the standard deviation (pysiglib's ``sigma`` is our
    :math:`2\sigma^2`).
    """

    _parameter_constraints = {"sigma": [Interval(Real, 0, None, closed="neither")]}

    def __init__(self, sigma: float = 1.0):
        self.sigma = sigma
        self.check_params()

    def cross(self, x, y):
        s2 = float(self.sigma) ** 2
        if 0.0 < s2 < math.inf:
            return sqdist(x, y, self.sigma).mul_(-0.5 / s2).exp_()
        # sigma beyond 1e+-154 (its square over- or underflows): distances in units of sigma
        return sqdist(x / self.sigma, y / self.sigma).mul_(-0.5).exp_()

    def pointwise(self, x, y):
        s2 = float(self.sigma) ** 2
        if 0.0 < s2 < math.inf:
            return torch.exp(((x - y) ** 2).sum(-1) * (-0.5 / s2))
        return torch.exp(-0.5 * (torch.linalg.vector_norm((x - y) / self.sigma, dim=-1) ** 2))

    def self_values(self, x):
        return torch.ones(x.shape[:-1], dtype=x.dtype, device=x.device)


class Laplacian(StaticKernel):
    r"""Laplacian (Abel) kernel :math:`k(x, y) = \exp(-|x - y| / \sigma)`."""

    _parameter_constraints = {"sigma": [Interval(Real, 0, None, closed="neither")]}

    def __init__(self, sigma: float = 1.0):
        self.sigma = sigma
        self.check_params()

    def cross(self, x, y):
        # direct differences (no |x|^2+|y|^2-2<x,y> expansion): exact 0 distance on the
        # diagonal, translation invariant
        return torch.exp(-exact_dist(x, y) / self.sigma)

    def pointwise(self, x, y):
        return torch.exp(-torch.linalg.vector_norm(x - y, dim=-1) / self.sigma)

    def self_values(self, x):
        return torch.ones(x.shape[:-1], dtype=x.dtype, device=x.device)
