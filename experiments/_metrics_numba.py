"""Compiled core of the CV metrics (numba): the per-position terms of ROC-AUC and average
precision for many rankings of the same labelled points.

Inputs are clean, contiguous arrays (checked by ``experiments._metrics._check``): N (R, n)
float64 negated scores without NaN, ``order`` (R, n) an ascending argsort of each row of N
(any algorithm: ties are put in index order here), y (n,) bool labels. The terms are summed
by numpy afterwards, so that the metrics are the same bits as
:func:`experiments._metrics.roc_auc_and_average_precision`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def metric_terms(N, order, y):  # pragma: no cover - compiled
    """(mid, prec) of shape (R, n): at descending position i of ranking r (the stable order:
    ties in index order) mid[r, i] = (n - (start + end) / 2) y_i, the ascending mid-rank of a
    positive, and prec[r, i] = TP(end) / (end + 1) y_i, the precision at the end of its tie
    group (0 for a negative); start, end the first and last position of that tie group.
    ``order`` is made stable in place (each tie group sorted by index)."""
    R, n = N.shape
    mid = np.zeros((R, n))
    prec = np.zeros((R, n))
    for r in prange(R):
        o = order[r]
        ss = N[r][o]
        i = 0
        tp = 0
        while i < n:
            j = i  # the tie group is positions i..j
            while j + 1 < n and ss[j + 1] == ss[i]:
                j += 1
            if j > i:
                o[i : j + 1] = np.sort(o[i : j + 1])
            for k in range(i, j + 1):
                if y[o[k]]:
                    tp += 1
            m = n - (i + j) / 2.0
            p = tp / (j + 1.0)
            for k in range(i, j + 1):
                if y[o[k]]:
                    mid[r, k] = m
                    prec[r, k] = p
            i = j + 1
    return mid, prec
