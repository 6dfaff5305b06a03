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
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["conformal_threshold", "conformal_p_values", "min_corpus_for"]


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
