r"""The SDO kernel by random Fourier features (Kozdoba, Perets, Mannor, ICML 2024).

.. math::

    k_a(x, y) = \int_{\mathbb R^d} \frac{\cos(2\pi \langle y - x, z\rangle)}
                {1 + a (2\pi)^{2m} |z|^{2m}}\,dz, \qquad m > d/2 \ (\text{default } \lfloor d/2
                \rfloor + 1).

Write :math:`z = r\theta` (:math:`\theta` uniform on the sphere). The radius has density
:math:`\propto r^{d-1} / (1 + a (2\pi r)^{2m})`; with :math:`u = a (2\pi r)^{2m}` this is the
beta-prime law :math:`u^{p-1}/(1+u)` with :math:`p = d/(2m)` (shapes :math:`p, 1-p`), i.e.
:math:`u = G_1/G_2` for independent :math:`G_1 \sim \Gamma(p)`, :math:`G_2 \sim \Gamma(1-p)`.
It is sampled exactly in log space, :math:`\log G = \log G' + \log(U)/s` with
:math:`G' \sim \Gamma(s+1)` (no underflow of small-shape gammas), and
:math:`r = \exp((\log u - \log a)/(2m)) / (2\pi)`: exact for every a, no grid of radii. One base
draw (directions, log u, phases) serves every a, so features are drawn once at fit.

Features :math:`\phi_j(x) = \sqrt{2/D}\cos(2\pi\langle z_j, x\rangle + b_j)` with phases
:math:`b_j \sim U[0, 2\pi)` give :math:`k_a(x, y) \approx C_a\,\phi(x)^\top\phi(y)`, where
:math:`C_a = k_a(x, x) = |S^{d-1}|(2\pi)^{-d} a^{-p}\,\pi / (2m \sin(\pi p))` is kept as
``log_scale_`` (log space: it under/overflows for large d). :math:`\int k_a(0, x)\,dx = 1`.

**Tails.** The exact kernel decays: with :math:`t = |x - y|/\ell` and the partial fractions
:math:`1/(1 + u^m) = \sum_k (\beta_k/m)/(u + \beta_k)`, :math:`\beta_k = e^{i\pi(2k+1-m)/m}`,

.. math:: k_a(x, y) = \ell^{-d} (2\pi)^{-d/2} \sum_{k<m} \frac{\beta_k}{m}
    \Bigl(\frac{\sqrt{\beta_k}}{t}\Bigr)^{\nu} K_\nu(\sqrt{\beta_k}\,t), \qquad
    \nu = d/2 - 1

(:func:`sdo_profile`; Bessel K of complex argument), so :math:`|k_a| \sim e^{-\sin(\pi/(2m))
t}` far away. The random features do not decay: :math:`\phi(x)^\top\phi(y)` keeps a
fluctuation of order :math:`D^{-1/2}` at any distance, so a random-feature expansion far outside
the data is noise at that floor, not a small density. :func:`sdo_log_envelope` gives a
non-increasing upper bound on :math:`|k_a(x, y)|/k_a(x, x)` in t (the sum of the terms'
magnitudes, a running supremum, capped at 1), with which the expansions bound
:math:`|f(x)| \le e^{\lambda} \|w\|_1 k_a(0)\,\bar\kappa(\min_i |x - c_i|/\ell)`.
"""

from __future__ import annotations

import functools
import math
from numbers import Real

import numpy as np
import torch
from scipy.special import kve

from ._kernels import VectorKernel
from ._validation import COUNT, POSITIVE, SEED, Interval

__all__ = ["SDOKernel", "sdo_log_envelope", "sdo_log_scale", "sdo_default_m", "sdo_profile"]


def sdo_default_m(d: int) -> int:
    """m = floor(d/2) + 1 (the smallest integer m > d/2)."""
    return d // 2 + 1


def sdo_log_scale(a: float | None, d: int, m: int, *, log_a: float | None = None) -> float:
    r""":math:`\log k_a(x, x) = \log\bigl(|S^{d-1}| (2\pi)^{-d} a^{-d/(2m)} \pi /
    (2m \sin(\pi d / (2m)))\bigr)`; ``log_a`` in place of ``a`` (pass ``a=None``) for an
    ``a`` outside the float64 range."""
    if (a is None) == (log_a is None):
        raise ValueError("give exactly one of `a` and `log_a`")
    log_a = math.log(a) if log_a is None else float(log_a)
    p = d / (2 * m)
    log_sphere = math.log(2.0) + 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d)
    return (
        log_sphere
        - d * math.log(2 * math.pi)
        - p * log_a
        + math.log(math.pi)
        - math.log(2 * m)
        - math.log(math.sin(math.pi * p))
    )


def _log_terms(t: np.ndarray, d: int, m: int) -> np.ndarray:
    r"""Complex logs of the m terms of :math:`k_a(t)\,\ell^d` (module docstring), (len(t), m)."""
    nu = d / 2 - 1
    k = np.arange(m)
    beta = np.exp(1j * np.pi * (2 * k + 1 - m) / m)
    root = np.sqrt(beta)  # real part > 0
    t = np.asarray(t, dtype=np.float64)[:, None]
    z = root * t
    with np.errstate(all="ignore"):
        kv = kve(abs(nu), z)  # K_nu(z) e^z; K_{-nu} = K_nu
        return (
            np.log(beta / m) + nu * np.log(root) - nu * np.log(t) + np.log(kv) - z
            - 0.5 * d * math.log(2 * math.pi)
        )  # fmt: skip


def _log_k0(d: int, m: int) -> float:
    r""":math:`\log(k_a(x, x)\,\ell^d)`: ``sdo_log_scale`` at a = 1."""
    return sdo_log_scale(1.0, d, m)


def sdo_profile(t, d: int, m: int) -> np.ndarray:
    r"""The exact SDO kernel as a function of distance: :math:`k_a(x, y) / k_a(x, x)` at
    :math:`t = |x - y|/\ell` (array of t > 0; the same for every a), from the Bessel-K sum of
    the module docstring. Accurate where the terms do not cancel (t of order 1 and beyond for
    small d; the random-feature Gram agrees to its Monte Carlo error, tested)."""
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    terms = np.exp(_log_terms(t, d, m) - _log_k0(d, m))
    return terms.sum(axis=1).real


#: Ratio of neighbouring points of the envelope's table: between them the bound is the value
#: at the left point, looser than the exact decay by at most 1 % of its log.
_ENVELOPE_RATIO = 1.01
#: The table reaches the distance where the bound is below exp(-_ENVELOPE_FLOOR) (far below
#: any float64 density); beyond it the slowest terms' exact rate extends it.
_ENVELOPE_FLOOR = 800.0


def _log_magnitude_bound(t: np.ndarray, d: int, m: int) -> np.ndarray:
    """log of the sum of the terms' magnitudes over k_a(x, x) (>= log |profile|); +inf where
    a term is not representable (small t, large d: the bound 1 applies there)."""
    L = _log_terms(t, d, m).real - _log_k0(d, m)
    L = np.where(np.isnan(L), np.inf, L)
    top = L.max(axis=1)
    finite = np.isfinite(top)
    out = np.full(t.shape, np.inf)
    out[finite] = top[finite] + np.log(np.exp(L[finite] - top[finite, None]).sum(axis=1))
    return out


@functools.lru_cache(maxsize=32)
def _envelope_table(d: int, m: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(grid t, non-increasing log bound on it, decay rate sin(pi / (2m)))."""
    rate = math.sin(math.pi / (2 * m))
    end = max(16.0, 1.5 * _ENVELOPE_FLOOR / rate)
    while _log_magnitude_bound(np.array([end]), d, m)[0] > -_ENVELOPE_FLOOR:
        end *= 2.0
    n = int(math.ceil(math.log(end / 1e-3) / math.log(_ENVELOPE_RATIO))) + 1
    grid = 1e-3 * _ENVELOPE_RATIO ** np.arange(n)
    bound = np.minimum(_log_magnitude_bound(grid, d, m), 0.0)  # |k_a(x, y)| <= k_a(x, x)
    bound = np.maximum.accumulate(bound[::-1])[::-1]  # sup over s >= t: non-increasing
    return grid, bound, rate


def sdo_log_envelope(t, d: int, m: int) -> np.ndarray:
    r"""A non-increasing upper bound on :math:`\log(|k_a(x, y)| / k_a(x, x))` at
    :math:`t = |x - y|/\ell` (array of t >= 0): 0 near the origin, then the log of the sum of
    the magnitudes of the Bessel-K terms (module docstring; no cancellation, computed in log
    space, so no underflow), as a running supremum on a geometric table (ratio 1.01; a
    point's bound is the value at the table point on its left), and beyond the table's end
    (bound exp(-800)) the slowest terms' rate :math:`\sin(\pi/(2m))`. Cached per (d, m)."""
    t = np.asarray(t, dtype=np.float64)
    grid, bound, rate = _envelope_table(int(d), int(m))
    idx = np.searchsorted(grid, t, side="right") - 1
    out = np.where(idx >= 0, bound[np.clip(idx, 0, None)], 0.0)
    beyond = t > grid[-1]
    return np.where(beyond, bound[-1] - rate * (t - grid[-1]), out)


def _log_gamma_sample(rng: np.random.Generator, shape: float, size: int) -> np.ndarray:
    """log of Gamma(shape) draws, exact and free of underflow for small shapes."""
    g = rng.gamma(shape + 1.0, size=size)
    u = rng.uniform(size=size)
    u = np.where(u == 0.0, np.finfo(float).tiny, u)  # U = 0 has probability 2^-53 per draw
    return np.log(g) + np.log(u) / shape


class SDOKernel(VectorKernel):
    r"""Random Fourier features of the SDO kernel :math:`k_a` (module docstring for the formula).

    Parameters: ``a`` > 0 (bandwidth: length scale :math:`\ell = a^{1/(2m)}`; default 1),
    or instead ``log_a`` = :math:`\log a` (any real; the bandwidth in log space, for large d,
    where :math:`a = \ell^{2m}` leaves the float64 range: :math:`\ell = 4`, d = 1,555 gives
    :math:`a = 4^{1556}`); giving both is a ValueError. ``m`` (integer > d/2, default
    floor(d/2) + 1), ``n_features`` D, ``seed``. Features are drawn at ``fit`` and reused for
    every later evaluation; only ``a`` rescales them, so ``clone(k).set_params(a=...)`` with the
    same seed shares the base draw. The scale :math:`k_a(x, x)` is kept in log space
    (``log_scale_``); ``gram`` raises a ValueError naming d and the bandwidth where the kernel's
    values themselves lie outside the float64 range.

    >>> import torch
    >>> k = SDOKernel(a=1.0, n_features=20000, seed=0).fit(torch.zeros(1, 1))
    >>> round(float(k.gram([[0.0]], [[0.0]])[0, 0]), 1)  # 1/(2 sqrt(a)) for d = m = 1
    0.5
    """

    bandwidth_param = "a"
    log_bandwidth_param = "log_a"
    random_features = True
    nonnegative = False
    _parameter_constraints = {
        **VectorKernel._parameter_constraints,
        "a": [None, *POSITIVE],
        "m": [None, *COUNT],
        "n_features": COUNT,
        "seed": SEED,
        "log_a": [None, Interval(Real, None, None, closed="neither")],  # finite
    }

    def __init__(
        self,
        a: float | None = None,
        m: int | None = None,
        n_features: int = 10_000,
        seed: int = 0,
        *,
        log_a: float | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__(device=device, dtype=dtype)
        self.a = a
        self.m = m
        self.n_features = n_features
        self.seed = seed
        self.log_a = log_a

    def _fit(self, d: int) -> None:
        if self.a is not None and self.log_a is not None:  # the one rule between parameters
            raise ValueError(
                f"give `a` or `log_a`, not both (got a={self.a!r}, log_a={self.log_a!r})"
            )
        m = sdo_default_m(d) if self.m is None else int(self.m)
        if 2 * m <= d:
            raise ValueError(
                f"`m` must exceed d/2 = {d / 2} for the SDO kernel to be finite, got {m}"
            )
        self.m_ = m
        D = int(self.n_features)
        rng = np.random.default_rng(self.seed)
        theta = rng.standard_normal((D, d))
        theta /= np.linalg.norm(theta, axis=1, keepdims=True)
        p = d / (2 * m)
        log_u = _log_gamma_sample(rng, p, D) - _log_gamma_sample(rng, 1.0 - p, D)
        phases = rng.uniform(0.0, 2 * math.pi, size=D)
        self.log_a_ = self._log_a()
        log_r = (log_u - self.log_a_) / (2 * m) - math.log(2 * math.pi)
        radius = np.exp(log_r)
        # store 2 pi z directly: phi(x) = sqrt(2/D) cos(x @ omega.T + b), omega = 2 pi z
        self.omega_ = torch.as_tensor(2 * math.pi * radius[:, None] * theta).to(
            self.device_, self.dtype_
        )
        self.phases_ = torch.as_tensor(phases).to(self.device_, self.dtype_)
        self.log_scale_ = sdo_log_scale(None, d, m, log_a=self.log_a_)
        self._feat_norm = math.sqrt(2.0 / D)

    def _log_a(self) -> float:
        if self.log_a is not None:
            return float(self.log_a)
        return math.log(1.0 if self.a is None else float(self.a))

    def bandwidth_label(self) -> str:
        if self.log_a is not None:
            return f"log_a = {float(self.log_a):.6g}"
        return f"a = {1.0 if self.a is None else float(self.a):.6g}"

    def log_integral(self) -> float:
        return 0.0

    def length_scale(self) -> float:
        r"""The length scale :math:`\ell = a^{1/(2m)}` of the fitted kernel: :math:`k_a(x, y)`
        depends on x - y only through :math:`(x - y)/\ell` (times :math:`\ell^{-d}`), and the
        frequencies satisfy :math:`|\omega_j|\,\ell = u_j^{1/(2m)}` with :math:`u_j` the
        beta-prime draw."""
        return math.exp(self.log_a_ / (2 * self.m_))

    def log_envelope(self, distance) -> np.ndarray:
        """:func:`sdo_log_envelope` of the fitted kernel at Euclidean distances (array):
        a non-increasing bound on log(|k_a(x, y)| / k_a(x, x))."""
        t = np.asarray(distance, dtype=np.float64) / self.length_scale()
        return sdo_log_envelope(t, self.n_features_in_, self.m_)

    def _features(self, X: torch.Tensor) -> torch.Tensor:
        """Normalised features (n, D): k_a(x, y) ~ exp(log_scale_) phi(x) . phi(y)."""
        return torch.cos(X @ self.omega_.T + self.phases_) * self._feat_norm

    def _features_grad(self, X: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        r""":math:`\nabla_x (\phi(x)^\top v)` (n, d) = :math:`-\sum_j v_j \sqrt{2/D}
        \sin(\omega_j x + b_j)\,\omega_j`."""
        s = torch.sin(X @ self.omega_.T + self.phases_) * (-self._feat_norm)
        return (s * v) @ self.omega_

    def _features_and_laplacian(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""(phi(X), :math:`\Delta \phi(X)`) with :math:`\Delta\phi_j = -|\omega_j|^2 \phi_j`."""
        phi = self._features(X)
        return phi, phi * (-(self.omega_ * self.omega_).sum(1))
