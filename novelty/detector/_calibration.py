r"""Conformal calibration of novelty scores: thresholds and p-values from held-out scores.

Given calibration scores :math:`c_1, \dots, c_n` (novelty scores of normal series that the
scoring model did not see, higher = more novel) and a new score :math:`s`, the conformal
p-value is

.. math::  p(s) = \frac{1 + \#\{i : c_i \ge s\}}{n + 1}.

If :math:`s, c_1, \dots, c_n` are exchangeable (the new series is normal and scored like the
calibration series), :math:`P(p(s) \le \varepsilon) \le \varepsilon` for every
:math:`\varepsilon`, with equality up to :math:`1/(n+1)` when the scores have no ties
(Vovk, Gammerman, Shafer 2005; split-conformal outlier detection as in Bates et al. 2023).
Flagging :math:`p(s) \le \varepsilon` is the same as :math:`s > t` with :math:`t` the
:math:`m`-th largest calibration score, :math:`m = \lfloor \varepsilon (n + 1) \rfloor`; with
:math:`m = 0` nothing can be flagged at that level (:math:`t = +\infty`).

For a batch of new series, :func:`benjamini_hochberg` on their conformal p-values controls the
false-discovery rate (the expected share of normal series among the flagged) instead of each
series' false-alarm probability.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from .._constraints import Interval, validate_arguments

__all__ = [
    "FDR",
    "benjamini_hochberg",
    "fdr_min_corpus",
    "fdr_shortfall",
    "conformal_threshold",
    "conformal_p_values",
    "min_corpus_for",
]


def _calibration(cal_scores) -> np.ndarray:
    c = np.asarray(cal_scores, dtype=np.float64).ravel()
    if c.size == 0:
        raise ValueError("conformal calibration needs at least one calibration score")
    if np.isnan(c).any():
        raise ValueError(
            f"{int(np.isnan(c).sum())} calibration score(s) are NaN: the scorer failed on "
            "held-out normal series"
        )
    return c


def conformal_threshold(cal_scores, contamination: float) -> float:
    r"""Novelty threshold :math:`t`: flag a series when its score is ``> t``.

    :math:`t` is the :math:`\lfloor \varepsilon (n+1) \rfloor`-th largest calibration score
    (``+inf`` when that count is 0, i.e. :math:`n < 1/\varepsilon - 1`), so that an
    exchangeable normal score exceeds it with probability at most ``contamination``.
    """
    c = _calibration(cal_scores)
    m = math.floor(float(contamination) * (c.size + 1) + 1e-12)
    if m <= 0:
        return math.inf
    return float(np.sort(c)[c.size - m])


def conformal_p_values(cal_scores, scores) -> np.ndarray:
    r""":math:`p(s) = (1 + \#\{c_i \ge s\}) / (n + 1)` for each score, array of the scores' shape.

    ``+inf`` scores get the smallest p-value :math:`1/(n+1)` unless calibration scores are
    ``+inf`` too; a NaN score raises.
    """
    c = np.sort(_calibration(cal_scores))
    s = np.asarray(scores, dtype=np.float64)
    if np.isnan(s).any():
        raise ValueError("cannot compute p-values of NaN scores")
    n_ge = c.size - np.searchsorted(c, s, side="left")
    return (1.0 + n_ge) / (c.size + 1.0)


def min_corpus_for(contamination: float) -> int:
    r"""The smallest number of calibration scores that can flag anything at ``contamination``:
    :math:`\lceil 1/\varepsilon \rceil - 1`."""
    return max(1, math.ceil(1.0 / float(contamination) - 1e-12) - 1)


#: relative slack of the step-up comparison: a p-value equal to its critical value
#: :math:`iq/m` in exact arithmetic (conformal p-values :math:`j/(n+1)` often are) is rejected
#: whatever the rounding of :math:`iq/m`
_BH_RTOL = 1e-12


#: A false-discovery rate: a float in (0, 1) (booleans, NaN and the ends refused).
FDR = Interval(Real, 0, 1, closed="neither")


@validate_arguments({"q": [FDR]})
def benjamini_hochberg(p_values, q: float) -> np.ndarray:
    r"""Benjamini-Hochberg step-up rule: which hypotheses to reject at false-discovery rate ``q``.

    With the :math:`m` p-values sorted, :math:`p_{(1)} \le \dots \le p_{(m)}`, let
    :math:`k = \max\{i : p_{(i)} \le i q / m\}` (:math:`k = 0` if there is none) and reject
    the :math:`k` smallest, i.e. every p-value :math:`\le p_{(k)}`. Tied p-values are all
    rejected or all kept (a tie straddling position :math:`k` would satisfy the condition at
    its last position), so the result does not depend on the order of the input. The
    comparison allows a relative 1e-12 of rounding, so that a p-value equal to :math:`iq/m` in
    exact arithmetic is rejected.

    Guarantee: if the null p-values are independent of each other and of the non-nulls, or more
    generally positively regression dependent on a subset (PRDS), BH controls the
    false-discovery rate, :math:`E[V / \max(R, 1)] \le q \, m_0 / m \le q` (:math:`V` false
    rejections among :math:`R`, :math:`m_0` nulls). Conformal p-values of a batch against one
    calibration set are not independent (they share the calibration scores) but, when the null
    (normal) test scores and the calibration scores are exchangeable, they are PRDS (Bates,
    Candès, Lei, Romano, Sesia 2023, "Testing for outliers with conformal p-values", Ann.
    Statist. 51(1)), so BH on them controls the FDR at ``q``. The guarantee holds marginally
    over the draw of the calibration set: averaged over calibration sets, not conditionally on
    the one at hand (for a given calibration set the realised FDR of repeated batches can be
    above ``q``).

    Parameters
    ----------
    p_values : array-like of floats in [0, 1] (any shape; NaN is an error).
    q : float in (0, 1), the target false-discovery rate.

    Returns
    -------
    bool array of ``p_values``' shape, True where rejected (flagged). Empty input gives an
    empty array.
    """
    q = float(q)
    p = np.asarray(p_values, dtype=np.float64)
    if p.size == 0:
        return np.zeros(p.shape, dtype=bool)
    if np.isnan(p).any():
        raise ValueError(
            f"{int(np.isnan(p).sum())} p-value(s) are NaN: the Benjamini-Hochberg rule needs "
            "every p-value"
        )
    if (p < 0).any() or (p > 1).any():
        raise ValueError(f"p-values must lie in [0, 1], got values in [{p.min()!r}, {p.max()!r}]")
    m = p.size
    ps = np.sort(p, axis=None)
    critical = q * np.arange(1, m + 1, dtype=np.float64) / m
    below = np.flatnonzero(ps <= critical * (1.0 + _BH_RTOL))
    if below.size == 0:
        return np.zeros(p.shape, dtype=bool)
    return p <= ps[below[-1]]


@validate_arguments({"q": [FDR], "n_series": [Interval(Integral, 1, None, closed="left")]})
def fdr_min_corpus(q: float, n_series: int = 1) -> int:
    r"""The fewest calibration scores :math:`n` with which :func:`benjamini_hochberg` at ``q``
    over ``n_series`` conformal p-values can flag a lone series: BH flags one series among
    :math:`m` only if its p-value is at most :math:`q/m`, and a conformal p-value is at least
    :math:`1/(n+1)`, so :math:`n \ge m/q - 1` (with BH's rounding slack). With ``n_series=1``
    (:math:`n \ge 1/q - 1`) it is the corpus below which ``fdr=q`` can flag nothing at all:
    with :math:`k` of :math:`m` series tied at the smallest p-value BH flags them all when
    :math:`1/(n+1) \le kq/m`, and :math:`k = m` is the most favourable case."""
    q, m = float(q), int(n_series)
    n = max(0, math.ceil(m / q) - 2)
    while 1.0 / (n + 1.0) > (q / m) * (1.0 + _BH_RTOL):  # BH's own comparison
        n += 1
    return n


@validate_arguments({"q": [FDR]})
def fdr_shortfall(n_calibration: int, q: float, n_series: int) -> str | None:
    r"""Why ``fdr=q`` over ``n_series`` series cannot flag a lone series with
    ``n_calibration`` held-out normal series (a message naming the corpus size needed), or
    None when it can (:func:`fdr_min_corpus`). Two cases: no series can be flagged at all
    (:math:`1/(n+1) > q`), or only a group of at least
    :math:`\lceil m / (q (n+1)) \rceil` series tied at the smallest p-value :math:`1/(n+1)`
    (more novel than every held-out normal series) can be. Used by
    ``KernelNoveltyDetector.predict(X, fdr=q)`` (a UserWarning when it flagged nothing) and
    the CLI's ``--fdr``."""
    q, n, m = float(q), int(n_calibration), int(n_series)
    if m < 1 or n >= fdr_min_corpus(q, m):
        return None
    at_all = fdr_min_corpus(q, 1)
    if n < at_all:
        return (
            f"fdr={q} can flag nothing: it needs at least {at_all} held-out normal series "
            f"(conformal p-values are at least 1/(n+1)); this detector has {n}"
        )
    k = math.ceil(m / (q * (n + 1)) * (1.0 - _BH_RTOL))
    return (
        f"fdr={q} over {m} series can flag only a group of at least {k} series with the "
        f"smallest p-value 1/{n + 1} (more novel than every held-out normal series); flagging "
        f"a lone series among {m} needs at least {fdr_min_corpus(q, m)} held-out normal "
        f"series, this detector has {n}: score fewer series at a time, fit on more normal "
        "series, or flag by p-value <= contamination (fdr=None)"
    )
