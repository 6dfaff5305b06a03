r"""Kernels on vector data (n, d) for the density estimators, and kernel expansions.

Three kernels, each with one bandwidth parameter (``bandwidth_param``):

* :class:`GaussianKernel` :math:`k(x, y) = \exp(-|x-y|^2 / (2\sigma^2))`, exact.
* :class:`LaplacianKernel` :math:`k(x, y) = \exp(-|x-y| / \sigma)`, exact.
* :class:`SDOKernel` (see ``_sdo.py``): random Fourier features of the SDO kernel.

A fitted kernel builds an :class:`Expansion` :math:`f(x) = \sum_i w_i k(c_i, x)` (the form of
both SOSREP and KDE) that evaluates :math:`f`, :math:`\log |f|` stably, and the closed-form
Laplacian :math:`\Delta_x f` used by the Fisher-divergence bandwidth selection.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from sklearn.base import BaseEstimator

from tskernels import sqdist

from ._validation import DEVICE, DTYPE, POSITIVE, resolve_device, resolve_dtype, validate_estimator

__all__ = ["VectorKernel", "GaussianKernel", "LaplacianKernel", "Expansion"]

#: Rows of X evaluated at once against all centres, at most (the (rows, N) or (rows, D) working
#: matrices are further bounded by :data:`MAX_MEMORY`).
_CHUNK = 2048
#: Bytes of working memory of the autograd path (:meth:`Expansion.raw_torch_value`): the
#: (rows, centres, d) differences of an exact kernel and their products, per block of rows.
MAX_MEMORY = 512 * 2**20
#: Arrays of the block's size alive at once on that path (differences, squares, autograd's
#: saved tensors), counted against :data:`MAX_MEMORY`.
_TORCH_COPIES = 4


def torch_rows_per_block(n_centres: int, width: int, itemsize: int) -> int:
    """Rows per block of :meth:`Expansion.raw_torch_value`: the most rows whose
    (rows, n_centres, width) arrays, :data:`_TORCH_COPIES` of them of ``itemsize`` bytes,
    fit in :data:`MAX_MEMORY` (at least one)."""
    per_row = max(1, n_centres) * max(1, width) * itemsize * _TORCH_COPIES
    return max(1, MAX_MEMORY // per_row)


def _sqdist(X: torch.Tensor, Y: torch.Tensor, length_scale: float) -> torch.Tensor:
    """Squared Euclidean distances (n_X, n_Y): the tskernels rule (points centred on a common
    shift, so any offset of the data cancels; the matrix-product expansion while the centred
    radius is within 1e4 length scales, else the differences themselves; rounding negatives
    set to 0; +inf where the square overflows)."""
    return sqdist(X, Y, length_scale)


class VectorKernel(BaseEstimator, ABC):
    """Base class of the vector kernels (sklearn parameters; fitted state ends in ``_``).

    Subclasses set ``bandwidth_param`` (the name of the bandwidth parameter),
    ``random_features`` and ``nonnegative`` (k >= 0 everywhere, so SOSREP's natural gradient
    is guaranteed to stay positive), and implement either ``_log_k`` (exact kernels) or
    ``_features`` (random-feature kernels).
    """

    bandwidth_param: str = ""
    #: The bandwidth in log space (any real), for kernels whose bandwidth can leave the
    #: float64 range (SDO: ``log_a``); None where the bandwidth itself is always representable.
    log_bandwidth_param: str | None = None
    random_features: bool = False
    nonnegative: bool = True
    #: True when Delta_x k(c, x) is singular at x = c (non-smooth kernels).
    laplacian_singular_at_centres: bool = False
    #: The parameters' constraints (checked at ``fit``; a subclass extends the dict).
    _parameter_constraints: dict = {"device": DEVICE, "dtype": DTYPE}

    def __init__(self, *, device=None, dtype=None):
        self.device = device
        self.dtype = dtype

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, X: torch.Tensor) -> VectorKernel:
        """Record the dimension (and draw random features) for data X (n, d)."""
        validate_estimator(self)
        self.dtype_ = resolve_dtype(self.dtype)
        self.device_ = resolve_device(self.device)
        self.n_features_in_ = int(X.shape[1])
        self._fit(self.n_features_in_)
        return self

    def _fit(self, d: int) -> None:
        pass

    def bandwidth_label(self) -> str:
        """The bandwidth as set, for messages (``"sigma = 0.5"``)."""
        return f"{self.bandwidth_param} = {getattr(self, self.bandwidth_param)!r}"

    # -- values ----------------------------------------------------------------------------
    def gram(self, X, Y=None) -> torch.Tensor:
        """Kernel matrix k(X_i, Y_j): Tensor of shape (n_X, n_Y) (Y = X when None)."""
        from ._validation import as_data

        X = as_data(X, "X", dtype=self.dtype_, device=self.device_, n_features=self.n_features_in_)
        Y = (
            X
            if Y is None
            else as_data(
                Y, "Y", dtype=self.dtype_, device=self.device_, n_features=self.n_features_in_
            )
        )
        if self.random_features:
            raw = self._features(X) @ self._features(Y).T
            return scale_in_log_space(raw, self.log_scale_, self, "the kernel's values")
        return self._log_k(X, Y).exp()

    @abstractmethod
    def log_integral(self) -> float:
        r""":math:`\log \int k(0, x)\,dx` (turns a kernel mean into a normalised density)."""

    # Exact kernels implement _log_k, _laplacian_k and _k_torch; random-feature kernels
    # implement _features. Asking a kernel for the other kind's method is a usage error.
    def _wrong_kind(self, method: str) -> TypeError:
        kind = "a random-feature" if self.random_features else "an exact"
        return TypeError(f"{type(self).__name__} is {kind} kernel and has no `{method}`")

    def _log_k(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        """log k(x_i, y_j) (n_X, n_Y) for exact kernels."""
        raise self._wrong_kind("_log_k")

    def _features(self, X: torch.Tensor) -> torch.Tensor:
        """Random features phi(x) (n, D) for random-feature kernels."""
        raise self._wrong_kind("_features")

    def _laplacian_k(self, X: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
        """Delta_x k(c_j, x_i) (n_X, n_C) for exact kernels."""
        raise self._wrong_kind("_laplacian_k")

    def _k_torch(self, X: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
        """k(c_j, x_i) (n_X, n_C), twice differentiable in X by autograd (no matmul trick)."""
        raise self._wrong_kind("_k_torch")

    def expansion(
        self, centres: torch.Tensor, weights: torch.Tensor, log_weight_scale: float = 0.0
    ) -> Expansion:
        r""":math:`f(x) = e^{s} \sum_i w_i k(c_i, x)` (centres (N, d), weights (N,), s given)."""
        return Expansion(self, centres, weights, log_weight_scale)


def scale_in_log_space(
    raw: torch.Tensor, log_factor: float, kernel: VectorKernel, what: str
) -> torch.Tensor:
    r""":math:`e^{\lambda}\,r` for a tensor r and :math:`\lambda` = ``log_factor``, formed as
    :math:`\mathrm{sign}(r)\,e^{\log|r| + \lambda}` (no intermediate :math:`e^{\lambda}`,
    which over- or underflows long before the product does). Where a nonzero entry of the
    product is outside the range of r's dtype (inf, or 0 from a nonzero r) a ValueError names
    ``what``, the dimension and the kernel's bandwidth: never inf or 0 in the value's place."""
    if log_factor == 0.0:
        return raw
    if abs(log_factor) < 700.0:  # the factor itself is a normal float64
        out = raw * math.exp(log_factor)
    else:
        out = torch.sign(raw) * torch.exp(torch.log(torch.abs(raw)) + log_factor)
    if not bool(torch.isfinite(out).all()) or bool(((out == 0) & (raw != 0)).any()):
        raise ValueError(
            f"{what} lie outside the {str(raw.dtype).removeprefix('torch.')} range: the "
            f"constant factor is exp({log_factor:.6g}) for {type(kernel).__name__} at "
            f"d = {kernel.n_features_in_}, {kernel.bandwidth_label()}; use the log-space "
            "results (score_samples, log_abs_value)"
        )
    return out


class Expansion:
    r"""A kernel expansion :math:`f(x) = e^{\lambda} \sum_i w_i k(c_i, x)` of a fitted kernel.

    :math:`\lambda` = ``log_factor`` (a constant kept in log space: the SDO scale
    :math:`k_a(x, x)` under- or overflows for large d). Random-feature kernels collapse the sum
    to :math:`\phi(x)^\top v` with :math:`v = \Phi^\top w` (one pass over D features per point).
    """

    def __init__(
        self,
        kernel: VectorKernel,
        centres: torch.Tensor,
        weights: torch.Tensor,
        log_weight_scale: float = 0.0,
    ):
        self.kernel = kernel
        self.weights = weights
        self.positive_weights = bool((weights > 0).all())
        self.log_factor = float(log_weight_scale)
        self.n_centres = int(centres.shape[0])
        if kernel.random_features:
            self.log_factor += kernel.log_scale_
            self.v = sum(
                kernel._features(c).T @ w
                for c, w in zip(self._chunks(centres), self._chunks(weights))
            )
            self.centres = None
            # for the tail bound of log_abs_value: the centres and log ||w||_1
            self.rf_centres = centres
            self.log_w1 = float(torch.log(weights.abs().sum()))
        else:
            self.centres = centres
            self.log_w = weights.log() if self.positive_weights else None

    def _chunks(self, X: torch.Tensor):
        """Blocks of rows of X: at most ``_CHUNK`` rows, and so few that the (rows, N)
        kernel matrices (exact kernels, N centres) or (rows, D) features are within
        :data:`MAX_MEMORY` (:func:`torch_rows_per_block`)."""
        k = self.kernel
        width = k.omega_.shape[0] if k.random_features else self.n_centres
        itemsize = torch.empty((), dtype=k.dtype_).element_size()
        rows = min(_CHUNK, torch_rows_per_block(1, width, itemsize))
        for s in range(0, X.shape[0], rows):
            yield X[s : s + rows]

    def raw_value(self, X: torch.Tensor) -> torch.Tensor:
        r""":math:`e^{-\lambda} f(X)`: Tensor of shape (n,) (same sign and ranking as f)."""
        k = self.kernel
        if k.random_features:
            return torch.cat([k._features(x) @ self.v for x in self._chunks(X)])
        return torch.cat([k._log_k(x, self.centres).exp() @ self.weights for x in self._chunks(X)])

    def value(self, X: torch.Tensor) -> torch.Tensor:
        """f(X): Tensor of shape (n,); a ValueError (naming d and the bandwidth) where a
        nonzero value lies outside the float range (:func:`scale_in_log_space`)."""
        return scale_in_log_space(self.raw_value(X), self.log_factor, self.kernel, "values of f")

    def log_abs_value(self, X: torch.Tensor) -> torch.Tensor:
        r""":math:`\log |f(x)|` (n,): log-sum-exp for positive weights on an exact kernel (no
        underflow far from the data); otherwise the log of the computed :math:`|f|`, which is
        ``-inf`` exactly where f = 0.

        Random-feature kernels (SDO): the features do not decay far from the data, the exact
        kernel does, so the computed value is capped by what the exact kernel allows,
        :math:`\log|f(x)| \le \lambda + \log\|w\|_1 + \log k_a(x, x) +
        \log\bar\kappa(\min_i |x - c_i| / \ell)` with :math:`\bar\kappa` the kernel's
        non-increasing envelope (``kernel.log_envelope``; :mod:`density._sdo`, "Tails"). Near the
        data the cap is far above f and changes nothing; far outside it, the value decreases
        with the distance to the data instead of staying at the features' noise floor."""
        k = self.kernel
        if not k.random_features and self.positive_weights:
            out = torch.cat(
                [
                    torch.logsumexp(k._log_k(x, self.centres) + self.log_w, dim=1)
                    for x in self._chunks(X)
                ]
            )
        else:
            out = self.raw_value(X).abs().log()
            if k.random_features and hasattr(k, "log_envelope"):
                out = torch.minimum(out, self._log_tail_bound(X) - k.log_scale_)
        return out + self.log_factor

    def _log_tail_bound(self, X: torch.Tensor) -> torch.Tensor:
        r""":math:`\log(\|w\|_1 k_a(0)) + \log\bar\kappa(d_{\min}(x)/\ell)` per row of X (the
        random-feature cap of :meth:`log_abs_value`, before the factor :math:`e^\lambda`)."""
        k = self.kernel
        scale = k.length_scale()
        d2 = torch.cat(
            [_sqdist(x, self.rf_centres, scale).min(dim=1).values for x in self._chunks(X)]
        )
        env = k.log_envelope(d2.sqrt().cpu().numpy())
        env = torch.as_tensor(env, dtype=d2.dtype, device=d2.device)
        return env + self.log_w1 + k.log_scale_

    def raw_value_and_laplacian(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r""":math:`e^{-\lambda}` (f(X), :math:`\Delta_x f(X)`), both (n,), in closed form."""
        k = self.kernel
        fs, ls = [], []
        for x in self._chunks(X):
            if k.random_features:
                phi, lap_phi = k._features_and_laplacian(x)
                fs.append(phi @ self.v)
                ls.append(lap_phi @ self.v)
            else:
                fs.append(k._log_k(x, self.centres).exp() @ self.weights)
                ls.append(k._laplacian_k(x, self.centres) @ self.weights)
        return torch.cat(fs), torch.cat(ls)

    def raw_value_grad_laplacian(
        self, X: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r""":math:`e^{-\lambda}` (f (n,), :math:`\nabla f` (n, d), :math:`\Delta f` (n,)).

        Closed form."""
        k = self.kernel
        fs, gs, ls = [], [], []
        for x in self._chunks(X):
            if k.random_features:
                phi, lap_phi = k._features_and_laplacian(x)
                fs.append(phi @ self.v)
                ls.append(lap_phi @ self.v)
                gs.append(k._features_grad(x, self.v))
            else:
                kx = k._log_k(x, self.centres).exp() * self.weights  # (n, N): w_i k(c_i, x)
                fs.append(kx.sum(1))
                ls.append(k._laplacian_k(x, self.centres) @ self.weights)
                gs.append(k._grad_weighted(x, self.centres, kx))
        return torch.cat(fs), torch.cat(gs), torch.cat(ls)

    def raw_torch_value(self, X: torch.Tensor) -> torch.Tensor:
        r""":math:`e^{-\lambda} f(X)` through operations autograd differentiates twice, in
        blocks of rows of X (:func:`torch_rows_per_block`: an exact kernel forms the
        (rows, N, d) differences, random features the (rows, D) features) within
        :data:`MAX_MEMORY` bytes."""
        k = self.kernel
        if k.random_features:
            rows = torch_rows_per_block(1, self.v.shape[0], X.element_size())
            return torch.cat([k._features(X[s : s + rows]) @ self.v
                              for s in range(0, X.shape[0], rows)])  # fmt: skip
        C = self.centres
        rows = torch_rows_per_block(C.shape[0], C.shape[1], X.element_size())
        return torch.cat([k._k_torch(X[s : s + rows], C) @ self.weights
                          for s in range(0, X.shape[0], rows)])  # fmt: skip


class _SigmaKernel(VectorKernel):
    """An exact radial kernel with one length scale ``sigma`` > 0."""

    bandwidth_param = "sigma"
    _parameter_constraints = {**VectorKernel._parameter_constraints, "sigma": POSITIVE}

    def __init__(self, sigma: float = 1.0, *, device=None, dtype=None):
        super().__init__(device=device, dtype=dtype)
        self.sigma = sigma


class GaussianKernel(_SigmaKernel):
    r"""Gaussian kernel :math:`k(x, y) = \exp(-|x - y|^2 / (2\sigma^2))` on :math:`\mathbb R^d`.

    Exact (no random features); :math:`k \ge 0`.
    :math:`\Delta_x k = k\,(|x-y|^2/\sigma^4 - d/\sigma^2)`.

    >>> import torch
    >>> k = GaussianKernel(1.0).fit(torch.zeros(1, 2))
    >>> float(k.gram([[0.0, 0.0]], [[1.0, 0.0]])[0, 0])  # exp(-1/2)
    0.6065306597126334
    """

    def log_integral(self) -> float:
        return 0.5 * self.n_features_in_ * math.log(2 * math.pi * self.sigma**2)

    def _log_k(self, X, Y):
        return _sqdist(X, Y, self.sigma) / (-2.0 * self.sigma**2)

    def _laplacian_k(self, X, C):
        d2 = _sqdist(X, C, self.sigma)
        s2 = self.sigma**2
        return (d2 / (-2.0 * s2)).exp() * (d2 / s2**2 - self.n_features_in_ / s2)

    def _grad_weighted(self, X, C, kx):
        # sum_i w_i k(c_i, x) (c_i - x) / sigma^2, kx = w_i k(c_i, x); the points shifted by
        # the centres' mean first (any offset of the data cancels instead of its digits)
        shift = C.mean(0)
        return (kx @ (C - shift) - kx.sum(1, keepdim=True) * (X - shift)) / self.sigma**2

    def _k_torch(self, X, C):
        diff = X[:, None, :] - C[None, :, :]
        return ((diff * diff).sum(-1) / (-2.0 * self.sigma**2)).exp()


class LaplacianKernel(_SigmaKernel):
    r"""Laplacian (Abel) kernel :math:`k(x, y) = \exp(-|x - y| / \sigma)` (Euclidean norm).

    Exact; :math:`k \ge 0`. Off the centres
    :math:`\Delta_x k = k\,(1/\sigma^2 - (d-1)/(\sigma |x-y|))`; it is singular at x = y (the
    kernel is not twice differentiable there), and evaluating the Laplacian at a centre raises.

    >>> import torch
    >>> k = LaplacianKernel(2.0).fit(torch.zeros(1, 2))
    >>> float(k.gram([[0.0, 0.0]], [[3.0, 4.0]])[0, 0])  # exp(-5/2)
    0.0820849986238988
    """

    laplacian_singular_at_centres = True

    def log_integral(self) -> float:
        d = self.n_features_in_
        # int exp(-|x|/s) dx = |S^{d-1}| s^d Gamma(d), |S^{d-1}| = 2 pi^{d/2} / Gamma(d/2)
        return (
            math.log(2.0)
            + 0.5 * d * math.log(math.pi)
            - math.lgamma(0.5 * d)
            + d * math.log(self.sigma)
            + math.lgamma(d)
        )

    def _log_k(self, X, Y):
        return _sqdist(X, Y, self.sigma).sqrt() / (-self.sigma)

    def _laplacian_k(self, X, C):
        r = _sqdist(X, C, self.sigma).sqrt()
        if bool((r == 0).any()):
            raise ValueError(
                "LaplacianKernel: the Laplacian of exp(-|x - c|/sigma) is singular at x = c and "
                "an evaluation point coincides with a centre; drop duplicated points"
            )
        d = self.n_features_in_
        k = (r / -self.sigma).exp()
        return k * (1.0 / self.sigma**2 - (d - 1) / (self.sigma * r))

    def _grad_weighted(self, X, C, kx):
        # sum_i w_i k(c_i, x) (c_i - x) / (sigma |x - c_i|); a coinciding centre raises above
        r = _sqdist(X, C, self.sigma).sqrt()
        if bool((r == 0).any()):
            raise ValueError(
                "LaplacianKernel: exp(-|x - c|/sigma) is not differentiable at x = c and an "
                "evaluation point coincides with a centre; drop duplicated points"
            )
        q = kx / (self.sigma * r)
        shift = C.mean(0)
        return q @ (C - shift) - q.sum(1, keepdim=True) * (X - shift)

    def _k_torch(self, X, C):
        diff = X[:, None, :] - C[None, :, :]
        return ((diff * diff).sum(-1).sqrt() / (-self.sigma)).exp()
