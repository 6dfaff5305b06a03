r"""Compiled (numba) core of the truncated signature kernel: explicit truncated signatures.

Isolated numba module. The signature of a piecewise-linear path is the product (Chen) of
the segment exponentials; each segment multiplies the running signature by
:math:`\exp(v) = \sum_j v^{\otimes j}/j!` in Horner form, level by level from the top:

.. math::
    S^k \leftarrow S^k + \Big(\big((v/k + S^1) \otimes v/(k-1) + S^2\big) \otimes \cdots
    + S^{k-1}\Big) \otimes v.

Inputs are assumed clean: C-contiguous float64 increments (n, L, d), finite.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["signatures"]


@njit(cache=True, parallel=True, fastmath={"contract"})
def signatures(dX, level, out):
    """Levels 1..``level`` of the signatures of paths with increments ``dX`` (n, L, d).

    ``out`` (n, d + d^2 + ... + d^level), zero-initialised, receives the levels concatenated
    (level k at offset d + ... + d^(k-1)); the word (i_1, ..., i_k) sits at index
    i_1 + i_2 d + ... + i_k d^(k-1) (reversed order: the last letter varies slowest, so each
    Horner step is a contiguous, vectorisable loop).
    """
    n, L, d = dX.shape
    off = np.zeros(level + 2, dtype=np.int64)
    size = 1
    for k in range(1, level + 1):
        size *= d
        off[k + 1] = off[k] + size
    for s in prange(n):
        B = np.empty(size)
        C = np.empty(size)
        tmp = np.empty(size)
        v = np.empty(d)
        for t in range(L):
            for c in range(d):
                v[c] = dX[s, t, c]
            for k in range(level, 1, -1):
                # Horner steps m = 1..k-2 in the scratch buffers (alternating B -> C -> B ...)
                for c in range(d):
                    B[c] = v[c] / k
                width = d
                for m in range(1, k - 1):
                    f = 1.0 / (k - m)
                    o = off[m]
                    src, dst = (B, C) if m % 2 == 1 else (C, B)
                    for i in range(width):
                        tmp[i] = (src[i] + out[s, o + i]) * f
                    for c in range(d):
                        vc = v[c]
                        oc = c * width
                        for i in range(width):
                            dst[oc + i] = tmp[i] * vc
                    width *= d
                # last step m = k-1 (factor 1) accumulates straight into level k
                src = B if k % 2 == 0 else C
                o, ok = off[k - 1], off[k]
                for i in range(width):
                    tmp[i] = src[i] + out[s, o + i]
                for c in range(d):
                    vc = v[c]
                    oc = ok + c * width
                    for i in range(width):
                        out[s, oc + i] += tmp[i] * vc
            for c in range(d):
                out[s, c] += v[c]
