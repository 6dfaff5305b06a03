r"""Compiled (numba) core of the truncated signature kernel: explicit truncated signatures
and their order-1 discretisation (strictly increasing iterated sums).

Isolated numba module. The signature of a piecewise-linear path is the product (Chen) of
the segment exponentials; each segment multiplies the running signature by
:math:`\exp(v) = \sum_j v^{\otimes j}/j!` in Horner form, level by level from the top (so
the lower levels used are still the old ones):

.. math::
    S^k \leftarrow S^k + \Big(\big((v/k + S^1) \otimes v/(k-1) + S^2\big) \otimes \cdots
    + S^{k-1}\Big) \otimes v.

Each Horner step is an outer product with ``v`` whose new letter varies slowest, so it is
``d`` contiguous loops over the previous step's entries. The loops run over 1-d slices
starting at index 0 (LLVM vectorises these; with a run-time start offset numba's negative
index wraparound blocks vectorisation). The top level is read by no other level, so its
update is deferred and two segments are added to it per pass (``_advance``): half the
loads and stores of the largest level. Paths are distributed over threads (``prange``).

Inputs are assumed clean: C-contiguous float64 arrays, finite.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = [
    "signatures",
    "signatures_from_values",
    "order1_sums",
    "order1_sums_from_values",
    "order1_recursion_pairs",
]

#: only FMA contraction: IEEE semantics otherwise kept
_FM = {"contract"}


@njit(cache=True, fastmath=_FM, inline="always")
def _segment(v, level, off, S, B, C, D):
    r"""Chen's relation for one segment: S <- S (x) exp(v), levels 1..``level`` in place.

    Level k from the top: :math:`t_1 = v/k + S^1`, :math:`t_{m+1} = t_m \otimes v/(k-m) +
    S^{m+1}` (one fused multiply-add per entry; ``_top_vector``, into D), then
    :math:`S^k \mathrel{+}= t_{k-1} \otimes v`.
    """
    d = v.shape[0]
    for k in range(level, 1, -1):
        _top_vector(v, k, off, S, B, C, D)
        _top_update(S, off[k], off[k] - off[k - 1], d, D, v, D, v, False)
    for c in range(d):
        S[c] += v[c]


@njit(cache=True, fastmath=_FM, inline="always")
def _top_vector(v, N, off, S, B, C, out):
    r"""The vector :math:`t_{N-1}` of the top level's Horner chain (``_segment``) from the
    current levels 1..N-1, into ``out`` (d^(N-1)): the top level then gains
    :math:`t_{N-1} \otimes v`. N >= 2."""
    d = v.shape[0]
    fk = 1.0 / N
    first = out if N == 2 else B
    for c in range(d):
        first[c] = v[c] * fk + S[c]
    width = d
    cur = B
    nxt = C
    for m in range(1, N - 1):
        f = 1.0 / (N - m)
        so = off[m + 1]
        cv = cur[:width]
        dst = out if m == N - 2 else nxt
        for c in range(d):
            wc = v[c] * f
            dv = dst[c * width : (c + 1) * width]
            sv = S[so + c * width : so + (c + 1) * width]
            for i in range(width):
                dv[i] = cv[i] * wc + sv[i]
        width *= d
        cur, nxt = nxt, cur


@njit(cache=True, fastmath=_FM, inline="always")
def _top_update(S, base, width, d, T0, V0, T1, V1, two):
    """S^N += T0 (x) V0 (+ T1 (x) V1 when ``two``): one pass over the top level for two
    segments."""
    for c in range(d):
        a = V0[c]
        dv = S[base + c * width : base + (c + 1) * width]
        if two:
            b = V1[c]
            for i in range(width):
                dv[i] += T0[i] * a + T1[i] * b
        else:
            for i in range(width):
                dv[i] += T0[i] * a


@njit(cache=True, fastmath=_FM, inline="always")
def _advance(level, off, S, B, C, D, Tq, Vq, q):
    """Chen's relation for the segment ``Vq[q]``. The top level (read by no lower level) is
    deferred: its Horner vector goes to ``Tq[q]`` and two segments are added in one pass
    (half the loads and stores of the largest level). Returns the number pending (0 or 1)."""
    v = Vq[q]
    if level == 1:
        _segment(v, 1, off, S, B, C, D)
        return 0
    _top_vector(v, level, off, S, B, C, Tq[q])
    _segment(v, level - 1, off, S, B, C, D)
    if q == 0:
        return 1
    d = v.shape[0]
    _top_update(S, off[level], Tq.shape[1], d, Tq[0], Vq[0], Tq[1], Vq[1], True)
    return 0


@njit(cache=True, fastmath=_FM, inline="always")
def _flush(level, off, S, Tq, Vq, q):
    """Add a pending segment's top-level term."""
    if q == 1 and level > 1:
        d = Vq.shape[1]
        _top_update(S, off[level], Tq.shape[1], d, Tq[0], Vq[0], Tq[0], Vq[0], False)


@njit(cache=True)
def _offsets(level, d):
    """Offsets of the levels in the flat layout (level k starts at off[k]) and d^level."""
    off = np.zeros(level + 2, dtype=np.int64)
    size = 1
    for k in range(1, level + 1):
        size *= d
        off[k + 1] = off[k] + size
    return off, size


@njit(cache=True, parallel=True, fastmath=_FM)
def _signatures(P, from_values, scale, level, out):
    """Signatures of the paths given by P (n, ., d): points (increments
    ``scale * (P[:, t+1] - P[:, t])``) when ``from_values``, else the increments themselves."""
    n, R, d = P.shape
    L = R - 1 if from_values else R
    off, size = _offsets(level, d)
    for s in prange(n):
        B = np.empty(size)
        C = np.empty(size)
        D = np.empty(size // d)
        Tq = np.empty((2, size // d))
        Vq = np.empty((2, d))
        row = out[s]
        row[:] = 0.0
        q = 0
        for t in range(L):
            for c in range(d):
                if from_values:
                    Vq[q, c] = (P[s, t + 1, c] - P[s, t, c]) * scale
                else:
                    Vq[q, c] = P[s, t, c]
            q = _advance(level, off, row, B, C, D, Tq, Vq, q)
        _flush(level, off, row, Tq, Vq, q)


def signatures(dX, level, out):
    """Levels 1..``level`` of the signatures of paths with increments ``dX`` (n, L, d).

    ``out`` (n, d + d^2 + ... + d^level) receives the levels concatenated (level k at offset
    d + ... + d^(k-1)); the word (i_1, ..., i_k) sits at index i_1 + i_2 d + ... +
    i_k d^(k-1) (reversed order: the last letter varies slowest).
    """
    _signatures(dX, False, 1.0, level, out)


def signatures_from_values(V, scale, level, out):
    """As :func:`signatures` for the increments ``scale * (V[:, t+1] - V[:, t])`` of the
    points ``V`` (n, T, d)."""
    _signatures(V, True, scale, level, out)


@njit(cache=True, parallel=True, fastmath=_FM)
def _order1(P, from_values, scale, level, out):
    r"""Order-1 (strictly increasing) iterated sums of the paths given by P (n, ., d), as
    :func:`_signatures`: per segment :math:`S \leftarrow S \otimes (1 + v)`, i.e.
    :math:`S^k \mathrel{+}= S^{k-1} \otimes v` from the top level down (the lower level
    used is still the old one), then :math:`S^1 \mathrel{+}= v`."""
    n, R, d = P.shape
    L = R - 1 if from_values else R
    off, _ = _offsets(level, d)
    for s in prange(n):
        v = np.empty(d)
        row = out[s]
        row[:] = 0.0
        for t in range(L):
            for c in range(d):
                if from_values:
                    v[c] = (P[s, t + 1, c] - P[s, t, c]) * scale
                else:
                    v[c] = P[s, t, c]
            for k in range(level, 1, -1):
                lo = off[k - 1]
                width = off[k] - lo
                sv = row[lo : lo + width]
                for c in range(d):
                    a = v[c]
                    dv = row[off[k] + c * width : off[k] + (c + 1) * width]
                    for i in range(width):
                        dv[i] += sv[i] * a
            for c in range(d):
                row[c] += v[c]


def order1_sums(dX, level, out):
    r"""Levels 1..``level`` of the order-1 iterated sums of paths with increments ``dX``
    (n, L, d): level k is :math:`\sum_{s_1 < \cdots < s_k} v_{s_1} \otimes \cdots \otimes
    v_{s_k}` (the truncation of :math:`\prod_s (1 + v_s)`), laid out as in :func:`signatures`."""
    _order1(dX, False, 1.0, level, out)


def order1_sums_from_values(V, scale, level, out):
    """As :func:`order1_sums` for the increments ``scale * (V[:, t+1] - V[:, t])`` of the
    points ``V`` (n, T, d)."""
    _order1(V, True, scale, level, out)


@njit(cache=True, parallel=True, fastmath=_FM)
def order1_recursion_pairs(G, ii, jj, level, out):
    r"""Level sums of the order-1 discretised signature kernel for the pairs
    ``(ii[q], jj[q])`` of increment Grams ``G`` (nX, nY, L1, L2), into ``out`` (npairs, level):

    :math:`A_1 = D`, :math:`A_{k+1}[s, t] = D[s, t] \sum_{s' < s, t' < t} A_k[s', t']`,
    :math:`P_k = \sum A_k`, with D = ``G[ii[q], jj[q]]``. Row by row: ``col[k, t]`` holds
    :math:`\sum_{s' < s} A_{k+1}[s', t]` and a running sum over t gives the double sum, so
    a pair needs O(level L2) memory and level multiply-adds per cell. Pairs over threads.
    """
    npairs = ii.shape[0]
    L1, L2 = G.shape[2], G.shape[3]
    for q in prange(npairs):
        D = G[ii[q], jj[q]]
        col = np.zeros((level, L2))
        run = np.empty(level)
        new = np.empty(level)
        acc = np.zeros(level)
        for s in range(L1):
            run[:] = 0.0
            for t in range(L2):
                g = D[s, t]
                new[0] = g
                for k in range(1, level):
                    new[k] = g * run[k - 1]
                for k in range(level):
                    run[k] += col[k, t]
                    col[k, t] += new[k]
                    acc[k] += new[k]
        for k in range(level):
            out[q, k] = acc[k]
