r"""Global alignment kernel (Cuturi et al. 2007; Cuturi 2011), with an optional band.

CPU: a compiled, pair-parallel recursion (``_gak_numba``); CUDA: a log-space wavefront over
anti-diagonals for a block of pairs (``_gak_torch``).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch

from ._base import Kernel
from ._constraints import Interval
from ._gak_torch import log_gak_wavefront
from ._registry import KernelSpec, register
from .validation import SeriesBatch

__all__ = ["GlobalAlignmentKernel", "GAK", "gak_median_sigma"]

#: Number of time points sampled for the median heuristic.
_N_SIGMA_SAMPLES = 500


def gak_median_sigma(X: SeriesBatch, random_state: int | None = 0) -> float:
    """Median heuristic: median Euclidean distance between up to 500 time points sampled
    (without replacement, seeded) from all time points of the batch, times sqrt(T) with T the
    median series length."""
    from scipy.spatial.distance import pdist  # scipy.spatial: imported on first use

    lengths = X.lengths.cpu().numpy()
    values = X.values.detach().cpu().double().numpy()
    points = np.concatenate([values[i, :L] for i, L in enumerate(lengths)])
    rng = np.random.default_rng(random_state)
    k = min(_N_SIGMA_SAMPLES, len(points))
    sample = points[rng.choice(len(points), size=k, replace=False)]
    top = float(np.abs(sample).max()) if k else 0.0
    # points beyond 2^(+-400): distances of the points scaled by a power of two (exact), so
    # the squares inside pdist neither overflow nor lose their digits as subnormals
    c = 1.0 if top == 0.0 or 2.0**-400 < top < 2.0**400 else 2.0 ** -math.frexp(top)[1]
    med = float(np.median(pdist(sample * c))) / c if k > 1 else 0.0
    if not med > 0:
        raise ValueError(
            "cannot set `sigma` by the median heuristic: the sampled time points are all "
            "identical (median distance 0); pass `sigma` explicitly"
        )
    return med * math.sqrt(float(np.median(lengths)))


#: sigma outside [2^-100, 2^100] is brought into [1/2, 1) with the data, by a power of two.
_SIGMA_RANGE = (2.0**-100, 2.0**100)
#: Largest |x| / sigma accepted (squared distances over 2 sigma^2 stay finite).
_MAX_DATA_OVER_SIGMA = 2.0**400


def _numpy_batch(X: SeriesBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """values (n, T, d), their transpose (n, d, T), lengths, largest point norm per series."""
    V = np.ascontiguousarray(X.values.detach().cpu().numpy(), dtype=np.float64)
    VT = np.ascontiguousarray(V.transpose(0, 2, 1))
    R = np.sqrt((V * V).sum(-1).max(-1))  # forward-fill padding repeats real points
    return V, VT, X.lengths.cpu().numpy().astype(np.int64), R


class GlobalAlignmentKernel(Kernel):
    r"""Global alignment kernel: the sum over all monotone alignments of products of a local
    kernel,

    .. math::
        k(x, y) = \sum_{\pi} \prod_{(i, j) \in \pi} \kappa_{ij},\qquad
        \kappa_{ij} = \frac{e_{ij}}{2 - e_{ij}},\quad
        e_{ij} = \omega_{|i-j|} \exp\!\Big(-\frac{\|x_i - y_j\|^2}{2\sigma^2}\Big),

    computed by :math:`M_{ij} = \kappa_{ij}(M_{i-1,j-1} + M_{i-1,j} + M_{i,j-1})`,
    :math:`M_{00} = 1`, :math:`k = M_{T_x T_y}`. Same ``sigma`` convention as tslearn's
    ``cdist_gak``.

    Parameters
    ----------
    sigma : float or None
        Bandwidth. ``None``: ``sigma_factor`` times the median heuristic (median distance
        between 500 seeded sampled time points, times sqrt(median length)). ``fit(X)`` computes
        it on ``X`` and keeps it in ``sigma_median_``; a fitted kernel uses it for every call.
        An unfitted kernel computes it on the ``X`` of each ``gram``/``diag``/``log_gram``
        call, for that call only: ``gram`` never writes an attribute. ``sigma_`` (fitted, or
        ``sigma`` given) is the bandwidth in use.
    triangular : int or None
        Band: only alignments with :math:`|i - j| < t` count (``None``: no band). Pairs with
        :math:`|T_x - T_y| \ge t` get kernel 0.
    sigma_factor : float
        Multiplies the median heuristic (only with ``sigma=None``).
    normalized : bool, default True
        True: the kernel is the normalised GAK
        :math:`k(x,y)/\sqrt{k(x,x)k(y,y)}`, evaluated from log values
        (:math:`\exp(\log k(x,y) - \tfrac12\log k(x,x) - \tfrac12\log k(y,y))`), so it is
        finite at any length and ``diag`` is 1. False: the raw kernel, which overflows float64
        beyond roughly T = 400 (values grow like :math:`(3+2\sqrt2)^T`); ``log_gram`` gives its
        logarithm at any length.
    triangular_weights : bool, default False
        With ``triangular=t``: False is a hard band (:math:`\omega = 1` inside the band);
        True uses Cuturi's triangular weights :math:`\omega_k = 1 - k/t`, which keep the
        kernel positive definite (a hard band need not be).
    random_state : int or None, default 0
        Seed of the median-heuristic sample.
    backend : "auto" (numba on the CPU, the torch wavefront on CUDA), "numba" or "torch"
        (the torch wavefront on any device).
    n_jobs : None, -1 or int > 0
        Threads (numba's on the CPU path; None: the current setting, -1: all).

    >>> import numpy as np
    >>> X = np.array([[1.0, 2, 2, 3], [1, 2, 3, 4]])[..., None]
    >>> round(float(GlobalAlignmentKernel(sigma=2.0).gram(X)[0, 1]), 6)
    0.656297
    """

    _tags = {
        "unequal_length": True,
        "backends": ("numba", "torch"),
        "fit_is_empty": False,
        "log_space": True,
    }
    _parameter_constraints = {
        "sigma": [None, Interval(Real, 0, None, closed="neither")],
        "triangular": [None, Interval(Integral, 1, None, closed="left")],
        "sigma_factor": [Interval(Real, 0, None, closed="neither")],
        "normalized": ["boolean"],
        "triangular_weights": ["boolean"],
        "random_state": [None, Interval(Integral, 0, None, closed="left")],
    }
    _divergence_hint = (
        "Raw GAK values overflow float64 for long series (they grow like (3+2*sqrt(2))^T) "
        "and underflow for series far apart on the scale of sigma: use normalized=True (the "
        "default) or log_gram()."
    )

    def __init__(
        self,
        sigma: float | None = None,
        triangular: int | None = None,
        *,
        sigma_factor: float = 1.0,
        normalized: bool = True,
        triangular_weights: bool = False,
        random_state: int | None = 0,
        **execution,
    ):
        super().__init__(**execution)
        self.sigma = sigma
        self.triangular = triangular
        self.sigma_factor = sigma_factor
        self.normalized = normalized
        self.triangular_weights = triangular_weights
        self.random_state = random_state
        self._check_parameters()

    # ------------------------------------------------------------------ options
    def _check_parameters(self) -> None:
        super()._check_parameters()
        if self.sigma is not None and self.sigma_factor != 1.0:
            raise ValueError(
                f"`sigma_factor` ({self.sigma_factor!r}) scales the median heuristic and "
                f"applies only with sigma=None, but `sigma` = {self.sigma!r} was given"
            )
        if self.triangular_weights and self.triangular is None:
            raise ValueError("`triangular_weights=True` needs a band: set `triangular` too")

    def _fit(self, X: SeriesBatch) -> None:
        """The median heuristic on ``X`` (when ``sigma=None``), kept in ``sigma_median_``."""
        if self.sigma is None:
            self.sigma_median_ = gak_median_sigma(X, self.random_state)

    def _is_fitted(self) -> bool:
        return self.sigma is not None or "sigma_median_" in self.__dict__

    def _bound(self, X: SeriesBatch) -> GlobalAlignmentKernel:
        if self._is_fitted():
            return self
        # unfitted, data-dependent sigma: the median heuristic of this call's X, on a copy
        return self._copy_with(sigma_median_=gak_median_sigma(X, self.random_state))

    @property
    def sigma_(self) -> float:
        """The bandwidth in use: ``sigma``, or ``sigma_factor`` times the fitted median
        heuristic (AttributeError before ``fit`` when ``sigma=None``)."""
        if self.sigma is not None:
            return float(self.sigma)
        if "sigma_median_" not in self.__dict__:
            raise AttributeError(
                "sigma_: GlobalAlignmentKernel(sigma=None) has no bandwidth before fit(X)"
            )
        return float(self.sigma_factor) * self.sigma_median_

    @property
    def _normalized_kernel(self) -> bool:
        return bool(self.normalized)

    def _weights(self, T: int) -> tuple[np.ndarray, int]:
        w = np.ones(max(T, 1))
        t = self.triangular
        if t is None:
            return w, 0
        if self.triangular_weights:
            k = np.arange(len(w))
            w = np.where(k < t, 1.0 - k / t, 1.0)  # offsets >= t are outside the band
        return w, int(t)

    # ------------------------------------------------------------------ log values
    def log_gram(self, X, Y=None) -> torch.Tensor:
        """log of the raw kernel, Tensor (n_X, n_Y), finite at any length (-inf where the
        band excludes every alignment)."""
        k, Xb, Yb = self._prepare(X, Y)
        with k._threads():
            L = k._assemble_blocks(Xb, Yb, k._log_gram_block, torch.float64)
        return L.to(self._dtype)

    def _on_sigma_scale(self, sigma: float, *batches: SeriesBatch):
        """(batches, sigma) rescaled together by a power of two when sigma is extreme (the
        kernel depends on |x - y| / sigma only, so the values are the same); raises when the
        data are too large for sigma (squared distances would overflow)."""
        lo, hi = _SIGMA_RANGE
        c = 1.0 if lo <= sigma <= hi else 2.0 ** -math.frexp(sigma)[1]
        top = max(float(b.values.abs().max()) for b in batches)
        if top * c > _MAX_DATA_OVER_SIGMA * (sigma * c):
            raise ValueError(
                f"{self._describe()}: the data reach |x| = {top:.3g}, beyond 2^400 times "
                f"sigma = {sigma:.3g}, so squared distances overflow; rescale the data (e.g. "
                "z-score them) or use a larger `sigma`"
            )
        if c == 1.0:
            return batches, sigma
        return tuple(SeriesBatch(b.values * c, b.lengths) for b in batches), sigma * c

    def _log_gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        (X, Y), sigma = self._on_sigma_scale(self.sigma_, X, Y)
        w, band = self._weights(max(X.length, Y.length))
        return self._dispatch("log_block")(X, Y, symmetric, 1.0 / (2.0 * sigma * sigma), w, band)

    def _log_diag(self, X: SeriesBatch) -> torch.Tensor:
        (X,), sigma = self._on_sigma_scale(self.sigma_, X)
        w, band = self._weights(X.length)
        return self._dispatch("log_diag")(X, 1.0 / (2.0 * sigma * sigma), w, band)

    # ------------------------------------------------------------------ entry points
    def _log_block_numba(self, X, Y, symmetric, inv2s2, w, band) -> torch.Tensor:
        from . import _gak_numba

        VX, VXT, LX, RX = _numpy_batch(X)
        weighted = bool(self.triangular_weights)
        if band == 0 and not weighted:  # pairs in SIMD lanes
            if symmetric:
                ii, jj = np.triu_indices(X.n)
                VY, VYT, LY, RY = VX, VXT, LX, RX
            else:
                VY, VYT, LY, RY = _numpy_batch(Y)
                ii, jj = np.divmod(np.arange(X.n * Y.n), Y.n)
            vals = np.empty(len(ii))
            _gak_numba.log_gak_pairs(VX, VXT, LX, RX, VY, VYT, LY, RY, ii, jj, inv2s2, w, vals)
            out = np.empty((X.n, Y.n))
            out[ii, jj] = vals
            if symmetric:
                out[jj, ii] = vals
        elif symmetric:
            out = _gak_numba.log_gak_sym(VX, VXT, LX, RX, inv2s2, w, weighted, band)
        else:
            _, VYT, LY, RY = _numpy_batch(Y)
            out = _gak_numba.log_gak_xy(VX, LX, RX, VYT, LY, RY, inv2s2, w, weighted, band)
        return torch.from_numpy(out)  # float64: cast after normalising

    def _log_diag_numba(self, X, inv2s2, w, band) -> torch.Tensor:
        from . import _gak_numba

        V, VT, L, R = _numpy_batch(X)
        weighted = bool(self.triangular_weights)
        if band == 0 and not weighted:  # pairs in SIMD lanes
            idx = np.arange(X.n)
            out = np.empty(X.n)
            _gak_numba.log_gak_pairs(V, VT, L, R, V, VT, L, R, idx, idx, inv2s2, w, out)
        else:
            out = _gak_numba.log_gak_diag(V, VT, L, R, inv2s2, w, weighted, band)
        return torch.from_numpy(out)

    def _log_block_torch(self, X, Y, symmetric, inv2s2, w, band) -> torch.Tensor:
        log_w = torch.from_numpy(np.log(w)).to(device=X.values.device, dtype=X.values.dtype)
        rows = max(1, self._budget // max(1, self._wavefront_pair_bytes(X, Y) * Y.n))
        parts = [
            log_gak_wavefront(
                X.values[i : i + rows],
                X.lengths[i : i + rows],
                Y.values,
                Y.lengths,
                inv2s2,
                log_w,
                band,
            )
            for i in range(0, X.n, rows)
        ]
        return torch.cat(parts) if len(parts) > 1 else parts[0]

    def _log_diag_torch(self, X, inv2s2, w, band) -> torch.Tensor:
        log_w = torch.from_numpy(np.log(w)).to(device=X.values.device, dtype=X.values.dtype)
        rows = max(1, self._budget // max(1, self._wavefront_pair_bytes(X, X)))
        parts = [
            log_gak_wavefront(V, L, V, L, inv2s2, log_w, band, paired=True)
            for V, L in (
                (X.values[i : i + rows], X.lengths[i : i + rows]) for i in range(0, X.n, rows)
            )
        ]
        return torch.cat(parts)

    # ------------------------------------------------------------------ Kernel interface
    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        """The kernel of a block (``gram`` of a normalised GAK never comes here: it goes
        through the base class's log-space normalisation, the only one)."""
        if self.normalized:
            return self._gram_from_logs(X, None if symmetric else Y)
        return torch.exp(self._log_gram_block(X, Y, symmetric)).to(self._dtype)

    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        if self.normalized:
            return torch.ones(X.n, dtype=self._dtype, device=self._device)
        return torch.exp(self._log_diag(X)).to(self._dtype)

    def _wavefront_pair_bytes(self, X: SeriesBatch, Y: SeriesBatch) -> int:
        T = max(X.length, Y.length) + 1
        return (X.d + 12) * T * self._itemsize

    def _pair_bytes(self, X: SeriesBatch, Y: SeriesBatch) -> int:
        if self._backend == "numba":
            return 2 * self._itemsize  # numba: per-thread row buffers; only the output per pair
        return self._wavefront_pair_bytes(X, Y)


#: Short alias.
GAK = GlobalAlignmentKernel

register(
    KernelSpec(
        "gak",
        GlobalAlignmentKernel,
        lambda: GlobalAlignmentKernel(),
        description="global alignment kernel (normalised, median-heuristic sigma)",
    )
)
