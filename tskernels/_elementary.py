r"""Time-series kernels built directly on a static kernel: flattened and integral.

Both are computed with batched matrix products over whole blocks of series (no loop over
pairs of series).
"""

from __future__ import annotations

from numbers import Integral

import torch

from ._base import Kernel
from ._constraints import Interval
from ._static import RBF, StaticKernel
from .validation import SeriesBatch

__all__ = ["DEFAULT_N_GRID", "FlattenedKernel", "IntegralKernel", "resample_linear"]

#: Grid of the integral kernel when the series of a call have unequal lengths.
DEFAULT_N_GRID = 100


class FlattenedKernel(Kernel):
    r"""Static kernel on the flattened series: :math:`K(x, y) = k(\mathrm{vec}(x), \mathrm{vec}(y))`
    with :math:`\mathrm{vec}(x) \in \mathbb{R}^{Td}`. Equal lengths only.

    >>> import numpy as np
    >>> from tskernels import FlattenedKernel, Linear
    >>> X = np.ones((2, 3, 2))
    >>> FlattenedKernel(Linear()).gram(X).tolist()
    [[6.0, 6.0], [6.0, 6.0]]
    """

    _parameter_constraints = {"static": [None, StaticKernel]}

    def __init__(
        self,
        static: StaticKernel | None = None,
        **execution,
    ):
        super().__init__(**execution)
        self.static = static

    @property
    def _static(self) -> StaticKernel:
        return RBF() if self.static is None else self.static

    def _pair_bytes(self, X, Y):
        return 4 * self._itemsize

    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        if X.length != Y.length:
            raise ValueError(
                f"FlattenedKernel needs equal lengths in X and Y, got T={X.length} and T={Y.length}"
            )
        return self._static.cross(X.values.reshape(X.n, -1), Y.values.reshape(Y.n, -1))

    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        return self._static.self_values(X.values.reshape(X.n, -1))


def resample_linear(batch: SeriesBatch, length: int) -> torch.Tensor:
    """Each series linearly interpolated at ``length`` equispaced points of [0, 1].

    Series i is read as the piecewise-linear function through its ``lengths[i]`` samples
    placed at equispaced times of [0, 1]. Returns Tensor (n, length, d).
    """
    v, L = batch.values, batch.lengths.to(batch.values.dtype)
    grid = torch.linspace(0.0, 1.0, length, dtype=v.dtype, device=v.device)
    pos = grid[None, :] * (L[:, None] - 1.0)  # (n, length) fractional index
    lo = pos.floor().long().clamp_(min=0)
    hi = torch.minimum(lo + 1, batch.lengths[:, None] - 1)
    frac = (pos - lo.to(v.dtype))[..., None]
    d = v.shape[-1]
    v_lo = torch.gather(v, 1, lo[..., None].expand(-1, -1, d))
    v_hi = torch.gather(v, 1, hi[..., None].expand(-1, -1, d))
    return v_lo + frac * (v_hi - v_lo)


def _trapezoid_weights(T: int, dtype, device) -> torch.Tensor:
    if T == 1:
        return torch.ones(1, dtype=dtype, device=device)
    w = torch.full((T,), 1.0 / (T - 1), dtype=dtype, device=device)
    w[0] *= 0.5
    w[-1] *= 0.5
    return w


def _trapezoid_weight_rows(batch: SeriesBatch) -> torch.Tensor:
    """(n, T_max): the trapezoid weights of each series on its own L_i samples, then zeros."""
    v, L = batch.values, batch.lengths
    t = torch.arange(batch.length, device=v.device)[None, :]
    Lf = L.to(v.dtype)[:, None]
    w = torch.where(t < L[:, None], 1.0 / (Lf - 1.0).clamp_min(1.0), torch.zeros((), dtype=v.dtype))
    ends = (t == 0) | (t == L[:, None] - 1)
    w = torch.where(ends & (L[:, None] > 1), 0.5 * w, w)
    return w


class IntegralKernel(Kernel):
    r"""Integral of the static kernel along time, trapezoid rule on [0, 1]:

    .. math:: K(x, y) = \int_0^1 k(x_t, y_t)\,dt
              \approx \sum_{t=1}^{T} w_t\, k(x_t, y_t),\quad
              w = \tfrac{1}{T-1}(\tfrac12, 1, \dots, 1, \tfrac12).

    Unequal lengths: every series is read as the piecewise-linear function through its
    samples at equispaced times of [0, 1]. With ``n_grid`` given, every series is resampled,
    by linear interpolation, on a common grid of ``n_grid`` points (one quadrature for all
    pairs: positive semi-definite on any batch). With ``n_grid=None`` (default) the rule is
    per pair: two series of one length are integrated on their own samples, two series of
    different lengths on a grid of ``DEFAULT_N_GRID`` (= 100) points. A value is then a
    function of the pair alone, never of the other series of the call, and ``diag`` and
    ``normalize=True`` follow the same rule; but a Gram mixing lengths is not guaranteed
    positive semi-definite (the quadrature changes with the pair): pass ``n_grid`` when that
    matters.
    """

    _tags = {"unequal_length": True}
    _parameter_constraints = {
        "static": [None, StaticKernel],
        "n_grid": [None, Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        static: StaticKernel | None = None,
        *,
        n_grid: int | None = None,
        **execution,
    ):
        super().__init__(**execution)
        self.static = static
        self.n_grid = n_grid

    @property
    def _static(self) -> StaticKernel:
        return RBF() if self.static is None else self.static

    def _pair_bytes(self, X, Y):
        return 3 * max(X.length, Y.length) * self._itemsize

    def _assemble(self, X, Y):
        # Resample once for the whole call (not per block).
        if self.n_grid is not None:
            T = int(self.n_grid)
            return super()._assemble(
                self._on_grid(X, T), None if Y is None else self._on_grid(Y, T)
            )
        Y_ = X if Y is None else Y
        lengths = torch.cat([X.lengths, Y_.lengths])
        if bool((lengths == lengths[0]).all()):
            return super()._assemble(X, Y)
        # every pair on the common grid, then the pairs of one length on their own samples
        K = super()._assemble(
            self._on_grid(X, DEFAULT_N_GRID),
            None if Y is None else self._on_grid(Y, DEFAULT_N_GRID),
        )
        for L in torch.unique(X.lengths).tolist():
            ix = torch.nonzero(X.lengths == L).flatten()
            iy = ix if Y is None else torch.nonzero(Y.lengths == L).flatten()
            if iy.numel() == 0:
                continue
            Xs = SeriesBatch(X.values[ix, :L], X.lengths[ix])
            Ys = None if Y is None else SeriesBatch(Y.values[iy, :L], Y.lengths[iy])
            K[ix[:, None], iy[None, :]] = super()._assemble(Xs, Ys)
        return K

    def _normalizing_diags(self, X: SeriesBatch, Y: SeriesBatch):
        return self._checked_diag(X), self._checked_diag(Y)

    @staticmethod
    def _on_grid(batch: SeriesBatch, T: int) -> SeriesBatch:
        if int(batch.lengths.min()) == T and batch.length == T:
            return batch
        values = resample_linear(batch, T)
        return SeriesBatch(values, torch.full_like(batch.lengths, T))

    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        w = _trapezoid_weights(X.length, X.values.dtype, X.values.device)
        per_step = self._static.cross(X.values.transpose(0, 1), Y.values.transpose(0, 1))
        return torch.einsum("t,tnm->nm", w, per_step)

    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        if self.n_grid is not None:
            X = self._on_grid(X, int(self.n_grid))
        if X.equal_length:
            w = _trapezoid_weights(X.length, X.values.dtype, X.values.device)
            return self._static.self_values(X.values) @ w
        # each series on its own samples: trapezoid weights per length, 0 on the padding
        return (self._static.self_values(X.values) * _trapezoid_weight_rows(X)).sum(1)
