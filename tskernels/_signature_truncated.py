r"""The truncated signature kernel of static-kernel-lifted paths: exact (Kiraly-Oberhauser) or
its order-1 discretisation."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch

from ._base import NORMALIZE, Kernel, mirror_upper_, normalize_gram_
from ._constraints import Interval, StrOptions, validate_params
from ._registry import KernelSpec, register
from ._signature_pde import lifted_increments, lifted_increments_pairs
from ._static import RBF, Linear, StaticKernel
from .validation import SeriesBatch

__all__ = [
    "TruncatedSignatureKernel",
    "signature_levels",
    "signature_kernel_levels",
    "order1_levels",
    "order1_kernel_levels",
]

_LEVELS = ("cumulative", "single")
_ALGORITHMS = ("auto", "features", "recursion")
_DISCRETIZATIONS = ("exact", "order1")


def _compiled_levels(core, increments: torch.Tensor, level: int) -> list[torch.Tensor]:
    """Levels 1..``level`` from a compiled core filling (n, d + d^2 + ...) in place."""
    n, _, d = increments.shape
    dx = np.ascontiguousarray(increments.detach().to("cpu", torch.float64).numpy())
    out = np.zeros((n, sum(d**k for k in range(1, level + 1))))
    core(dx, level, out)
    flat = torch.from_numpy(out).to(device=increments.device, dtype=increments.dtype)
    return list(torch.split(flat, [d**k for k in range(1, level + 1)], dim=1))


def signature_levels(
    increments: torch.Tensor, level: int, *, compiled: bool | None = None
) -> list[torch.Tensor]:
    """Explicit truncated signatures of piecewise-linear paths, levels 1..``level``.

    ``increments`` (n, L, d) -> list of Tensors (n, d^k), k = 1..level, the word
    (i_1, ..., i_k) at index i_1 + i_2 d + ... + i_k d^(k-1) (reversed order).
    ``compiled=None``: the numba core on CPU, a torch loop over time on other devices.
    """
    n, L, d = increments.shape
    if compiled is None:
        compiled = increments.device.type == "cpu"
    if compiled:
        from ._signature_truncated_numba import signatures

        return _compiled_levels(signatures, increments, level)
    S = [increments.new_zeros((n, d**k)) for k in range(1, level + 1)]
    for t in range(L):
        v = increments[:, t]
        for k in range(level, 0, -1):
            B = v / k
            for m in range(1, k):
                B = ((v / (k - m))[:, :, None] * (B + S[m - 1])[:, None, :]).reshape(n, -1)
            S[k - 1] = S[k - 1] + B
    return S


def _excl_cumsum(Z: torch.Tensor, dim: int) -> torch.Tensor:
    """Sum over strictly smaller indices along ``dim``."""
    c = torch.cumsum(Z, dim=dim)
    c = c.narrow(dim, 0, Z.shape[dim] - 1)
    pad = torch.zeros_like(Z.narrow(dim, 0, 1))
    return torch.cat([pad, c], dim=dim)


def signature_kernel_levels(G: torch.Tensor, level: int) -> torch.Tensor:
    r"""Level inner products :math:`\langle S^m(x), S^m(y) \rangle`, m = 1..``level``, of
    piecewise-linear paths from their increment inner products ``G`` (..., L1, L2).

    Exact (full geometric order): the level-m term sums :math:`\prod_k G[a_k, b_k] /
    (c(a) c(b))` over non-decreasing index sequences a, b of length m, where c(a) is the
    product of the factorials of the multiplicities. The recursion tracks, per end cell, the
    number p (q) of trailing repeats of the last x (y) index; appending a cell multiplies by
    G and by 1/(p+1) (1/(q+1)) when the index repeats. Returns Tensor (level, ...).
    """
    if G.shape[-1] == 0 or G.shape[-2] == 0:  # a constant path: every level vanishes
        return G.new_zeros((level,) + G.shape[:-2])
    R = {(1, 1): G}
    out = [G.sum((-2, -1))]
    for m in range(1, level):
        total = sum(R.values())
        new = {(1, 1): G * _excl_cumsum(_excl_cumsum(total, -2), -1)}
        for p in range(1, m + 1):
            row = sum(R[(p, q)] for q in range(1, m + 1) if (p, q) in R)
            new[(p + 1, 1)] = G * _excl_cumsum(row, -1) * (1.0 / (p + 1))
        for q in range(1, m + 1):
            col = sum(R[(p, q)] for p in range(1, m + 1) if (p, q) in R)
            new[(1, q + 1)] = G * _excl_cumsum(col, -2) * (1.0 / (q + 1))
        for (p, q), r in R.items():
            new[(p + 1, q + 1)] = G * r * (1.0 / ((p + 1) * (q + 1)))
        R = new
        out.append(sum(r.sum((-2, -1)) for r in R.values()))
    return torch.stack(out)


def _order1_pairs(G: torch.Tensor, ii: np.ndarray, jj: np.ndarray, level: int) -> torch.Tensor:
    """The compiled order-1 recursion for the pairs (ii[q], jj[q]) of ``G`` (nX, nY, L1, L2),
    Tensor (level, len(ii)) on G's device and dtype."""
    from ._signature_truncated_numba import order1_recursion_pairs

    g = np.ascontiguousarray(G.detach().to("cpu", torch.float64).numpy())
    out = np.zeros((len(ii), level))
    if len(ii):
        order1_recursion_pairs(g, ii, jj, level, out)
    return torch.from_numpy(np.ascontiguousarray(out.T)).to(device=G.device, dtype=G.dtype)


def order1_levels(
    increments: torch.Tensor, level: int, *, compiled: bool | None = None
) -> list[torch.Tensor]:
    r"""Order-1 iterated sums of paths, levels 1..``level``: level k is
    :math:`\sum_{s_1 < \cdots < s_k} v_{s_1} \otimes \cdots \otimes v_{s_k}` for the
    increments v (the truncation of :math:`\prod_s (1 + v_s)`; no 1/k! terms within a segment).

    ``increments`` (n, L, d) -> list of Tensors (n, d^k), laid out as :func:`signature_levels`.
    ``compiled=None``: the numba core on CPU, a torch loop over time on other devices.
    """
    n, L, d = increments.shape
    if compiled is None:
        compiled = increments.device.type == "cpu"
    if compiled:
        from ._signature_truncated_numba import order1_sums

        return _compiled_levels(order1_sums, increments, level)
    S = [increments.new_zeros((n, d**k)) for k in range(1, level + 1)]
    for t in range(L):
        v = increments[:, t]
        for k in range(level, 1, -1):  # top down: S^(k-1) is still the old one
            S[k - 1] = S[k - 1] + (v[:, :, None] * S[k - 2][:, None, :]).reshape(n, -1)
        S[0] = S[0] + v
    return S


def order1_kernel_levels(
    D: torch.Tensor, level: int, *, compiled: bool | None = None
) -> torch.Tensor:
    r"""Level sums of the order-1 discretised signature kernel, m = 1..``level``, from the
    double-differenced static Gram ``D`` (..., L1, L2),
    :math:`D[s, t] = k(x_{s+1}, y_{t+1}) - k(x_{s+1}, y_t) - k(x_s, y_{t+1}) + k(x_s, y_t)`:

    .. math::
        P_m = \sum_{s_1 < \cdots < s_m,\ t_1 < \cdots < t_m} \prod_{k=1}^m D[s_k, t_k],

    by the recursion :math:`A_1 = D`, :math:`A_{m+1}[s, t] = D[s, t] \sum_{s' < s, t' < t}
    A_m[s', t']` (the double cumulative sum shifted by one along both axes),
    :math:`P_m = \sum A_m`. Returns Tensor (level, ...).

    ``compiled=None``: the numba core on CPU (row by row, O(level L2) memory per pair), whole
    (..., L1, L2) torch tensors per level on other devices.
    """
    if D.shape[-1] == 0 or D.shape[-2] == 0:  # a constant path: every level vanishes
        return D.new_zeros((level,) + D.shape[:-2])
    if compiled is None:
        compiled = D.device.type == "cpu"
    if compiled:
        lead = D.shape[:-2]
        flat = D.reshape((-1, 1) + D.shape[-2:])
        P = flat.shape[0]
        idx = np.arange(P, dtype=np.int64)
        out = _order1_pairs(flat, idx, np.zeros(P, dtype=np.int64), level)
        return out.reshape((level,) + lead)
    out = [D.sum((-2, -1))]
    A = D
    for _ in range(1, level):
        C = torch.cumsum(A, dim=-2).cumsum_(dim=-1)
        A = torch.zeros_like(D)
        A[..., 1:, 1:] = D[..., 1:, 1:] * C[..., :-1, :-1]
        del C
        out.append(A.sum((-2, -1)))
    return torch.stack(out)


class TruncatedSignatureKernel(Kernel):
    r"""Truncated signature kernel of the static-kernel-lifted, piecewise-linear paths.

    .. math::
        K_N(x, y) = \sum_{m=0}^{N} \langle S^m(\phi(s x)), S^m(\phi(s y)) \rangle
        \quad(\texttt{levels="cumulative"}),\qquad
        1 + \langle S^N, S^N \rangle \quad(\texttt{levels="single"}),

    with :math:`S^m` the level-m signature, :math:`\phi` the lift by the static kernel
    :math:`a\,k` (k = ``static``, default ``Linear()``; a = ``amplitude`` multiplies k, so the
    level-m term scales by :math:`a^m`), ``s = scale`` and N = ``level``. Exact for
    piecewise-linear paths (the Kiraly-Oberhauser recursion of full geometric order over the
    double-differenced static Gram, see :func:`signature_kernel_levels`). With the linear
    static kernel the explicit signatures are used when they fit in memory, or, blocked, when
    they cost less than the recursion (``algorithm="auto"``; order 1: only when they cost
    less). :meth:`gram_levels` returns every level 1..N from one pass.

    ``discretization="order1"`` replaces :math:`\langle S^m, S^m \rangle` by its order-1
    discretisation over the double-differenced static Gram
    :math:`D[s, t] = a\,(k(x_{s+1}, y_{t+1}) - k(x_{s+1}, y_t) - k(x_s, y_{t+1}) + k(x_s, y_t))`
    (points of ``s x`` and ``s y``):

    .. math::
        P_m(x, y) = \sum_{s_1 < \cdots < s_m,\ t_1 < \cdots < t_m} \prod_{k=1}^m D[s_k, t_k]

    (strictly increasing indices, no 1/k! terms within a segment; see
    :func:`order1_kernel_levels`). ``levels="single"`` gives :math:`1 + P_N` (the reference
    study's kernel), ``levels="cumulative"`` gives :math:`1 + P_1 + \cdots + P_N`. Both are
    inner products of the order-1 features :math:`\prod_s (1 + v_s)` (v the lifted
    increments), hence positive semi-definite; with the linear static kernel those features
    are computed explicitly when they fit (:func:`order1_levels`).

    Unequal lengths are handled by the forward-fill padding (constant pieces add nothing, in
    both discretisations).

    >>> import numpy as np
    >>> from tskernels import TruncatedSignatureKernel
    >>> x = np.array([[[0.0, 0.0], [1.0, 2.0]]])  # one segment: S^m = v^{(x)m} / m!
    >>> float(TruncatedSignatureKernel(level=2).gram(x)[0, 0])  # 1 + 5 + 25 / 4
    12.25
    >>> k1 = TruncatedSignatureKernel(level=2, discretization="order1")
    >>> float(k1.gram(x)[0, 0])  # one segment: no pair s_1 < s_2, so 1 + 5 + 0
    6.0
    """

    _tags = {
        "unequal_length": True,
        "backends": ("numba", "torch"),
        "gram_levels": True,
        "first_level": 1,
    }
    _parameter_constraints = {
        "static": [None, StaticKernel],
        "level": [Interval(Integral, 1, None, closed="left")],
        "scale": [Interval(Real, 0, None, closed="neither")],
        "amplitude": [Interval(Real, 0, None, closed="neither")],
        "levels": [StrOptions(set(_LEVELS))],
        "algorithm": [StrOptions(set(_ALGORITHMS))],
        "discretization": [StrOptions(set(_DISCRETIZATIONS))],
    }

    def __init__(
        self,
        static: StaticKernel | None = None,
        level: int = 4,
        scale: float = 1.0,
        levels: str = "cumulative",
        *,
        algorithm: str = "auto",
        discretization: str = "exact",
        amplitude: float = 1.0,
        **execution,
    ):
        super().__init__(**execution)
        self.static = static
        self.level = level
        self.scale = scale
        self.levels = levels
        self.algorithm = algorithm
        self.discretization = discretization
        self.amplitude = amplitude

    # ------------------------------------------------------------------ helpers
    @property
    def _static(self) -> StaticKernel:
        return Linear() if self.static is None else self.static

    def _check_parameters(self) -> None:
        super()._check_parameters()
        if self.algorithm == "features" and type(self._static) is not Linear:
            raise ValueError(
                f"algorithm='features' needs the Linear static kernel, got static={self._static!r}"
            )

    def _n_features(self, d: int) -> int:
        return sum(d**k for k in range(1, int(self.level) + 1))

    def _use_features(self, n_series: int, d: int, length: int) -> bool:
        """Explicit signatures (Linear static kernel, ``algorithm="auto"``) when a pair
        costs less by features (d + ... + d^N products) than by the recursion (~ (T - 1)^2 N^2
        cells exact, (T - 1)^2 N order 1) and every series' features fit in ``max_memory`` at
        once or, blocked, one series' features on each side of a block. Order 1 only: the
        features of every series were used whenever they fit, whatever they cost (order 1,
        level 7, 7 channels, T = 30 took 25 CPU s a CV cell by features against 0.3 s by the
        recursion). The exact discretisation keeps that rule (its torch recursion costs far
        more a cell than a product: d = 5, N = 7, T = 40, 40 series took 7.7 CPU s by the
        recursion against 0.07 s by features) and its cost rule decides the blocked case."""
        if self.algorithm != "auto":
            return self.algorithm == "features"
        if type(self._static) is not Linear:
            return False
        row_bytes = self._n_features(d) * self._itemsize
        if self.discretization != "order1" and n_series * row_bytes <= self._budget:
            return True
        # recursion cells per pair: ~N^2 per grid cell exact, N for order 1
        per_cell = int(self.level) if self.discretization == "order1" else int(self.level) ** 2
        cells = max(1, length - 1) ** 2 * per_cell
        if self._n_features(d) > cells:
            return False
        return n_series * row_bytes <= self._budget or 2 * row_bytes <= self._budget

    def _features_fit(self, n_series: int, d: int) -> bool:
        """Every feature of the call at once (no blocks), as long as no ``block_size`` asks
        for blocks."""
        return (
            self.block_size is None
            and n_series * self._n_features(d) * self._itemsize <= self._budget
        )

    def _feature_rows(self, d: int) -> int:
        """Series per block of the blocked explicit-signature path: ``block_size``, else the
        features of a block on each side and the block's output within ``max_memory``."""
        if self.block_size is not None:
            return int(self.block_size)
        half = self._budget // 2
        rows = half // (self._n_features(d) * self._itemsize)
        return max(1, min(rows, math.isqrt(half // self._itemsize)))

    def _flat_feature_tensor(self, X: SeriesBatch) -> torch.Tensor:
        """Levels 1..N of the signatures, concatenated, Tensor (n, d + ... + d^N) on the
        kernel's device and dtype."""
        if self._backend == "numba":
            return torch.from_numpy(self._flat_features(X)).to(self._dtype)
        return torch.cat(self._features(X), dim=1)

    def _feature_blocks(self, X: SeriesBatch, Y: SeriesBatch | None):
        """(i, j, F_X block, F_Y block) over the block pairs (upper triangle when Y is None);
        a block's features are computed when they are needed (bounded memory)."""
        b = self._feature_rows(X.d)
        Y_ = X if Y is None else Y
        for i in range(0, X.n, b):
            FX = self._flat_feature_tensor(X[i : i + b])
            for j in range(i if Y is None else 0, Y_.n, b):
                FY = FX if Y is None and j == i else self._flat_feature_tensor(Y_[j : j + b])
                yield i, j, FX, FY

    def _pair_bytes(self, X, Y):
        N = int(self.level)
        per_cell = 8 if self.discretization == "order1" else 2 * N * N + 6
        return per_cell * X.length * Y.length * self._itemsize

    @property
    def _feature_factor(self) -> float:
        """Multiplier of the path increments in the explicit features (linear static kernel):
        scale * sqrt(static scale * amplitude)."""
        return float(self.scale) * math.sqrt(float(self._static.scale) * float(self.amplitude))

    def _increment_grams(self, x: torch.Tensor, y: torch.Tensor, pairs: bool) -> torch.Tensor:
        """D = amplitude x the double-differenced static Gram of the scaled points, every pair
        of a block (``pairs=False``, (n, m, L1, L2)) or aligned pairs ((n, L1, L2))."""
        s = float(self.scale)
        lift = lifted_increments_pairs if pairs else lifted_increments
        G = lift(self._static, x * s, y * s)
        a = float(self.amplitude)
        return G if a == 1.0 else G.mul_(a)

    def _recursion(self, G: torch.Tensor, symmetric: bool = False) -> torch.Tensor:
        """(level, ...) level terms from the increment Grams ``G`` (..., L1, L2); with
        ``symmetric`` (G of a block with itself, (n, n, L1, L2)) the order-1 CPU core fills
        the upper triangle only (the caller mirrors it)."""
        N = int(self.level)
        if self.discretization != "order1":
            return signature_kernel_levels(G, N)
        compiled = self._backend == "numba"
        if not symmetric or not compiled or 0 in G.shape[-2:]:
            return order1_kernel_levels(G, N, compiled=compiled)
        ii, jj = np.triu_indices(G.shape[0])
        out = G.new_zeros((N, G.shape[0], G.shape[1]))
        out[:, ii, jj] = _order1_pairs(G, ii.astype(np.int64), jj.astype(np.int64), N)
        return out

    def _combine(self, per_level: torch.Tensor) -> torch.Tensor:
        """(level, ...) level inner products -> (level, ...) kernels per ``levels``, in place
        (no second (level, ...) tensor)."""
        if self.levels == "cumulative":
            for k in range(1, per_level.shape[0]):
                per_level[k] += per_level[k - 1]
        return per_level.add_(1.0)

    def _features(self, X: SeriesBatch) -> list[torch.Tensor]:
        c = self._feature_factor
        if self._backend == "numba":
            flat = torch.from_numpy(self._flat_features(X))
            sizes = [X.d**k for k in range(1, int(self.level) + 1)]
            return list(torch.split(flat.to(self._dtype), sizes, dim=1))
        levels_of = order1_levels if self.discretization == "order1" else signature_levels
        return levels_of(torch.diff(X.values, dim=1) * c, int(self.level), compiled=False)

    def _flat_features(self, X: SeriesBatch) -> np.ndarray:
        """CPU: levels 1..N of the signatures, concatenated, float64 array (n, d + ... + d^N)."""
        from ._signature_truncated_numba import order1_sums_from_values, signatures_from_values

        c = self._feature_factor
        V = np.ascontiguousarray(X.values.detach().numpy(), dtype=np.float64)
        out = np.empty((X.n, self._n_features(X.d)))
        order1 = self.discretization == "order1"
        (order1_sums_from_values if order1 else signatures_from_values)(V, c, int(self.level), out)
        return out

    # ------------------------------------------------------------------ blocks
    def _levels_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        """(level, X.n, Y.n) level inner products by the recursion."""
        return self._recursion(self._increment_grams(X.values, Y.values, pairs=False), symmetric)

    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        return self._combine(self._levels_block(X, Y, symmetric))[-1]

    def _diag_levels(self, X: SeriesBatch) -> torch.Tensor:
        """(level, X.n) level inner products of each series with itself."""
        if self._use_features(X.n, X.d, X.length):
            b = X.n if self._features_fit(X.n, X.d) else self._feature_rows(X.d)
            parts = [
                torch.stack([(f * f).sum(1) for f in self._features(X[i : i + b])])
                for i in range(0, X.n, b)
            ]
            return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
        return self._recursion(self._increment_grams(X.values, X.values, pairs=True))

    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        return self._combine(self._diag_levels(X))[-1]

    def _assemble(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        n_all = X.n + (0 if Y is None else Y.n)
        if not self._use_features(n_all, X.d, max(X.length, 0 if Y is None else Y.length)):
            return super()._assemble(X, Y)
        if not self._features_fit(n_all, X.d):
            return self._assemble_blocked(X, Y)
        if self._backend != "numba":
            return self._combine(self._feature_levels(X, Y))[-1]
        # CPU: one matrix product (torch's BLAS: numpy's OpenBLAS threads busy-wait for a
        # long time after each call, starving the other thread pools), no per-level torch
        # ops; cumulative levels are one product of the concatenated levels,
        # 1 + sum_k <S^k(x), S^k(y)>
        N = int(self.level)
        FX = torch.from_numpy(self._flat_features(X))
        if self.levels == "single":
            FX = FX[:, -(X.d**N) :]
        if Y is None:
            K = mirror_upper_(torch.mm(FX, FX.T))  # exactly symmetric, in place
        else:
            FY = torch.from_numpy(self._flat_features(Y))
            if self.levels == "single":
                FY = FY[:, -(Y.d**N) :]
            K = torch.mm(FX, FY.T)
        return K.add_(1.0).to(self._dtype)

    def _assemble_blocked(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        """The explicit-signature Gram block by block (features of one block pair at a time):
        output + ``max_memory``."""
        N = int(self.level)
        last = X.d**N if self.levels == "single" else None
        K = torch.empty((X.n, X.n if Y is None else Y.n), dtype=self._dtype, device=self._device)
        for i, j, FX, FY in self._feature_blocks(X, Y):
            if last is not None:
                FX, FY = FX[:, -last:], FY[:, -last:]
            blk = K[i : i + FX.shape[0], j : j + FY.shape[0]]
            torch.mm(FX, FY.T, out=blk) if blk.is_contiguous() else blk.copy_(FX @ FY.T)
            if Y is None and j == i:
                mirror_upper_(blk)
            elif Y is None:
                K[j : j + FY.shape[0], i : i + FX.shape[0]].copy_(blk.T)
        return K.add_(1.0)

    def _feature_levels(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        n_all = X.n + (0 if Y is None else Y.n)
        if not self._features_fit(n_all, X.d):
            return self._feature_levels_blocked(X, Y)
        FX = self._features(X)
        FY = FX if Y is None else self._features(Y)
        K = torch.stack([fx @ fy.T for fx, fy in zip(FX, FY)])
        return mirror_upper_(K) if Y is None else K  # exactly symmetric

    def _feature_levels_blocked(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        sizes = [X.d**k for k in range(1, int(self.level) + 1)]
        m = X.n if Y is None else Y.n
        out = torch.empty((len(sizes), X.n, m), dtype=self._dtype, device=self._device)
        for i, j, FX, FY in self._feature_blocks(X, Y):
            blk = out[:, i : i + FX.shape[0], j : j + FY.shape[0]]
            for k, (fx, fy) in enumerate(zip(torch.split(FX, sizes, 1), torch.split(FY, sizes, 1))):
                blk[k].copy_(fx @ fy.T)
            if Y is None and j == i:
                mirror_upper_(blk)
            elif Y is None:
                out[:, j : j + FY.shape[0], i : i + FX.shape[0]].copy_(blk.transpose(1, 2))
        return out

    # ------------------------------------------------------------------ public
    @validate_params(NORMALIZE)
    def gram_levels(self, X, Y=None, *, normalize: bool = False) -> torch.Tensor:
        r"""Kernels of every level 1..``level`` from one pass, Tensor (level, n_X, n_Y).

        Entry ``[k - 1]`` is the kernel truncated at level k (``levels="cumulative"``) or
        1 + the level-k term alone (``levels="single"``), in either discretisation
        (order 1: :math:`1 + P_1 + \cdots + P_k` or :math:`1 + P_k`); ``normalize=True``
        divides each level by sqrt(K(x, x) K(y, y)) of that level.
        """
        k, Xb, Yb = self._prepare(X, Y)
        with k._threads():
            return k._gram_levels(Xb, Yb, bool(normalize))

    def _gram_levels(self, Xb: SeriesBatch, Yb: SeriesBatch | None, normalize: bool):
        length = max(Xb.length, 0 if Yb is None else Yb.length)
        if self._use_features(Xb.n + (0 if Yb is None else Yb.n), Xb.d, length):
            Kl = self._feature_levels(Xb, Yb)
        else:
            Kl = self._levels_blockwise(Xb, Yb)
        K = self._combine(Kl)
        self._check_result(K, "Gram matrix")
        if normalize:
            if Yb is None:
                dx = dy = torch.diagonal(K, dim1=1, dim2=2).clone()
            else:
                dx = self._combine(self._diag_levels(Xb))
                dy = self._combine(self._diag_levels(Yb))
            self._check_diag_positive(dx, "X")
            self._check_diag_positive(dy, "Y")
            K = normalize_gram_(K, dx, dy, symmetric=Yb is None)
        return K

    def _levels_blockwise(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        symmetric = Y is None
        Y_ = X if symmetric else Y
        b = self._block_rows(X, Y_)
        out = torch.empty((int(self.level), X.n, Y_.n), dtype=self._dtype, device=self._device)
        for i in range(0, X.n, b):
            for j in range(i if symmetric else 0, Y_.n, b):
                blk = self._levels_block(X[i : i + b], Y_[j : j + b], symmetric and i == j)
                out[:, i : i + b, j : j + b] = blk
                del blk
                if symmetric and j == i:
                    mirror_upper_(out[:, i : i + b, i : i + b])
                elif symmetric:
                    out[:, j : j + b, i : i + b].copy_(out[:, i : i + b, j : j + b].transpose(1, 2))
        return out


register(
    KernelSpec(
        "trunc_sig_linear",
        TruncatedSignatureKernel,
        lambda: TruncatedSignatureKernel(Linear(), level=4, scale=0.5),
        description="truncated signature kernel (level 4), linear lift",
    )
)
register(
    KernelSpec(
        "trunc_sig_rbf",
        TruncatedSignatureKernel,
        lambda: TruncatedSignatureKernel(RBF(1.0), level=3, scale=0.5),
        description="truncated signature kernel (level 3), RBF lift",
    )
)
register(
    KernelSpec(
        "trunc_sig_linear_order1",
        TruncatedSignatureKernel,
        lambda: TruncatedSignatureKernel(
            Linear(), level=4, scale=0.5, levels="single", discretization="order1"
        ),
        description="order-1 discretised signature kernel (1 + level 4 alone), linear lift",
    )
)
register(
    KernelSpec(
        "trunc_sig_rbf_order1",
        TruncatedSignatureKernel,
        lambda: TruncatedSignatureKernel(
            RBF(1.0), level=3, scale=0.5, levels="single", discretization="order1"
        ),
        description="order-1 discretised signature kernel (1 + level 3 alone), RBF lift",
    )
)
