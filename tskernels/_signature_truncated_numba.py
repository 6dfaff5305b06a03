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
    (level k at offset d + ... + d^(k-1), row-major index i_1 d^(k-1) + ... + i_k).
    """
    n, L, d = dX.shape
    off = np.zeros(level + 2, dtype=np.int64)
    size = 1
    for k in range(1, level + 1):
        size *= d
        off[k + 1] = off[k] + size
    for s in prange(n):
        S = out[s]
        B = np.empty(size)
        C = np.empty(size)
        for t in range(L):
            v = dX[s, t]
            for k in range(level, 0, -1):
                for c in range(d):
                    B[c] = v[c] / k
                width = d
                for m in range(1, k):
                    f = 1.0 / (k - m)
                    o = off[m]
                    for i in range(width):
                        bi = (B[i] + S[o + i]) * f
                        for c in range(d):
                            C[i * d + c] = bi * v[c]
                    width *= d
                    B, C = C, B
                o = off[k]
                for i in range(width):
                    S[o + i] += B[i]
