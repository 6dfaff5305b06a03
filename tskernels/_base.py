"""The Gram-matrix interface every time-series kernel implements.

A subclass implements two private methods on validated :class:`SeriesBatch` inputs:

- ``_gram_block(X, Y, symmetric) -> Tensor (n_X, n_Y)``: the kernel between two blocks
  (``symmetric`` is True when Y is X, so a kernel may exploit it);
- ``_diag(X) -> Tensor (n_X,)``: K(x_i, x_i) without the full Gram;

and may override ``_pair_bytes(X, Y)``, its working memory per pair of series, which sizes
the blocks under ``max_memory``. The public ``gram`` validates once, assembles blocks
(upper triangle only when ``Y is None``, then mirrors, so the result is exactly symmetric),
checks the result is finite and optionally normalises.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from numbers import Integral

import torch
from sklearn.base import BaseEstimator

from ._validation import (
    SeriesBatch,
    all_finite,
    as_series_batch,
    check_channels,
    resolve_device,
    resolve_dtype,
)

__all__ = [
    "Kernel",
    "NonFiniteKernelError",
    "DEFAULT_MAX_MEMORY",
    "mirror_upper_",
    "normalize_gram_",
]

#: Default working-memory budget for the intermediates of one block (bytes), 512 MiB.
DEFAULT_MAX_MEMORY = 512 * 2**20


class NonFiniteKernelError(FloatingPointError):
    """A kernel evaluation produced NaN/Inf or an invalid diagonal (overflow, divergence)."""


#: Entries of the scratch factor per strip in :func:`normalize_gram_` (8 MiB in float64).
_NORMALIZE_ELEMENTS = 2**20
#: Rows of the strip mirrored at once by :func:`mirror_upper_` (bounds its scratch memory).
_MIRROR_ROWS = 256


def mirror_upper_(K: torch.Tensor) -> torch.Tensor:
    """Copy the strict upper triangle of the square matrix ``K`` (..., n, n) onto its lower
    triangle, in place, so that ``K`` is exactly symmetric; returns ``K``.

    Works strip by strip: the scratch memory is one (256 x 256) diagonal tile per leading
    index, never a second n x n matrix.
    """
    n = K.shape[-1]
    b = _MIRROR_ROWS
    for i in range(0, n, b):
        e = min(i + b, n)
        tile = K[..., i:e, i:e]
        upper = torch.triu(tile, 1)
        tile.copy_(torch.triu(tile) + upper.transpose(-1, -2))
        if e < n:  # rows e.. of columns i..e <- columns e.. of rows i..e (disjoint regions)
            K[..., e:, i:e].copy_(K[..., i:e, e:].transpose(-1, -2))
    return K


def normalize_gram_(
    K: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor, *, symmetric: bool = False
) -> torch.Tensor:
    r"""K(x, y) / sqrt(K(x, x) K(y, y)), in place: ``K`` (..., n, m), ``dx`` (..., n), ``dy``
    (..., m) positive; returns ``K``.

    Divides by :math:`\sqrt{K(x, x)} \sqrt{K(y, y)}`: the product of the square roots of
    two normal floats neither overflows nor underflows, where the product of the diagonals
    does beyond 1e154 or below 1e-154. Row strips bound the scratch memory; the result is
    exactly symmetric when K is (the factor is the same product both ways), and
    ``symmetric=True`` sets the diagonal to exactly 1.
    """
    a, b = torch.sqrt(dx), torch.sqrt(dy)
    if not math.isfinite(float(a.max()) * float(b.max())):  # both diagonals at ~1.8e308
        K.div_(a.unsqueeze(-1)).div_(b.unsqueeze(-2))
    else:
        n = K.shape[-2]
        step = max(1, _NORMALIZE_ELEMENTS // max(1, K[..., :1, :].numel()))
        for i in range(0, n, step):
            K[..., i : i + step, :].div_(a[..., i : i + step, None] * b[..., None, :])
    if symmetric:
        torch.diagonal(K, dim1=-2, dim2=-1).fill_(1.0)
    return K


def check_max_memory(value) -> int:
    """``max_memory``: None (the default budget) or a positive integer number of bytes."""
    if value is None:
        return DEFAULT_MAX_MEMORY
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(
            f"`max_memory` must be None or a positive integer number of bytes, got {value!r}"
        )
    return int(value)


def check_block_size(value) -> int | None:
    """``block_size``: None (sized by ``max_memory``) or a positive integer of series."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"`block_size` must be None or a positive integer, got {value!r}")
    return int(value)


class Kernel(BaseEstimator, ABC):
    """Abstract kernel on batches of multivariate time series.

    Parameters common to all kernels (keyword-only in every subclass):

    device : torch device or str, default "cpu"
    dtype : torch.float64 (default) or torch.float32
    max_memory : int, bytes of working memory per block (default 512 MiB)
    block_size : int or None, force blocks of this many series (overrides ``max_memory``)
    """

    #: Whether the kernel accepts unequal-length batches (lists of (T_i, d) arrays).
    supports_unequal_length: bool = False
    #: Whether ``gram`` needs ``fit(corpus)`` first (data-dependent features, e.g. the
    #: random-convolution kernel); the detector, the experiments and the tests fit such a
    #: kernel on the corpus. A kernel whose ``fit`` is optional (GAK's median heuristic) is False.
    needs_fit: bool = False
    #: A hint appended to the error raised on non-finite values.
    _divergence_hint: str = ""

    def __init__(self, *, device=None, dtype=None, max_memory=None, block_size=None):
        self.device = device
        self.dtype = dtype
        self.max_memory = max_memory
        self.block_size = block_size

    # ------------------------------------------------------------------ public API
    def gram(self, X, Y=None, *, normalize: bool = False) -> torch.Tensor:
        """Gram matrix K[i, j] = k(X[i], Y[j]) as a Tensor of shape (n_X, n_Y).

        ``Y=None`` means Y = X (upper triangle computed and mirrored). ``normalize=True``
        returns K(x, y) / sqrt(K(x, x) K(y, y)).
        """
        Xb = self._check_input(X, "X")
        Yb = None if Y is None else self._check_input(Y, "Y")
        if Yb is not None:
            check_channels(Xb, Yb)
        K = self._assemble(Xb, Yb)
        self._check_result(K, "Gram matrix")
        if normalize:
            if Yb is None:
                dx = dy = torch.diagonal(K).clone()
            else:
                dx, dy = self._normalizing_diags(Xb, Yb)
            self._check_diag_positive(dx, "X")
            self._check_diag_positive(dy, "Y")
            K = normalize_gram_(K, dx, dy, symmetric=Yb is None)
        return K

    __call__ = gram

    def diag(self, X) -> torch.Tensor:
        """K(x_i, x_i) for each series, Tensor of shape (n,), without the full Gram."""
        return self._checked_diag(self._check_input(X, "X"))

    # --------------------------------------------------------- subclass interface
    @abstractmethod
    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        """Kernel between two validated blocks, Tensor (X.n, Y.n)."""

    @abstractmethod
    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        """K(x_i, x_i), Tensor (X.n,)."""

    def _pair_bytes(self, X: SeriesBatch, Y: SeriesBatch) -> int:
        """Working memory per pair of series (bytes); default one T_x x T_y matrix."""
        return X.length * Y.length * self._itemsize * 2

    def _check_params(self, d: int) -> None:  # noqa: B027 - optional hook
        """Validate parameters against the data's channel count (hook, optional)."""

    # ------------------------------------------------------------------ internals
    @property
    def _dtype(self) -> torch.dtype:
        return resolve_dtype(self.dtype)

    @property
    def _device(self) -> torch.device:
        return resolve_device(self.device)

    @property
    def _itemsize(self) -> int:
        return torch.empty((), dtype=self._dtype).element_size()

    def _describe(self) -> str:
        return repr(self)

    def _check_execution_params(self) -> None:
        """device, dtype, max_memory and block_size, checked at every use (``set_params``
        cannot slip past them)."""
        resolve_dtype(self.dtype)
        resolve_device(self.device)
        check_max_memory(self.max_memory)
        check_block_size(self.block_size)

    @property
    def _budget(self) -> int:
        """The working-memory budget per block, bytes."""
        return check_max_memory(self.max_memory)

    def _check_input(self, X, name: str) -> SeriesBatch:
        self._check_execution_params()
        batch = as_series_batch(X, name=name, dtype=self._dtype, device=self._device)
        if not self.supports_unequal_length and not batch.equal_length:
            lo, hi = int(batch.lengths.min()), int(batch.lengths.max())
            raise ValueError(
                f"{type(self).__name__} needs equal-length series, got lengths {lo}..{hi} in "
                f"`{name}`; resample or pad them first, or use a kernel that accepts them"
            )
        self._check_params(batch.d)
        return batch

    def _block_rows(self, X: SeriesBatch, Y: SeriesBatch) -> int:
        block_size = check_block_size(self.block_size)
        if block_size is not None:
            return block_size
        pairs = max(1, self._budget // max(1, self._pair_bytes(X, Y)))
        return max(1, math.isqrt(pairs))

    def _assemble(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        symmetric = Y is None
        Y_ = X if symmetric else Y
        n, m = X.n, Y_.n
        b = self._block_rows(X, Y_)
        if b >= n and b >= m:
            K = self._gram_block(X, Y_, symmetric)
            return mirror_upper_(K) if symmetric else K
        # output + one block of working memory: upper-triangle blocks are written into K and
        # mirrored in place (a diagonal block is made exactly symmetric on its own)
        K = torch.empty((n, m), dtype=self._dtype, device=self._device)
        for i in range(0, n, b):
            Xi = X[i : i + b]
            for j in range(i if symmetric else 0, m, b):
                block = self._gram_block(Xi, Y_[j : j + b], symmetric and i == j)
                K[i : i + b, j : j + b] = block
                del block
                if symmetric and j == i:
                    mirror_upper_(K[i : i + b, i : i + b])
                elif symmetric:
                    K[j : j + b, i : i + b].copy_(K[i : i + b, j : j + b].T)
        return K

    def _normalizing_diags(
        self, X: SeriesBatch, Y: SeriesBatch
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K(x, x) and K(y, y) for normalising K(X, Y) (a kernel whose values depend on the
        call, e.g. a common resampling grid, overrides this)."""
        return self._checked_diag(X), self._checked_diag(Y)

    def _checked_diag(self, X: SeriesBatch) -> torch.Tensor:
        b = self._block_rows(X, X) ** 2
        parts = [self._diag(X[i : i + b]) for i in range(0, X.n, b)]
        out = torch.cat(parts) if len(parts) > 1 else parts[0]
        self._check_result(out, "diagonal")
        return out

    def _check_result(self, K: torch.Tensor, what: str) -> None:
        if all_finite(K):
            return
        bad = ~torch.isfinite(K)
        if bool(bad.any()):
            idx = tuple(int(i) for i in torch.nonzero(bad)[0].tolist())
            raise NonFiniteKernelError(
                f"{self._describe()} produced a non-finite {what} entry at {idx} "
                f"({int(bad.sum())} of {K.numel()} entries)."
                + (f" {self._divergence_hint}" if self._divergence_hint else "")
            )

    def _check_diag_positive(self, diag: torch.Tensor, name: str) -> None:
        if bool((diag <= 0).any()):
            i = int(torch.nonzero(diag <= 0)[0])
            raise NonFiniteKernelError(
                f"normalize=True needs K(x, x) > 0, but {self._describe()} gives "
                f"K(x, x) = {float(diag[i]):.3g} for `{name}`[{i}]."
                + (f" {self._divergence_hint}" if self._divergence_hint else "")
            )
        tiny = torch.finfo(diag.dtype).tiny
        if bool((diag < tiny).any()):
            i = int(torch.nonzero(diag < tiny)[0])
            raise NonFiniteKernelError(
                f"normalize=True: {self._describe()} gives K(x, x) = {float(diag[i]):.3g} for "
                f"`{name}`[{i}], below the smallest normal {diag.dtype} ({tiny:.3g}): the "
                "kernel values underflow and have lost their digits; rescale the data (e.g. "
                "z-score it) or the kernel's parameters"
            )
