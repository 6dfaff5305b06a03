r"""Volterra reservoir kernel (Gonon, Grigoryeva, Ortega): the kernel of an infinite-
dimensional linear reservoir, in closed form, evaluated by a backward (Horner) recursion
in O(T d) per pair from one batched inner-product tensor.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
import torch

from ._base import Kernel
from ._constraints import Interval
from ._registry import KernelSpec, register
from .validation import SeriesBatch

__all__ = ["VolterraReservoirKernel", "vrk_torch"]

#: Time steps whose inner products are formed together (bounds the working memory).
_TIME_CHUNK = 32


def _right_aligned(X: SeriesBatch, T: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The last ``T`` steps of every series, right-aligned (n, T, d), zeros before a series
    starts; and the first valid index per series (None when every series has >= T steps)."""
    v, L = X.values, X.lengths
    if bool((L >= T).all()):
        idx = (L - T)[:, None] + torch.arange(T, device=v.device)[None, :]
        out = torch.gather(v, 1, idx[..., None].expand(-1, -1, v.shape[2]))
        return out, None
    start = (T - L).clamp_min(0)  # first aligned position holding data
    pos = torch.arange(T, device=v.device)[None, :]
    src = (pos - start[:, None] + (L - T).clamp_min(0)[:, None]).clamp_min(0)
    out = torch.gather(v, 1, src[..., None].expand(-1, -1, v.shape[2]))
    out = out * (pos >= start[:, None])[..., None].to(v.dtype)
    return out, start


def point_norms(values: torch.Tensor) -> torch.Tensor:
    """|x_t| over the last axis without overflow or underflow of the squares: each point is
    divided by a power of two near its largest coordinate first (exact), (..., d) -> (...)."""
    m = values.abs().amax(-1, keepdim=True)
    _, e = torch.frexp(m)
    scale = torch.ldexp(torch.ones_like(m), -e)  # 2^-e, m * 2^-e in [0.5, 1)
    scale = torch.where(m > 0, scale, torch.ones_like(m))
    return torch.linalg.vector_norm(values * scale, dim=-1) / scale[..., 0]


def vrk_torch(xa, sx, ya, sy, tau2: float, lam2: float) -> torch.Tensor:
    """Gram (n, m) of right-aligned batches xa (n, T, d), ya (m, T, d) with first valid steps
    sx, sy (None: all valid), by the recursion over time chunks of batched inner products
    (the torch/GPU path)."""
    n, T, _ = xa.shape
    m = ya.shape[0]
    start = None
    if sx is not None or sy is not None:
        zx = torch.zeros(n, dtype=torch.long, device=xa.device) if sx is None else sx
        zy = torch.zeros(m, dtype=torch.long, device=xa.device) if sy is None else sy
        start = torch.maximum(zx[:, None], zy[None, :])  # first step both series hold
    xt = xa.transpose(0, 1)  # (T, n, d)
    yt = ya.permute(1, 2, 0)  # (T, d, m)
    S = torch.ones((n, m), dtype=xa.dtype, device=xa.device)
    one = torch.ones((), dtype=xa.dtype, device=xa.device)
    for s0 in range(0, T, _TIME_CHUNK):
        den = torch.bmm(xt[s0 : s0 + _TIME_CHUNK], yt[s0 : s0 + _TIME_CHUNK])
        den.mul_(-tau2).add_(1.0)  # 1 - tau^2 <x_s, y_s>
        for c in range(den.shape[0]):
            if start is None:
                torch.addcdiv(one, S, den[c], value=lam2, out=S)
            else:
                S = torch.where(start <= s0 + c, torch.addcdiv(one, S, den[c], value=lam2), S)
    return S


class VolterraReservoirKernel(Kernel):
    r"""Volterra reservoir kernel, series aligned at their last step:

    .. math::
        K(x, y) = 1 + \sum_{k=1}^{T} \lambda^{2k} \prod_{t=0}^{k-1}
                  \frac{1}{1 - \tau^2 \langle x_{T_x - t}, y_{T_y - t}\rangle},
        \qquad T = \min(T_x, T_y),

    computed by :math:`S_0 = 1,\ S_s = 1 + \lambda^2 S_{s-1} / (1 - \tau^2\langle x, y
    \rangle_s)` over the aligned steps, oldest first (:math:`K = S_T`). Defined (and positive
    definite) only when :math:`\tau^2 |x_t| |y_t| < 1` at every aligned step: otherwise a
    ``ValueError`` states the largest admissible ``tau`` for the data, unless
    ``clip_inputs=True``, which first shrinks every time point to norm at most
    :math:`1/\tau - 0.1` (the reference study clamped coordinates to
    :math:`\pm(1/\tau - 0.1)`; for d = 1 this is the same rule, for d > 1 a coordinate clamp
    does not ensure admissibility, the norm clip does). Kernel values are never clipped.
    ``tau`` and ``lam`` are used as given (scale ``tau`` by :math:`1/\sqrt{d}` yourself).

    >>> import numpy as np
    >>> x = np.array([[[0.5], [1.0]]])  # one series, T = 2, d = 1
    >>> # 1 + lam^2 g_2 + lam^4 g_2 g_1 with g_t = 1 / (1 - tau^2 x_t^2)
    >>> round(float(VolterraReservoirKernel(tau=0.5, lam=0.5).gram(x)[0, 0]), 6)
    1.422222
    """

    _tags = {"unequal_length": True, "backends": ("numba", "torch")}
    _parameter_constraints = {
        "tau": [Interval(Real, 0, None, closed="neither")],
        "lam": [Interval(Real, 0, None, closed="neither")],
        "clip_inputs": ["boolean"],
    }
    _divergence_hint = (
        "lam^2 / (1 - tau^2 <x_t, y_t>) compounds over the T steps: lower `lam` or `tau`."
    )

    def __init__(
        self,
        tau: float = 0.5,
        lam: float = 0.5,
        *,
        clip_inputs: bool = False,
        **execution,
    ):
        super().__init__(**execution)
        self.tau = tau
        self.lam = lam
        self.clip_inputs = clip_inputs
        self._check_parameters()

    def _check_parameters(self) -> None:
        super()._check_parameters()
        if self.clip_inputs and 1.0 / float(self.tau) - 0.1 <= 0:
            raise ValueError(
                f"`clip_inputs=True` clips time points to norm 1/tau - 0.1, which is not "
                f"positive for tau={self.tau!r}; use tau < 10"
            )

    def _options(self) -> tuple[float, float]:
        """(tau, lam) as floats (checked at the public call)."""
        return float(self.tau), float(self.lam)

    # ------------------------------------------------------------------ inputs
    def _clipped(self, X: SeriesBatch) -> SeriesBatch:
        if not self.clip_inputs:
            return X
        radius = 1.0 / float(self.tau) - 0.1
        norms = point_norms(X.values)[..., None]  # finite for any finite data
        scale = torch.clamp(radius / norms.clamp_min(torch.finfo(norms.dtype).tiny), max=1.0)
        return SeriesBatch(X.values * scale, X.lengths)

    def _check_admissible(self, X: SeriesBatch, Y: SeriesBatch) -> None:
        tau, _ = self._options()
        T = min(X.length, Y.length)
        nx = point_norms(_right_aligned(X, T)[0]).amax(0)  # (T,)
        ny = point_norms(_right_aligned(Y, T)[0]).amax(0)
        # sqrt(|x_t| |y_t|) as a product of square roots: finite for any finite data
        root = float((torch.sqrt(nx) * torch.sqrt(ny)).max())
        if tau * root >= 1.0:
            raise ValueError(
                f"{self._describe()} needs tau^2 |x_t| |y_t| < 1 at every aligned time step, "
                f"but the data reach |x_t| |y_t| = {root:.6g}^2, so `tau` must be below "
                f"{1.0 / root:.6g} (got tau={tau!r}); lower `tau`, rescale the series, "
                "or pass clip_inputs=True (shrinks each time point to norm 1/tau - 0.1)"
            )

    # ------------------------------------------------------------------ Kernel interface
    def _assemble(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        X = self._clipped(X)
        Y = None if Y is None else self._clipped(Y)
        self._check_admissible(X, X if Y is None else Y)
        return super()._assemble(X, Y)

    def _pair_bytes(self, X: SeriesBatch, Y: SeriesBatch) -> int:
        return (min(_TIME_CHUNK, X.length, Y.length) + 3) * self._itemsize

    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        tau, lam = self._options()
        T = min(X.length, Y.length)
        xa, sx = _right_aligned(X, T)
        ya, sy = _right_aligned(Y, T)
        return self._dispatch("block")(xa, sx, ya, sy, symmetric, tau * tau, lam * lam)

    def _block_torch(self, xa, sx, ya, sy, symmetric, tau2, lam2) -> torch.Tensor:
        return vrk_torch(xa, sx, ya, sy, tau2, lam2)

    def _block_numba(self, xa, sx, ya, sy, symmetric, tau2, lam2) -> torch.Tensor:
        from . import _reservoir_numba

        def start(s, n):
            return np.zeros(n, dtype=np.int64) if s is None else s.cpu().numpy().astype(np.int64)

        XA = np.ascontiguousarray(xa.cpu().numpy(), dtype=np.float64)
        sx_ = start(sx, XA.shape[0])
        if symmetric:
            XAT = np.ascontiguousarray(XA.transpose(1, 2, 0))
            out = _reservoir_numba.vrk_sym(XA, XAT, sx_, tau2, lam2)
        else:
            YA = np.ascontiguousarray(ya.cpu().numpy(), dtype=np.float64)
            YAT = np.ascontiguousarray(YA.transpose(1, 2, 0))
            out = _reservoir_numba.vrk_xy(XA, sx_, YAT, start(sy, YA.shape[0]), tau2, lam2)
        return torch.from_numpy(out).to(dtype=self._dtype)

    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        X = self._clipped(X)
        self._check_admissible(X, X)
        tau, lam = self._options()
        xa, sx = _right_aligned(X, X.length)
        sq = (xa * xa).sum(-1)  # (n, T)
        S = torch.ones(X.n, dtype=xa.dtype, device=xa.device)
        for s in range(X.length):
            new = 1.0 + lam * lam * S / (1.0 - tau * tau * sq[:, s])
            S = new if sx is None else torch.where(sx <= s, new, S)
        return S


register(
    KernelSpec(
        "reservoir",
        VolterraReservoirKernel,
        lambda: VolterraReservoirKernel(tau=0.1, lam=0.7, clip_inputs=True),
        description="Volterra reservoir kernel (aligned at the last step)",
    )
)
