"""The Gram-matrix interface every time-series kernel implements.

A subclass implements two private methods on validated :class:`SeriesBatch` inputs:

- ``_gram_block(X, Y, symmetric) -> Tensor (n_X, n_Y)``: the kernel between two blocks
  (``symmetric`` is True when Y is X, so a kernel may exploit it);
- ``_diag(X) -> Tensor (n_X,)``: K(x_i, x_i) without the full Gram;

and may override ``_pair_bytes(X, Y)``, its working memory per pair of series, which sizes
the blocks under ``max_memory``. The public ``gram`` checks the parameters
(``_parameter_constraints``) and the inputs once, binds data-dependent parameters for the
call (``_bound``: no state is written), picks the backend and the thread count
(:meth:`Kernel._backend`, :func:`tskernels._threads.threads`), assembles blocks (upper
triangle only when ``Y is None``, then mirrors, so the result is exactly symmetric), checks
the result is finite and optionally normalises: cosine normalisation in one place, from log
values for a kernel tagged ``log_space`` (``_log_gram_block`` / ``_log_diag``), with each
diagonal computed once.

Capabilities are tags on the class (``Kernel.get_tag``), read by the registry and the tests:

``unequal_length``  accepts unequal-length batches (lists of (T_i, d) arrays)
``gpu``             runs on CUDA devices
``backends``        compiled back-ends, e.g. ("numba", "torch"); ``backend="auto"`` takes the
                    first one that runs on the device (numba: CPU only)
``needs_fit``       ``gram`` needs ``fit(corpus)`` first (data-dependent features)
``fit_is_empty``    ``fit`` learns nothing (False: ``fit`` fixes data-dependent parameters,
                    e.g. GAK's median-heuristic bandwidth; unfitted, ``gram`` computes them on
                    its ``X`` for that call only)
``symmetric``       K(x, y) = K(y, x)
``log_space``       the kernel has a log-space evaluation (``log_gram``)
``gram_levels``     ``gram_levels`` gives every truncation level in one pass
``first_level``     the level of ``gram_levels(...)[0]`` (1: levels 1..N, no level 0)
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from numbers import Integral

import torch

from ._constraints import (
    Constraint,
    Interval,
    Options,
    StrOptions,
    TorchDevice,
    validate_params,
)
from ._params import Parametrized
from ._threads import threads
from .validation import (
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


class _AllCores(Constraint):
    """``n_jobs=-1``: every core."""

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, Integral) and not isinstance(value, bool) and value == -1

    def __str__(self) -> str:
        return "-1 (all cores)"


#: The ``normalize`` argument of the public Gram methods: True or False (numpy's bool too),
#: never a string or a number read by its truth value.
NORMALIZE = {"normalize": ["boolean"]}


class Kernel(Parametrized, ABC):
    """Abstract kernel on batches of multivariate time series.

    Parameters common to all kernels (keyword-only; a subclass takes them as ``**execution``
    and passes them here, and ``get_params`` lists them with its own):

    backend : "auto" (default), "numba" or "torch". "auto": the compiled numba core on the
        CPU where the kernel has one (tag ``backends``), torch otherwise (and on CUDA).
    n_jobs : None (default: the current thread setting), -1 (all cores) or a positive int;
        threads of the pool the computation runs on (numba's or torch's), restored after.
    device : torch device or str, default "cpu"
    dtype : torch.float64 (default) or torch.float32
    max_memory : int, bytes of working memory per block (default 512 MiB)
    block_size : int or None, force blocks of this many series (overrides ``max_memory``)
    """

    _tags = {
        "unequal_length": False,
        "gpu": True,
        "backends": ("torch",),
        "needs_fit": False,
        "fit_is_empty": True,
        "symmetric": True,
        "log_space": False,
        "gram_levels": False,
        "first_level": None,
    }
    _parameter_constraints = {
        "backend": [StrOptions({"auto", "numba", "torch"})],
        "n_jobs": [None, _AllCores(), Interval(Integral, 1, None, closed="left")],
        "device": [None, TorchDevice()],
        "dtype": [
            None,
            StrOptions({"float32", "float64"}),
            Options(torch.dtype, {torch.float32, torch.float64}),
        ],
        "max_memory": [None, Interval(Integral, 1, None, closed="left")],
        "block_size": [None, Interval(Integral, 1, None, closed="left")],
    }
    #: Whether K(x, x) of both inputs of a cross Gram is checked even without normalising
    #: (computed once, and reused when normalising).
    _checks_cross_diag: bool = False
    #: A hint appended to the error raised on non-finite values.
    _divergence_hint: str = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # read-only views of the tags, for code written against the attributes
        cls.supports_unequal_length = bool(cls._all_tags["unequal_length"])
        cls.needs_fit = bool(cls._all_tags["needs_fit"])
        if cls._all_tags["log_space"]:
            missing = [
                m for m in ("_log_gram_block", "_log_diag") if getattr(cls, m) is getattr(Kernel, m)
            ]
            if missing:
                raise TypeError(
                    f"{cls.__name__} is tagged log_space but does not define {', '.join(missing)}"
                )

    def __init__(
        self,
        *,
        backend="auto",
        n_jobs=None,
        device=None,
        dtype=None,
        max_memory=None,
        block_size=None,
    ):
        self.backend = backend
        self.n_jobs = n_jobs
        self.device = device
        self.dtype = dtype
        self.max_memory = max_memory
        self.block_size = block_size

    # ------------------------------------------------------------------ public API
    def fit(self, X, y=None):
        """Fix the data-dependent parameters on ``X`` (nothing for most kernels, tag
        ``fit_is_empty``); returns self."""
        self._check_parameters()
        self._fit(self._check_input(X, "X"))
        return self

    @validate_params(NORMALIZE)
    def gram(self, X, Y=None, *, normalize: bool = False) -> torch.Tensor:
        """Gram matrix K[i, j] = k(X[i], Y[j]) as a Tensor of shape (n_X, n_Y).

        ``Y=None`` means Y = X (upper triangle computed and mirrored). ``normalize=True``
        returns K(x, y) / sqrt(K(x, x) K(y, y)). Writes no attribute on the kernel.
        ``X``/``Y``: (n, T, d) arrays, lists of (T_i, d) arrays, or checked
        :class:`~tskernels.SeriesBatch` objects (moved to the kernel's device and dtype, not
        scanned again: the path of callers that checked their input at their own public call,
        as ``novelty``'s detector does).
        """
        k, Xb, Yb = self._prepare(X, Y)
        with k._threads():
            return k._gram(Xb, Yb, bool(normalize) or k._normalized_kernel)

    __call__ = gram

    def diag(self, X) -> torch.Tensor:
        """K(x_i, x_i) for each series, Tensor of shape (n,), without the full Gram."""
        k, Xb, _ = self._prepare(X, None)
        with k._threads():
            return k._checked_diag(Xb)

    def __sklearn_is_fitted__(self) -> bool:
        return bool(self.get_tag("fit_is_empty")) or self._is_fitted()

    # --------------------------------------------------------- subclass interface
    @abstractmethod
    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        """Kernel between two validated blocks, Tensor (X.n, Y.n)."""

    @abstractmethod
    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        """K(x_i, x_i), Tensor (X.n,)."""

    def _log_gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        """log K between two blocks, float64 Tensor (X.n, Y.n) (tag ``log_space``: a class
        with the tag must define it, checked when the class is defined)."""
        raise NotImplementedError(f"{type(self).__name__} has no log-space evaluation")

    def _log_diag(self, X: SeriesBatch) -> torch.Tensor:
        """log K(x_i, x_i), float64 Tensor (X.n,) (tag ``log_space``, as above)."""
        raise NotImplementedError(f"{type(self).__name__} has no log-space evaluation")

    def _pair_bytes(self, X: SeriesBatch, Y: SeriesBatch) -> int:
        """Working memory per pair of series (bytes); default one T_x x T_y matrix."""
        return X.length * Y.length * self._itemsize * 2

    def _check_params(self, d: int) -> None:  # noqa: B027 - optional hook
        """Validate parameters against the data's channel count (hook, optional)."""

    def _fit(self, X: SeriesBatch) -> None:  # noqa: B027 - optional hook
        """Learn the data-dependent parameters from the checked corpus ``X`` (hook)."""

    def _is_fitted(self) -> bool:
        """Whether ``fit`` has run (kernels whose ``fit`` is not empty override this)."""
        return True

    def _bound(self, X: SeriesBatch) -> Kernel:
        """The kernel this call computes with: ``self``, or a copy whose data-dependent
        parameters are fixed on this call's ``X`` (an unfitted kernel; ``self`` is not
        modified)."""
        return self

    @property
    def _normalized_kernel(self) -> bool:
        """Whether the kernel itself is the normalised one (GAK's ``normalized=True``)."""
        return False

    def _validate_diag(self, diag: torch.Tensor) -> None:  # noqa: B027 - optional hook
        """Extra checks of K(x, x) (hook)."""

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

    @property
    def _backend(self) -> str:
        """The backend of this call, from ``backend``, the device and the tag ``backends``
        (the one dispatch rule: numba runs on the CPU only, torch anywhere)."""
        available = self.get_tag("backends")
        device = self._device
        if self.backend == "auto":
            return "numba" if device.type == "cpu" and "numba" in available else "torch"
        if self.backend not in available:
            raise ValueError(
                f"`backend` {self.backend!r} is not available for {type(self).__name__}; "
                f"choose 'auto' or one of {', '.join(repr(b) for b in available)}"
            )
        if self.backend == "numba" and device.type != "cpu":
            raise ValueError(
                f"backend='numba' runs on the CPU only, but `device` is {device}; "
                "use backend='torch' or 'auto'"
            )
        return self.backend

    def _dispatch(self, op: str):
        """The entry point of ``op`` for this call's backend: the method ``_<op>_<backend>``
        (compiled cores take float64 numpy arrays on the CPU; torch entry points work on the
        kernel's device and dtype; results are cast to the kernel's dtype by the caller)."""
        return getattr(self, f"_{op}_{self._backend}")

    def _threads(self):
        """``n_jobs`` threads in the pool of this call's backend (restored afterwards)."""
        if self.n_jobs is None:
            return threads(None, "torch")
        pool = "numba" if self._backend == "numba" else "torch"
        if pool == "torch" and self._device.type != "cpu":
            return threads(None, pool)
        return threads(self.n_jobs, pool)

    def _describe(self) -> str:
        return repr(self)

    @property
    def _budget(self) -> int:
        """The working-memory budget per block, bytes (``max_memory`` checked at the call)."""
        return DEFAULT_MAX_MEMORY if self.max_memory is None else int(self.max_memory)

    def _prepare(self, X, Y) -> tuple[Kernel, SeriesBatch, SeriesBatch | None]:
        """The prologue of every public call: parameters checked once, inputs checked once,
        the kernel of this call (data-dependent parameters bound)."""
        self._check_parameters()
        self._backend  # noqa: B018 - the backend is available on this device
        Xb = self._check_input(X, "X")
        Yb = None if Y is None else self._check_input(Y, "Y")
        if Yb is not None:
            check_channels(Xb, Yb)
        return self._bound(Xb), Xb, Yb

    def _check_input(self, X, name: str) -> SeriesBatch:
        """The input as a SeriesBatch: validated once (a SeriesBatch, checked by construction,
        is only moved), then the kernel's own requirements (lengths, channel count)."""
        batch = as_series_batch(X, name=name, dtype=self._dtype, device=self._device)
        if not self.get_tag("unequal_length") and not batch.equal_length:
            lo, hi = int(batch.lengths.min()), int(batch.lengths.max())
            raise ValueError(
                f"{type(self).__name__} needs equal-length series, got lengths {lo}..{hi} in "
                f"`{name}`; resample or pad them first, or use a kernel that accepts them"
            )
        self._check_params(batch.d)
        return batch

    def _block_rows(self, X: SeriesBatch, Y: SeriesBatch) -> int:
        if self.block_size is not None:  # checked at the call
            return int(self.block_size)
        pairs = max(1, self._budget // max(1, self._pair_bytes(X, Y)))
        return max(1, math.isqrt(pairs))

    def _gram(self, X: SeriesBatch, Y: SeriesBatch | None, normalize: bool) -> torch.Tensor:
        """The Gram of checked inputs, normalised in one place (cosine normalisation; from
        log values for a ``log_space`` kernel, so it neither overflows nor underflows)."""
        if normalize and self.get_tag("log_space"):
            return self._gram_from_logs(X, Y)
        K = self._assemble(X, Y)
        self._check_result(K, "Gram matrix")
        if not normalize and (Y is None or not self._checks_cross_diag):
            return K
        if Y is None:
            dx = dy = torch.diagonal(K).clone()
        else:
            dx, dy = self._normalizing_diags(X, Y)  # each computed once
        if not normalize:
            return K
        self._check_diag_positive(dx, "X")
        self._check_diag_positive(dy, "Y")
        return normalize_gram_(K, dx, dy, symmetric=Y is None)

    def _gram_from_logs(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        """exp(log K(x, y) - log K(x, x) / 2 - log K(y, y) / 2), in float64 then cast."""
        # symmetric: the upper triangle is normalised, then mirrored once
        L = self._assemble_blocks(X, Y, self._log_gram_block, torch.float64, mirror=False)
        if Y is None:
            lx = ly = torch.diagonal(L).clone()
        else:
            lx, ly = self._checked_log_diag(X), self._checked_log_diag(Y)
        for v, name in ((lx, "X"), (ly, "Y")):
            if not bool(torch.isfinite(v).all()):
                i = int(torch.nonzero(~torch.isfinite(v))[0])
                raise NonFiniteKernelError(
                    f"normalize=True needs a finite log K(x, x), but {self._describe()} gives "
                    f"{float(v[i]):.3g} for `{name}`[{i}]."
                    + (f" {self._divergence_hint}" if self._divergence_hint else "")
                )
        half_x, half_y = 0.5 * lx, 0.5 * ly
        L.sub_(half_x[:, None]).sub_(half_y[None, :]).exp_()
        if Y is None:  # the upper triangle mirrored: exactly symmetric, unit diagonal
            mirror_upper_(L)
            torch.diagonal(L).fill_(1.0)
        K = L.to(self._dtype)
        self._check_result(K, "Gram matrix")
        return K

    def _assemble(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        return self._assemble_blocks(X, Y, self._gram_block, self._dtype)

    def _assemble_blocks(
        self,
        X: SeriesBatch,
        Y: SeriesBatch | None,
        block,
        dtype: torch.dtype,
        mirror: bool = True,
    ) -> torch.Tensor:
        """``block(X_i, Y_j, symmetric)`` over blocks sized by ``max_memory``: the upper
        triangle when ``Y is None``, mirrored in place (output + one block of memory);
        ``mirror=False`` leaves the strict lower triangle for the caller to fill."""
        symmetric = Y is None
        Y_ = X if symmetric else Y
        n, m = X.n, Y_.n
        b = self._block_rows(X, Y_)
        if b >= n and b >= m:
            K = block(X, Y_, symmetric).to(dtype)
            return mirror_upper_(K) if symmetric and mirror else K
        K = torch.empty((n, m), dtype=dtype, device=self._device)
        for i in range(0, n, b):
            Xi = X[i : i + b]
            for j in range(i if symmetric else 0, m, b):
                blk = block(Xi, Y_[j : j + b], symmetric and i == j)
                K[i : i + b, j : j + b] = blk
                del blk
                if symmetric and mirror and j == i:
                    mirror_upper_(K[i : i + b, i : i + b])
                elif symmetric and mirror:
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
        self._validate_diag(out)
        return out

    def _checked_log_diag(self, X: SeriesBatch) -> torch.Tensor:
        b = self._block_rows(X, X) ** 2
        parts = [self._log_diag(X[i : i + b]) for i in range(0, X.n, b)]
        return (torch.cat(parts) if len(parts) > 1 else parts[0]).to(torch.float64)

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

    def _copy_with(self, **params) -> Kernel:
        """A shallow copy with ``params`` set (``self`` untouched)."""
        new = copy.copy(self)
        new.__dict__.update(params)
        return new


Kernel.supports_unequal_length = False
Kernel.needs_fit = False
