"""Compiled core of the conformance score (numba): nearest corpus point for every rank.

Inputs are clean, contiguous float64 arrays (checked by ``_variance_norm``):
P (n_test, M) test projections, E (N, M) corpus projections, W (n_alpha, M) weights.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def conformance_sq_all_ranks(P, E, W):  # pragma: no cover - compiled
    """out[a, m, t] = min_n sum_{k <= m} W[a, k] (P[t, k] - E[n, k])^2.

    The partial sums grow with m, so once every alpha's partial sum for corpus point n
    exceeds the current best at the full rank M, n cannot lower the minimum at any rank
    still ahead (nor at M): the loop over m stops there. The result is exact.
    """
    n_t, M = P.shape
    N = E.shape[0]
    n_a = W.shape[0]
    out = np.empty((n_a, M, n_t))
    for t in prange(n_t):
        best = np.full((n_a, M), np.inf)
        acc = np.empty(n_a)
        for n in range(N):
            for a in range(n_a):
                acc[a] = 0.0
            for m in range(M):
                d = P[t, m] - E[n, m]
                d2 = d * d
                alive = False
                for a in range(n_a):
                    acc[a] += W[a, m] * d2
                    if acc[a] < best[a, m]:
                        best[a, m] = acc[a]
                    if acc[a] <= best[a, M - 1]:
                        alive = True
                if not alive:
                    break
        for a in range(n_a):
            for m in range(M):
                out[a, m, t] = best[a, m]
    return out
