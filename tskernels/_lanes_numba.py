"""Compiled helpers shared by the pair solvers that run ``LANES`` pairs at once, one per SIMD
lane (the pair index is the innermost, contiguous array axis): GAK and the signature PDE."""

from __future__ import annotations

from numba import njit

#: pairs solved together, one per SIMD lane
LANES = 64


@njit(cache=True, inline="always")
def gather_lanes(src, index, chunk, npairs, dst):
    """``dst[:, :, p] = src[index[q]]`` for the pairs q = chunk * LANES + p of this chunk (past
    the last pair, the last pair again: those lanes compute a copy that is never stored)."""
    T, d = src.shape[1], src.shape[2]
    for p in range(LANES):
        i = index[min(chunk * LANES + p, npairs - 1)]
        for a in range(T):
            for k in range(d):
                dst[a, k, p] = src[i, a, k]


@njit(cache=True, inline="always")
def store_lanes(values, chunk, npairs, out):
    """``out[q] = values[p]`` for the pairs q = chunk * LANES + p that exist."""
    for p in range(LANES):
        q = chunk * LANES + p
        if q < npairs:
            out[q] = values[p]
