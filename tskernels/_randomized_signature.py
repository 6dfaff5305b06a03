r"""The randomized signature kernel: random features from a controlled ODE driven by the path."""

from __future__ import annotations

from contextlib import nullcontext
from numbers import Integral, Real

import torch

from ._base import Kernel, mirror_upper_
from ._constraints import Interval, StrOptions
from ._registry import KernelSpec, register
from ._threads import threads
from .validation import SeriesBatch

__all__ = ["RandomizedSignatureKernel"]

#: Multiply-adds of one Euler step (n d M^2) below which the step runs on one torch thread
#: when ``n_jobs`` is None. The scheme is T sequential small steps; each of torch's parallel
#: regions synchronises its threads, and on a machine whose other cores are busy a waiting
#: thread is descheduled: n = 40, d = 7, M = 50, T = 100 took 1.3-1.6 s a Gram with 2 threads
#: at load average 3.6 on 2 cores against 0.011 s with one.
SMALL_STEP_WORK = 4_000_000

#: Bytes of one Euler step's products (rows x d M numbers) up to which the CPU path solves a
#: batch in one block; a larger batch is solved in blocks of rows of about this size (each
#: series is solved on its own row, so the blocks only bound the working set: one step's
#: products of 3,080 series at 200 features and 10 channels are 49 MB, and were 1.25x slower
#: a series than blocks of 512 rows, measured on one core).
ROW_BLOCK_BYTES = 8 * 2**20

_ACTIVATIONS = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "identity": lambda h: h,
}
#: The same activations written in place (the CPU path's buffers).
_ACTIVATIONS_INPLACE = {
    "tanh": torch.Tensor.tanh_,
    "sigmoid": torch.Tensor.sigmoid_,
    "relu": torch.Tensor.relu_,
    "identity": lambda h: h,
}


class RandomizedSignatureKernel(Kernel):
    r"""Randomized signature features and their kernel.

    .. math::
        dZ_t = \sum_{i=1}^{d} \sigma(A_i Z_t + b_i)\, dx^i_t,\qquad
        K(x, y) = \langle Z_T(x), Z_T(y) \rangle / M,

    or, with ``activation_first=True`` (the reference study's vector field: the activation
    before the linear map, the bias outside it),
    :math:`dZ_t = \sum_i (A_i^\top \sigma(Z_t) + b_i)\, dx^i_t`,

    solved by the Euler scheme on the sampling grid,
    :math:`Z_{t+1} = Z_t + \sum_i \sigma(A_i Z_t + b_i)\,(x^i_{t+1} - x^i_t)`, with
    :math:`Z \in \mathbb{R}^M` (M = ``n_features``; with ``activation_first`` the increment is
    :math:`\sum_i (A_i^\top \sigma(Z_t) + b_i)(x^i_{t+1} - x^i_t)`), :math:`A_i` entries
    :math:`\mathcal N(0, \texttt{scale})` (``scale`` is the variance), :math:`b_i` and
    :math:`Z_0` entries :math:`\mathcal N(0, 1)`, :math:`\sigma` = ``activation``. The draws
    come from a CPU generator seeded by ``seed`` in float64 (the same features on every device
    and dtype), in the order A (d, M, M), b (d, M), Z_0 (M,).

    Unequal lengths are handled by the forward-fill padding (zero increments leave Z as is).

    >>> import numpy as np
    >>> from tskernels import RandomizedSignatureKernel
    >>> k = RandomizedSignatureKernel(n_features=8, seed=1)
    >>> x = np.zeros((1, 5, 2))  # a constant path: Z_T = Z_0
    >>> bool(torch.allclose(k.features(x)[0], k._draw(2)[2]))
    True
    """

    _tags = {"unequal_length": True}
    _parameter_constraints = {
        "n_features": [Interval(Integral, 1, None, closed="left")],
        "scale": [Interval(Real, 0, None, closed="neither")],
        "seed": [Interval(Integral, 0, None, closed="left")],
        "activation": [StrOptions(set(_ACTIVATIONS))],
        "activation_first": ["boolean"],
    }
    _divergence_hint = (
        "The randomized signature overflowed: reduce `scale` or the size of the inputs."
    )

    def __init__(
        self,
        n_features: int = 100,
        scale: float = 1.0,
        seed: int = 0,
        activation: str = "tanh",
        *,
        activation_first: bool = False,
        **execution,
    ):
        super().__init__(**execution)
        self.n_features = n_features
        self.scale = scale
        self.seed = seed
        self.activation = activation
        self.activation_first = activation_first

    def _draw(self, d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(A (d, M, M), b (d, M), Z_0 (M,)) on the kernel's device and dtype."""
        M = int(self.n_features)
        gen = torch.Generator(device="cpu").manual_seed(int(self.seed))
        A = torch.randn((d, M, M), generator=gen, dtype=torch.float64) * float(self.scale) ** 0.5
        b = torch.randn((d, M), generator=gen, dtype=torch.float64)
        z0 = torch.randn((M,), generator=gen, dtype=torch.float64)
        return tuple(t.to(device=self._device, dtype=self._dtype) for t in (A, b, z0))

    def _features(self, X: SeriesBatch) -> torch.Tensor:
        A, b, z0 = self._draw(X.d)
        d, M = b.shape
        cpu = self._device.type == "cpu"
        small = X.n * d * M * M < SMALL_STEP_WORK and cpu
        with threads(1, "torch") if small and self.n_jobs is None else nullcontext():
            if not cpu:
                return self._euler(X, A, b, z0)
            rows = max(1, ROW_BLOCK_BYTES // (X.values.element_size() * d * M))
            if X.n <= rows:
                return self._euler_cpu(X, A, b, z0)
            return torch.cat(
                [self._euler_cpu(X[i : i + rows], A, b, z0) for i in range(0, X.n, rows)]
            )

    def _features_of_batches(self, batches: list[SeriesBatch]) -> list[torch.Tensor]:
        """:meth:`_features` of several checked batches (one channel count), solved as one
        batch: their rows concatenated (forward-fill padded to the longest), one Euler solve,
        the rows split back. Each series is solved on its own row, so the features are those
        of one solve per batch up to the order in which the BLAS sums a row's products (equal
        bit for bit in the tests on this machine's MKL; asserted to 1e-12); one product a step
        serves every batch instead of one small product per batch."""
        Z = self._features(SeriesBatch.concat(batches))
        return list(torch.split(Z, [b.n for b in batches]))

    def _euler(self, X: SeriesBatch, A, b, z0) -> torch.Tensor:
        """The Euler scheme, one batched step at a time (the path on other devices than the
        CPU, and the reference of :meth:`_euler_cpu`)."""
        d, M = b.shape
        act = _ACTIVATIONS[self.activation]
        b_flat = b.reshape(d * M)
        dX = torch.diff(X.values, dim=1)  # (n, T - 1, d)
        Z = z0.expand(X.n, M).clone()
        if self.activation_first:
            # column (i, k) of AT: coefficients of (A_i^T sigma(Z))_k = sum_j A_i[j, k] sigma(Z)_j
            AT = A.permute(1, 0, 2).reshape(M, d * M)
            for t in range(dX.shape[1]):
                H = torch.addmm(b_flat, act(Z), AT).reshape(X.n, d, M)
                Z = Z + torch.bmm(dX[:, t, None, :], H)[:, 0]
            return Z
        A_flat = A.reshape(d * M, M)  # row (i, k): coefficients of (A_i Z)_k
        for t in range(dX.shape[1]):
            H = act(torch.addmm(b_flat, Z, A_flat.T)).reshape(X.n, d, M)
            Z = Z + torch.bmm(dX[:, t, None, :], H)[:, 0]
        return Z

    def _euler_cpu(self, X: SeriesBatch, A, b, z0) -> torch.Tensor:
        """The same Euler scheme, arranged for the CPU (the same products, summed in another
        order: equal to :meth:`_euler` to rounding, about 1e-15 relative):

        - the linear map as one contiguous (M, d M) matrix (its transposed view cost the
          matrix product 17-33 % more time), the step's products, activation and increment
          written into buffers allocated once, the increment added in place by one
          ``baddbmm`` (three operations a step instead of six);
        - series in decreasing order of length, each step solved for the series still running
          only: a step past a series' end has a zero increment (forward-fill padding), so
          skipping it leaves Z_T as is.
        """
        n = X.n
        d, M = b.shape
        act_ = _ACTIVATIONS_INPLACE[self.activation]
        b_flat = b.reshape(d * M)
        if self.activation_first:
            W = A.permute(1, 0, 2).reshape(M, d * M).contiguous()  # (A_i^T s)_k at (i, k)
        else:
            W = A.reshape(d * M, M).T.contiguous()  # (A_i z)_k at column (i, k)
        lengths = X.lengths
        order = None
        if bool((lengths != lengths[0]).any()):
            order = torch.argsort(lengths, descending=True, stable=True)
            lengths = lengths[order]
        values = X.values if order is None else X.values[order]
        # running[t]: series whose step t (from point t to t + 1) is inside them
        steps = values.shape[1] - 1
        running = (lengths[None, :] - 1 > torch.arange(steps)[:, None]).sum(1).tolist()
        dX = torch.diff(values, dim=1).permute(1, 0, 2).unsqueeze(2).contiguous()  # (T-1,n,1,d)
        Z3 = z0.expand(n, 1, M).clone()
        Z = Z3.view(n, M)
        P = torch.empty((n, d * M), dtype=Z.dtype, device=Z.device)
        S = torch.empty((n, M), dtype=Z.dtype, device=Z.device)
        first = self.activation_first
        width = -1  # the views below are those of the first `width` series
        for t, dx in enumerate(dX.unbind(0)):
            m = running[t]
            if m == 0:
                break
            if m != width:  # (once for equal lengths: the per-step work is three operations)
                width = m
                Zm, Z3m, Pm, Sm, Hm = Z[:m], Z3[:m], P[:m], S[:m], P[:m].view(m, d, M)
            if first:
                torch.addmm(b_flat, act_(Sm.copy_(Zm)), W, out=Pm)
            else:
                act_(torch.addmm(b_flat, Zm, W, out=Pm))
            Z3m.baddbmm_(dx if m == n else dx[:m], Hm)
        if order is None:
            return Z
        out = torch.empty_like(Z)
        out[order] = Z
        return out

    def features(self, X) -> torch.Tensor:
        """The random features Z_T(x), Tensor of shape (n, n_features)."""
        k, Xb, _ = self._prepare(X, None)
        with k._threads():
            Z = k._features(Xb)
        self._check_result(Z, "feature")
        return Z

    def _pair_bytes(self, X, Y):
        return 4 * self._itemsize

    def _assemble(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        # the features are (n, M); the Gram is formed and scaled in place (output + O(n M))
        ZX = self._features(X)
        if Y is None:
            return mirror_upper_(torch.mm(ZX, ZX.T).div_(int(self.n_features)))
        return torch.mm(ZX, self._features(Y).T).div_(int(self.n_features))

    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        return self._features(X) @ self._features(Y).T / int(self.n_features)

    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        Z = self._features(X)
        return (Z * Z).sum(1) / int(self.n_features)


register(
    KernelSpec(
        "rand_sig_tanh",
        RandomizedSignatureKernel,
        lambda: RandomizedSignatureKernel(n_features=50, scale=0.1, seed=0),
        description="randomized signature (tanh controlled ODE, Euler scheme) random features",
    )
)
