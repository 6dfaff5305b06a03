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

__all__ = ["Kernel", "NonFiniteKernelError", "DEFAULT_MAX_MEMORY"]

#: Default working-memory budget for the intermediates of one block (bytes), 512 MiB.
DEFAULT_MAX_MEMORY = 512 * 2**20


class NonFiniteKernelError(FloatingPointError):
    """A kernel evaluation produced NaN/Inf or an invalid diagonal (overflow, divergence)."""


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
            K = K / torch.sqrt(dx[:, None] * dy[None, :])
            if Yb is None:
                K.fill_diagonal_(1.0)
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

    def _check_input(self, X, name: str) -> SeriesBatch:
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
        if self.block_size is not None:
            if int(self.block_size) < 1:
                raise ValueError(f"`block_size` must be a positive integer, got {self.block_size}")
            return int(self.block_size)
        budget = DEFAULT_MAX_MEMORY if self.max_memory is None else int(self.max_memory)
        pairs = max(1, budget // max(1, self._pair_bytes(X, Y)))
        return max(1, math.isqrt(pairs))

    def _assemble(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        symmetric = Y is None
        Y_ = X if symmetric else Y
        n, m = X.n, Y_.n
        b = self._block_rows(X, Y_)
        if b >= n and b >= m:
            K = self._gram_block(X, Y_, symmetric)
        else:
            K = torch.empty((n, m), dtype=self._dtype, device=self._device)
            for i in range(0, n, b):
                Xi = X[i : i + b]
                for j in range(i if symmetric else 0, m, b):
                    block = self._gram_block(Xi, Y_[j : j + b], symmetric and i == j)
                    K[i : i + b, j : j + b] = block
                    if symmetric and j != i:
                        K[j : j + b, i : i + b] = block.T
        if symmetric:
            K = torch.triu(K) + torch.triu(K, 1).T
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
