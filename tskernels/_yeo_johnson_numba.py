r"""Compiled (numba) core of the Yeo-Johnson lambda search: the variance of
:math:`\psi_\lambda(x)` of every feature, one lambda per feature, without (n, F) temporaries.

Isolated numba module. The arrays are feature-major, (F, n) and C-contiguous, so that each
feature's n values are contiguous: ``Lt`` = log(1 + |x|), ``post`` = (x >= 0), ``lam`` (F,).
One evaluation is three passes over one reused (F, n) buffer ``E``:

1. ``scaled_logs``: E = c L with c = lambda (x >= 0) or 2 - lambda (x < 0);
2. ``np.expm1(E, out=E)`` by the caller: numpy's expm1 is vectorised (SVML on AVX-512
   machines), about ten times faster than the scalar libm call a numba loop makes, and it
   keeps every value bitwise equal to the numpy reference (``_yeo_johnson._psi``);
3. ``psi_variances``: psi = +-E / c (+-L at c = 0), its mean, then the mean squared
   deviation, per feature (two passes over the feature's n values, in cache).

Both run in parallel over features from ``PARALLEL_MIN`` entries on, serially below: a
search makes ~70 evaluations of two passes each, and on cores shared with other work every
parallel region waits for a descheduled thread (measured on 2 cores shared with other
work: the default detector's fit at N = 100, T = 500, 0.9 M entries per pass, took 15.6 s
with parallel passes and 8.5 s with serial ones; on idle cores parallel passes save ~1.2 ms
of ~3.8 ms per evaluation). No fastmath:
every feature's sums run in row order with IEEE arithmetic, the order of numpy's axis-0
reductions on an (n, F) array with F >= 2, so the variances equal the reference's
``psi.var(axis=0)`` bit for bit.
"""

from __future__ import annotations

from numba import njit, prange

__all__ = ["PARALLEL_MIN", "scaled_logs", "psi_variances"]

#: Entries (F * n) from which a pass runs in parallel over features: a serial pass over
#: them takes ~8 ms, of the order of what one parallel region lost waiting on busy cores.
PARALLEL_MIN = 1 << 22


@njit(cache=True, inline="always")
def _scaled_logs_feature(Lt, post, lam, E, j):
    lp = lam[j]
    ln = 2.0 - lam[j]
    for i in range(Lt.shape[1]):
        E[j, i] = (lp if post[j, i] else ln) * Lt[j, i]


@njit(cache=True, inline="always")
def _psi_variance_feature(E, Lt, post, lam, j):
    n = E.shape[1]
    lp = lam[j]
    ln = 2.0 - lam[j]
    s = 0.0
    for i in range(n):
        p = post[j, i]
        c = lp if p else ln
        v = Lt[j, i] if abs(c) < 1e-12 else E[j, i] / c
        v = v if p else -v
        E[j, i] = v
        s += v
    mean = s / n
    q = 0.0
    for i in range(n):
        d = E[j, i] - mean
        q += d * d
    return q / n


@njit(cache=True, parallel=True)
def _scaled_logs_parallel(Lt, post, lam, E):
    for j in prange(Lt.shape[0]):
        _scaled_logs_feature(Lt, post, lam, E, j)


@njit(cache=True)
def _scaled_logs_serial(Lt, post, lam, E):
    for j in range(Lt.shape[0]):
        _scaled_logs_feature(Lt, post, lam, E, j)


@njit(cache=True, parallel=True)
def _psi_variances_parallel(E, Lt, post, lam, var):
    for j in prange(E.shape[0]):
        var[j] = _psi_variance_feature(E, Lt, post, lam, j)


@njit(cache=True)
def _psi_variances_serial(E, Lt, post, lam, var):
    for j in range(E.shape[0]):
        var[j] = _psi_variance_feature(E, Lt, post, lam, j)


def scaled_logs(Lt, post, lam, E) -> None:
    """E[j, i] = c * Lt[j, i] with c = lam[j] where post[j, i], else 2 - lam[j]."""
    if Lt.size >= PARALLEL_MIN:
        _scaled_logs_parallel(Lt, post, lam, E)
    else:
        _scaled_logs_serial(Lt, post, lam, E)


def psi_variances(E, Lt, post, lam, var) -> None:
    """var[j] = population variance over i of psi = +-E[j, i] / c (+-Lt[j, i] where
    |c| < 1e-12), with E = expm1(c Lt) on entry (overwritten by psi); the sign is that of
    x (post). Two passes: the mean, then the mean squared deviation from it."""
    if E.size >= PARALLEL_MIN:
        _psi_variances_parallel(E, Lt, post, lam, var)
    else:
        _psi_variances_serial(E, Lt, post, lam, var)


def cores_for(size: int):
    """(scaled_logs, psi_variances) compiled cores for arrays of ``size`` entries, chosen once
    (the serial ones below ``PARALLEL_MIN``): what :func:`scaled_logs` and :func:`psi_variances`
    dispatch to, for a caller evaluating many lambdas on the same arrays."""
    if size >= PARALLEL_MIN:
        return _scaled_logs_parallel, _psi_variances_parallel
    return _scaled_logs_serial, _psi_variances_serial
