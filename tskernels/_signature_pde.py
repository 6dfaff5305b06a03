r"""The signature kernel of static-kernel-lifted paths, from its Goursat PDE (Salvi et al.)."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import torch

from ._base import Kernel, NonFiniteKernelError
from ._constraints import Constraint, Interval
from ._registry import KernelSpec, register
from ._signature_pde_torch import double_difference, pde_wavefront
from ._static import (
    CENTRE_ABOVE_RATIO,
    EXPANSION_MAX_RATIO,
    RBF,
    Linear,
    StaticKernel,
)
from .validation import SeriesBatch

__all__ = ["SignaturePDEKernel", "lifted_increments", "lifted_increments_pairs"]

_HINT = (
    "The signature PDE solution diverged (path increments too large for the grid): reduce "
    "`scale` or raise `dyadic_order`."
)


def lifted_increments(static: StaticKernel, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""Increment inner products of the lifted paths for every pair of a block.

    ``x`` (n, T1, d), ``y`` (m, T2, d) -> Tensor (n, m, T1 - 1, T2 - 1) with entries
    :math:`k(x_{a+1}, y_{b+1}) - k(x_a, y_{b+1}) - k(x_{a+1}, y_b) + k(x_a, y_b)`
    (for the linear kernel, :math:`s \langle x_{a+1} - x_a, y_{b+1} - y_b \rangle`).
    """
    n, T1, d = x.shape
    m, T2, _ = y.shape
    if type(static) is Linear:
        dx, dy = torch.diff(x, dim=1), torch.diff(y, dim=1)
        G = static.cross(dx.reshape(-1, d), dy.reshape(-1, d))
        return G.reshape(n, T1 - 1, m, T2 - 1).permute(0, 2, 1, 3).contiguous()
    E = static.cross(x.reshape(-1, d), y.reshape(-1, d)).reshape(n, T1, m, T2)
    return double_difference(E.permute(0, 2, 1, 3)).contiguous()


def lifted_increments_pairs(static: StaticKernel, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """As :func:`lifted_increments` for aligned pairs: (P, T1, d), (P, T2, d) -> (P, T1-1, T2-1)."""
    if type(static) is Linear:
        return static.cross(torch.diff(x, dim=1), torch.diff(y, dim=1))
    return double_difference(static.cross(x, y))


_ORDER = Interval(Integral, 0, None, closed="left")


class _DyadicOrderPair(Constraint):
    """A pair (tuple or list) of dyadic orders, one per path."""

    def is_satisfied_by(self, value) -> bool:
        return (
            isinstance(value, (tuple, list))
            and len(value) == 2
            and all(_ORDER.is_satisfied_by(v) for v in value)
        )

    def __str__(self) -> str:
        return f"a pair (tuple or list) of {_ORDER}"


def _parse_dyadic_order(dyadic_order) -> tuple[int, int]:
    """The checked ``dyadic_order`` as one order per path."""
    if isinstance(dyadic_order, (tuple, list)):
        return int(dyadic_order[0]), int(dyadic_order[1])
    return int(dyadic_order), int(dyadic_order)


class SignaturePDEKernel(Kernel):
    r"""Signature kernel of the static-kernel-lifted, piecewise-linear paths, solved from the
    Goursat PDE with the second-order explicit scheme on a dyadically refined grid.

    .. math::
        K(x, y) = u(1, 1),\quad
        \frac{\partial^2 u}{\partial s\,\partial t} =
        \langle \dot{\phi(x)}_s, \dot{\phi(y)}_t \rangle_{\mathcal H}\, u,\quad
        u(0, \cdot) = u(\cdot, 0) = 1,

    where :math:`\phi` lifts each point of the path ``scale * x`` by the static kernel
    :math:`a\,k` (k = ``static``, default ``RBF(1.0)``, :math:`k(u, v) = \exp(-|u-v|^2 /
    (2\sigma^2))`; a = ``amplitude``); the increment inner products are the
    double-differenced static Gram times a. On the grid refined by
    :math:`2^{\lambda_1}` (X's time axis) and :math:`2^{\lambda_2}` (Y's),
    :math:`K_{i+1,j+1} = (K_{i+1,j} + K_{i,j+1})(1 + g/2 + g^2/12) - K_{i,j}(1 - g^2/12)` with
    :math:`g` the increment inner product over :math:`2^{\lambda_1 + \lambda_2}`.

    Parameters
    ----------
    static : StaticKernel, default RBF(1.0)
    scale : float, multiplies the paths before the static kernel.
    amplitude : float, default 1.0, multiplies the static kernel (the increment inner
        products scale by it; the reference study's RBF lift is ``RBF(sigma * sqrt(d))`` with
        an amplitude s; for the linear lift, amplitude a equals ``Linear(scale * a)``).
        The RBF bandwidth is a grid axis as ``set_params(static__sigma=...)``.
    dyadic_order : int or (int, int), refinement of the two time axes (pysiglib's
        ``dyadic_order``). With a pair, a symmetric Gram holds the upper triangle's values.
    backend : "auto" (compiled numba solver on CPU, torch wavefront on CUDA), "numba", "torch".
    n_jobs : None, -1 or int > 0: threads (None: the current setting, -1: all cores);
        restored afterwards.

    Unequal lengths are handled by the forward-fill padding (constant pieces add nothing).
    A non-finite or non-positive K(x, x) raises :class:`NonFiniteKernelError`.

    >>> import numpy as np
    >>> from tskernels import SignaturePDEKernel, Linear
    >>> x = np.array([[[0.0, 0.0], [1.0, 0.0]]])
    >>> y = np.array([[[0.0, 0.0], [0.0, 1.0]]])
    >>> float(SignaturePDEKernel(Linear(), dyadic_order=0).gram(x, y)[0, 0])
    1.0
    """

    _tags = {"unequal_length": True, "backends": ("numba", "torch")}
    _parameter_constraints = {
        "static": [None, StaticKernel],
        "scale": [Interval(Real, 0, None, closed="neither")],
        "amplitude": [Interval(Real, 0, None, closed="neither")],
        "dyadic_order": [_ORDER, _DyadicOrderPair()],
    }
    _divergence_hint = _HINT
    _checks_cross_diag = True  # K(x, x) of both inputs is checked (finite, positive)

    def __init__(
        self,
        static: StaticKernel | None = None,
        scale: float = 1.0,
        dyadic_order: int | tuple[int, int] = 2,
        *,
        amplitude: float = 1.0,
        **execution,
    ):
        super().__init__(**execution)
        self.static = static
        self.scale = scale
        self.dyadic_order = dyadic_order
        self.amplitude = amplitude

    # ------------------------------------------------------------------ helpers
    @property
    def _static(self) -> StaticKernel:
        return RBF(1.0) if self.static is None else self.static

    def _pair_bytes(self, X, Y):
        L = X.length * Y.length * 8
        if self._backend == "torch":
            return 6 * L
        if type(self._static) in (Linear, RBF):
            return 64  # the compiled solver keeps two grid rows per chunk of pairs only
        return 3 * L

    # ------------------------------------------------------------------ solvers
    def _solve_pairs(self, X: SeriesBatch, Y: SeriesBatch, ii, jj) -> torch.Tensor:
        """K(X[ii[q]], Y[jj[q]]) for index arrays ii, jj (numpy int64), Tensor (len(ii),)."""
        lam1, lam2 = _parse_dyadic_order(self.dyadic_order)
        static = self._static
        amp = float(self.amplitude)
        x = X.values * float(self.scale)
        y = Y.values * float(self.scale)
        if len(ii) == 0:
            return torch.empty(0, dtype=self._dtype, device=self._device)
        return self._dispatch("solve")(static, x, y, ii, jj, lam1, lam2, amp)

    def _solve_torch(self, static, x, y, ii, jj, lam1, lam2, amp) -> torch.Tensor:
        """The wavefront over anti-diagonals, on the kernel's device and dtype."""
        iit = torch.as_tensor(ii, device=x.device)
        jjt = torch.as_tensor(jj, device=x.device)
        G = lifted_increments_pairs(static, x[iit], y[jjt])
        if amp != 1.0:
            G = G.mul_(amp)
        return pde_wavefront(G, lam1, lam2).to(self._dtype)

    def _solve_numba(self, static, x, y, ii, jj, lam1, lam2, amp) -> torch.Tensor:
        """The compiled solvers, on float64 CPU arrays (cast to the kernel's dtype after)."""
        x64 = x.detach().to("cpu", torch.float64)
        y64 = y.detach().to("cpu", torch.float64)
        out = np.empty(len(ii), dtype=np.float64)
        ii = np.ascontiguousarray(ii, dtype=np.int64)
        jj = np.ascontiguousarray(jj, dtype=np.int64)
        import numba

        from . import _signature_pde_numba as nb

        # threads: set by the caller (Kernel._threads, from n_jobs)
        if type(static) is Linear:
            dx = torch.diff(x64, dim=1).numpy() * (float(static.scale) * amp)
            dx = np.ascontiguousarray(dx)
            dy = np.ascontiguousarray(torch.diff(y64, dim=1).numpy())
            nb.pde_linear_pairs(dx, dy, ii, jj, lam1, lam2, out, numba.get_num_threads())
        elif type(static) is RBF:
            gamma = 0.5 / float(static.sigma) ** 2
            # data far from the origin on sigma's scale are centred on a common shift
            # (the compiled lift expands |x|^2 + |y|^2 - 2<x, y>): the distances keep
            # their digits at any offset, as in tskernels._static.sqdist; beyond its expansion
            # range (or where |x|^2 overflows) the distances come from the differences
            d = x64.shape[-1]
            pts = torch.cat([x64.reshape(-1, d), y64.reshape(-1, d)])
            r2 = float((pts * pts).sum(1).max()) * gamma
            if r2 > 0.5 * CENTRE_ABOVE_RATIO:
                shift = pts.mean(0)
                if not bool(torch.isfinite(shift).all()):  # the sum overflowed
                    shift = (pts / pts.shape[0]).sum(0)
                x64, y64 = x64 - shift, y64 - shift
                pts = pts - shift
                r2 = float((pts * pts).sum(1).max()) * gamma
            nb.pde_rbf_pairs(
                np.ascontiguousarray(x64.numpy()),
                np.ascontiguousarray(y64.numpy()),
                ii,
                jj,
                lam1,
                lam2,
                gamma,
                out,
                numba.get_num_threads(),
                amp,
                r2 > 0.5 * EXPANSION_MAX_RATIO,
            )
        else:
            G = np.ascontiguousarray(lifted_increments(static, x64, y64).numpy() * amp)
            nb.pde_increments_pairs(G, ii, jj, lam1, lam2, out, numba.get_num_threads())
        return torch.from_numpy(out).to(device=self._device, dtype=self._dtype)

    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        if symmetric:
            ii, jj = np.triu_indices(X.n)
        else:
            ii, jj = np.divmod(np.arange(X.n * Y.n), Y.n)
        vals = self._solve_pairs(X, Y, ii, jj)
        K = torch.zeros((X.n, Y.n), dtype=self._dtype, device=self._device)
        K[torch.as_tensor(ii, device=K.device), torch.as_tensor(jj, device=K.device)] = vals
        if symmetric:
            self._check_self_values(torch.diagonal(K))
        return K

    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        idx = np.arange(X.n)
        out = self._solve_pairs(X, X, idx, idx)
        self._check_self_values(out)
        return out

    def _validate_diag(self, diag: torch.Tensor) -> None:
        self._check_self_values(diag)

    def _check_self_values(self, v: torch.Tensor) -> None:
        bad = ~torch.isfinite(v) | (v <= 0)
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0])
            raise NonFiniteKernelError(
                f"{self._describe()} gives K(x, x) = {float(v[i]):.3g} for a series (must be "
                f"finite and positive). {_HINT}"
            )


register(
    KernelSpec(
        "pde_sig_rbf",
        SignaturePDEKernel,
        lambda: SignaturePDEKernel(RBF(1.0), scale=0.25, dyadic_order=2),
        description="signature PDE kernel (Goursat, dyadic order 2), RBF lift",
    )
)
register(
    KernelSpec(
        "pde_sig_linear",
        SignaturePDEKernel,
        lambda: SignaturePDEKernel(Linear(), scale=0.1, dyadic_order=2),
        description="signature PDE kernel (Goursat, dyadic order 2), linear lift",
    )
)
