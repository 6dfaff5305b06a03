r"""Compiled (numba) cores of the signature PDE kernel: the Goursat PDE solved per pair.

Isolated numba module. Every solver takes a list of pairs ``(ii[q], jj[q])`` and writes
``out[q]``. Pairs are processed in chunks of ``_P`` at once, the pair index being the
innermost (contiguous) array axis, so the cell update vectorises over pairs (SIMD) and the
dependency chain along a row is a single fused multiply-add; chunks are distributed over
threads with ``prange``. Only two rows of the refined grid are kept.

The scheme on the dyadically refined grid (steps :math:`2^{-\lambda_1}, 2^{-\lambda_2}`),
with :math:`g` the increment inner product of the current original cell divided by
:math:`2^{\lambda_1 + \lambda_2}`:

.. math::
    K_{i+1, j+1} = (K_{i+1, j} + K_{i, j+1})\,(1 + g/2 + g^2/12) - K_{i, j}\,(1 - g^2/12),
    \qquad K_{0, \cdot} = K_{\cdot, 0} = 1,

evaluated as :math:`a K_{i+1, j} + (a K_{i, j+1} - b K_{i, j})` (one FMA on the chain).

``n_threads`` (the numba thread count) sets how many workspaces are allocated: each thread
keeps one and takes every ``n_threads``-th chunk. Inputs are assumed clean: C-contiguous
float64 arrays, finite, int64 pair indices.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._lanes_numba import LANES as _P
from ._lanes_numba import gather_lanes, store_lanes
from ._math_numba import _exp_nonpos

__all__ = ["pde_linear_pairs", "pde_rbf_pairs", "pde_increments_pairs"]

#: only FMA contraction: IEEE semantics otherwise kept (inputs are checked finite)
_FM = {"contract"}


@njit(cache=True, fastmath=_FM, inline="always")
def _coefficients(inc, A, B, b, factor):
    for p in range(_P):
        v = inc[p] * factor
        v2 = v * v * (1.0 / 12.0)
        A[b, p] = 1.0 + 0.5 * v + v2
        B[b, p] = 1.0 - v2


@njit(cache=True, fastmath=_FM, inline="always")
def _sweep(K, r, A, B, n_sub_rows, lam2, M2):
    """Advance ``n_sub_rows`` refined rows inside one original row. ``K`` (2, M2+1, P)
    holds the previous row at ``K[r]``; returns the parity of the new last row."""
    for _ in range(n_sub_rows):
        prev = K[r]
        cur = K[1 - r]
        for p in range(_P):
            cur[0, p] = 1.0
        for j in range(M2):
            b = j >> lam2
            for p in range(_P):
                a, c = A[b, p], B[b, p]
                cur[j + 1, p] = a * cur[j, p] + (a * prev[j + 1, p] - c * prev[j, p])
        r = 1 - r
    return r


@njit(cache=True, fastmath=_FM, inline="always")
def _squared_norms(xs, out):
    """out[a, p] = |xs[a, :, p]|^2 for lane-major points xs (T, d, P)."""
    out[:] = 0.0
    for a in range(xs.shape[0]):
        for k in range(xs.shape[1]):
            for p in range(_P):
                out[a, p] += xs[a, k, p] * xs[a, k, p]


@njit(cache=True, inline="always")
def _schedule(npairs, L2, lam1, lam2, n_threads, amplitude):
    """(M2, factor, nsub, nchunks, nthreads) of a pair sweep: the fine grid's columns
    ``L2 << lam2``, the increments' factor ``amplitude / 2^(lam1 + lam2)``, the sub-rows per
    row ``2^lam1``, the chunks of ``_P`` pairs and the threads that take them round-robin."""
    nchunks = (npairs + _P - 1) // _P
    factor = amplitude / float(1 << (lam1 + lam2))
    return L2 << lam2, factor, 1 << lam1, nchunks, max(1, min(n_threads, nchunks))


@njit(cache=True, fastmath=_FM, parallel=True)
def pde_linear_pairs(dX, dY, ii, jj, lam1, lam2, out, n_threads):
    """Linear lift: increments ``dX`` (nX, L1, d), ``dY`` (nY, L2, d) already scaled."""
    npairs = ii.shape[0]
    L1, d = dX.shape[1], dX.shape[2]
    L2 = dY.shape[1]
    M2, factor, nsub, nchunks, nthreads = _schedule(npairs, L2, lam1, lam2, n_threads, 1.0)
    for th in prange(nthreads):  # workspaces allocated once per thread, chunks round-robin
        xs = np.empty((L1, d, _P))
        ys = np.empty((L2, d, _P))
        K = np.empty((2, M2 + 1, _P))
        A = np.empty((L2, _P))
        B = np.empty((L2, _P))
        inc = np.empty(_P)
        for c in range(th, nchunks, nthreads):
            gather_lanes(dX, ii, c, npairs, xs)
            gather_lanes(dY, jj, c, npairs, ys)
            K[0] = 1.0
            r = 0
            for a in range(L1):
                for b in range(L2):
                    for p in range(_P):
                        inc[p] = 0.0
                    for k in range(d):
                        for p in range(_P):
                            inc[p] += xs[a, k, p] * ys[b, k, p]
                    _coefficients(inc, A, B, b, factor)
                r = _sweep(K, r, A, B, nsub, lam2, M2)
            store_lanes(K[r, M2], c, npairs, out)


@njit(cache=True, fastmath=_FM, parallel=True)
def pde_rbf_pairs(X, Y, ii, jj, lam1, lam2, gamma, out, n_threads, amplitude=1.0, exact=False):
    """RBF lift ``amplitude * exp(-gamma |x - y|^2)``: points ``X`` (nX, T1, d), ``Y`` (nY, T2, d).

    The increment inner product of the lifted paths is the double difference
    ``E[a+1, b+1] - E[a, b+1] - E[a+1, b] + E[a, b]`` of the point Gram ``E``, whose rows are
    computed on the fly (a vectorised polynomial exp; arguments below -708 give ~3e-308
    instead of a subnormal, an absolute difference far below rounding). The squared distances
    come from the expansion |x|^2 + |y|^2 - 2<x, y>, or with ``exact`` from the differences
    themselves (points far beyond the kernel's scale: the expansion would lose every digit or
    overflow; a square that overflows is +inf, E = 0), as ``tskernels.sqdist`` chooses.
    """
    npairs = ii.shape[0]
    T1, d = X.shape[1], X.shape[2]
    T2 = Y.shape[1]
    L2 = T2 - 1
    M2, factor, nsub, nchunks, nthreads = _schedule(npairs, L2, lam1, lam2, n_threads, amplitude)
    for th in prange(nthreads):  # workspaces allocated once per thread, chunks round-robin
        xs = np.empty((T1, d, _P))
        ys = np.empty((T2, d, _P))
        xn = np.empty((T1, _P))
        yn = np.empty((T2, _P))
        K = np.empty((2, M2 + 1, _P))
        A = np.empty((max(L2, 1), _P))
        B = np.empty((max(L2, 1), _P))
        E = np.empty((2, T2, _P))
        dot = np.empty(_P)
        inc = np.empty(_P)
        for c in range(th, nchunks, nthreads):
            gather_lanes(X, ii, c, npairs, xs)
            gather_lanes(Y, jj, c, npairs, ys)
            _squared_norms(xs, xn)
            _squared_norms(ys, yn)
            K[0] = 1.0
            r = 0
            e = 0  # E[e] is the current point-Gram row, E[1 - e] the previous one
            for a in range(T1):
                for b in range(T2):
                    for p in range(_P):
                        dot[p] = 0.0
                    if exact:
                        for k in range(d):
                            for p in range(_P):
                                t = xs[a, k, p] - ys[b, k, p]
                                dot[p] += t * t
                        for p in range(_P):
                            E[e, b, p] = _exp_nonpos(-gamma * dot[p])
                        continue
                    for k in range(d):
                        for p in range(_P):
                            dot[p] += xs[a, k, p] * ys[b, k, p]
                    for p in range(_P):
                        d2 = xn[a, p] + yn[b, p] - 2.0 * dot[p]
                        # vectorisable exp (1 ulp; libm's exp is a scalar call)
                        E[e, b, p] = _exp_nonpos(-gamma * max(d2, 0.0))
                if a > 0:
                    for b in range(L2):
                        for p in range(_P):
                            inc[p] = (E[e, b + 1, p] - E[1 - e, b + 1, p]) - (
                                E[e, b, p] - E[1 - e, b, p]
                            )
                        _coefficients(inc, A, B, b, factor)
                    r = _sweep(K, r, A, B, nsub, lam2, M2)
                e = 1 - e
            store_lanes(K[r, M2], c, npairs, out)


@njit(cache=True, fastmath=_FM, parallel=True)
def pde_increments_pairs(G, ii, jj, lam1, lam2, out, n_threads):
    """Any lift: precomputed increment inner products ``G`` (nX, nY, L1, L2)."""
    npairs = ii.shape[0]
    L1, L2 = G.shape[2], G.shape[3]
    M2, factor, nsub, nchunks, nthreads = _schedule(npairs, L2, lam1, lam2, n_threads, 1.0)
    for th in prange(nthreads):  # workspaces allocated once per thread, chunks round-robin
        K = np.empty((2, M2 + 1, _P))
        A = np.empty((max(L2, 1), _P))
        B = np.empty((max(L2, 1), _P))
        inc = np.empty(_P)
        for c in range(th, nchunks, nthreads):
            K[0] = 1.0
            r = 0
            for a in range(L1):
                for b in range(L2):
                    for p in range(_P):
                        q = min(c * _P + p, npairs - 1)
                        inc[p] = G[ii[q], jj[q], a, b]
                    _coefficients(inc, A, B, b, factor)
                r = _sweep(K, r, A, B, nsub, lam2, M2)
            store_lanes(K[r, M2], c, npairs, out)
