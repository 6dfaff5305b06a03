"""Compiled (numba) core of the Volterra reservoir kernel (CPU path).

Inputs are right-aligned series (zeros before a series starts): XA (n, T, d) and the
transposed YAT (T, d, m), C-contiguous float64, with the first valid aligned step of every
series (``sx``, ``sy``, int64; all 0 for equal lengths). For each pair, over the aligned
steps s where both series hold data, oldest first:

    S <- 1 + lam^2 S / (1 - tau^2 <x_s, y_s>),   S = 1 initially,   K = S.

Rows are parallel (prange); within a row the update is vectorised over the columns.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

_FM = {"contract"}


@njit(cache=True, fastmath=_FM, error_model="numpy")
def _vrk_row(x, sxi, YAT, sy, j0, tau2, lam2, out_row):
    """K(x, y_j) for j >= j0 into out_row[j0:]."""
    T, d, m = YAT.shape
    nn = m - j0
    S = np.ones(nn)
    g = np.empty(nn)
    sy_v = sy[j0:]
    for t in range(sxi, T):
        g[:] = 0.0
        for k in range(d):
            xk = x[t, k]
            yv = YAT[t, k, j0:]
            for q in range(nn):
                g[q] += xk * yv[q]
        for q in range(nn):
            new = 1.0 + lam2 * S[q] / (1.0 - tau2 * g[q])
            S[q] = new if t >= sy_v[q] else S[q]
    out_row[j0:] = S


@njit(cache=True, parallel=True)
def vrk_sym(XA, XAT, sx, tau2, lam2):
    """(n, n) Gram of one batch: upper triangle (rows t and n-1-t per task), mirrored."""
    n = XA.shape[0]
    out = np.empty((n, n))
    for tt in prange((n + 1) // 2):
        t = np.int64(tt)
        for r in range(2):
            i = t if r == 0 else n - 1 - t
            if r == 1 and i == t:
                break
            _vrk_row(XA[i], sx[i], XAT, sx, i, tau2, lam2, out[i])
            for j in range(i + 1, n):
                out[j, i] = out[i, j]
    return out


@njit(cache=True, parallel=True)
def vrk_xy(XA, sx, YAT, sy, tau2, lam2):
    """(n, m) Gram between two batches."""
    n = XA.shape[0]
    out = np.empty((n, YAT.shape[2]))
    for ii in prange(n):
        i = np.int64(ii)
        _vrk_row(XA[i], sx[i], YAT, sy, 0, tau2, lam2, out[i])
    return out
