r"""Static kernels on R^d: the building blocks lifted to series by the other kernels.

Each static kernel evaluates batched point Grams: ``cross(x, y)`` maps x of shape
(..., p, d) and y of shape (..., q, d) to (..., p, q) with entries k(x_a, y_b), computed
from one batched matrix product. ``gram(X, Y)`` is the plain (n, d) x (m, d) -> (n, m)
Gram for vector data.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from sklearn.base import BaseEstimator

from ._validation import as_vectors, check_int, check_nonnegative, check_positive

__all__ = ["StaticKernel", "Linear", "RBF", "Polynomial", "Laplacian"]


def _sqdist(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """|x_a - y_b|^2 for batched point sets, (..., p, d) x (..., q, d) -> (..., p, q)."""
    xx = (x * x).sum(-1)
    yy = (y * y).sum(-1)
    d2 = xx[..., :, None] + yy[..., None, :] - 2.0 * (x @ y.transpose(-1, -2))
    return d2.clamp_min_(0.0)  # rounding only: |x-y|^2 >= 0 exactly


class StaticKernel(BaseEstimator, ABC):
    """A positive-definite kernel on points of R^d."""

    #: True when k(x, y) depends on x, y only through <x, y> (the signature kernels use it).
    is_dot_product: bool = False

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
        x = as_vectors(X, name="X", dtype=dtype, device=device)
        y = x if Y is None else as_vectors(Y, name="Y", dtype=dtype, device=device)
        if x.shape[1] != y.shape[1]:
            raise ValueError(f"channel mismatch: `X` has d={x.shape[1]}, `Y` has d={y.shape[1]}")
        K = self.cross(x, y)
        if Y is None:
            K = torch.triu(K) + torch.triu(K, 1).T
        return K

    __call__ = gram


class Linear(StaticKernel):
    r"""Linear kernel :math:`k(x, y) = s \langle x, y \rangle` (``scale`` = s)."""

    is_dot_product = True

    def __init__(self, scale: float = 1.0):
        check_positive(scale, "scale")
        self.scale = scale

    def cross(self, x, y):
        return self.scale * (x @ y.transpose(-1, -2))

    def pointwise(self, x, y):
        return self.scale * (x * y).sum(-1)


class Polynomial(StaticKernel):
    r"""Polynomial kernel :math:`k(x, y) = (s \langle x, y \rangle + c)^p`."""

    is_dot_product = True

    def __init__(self, degree: int = 2, c: float = 1.0, scale: float = 1.0):
        check_int(degree, "degree", minimum=1)
        check_nonnegative(c, "c")
        check_positive(scale, "scale")
        self.degree = degree
        self.c = c
        self.scale = scale

    def cross(self, x, y):
        return (self.scale * (x @ y.transpose(-1, -2)) + self.c) ** self.degree

    def pointwise(self, x, y):
        return (self.scale * (x * y).sum(-1) + self.c) ** self.degree


class RBF(StaticKernel):
    r"""Gaussian kernel :math:`k(x, y) = \exp(-|x - y|^2 / (2 \sigma^2))`.

    Bandwidth convention: ``sigma`` is the standard deviation (pysiglib's ``sigma`` is our
    :math:`2\sigma^2`).
    """

    def __init__(self, sigma: float = 1.0):
        check_positive(sigma, "sigma")
        self.sigma = sigma

    def cross(self, x, y):
        return torch.exp(_sqdist(x, y) * (-0.5 / self.sigma**2))

    def pointwise(self, x, y):
        return torch.exp(((x - y) ** 2).sum(-1) * (-0.5 / self.sigma**2))

    def self_values(self, x):
        return torch.ones(x.shape[:-1], dtype=x.dtype, device=x.device)


class Laplacian(StaticKernel):
    r"""Laplacian (Abel) kernel :math:`k(x, y) = \exp(-|x - y| / \sigma)`."""

    def __init__(self, sigma: float = 1.0):
        check_positive(sigma, "sigma")
        self.sigma = sigma

    def cross(self, x, y):
        # direct differences (no |x|^2+|y|^2-2<x,y> expansion): exact 0 distance on the diagonal
        dist = torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist")
        return torch.exp(-dist / self.sigma)

    def pointwise(self, x, y):
        return torch.exp(-torch.linalg.vector_norm(x - y, dim=-1) / self.sigma)

    def self_values(self, x):
        return torch.ones(x.shape[:-1], dtype=x.dtype, device=x.device)
