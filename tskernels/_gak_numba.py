"""Compiled (numba) core of the global alignment kernel: log K for pairs of series.

The entry points assume clean inputs: C-contiguous float64 values V (n, T_max, d) and their
transpose VT (n, d, T_max), int64 lengths, the largest point norm R of every series,
``inv2s2 = 1 / (2 sigma^2)``, a float64 array ``w`` of per-offset weights indexed by |i - j|
(length >= T_max; all ones unless Cuturi's triangular weights are asked, ``weighted``), and
``band`` (0 = no band, else cells with |i - j| >= band are excluded).

Recursion (1-based cells, M[0, 0] = 1, M[i, 0] = M[0, j] = 0):

    M[i, j] = kappa_ij (M[i-1, j-1] + M[i-1, j] + M[i, j-1]),
    kappa_ij = e_ij / (2 - e_ij),  e_ij = w_|i-j| exp(-|x_i - y_j|^2 / (2 sigma^2)).

It runs in linear space, one row at a time: the local kernels of a row are computed in a
vectorised loop (a polynomial exp with explicit range reduction, accurate to 1 ulp, since
libm's exp does not vectorise), and the serial dependence along the row is cut fourfold by
solving four steps of the first-order recurrence at once. Each block of 128 columns of a row
carries its own power-of-two scale exponent (exact rescaling), so nothing overflows at any
length and cells are only ever compared with near neighbours: a single scale per row is not
enough, since along a long row the cells span far more than the float64 range and the cells
that matter for the corner need not be near the row maximum. A pair is recomputed exactly in
log space (log-sum-exp per cell) when a local kernel could underflow (|x_i - y_j|^2 /
(2 sigma^2) > 700, screened per pair from the largest norms ``R``, then checked per row) or
when a cell is negligible (< 1e-250) against its block; with bandwidths near the median
heuristic neither happens.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._lanes_numba import LANES as _P
from ._lanes_numba import gather_lanes
from ._math_numba import _bits_to_f64, _exp_nonpos  # noqa: F401  (_exp_nonpos: tests)

_TINY = 1e-250
_FM = {"contract"}  # allow fused multiply-add only
# error_model="numpy": no zero-division checks in the loops (they block vectorisation);
# divisors here are 2 - e >= 1 and a positive row maximum.


#: Bound on |x| below which ``_exp_small`` is accurate (Taylor remainder < 3e-19 relative).
_SMALL = 0.0625


@njit(cache=True, inline="always", fastmath=_FM)
def _exp_small(x):
    """exp(x) for |x| <= 1/16 (degree-9 Taylor polynomial, no range reduction)."""
    p = 1.0 / 362880.0
    p = p * x + 1.0 / 40320.0
    p = p * x + 1.0 / 5040.0
    p = p * x + 1.0 / 720.0
    p = p * x + 1.0 / 120.0
    p = p * x + 1.0 / 24.0
    p = p * x + 1.0 / 6.0
    p = p * x + 0.5
    p = p * x + 1.0
    return p * x + 1.0


@njit(cache=True)
def _pair_log_gak_logspace(x, nx, yT, ny, inv2s2, w, band):
    """log K(x, y) by the log-space recursion (exact fallback, log-sum-exp per cell)."""
    d = x.shape[1]
    ninf = -np.inf
    prev = np.full(ny + 1, ninf)
    cur = np.full(ny + 1, ninf)
    prev[0] = 0.0
    for i in range(1, nx + 1):
        cur[0] = ninf
        for j in range(1, ny + 1):
            off = i - j if i >= j else j - i
            if (band > 0 and off >= band) or w[off] <= 0.0:
                cur[j] = ninf
                continue
            a = prev[j - 1]
            b = prev[j]
            c = cur[j - 1]
            m = max(a, max(b, c))
            if m == ninf:
                cur[j] = ninf
                continue
            s = 0.0
            for k in range(d):
                diff = x[i - 1, k] - yT[k, j - 1]
                s += diff * diff
            le = math.log(w[off]) - s * inv2s2
            lse = m + math.log(math.exp(a - m) + math.exp(b - m) + math.exp(c - m))
            cur[j] = lse + le - math.log(2.0 - math.exp(le))
        prev, cur = cur, prev
    return prev[ny]


_BLOCK = 128  # columns sharing one scale exponent
_NEG = -(1 << 40)  # exponent of an all-zero block
_LN2 = 0.6931471805599453


@njit(cache=True, inline="always")
def _pow2(e):
    """2^e for integer e <= 1023, exactly (0 below the normal range)."""
    if e < -1022:
        return 0.0
    return _bits_to_f64((e + 1023) << 52)


@njit(cache=True, inline="always")
def _exponent(v):
    """e with v = m 2^e, m in [0.5, 1); _NEG for v == 0."""
    if v > 0.0:
        return np.int64(math.frexp(v)[1])
    return _NEG


@njit(cache=True, fastmath=_FM, error_model="numpy")
def _pair_log_gak(x, nx, yT, ny, inv2s2, w, weighted, band, careful, small):
    """log K(x, y): linear-space recursion, row by row, each block of 128 columns of a row
    carrying its own power-of-two scale exponent.

    Scaling per block rather than per row matters: along a long row the cells span far more
    than the float64 range, and the cells that matter for the corner need not be near the
    row maximum; within a block, neighbouring cells differ by bounded factors. Scaling by
    powers of two is exact. ``careful``: some |x_i - y_j|^2 / (2 sigma^2) may exceed 700
    (exp near underflow), so each row is checked and the pair redone in log space if it does.
    ``small``: every |x_i - y_j|^2 / (2 sigma^2) <= 1/16 (the usual case with the median
    heuristic), so the exponentials need no range reduction.
    """
    if band > 0 and abs(nx - ny) >= band:
        return -np.inf
    B = _BLOCK
    nb = (ny + B - 1) // B
    # separate allocations (not views of one buffer) so LLVM can vectorise the row loops
    prev = np.zeros(ny + 2)
    cur = np.zeros(ny + 2)
    acc = np.zeros(ny + 2)
    a = np.zeros(ny + 2)
    b = np.zeros(ny + 2)
    e_prev = np.full(nb, _NEG)  # true value = stored * 2^e, per block of columns
    e_cur = np.full(nb, _NEG)
    prev[0] = 1.0  # M[0, 0] = 1 (column 0 has exponent 0)
    for i in range(1, nx + 1):
        lo = 1
        hi = ny
        if band > 0:
            if i - band + 1 > 1:
                lo = i - band + 1
            if i + band - 1 < ny:
                hi = i + band - 1
        nn = hi - lo + 1
        # squared distances |x_i - y_j|^2, vectorised over j (on slices: LLVM does not
        # vectorise these loops with a run-time start index), channels two at a time
        acc_v = acc[lo : hi + 1]
        d = x.shape[1]
        k0 = d % 2
        if k0 == 1:
            x0 = x[i - 1, 0]
            y0 = yT[0, lo - 1 : hi]
            for q in range(nn):
                diff = x0 - y0[q]
                acc_v[q] = diff * diff
        else:
            acc_v[:] = 0.0
        for k in range(k0, d, 2):
            x0 = x[i - 1, k]
            x1 = x[i - 1, k + 1]
            y0 = yT[k, lo - 1 : hi]
            y1 = yT[k + 1, lo - 1 : hi]
            for q in range(nn):
                d0 = x0 - y0[q]
                d1 = x1 - y1[q]
                acc_v[q] += d0 * d0 + d1 * d1
        if careful:
            top = 0.0
            for q in range(nn):
                top = acc_v[q] if acc_v[q] > top else top
            if top * inv2s2 > 700.0:
                return _pair_log_gak_logspace(x, nx, yT, ny, inv2s2, w, band)
        # local kernels b[j] = kappa_ij, vectorised over j
        b_v = b[lo : hi + 1]
        if weighted:
            for q in range(nn):
                j = lo + q
                off = i - j if i >= j else j - i
                e = _exp_nonpos(-acc_v[q] * inv2s2) * w[off]
                b_v[q] = e / (2.0 - e)
        elif small:
            for q in range(nn):
                e = _exp_small(-acc_v[q] * inv2s2)
                b_v[q] = e / (2.0 - e)
        else:
            for q in range(nn):
                e = _exp_nonpos(-acc_v[q] * inv2s2)
                b_v[q] = e / (2.0 - e)
        cur[lo - 1] = 0.0
        cur[0] = 0.0
        for J in range(nb):
            e_cur[J] = _NEG
        for J in range((lo - 1) // B, (hi - 1) // B + 1):
            ja = max(lo, J * B + 1)
            jb = min(hi, (J + 1) * B)
            # inputs: top row of the block (exponent e_prev[J]), top-left and left cells
            if ja - 1 == 0:
                e_tl = 0 if i == 1 else _NEG
                e_left = _NEG
            elif ja - 1 >= J * B + 1:  # ja = lo inside the block: left cells are zero
                e_tl = e_prev[J]
                e_left = _NEG
            else:
                e_tl = e_prev[J - 1]
                e_left = e_cur[J - 1]
            v_tl = prev[ja - 1]
            v_left = cur[ja - 1]
            base = e_prev[J]
            if v_tl > 0.0:
                base = max(base, e_tl + _exponent(v_tl))
            if v_left > 0.0:
                base = max(base, e_left + _exponent(v_left))
            nq = jb - ja + 1
            c_v = cur[ja : jb + 1]
            if base <= _NEG // 2:  # every input is zero
                c_v[:] = 0.0
                continue
            f_top = _pow2(e_prev[J] - base)
            p_first = v_tl * _pow2(e_tl - base) if v_tl > 0.0 else 0.0
            c = v_left * _pow2(e_left - base) if v_left > 0.0 else 0.0
            # a[j] = kappa_ij (prev[j-1] + prev[j]) in the block's scale, vectorised
            a_v = a[ja : jb + 1]
            bb = b[ja : jb + 1]
            p_v = prev[ja - 1 : jb + 1]  # p_v[q] = prev[ja - 1 + q]
            for q in range(nq):
                a_v[q] = bb[q] * ((p_v[q] + p_v[q + 1]) * f_top)
            a_v[0] = bb[0] * (p_first + p_v[1] * f_top)
            # cur[j] = a[j] + b[j] cur[j-1], four steps at once: cur[j+r] = A_r + B_r cur[j-1]
            # with A_r, B_r formed off the serial path, which then holds one multiply-add per
            # four cells (all terms are positive: no cancellation)
            m = 0.0
            mn = np.inf
            q = 0
            while q < nq - 3:
                a0 = a_v[q]
                b0 = bb[q]
                b1 = bb[q + 1]
                b2 = bb[q + 2]
                b3 = bb[q + 3]
                A1 = a_v[q + 1] + b1 * a0
                B1 = b1 * b0
                A2 = a_v[q + 2] + b2 * A1
                B2 = b2 * B1
                A3 = a_v[q + 3] + b3 * A2
                B3 = b3 * B2
                c0 = a0 + b0 * c
                c1 = A1 + B1 * c
                c2 = A2 + B2 * c
                c = A3 + B3 * c
                c_v[q] = c0
                c_v[q + 1] = c1
                c_v[q + 2] = c2
                c_v[q + 3] = c
                t01 = c0 if c0 > c1 else c1
                t23 = c2 if c2 > c else c
                t = t01 if t01 > t23 else t23
                m = t if t > m else m
                u01 = c0 if c0 < c1 else c1
                u23 = c2 if c2 < c else c
                u = u01 if u01 < u23 else u23
                mn = u if u < mn else mn
                q += 4
            while q < nq:
                c = a_v[q] + bb[q] * c
                c_v[q] = c
                m = c if c > m else m
                mn = c if c < mn else mn
                q += 1
            if not mn > _TINY * m:
                # a cell negligible against its neighbours (or an underflow): redo exactly
                return _pair_log_gak_logspace(x, nx, yT, ny, inv2s2, w, band)
            ex = _exponent(m)
            scale = _pow2(-ex)  # exact: the block maximum into [0.5, 1)
            for q in range(nq):
                c_v[q] *= scale
            e_cur[J] = base + ex
        cur[hi + 1] = 0.0
        prev, cur = cur, prev
        e_prev, e_cur = e_cur, e_prev
    last = prev[ny]
    if not last > _TINY:  # the corner is negligible against its block: redo exactly
        return _pair_log_gak_logspace(x, nx, yT, ny, inv2s2, w, band)
    return math.log(last) + e_prev[(ny - 1) // B] * _LN2


@njit(cache=True)
def _careful(rx, ry, inv2s2):
    """Whether |x_i - y_j|^2 / (2 sigma^2) can exceed 700, from the largest norms."""
    return (rx + ry) * (rx + ry) * inv2s2 > 700.0


@njit(cache=True)
def _small(rx, ry, inv2s2):
    """Whether every |x_i - y_j|^2 / (2 sigma^2) is at most 1/16, from the largest norms."""
    return (rx + ry) * (rx + ry) * inv2s2 <= _SMALL


@njit(cache=True, parallel=True)
def log_gak_sym(V, VT, L, R, inv2s2, w, weighted, band):
    """log K between all pairs of one batch, (n, n); upper triangle computed, then mirrored.

    Task t handles rows t and n-1-t, so every task holds about n+1 pairs.
    """
    n = V.shape[0]
    out = np.empty((n, n))
    for tt in prange((n + 1) // 2):
        t = np.int64(tt)  # prange indices are unsigned; keep index arithmetic in int64
        for r in range(2):
            i = t if r == 0 else n - 1 - t
            if r == 1 and i == t:
                break
            for j in range(i, n):
                care = _careful(R[i], R[j], inv2s2)
                sm = _small(R[i], R[j], inv2s2)
                v = _pair_log_gak(V[i], L[i], VT[j], L[j], inv2s2, w, weighted, band, care, sm)
                out[i, j] = v
                out[j, i] = v
    return out


@njit(cache=True, parallel=True)
def log_gak_xy(VX, LX, RX, VYT, LY, RY, inv2s2, w, weighted, band):
    """log K between two batches, (n_X, n_Y)."""
    n, m = VX.shape[0], VYT.shape[0]
    out = np.empty((n, m))
    for pp in prange(n * m):
        p = np.int64(pp)
        i = p // m
        j = p - i * m
        care = _careful(RX[i], RY[j], inv2s2)
        sm = _small(RX[i], RY[j], inv2s2)
        out[i, j] = _pair_log_gak(VX[i], LX[i], VYT[j], LY[j], inv2s2, w, weighted, band, care, sm)
    return out


@njit(cache=True, parallel=True)
def log_gak_diag(V, VT, L, R, inv2s2, w, weighted, band):
    """log K(x_i, x_i), (n,)."""
    n = V.shape[0]
    out = np.empty(n)
    for i in prange(n):
        care = _careful(R[i], R[i], inv2s2)
        sm = _small(R[i], R[i], inv2s2)
        out[i] = _pair_log_gak(V[i], L[i], VT[i], L[i], inv2s2, w, weighted, band, care, sm)
    return out


# ---------------------------------------------------------------------------- pair lanes
@njit(cache=True, inline="always", fastmath=_FM)
def _kappa_small(a):
    """kappa = e / (2 - e), e = exp(-a), for -1e-3 <= a <= 1/16, without exp or division:
    1 - 2a + a^2 g(a), g of degree 9 interpolating (kappa - 1 + 2a) / a^2 at the Chebyshev
    nodes of [0, 1/16] (coefficients fitted in 50-digit arithmetic; truncation error below
    2e-18 relative on that range, against 1e-17 for the degree-16 Taylor series it replaces).
    """
    p = -52.55372838175888
    p = p * a + 52.85050877202143
    p = p * a + -38.814366155396804
    p = p * a + 27.064449826994814
    p = p * a + -18.766773837848035
    p = p * a + 13.008328534002935
    p = p * a + -9.016666620833579
    p = p * a + 6.249999999777168
    p = p * a + -4.333333333332912
    p = p * a + 3.0
    p = p * a + -2.0
    return p * a + 1.0


#: log of the float64 range kept clear of over/underflow by the a-priori bounds
_LOG_RANGE = 690.0


@njit(cache=True)
def _lanes_safe(rx, ry, nx, ny, inv2s2):
    """Whether every cell M[i, j], i <= nx, j <= ny, stays within exp(+-690) in linear
    space without rescaling: kappa <= 1 gives M[i, j] <= 3^(i + j), and the product along
    one alignment (at most i + j - 1 cells) gives M[i, j] >= kappa_min^(i + j), with
    kappa_min from the largest norms (e_min = exp(-(rx + ry)^2 / (2 sigma^2)))."""
    a = (rx + ry) * (rx + ry) * inv2s2
    neg_log_kmin = a + math.log(2.0 - math.exp(-a))
    n = nx + ny
    return n * 1.0986122886681098 < _LOG_RANGE and n * neg_log_kmin < _LOG_RANGE


@njit(cache=True, fastmath=_FM, error_model="numpy", parallel=True)
def log_gak_pairs(VX, VXT, LX, RX, VY, VYT, LY, RY, ii, jj, inv2s2, w, out):
    """log K(VX[ii[q]], VY[jj[q]]) -> out[q], no band, unit weights.

    ``_P`` pairs at once, one per SIMD lane: the local kernels of a row and the recursion
    along it are vector operations over the pairs, so the serial dependence along a row is
    shared by ``_P`` pairs. Linear space without any rescaling, used for the pairs whose
    cells provably stay within the float64 range (:func:`_lanes_safe`, e.g. T <= 300 with
    bandwidths near the median heuristic); other pairs go to the rescaled recursion
    :func:`_pair_log_gak`.
    """
    npairs = ii.shape[0]
    T1, d = VX.shape[1], VX.shape[2]
    T2 = VY.shape[1]
    nch = (npairs + _P - 1) // _P
    for cc in prange(nch):
        ch = np.int64(cc)
        xs = np.empty((T1, d, _P))
        ys = np.empty((T2, d, _P))
        prev = np.empty((T2 + 1, _P))
        cur = np.empty((T2 + 1, _P))
        cu2 = np.empty((T2 + 1, _P))
        kap = np.empty((T2, _P))
        nxs = np.empty((T1, _P))
        nys = np.empty((T2, _P))
        acc = np.empty(_P)
        ac2 = np.empty(_P)
        res = np.zeros(_P)
        nx = np.zeros(_P, dtype=np.int64)
        ny = np.zeros(_P, dtype=np.int64)
        safe = np.zeros(_P, dtype=np.bool_)
        small = True
        any_safe = False
        gather_lanes(VX, ii, ch, npairs, xs)
        gather_lanes(VY, jj, ch, npairs, ys)
        for p in range(_P):
            q = min(ch * _P + p, npairs - 1)
            i, j = ii[q], jj[q]
            nx[p] = LX[i]
            ny[p] = LY[j]
            safe[p] = _lanes_safe(RX[i], RY[j], LX[i], LY[j], inv2s2)
            any_safe = any_safe or safe[p]
            small = small and _small(RX[i], RY[j], inv2s2)
        if any_safe:
            mx = 0
            my = 0
            for p in range(_P):
                mx = max(mx, nx[p])
                my = max(my, ny[p])
            prev[:, :] = 0.0
            for p in range(_P):
                prev[0, p] = 1.0
            if small:
                # a = |x|^2 s + |y|^2 s - <2 s x, y>, s = 1 / (2 sigma^2): the absolute
                # rounding error in a is a few ulp of (|x|^2 + |y|^2) s <= 1/16
                for a in range(T1):
                    for p in range(_P):
                        nxs[a, p] = 0.0
                    for k in range(d):
                        for p in range(_P):
                            v = xs[a, k, p]
                            nxs[a, p] += v * v
                            xs[a, k, p] = v * (2.0 * inv2s2)
                    for p in range(_P):
                        nxs[a, p] *= inv2s2
                for b in range(T2):
                    for p in range(_P):
                        nys[b, p] = 0.0
                    for k in range(d):
                        for p in range(_P):
                            v = ys[b, k, p]
                            nys[b, p] += v * v
                    for p in range(_P):
                        nys[b, p] *= inv2s2
            for i in range(1, mx + 1):
                for p in range(_P):
                    cur[0, p] = 0.0
                if small:
                    # scaled squared distance, kappa by its polynomial (no exp or division)
                    # and the recursion, fused per cell, vectorised over the lanes; two rows
                    # at a time (row i + 1 reuses the loads of the y points from L1)
                    if i % 2 == 0:
                        continue  # done with row i - 1
                    two = i < mx
                    r2 = i if two else i - 1
                    for p in range(_P):
                        cu2[0, p] = 0.0
                    k0 = d % 2
                    for j in range(my):
                        if k0 == 1:
                            for p in range(_P):
                                acc[p] = (nxs[i - 1, p] + nys[j, p]) - xs[i - 1, 0, p] * ys[j, 0, p]
                                ac2[p] = (nxs[r2, p] + nys[j, p]) - xs[r2, 0, p] * ys[j, 0, p]
                        else:
                            for p in range(_P):
                                acc[p] = nxs[i - 1, p] + nys[j, p]
                                ac2[p] = nxs[r2, p] + nys[j, p]
                        for k in range(k0, d, 2):
                            for p in range(_P):
                                y0 = ys[j, k, p]
                                y1 = ys[j, k + 1, p]
                                acc[p] -= xs[i - 1, k, p] * y0 + xs[i - 1, k + 1, p] * y1
                                ac2[p] -= xs[r2, k, p] * y0 + xs[r2, k + 1, p] * y1
                        for p in range(_P):
                            c1 = _kappa_small(acc[p]) * (prev[j, p] + prev[j + 1, p] + cur[j, p])
                            cur[j + 1, p] = c1
                            cu2[j + 1, p] = _kappa_small(ac2[p]) * (cur[j, p] + c1 + cu2[j, p])
                    for p in range(_P):
                        if i == nx[p]:
                            res[p] = cur[ny[p], p]
                        elif two and i + 1 == nx[p]:
                            res[p] = cu2[ny[p], p]
                    prev, cur, cu2 = cu2, prev, cur
                    continue
                # local kernels kappa of row i, vectorised over the lanes
                for j in range(my):
                    # squared distances, two channels per pass over the lanes
                    k0 = d % 2
                    if k0 == 1:
                        for p in range(_P):
                            diff = xs[i - 1, 0, p] - ys[j, 0, p]
                            acc[p] = diff * diff
                    else:
                        for p in range(_P):
                            acc[p] = 0.0
                    for k in range(k0, d, 2):
                        for p in range(_P):
                            d0 = xs[i - 1, k, p] - ys[j, k, p]
                            d1 = xs[i - 1, k + 1, p] - ys[j, k + 1, p]
                            acc[p] += d0 * d0 + d1 * d1
                    for p in range(_P):
                        e = _exp_nonpos(-acc[p] * inv2s2)
                        kap[j, p] = e / (2.0 - e)
                for j in range(1, my + 1):
                    for p in range(_P):
                        cur[j, p] = kap[j - 1, p] * (prev[j - 1, p] + prev[j, p] + cur[j - 1, p])
                for p in range(_P):
                    if i == nx[p]:
                        res[p] = cur[ny[p], p]
                prev, cur = cur, prev
        for p in range(_P):
            q = ch * _P + p
            if q < npairs:
                if safe[p]:
                    out[q] = math.log(res[p])
                else:
                    i, j = ii[q], jj[q]
                    care = _careful(RX[i], RY[j], inv2s2)
                    sm = _small(RX[i], RY[j], inv2s2)
                    out[q] = _pair_log_gak(
                        VX[i], LX[i], VYT[j], LY[j], inv2s2, w, False, 0, care, sm
                    )
