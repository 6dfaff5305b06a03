"""The held-out folds of the calibration: one rule, read by the exact members
(:mod:`novelty.detector._members`), the scorers' held-out scoring (:meth:`GramScorer.held_out_scores
<novelty.scorers._gram_scorer.GramScorer.held_out_scores>`) and the feature scorers
(:mod:`novelty.scorers._feature_scorers`).

The rule, on ``n`` held-out units (series, or groups of exact copies): leave one unit out when
``n <= loo_max``, else ``CALIBRATION_FOLDS`` folds of consecutive units of a seeded permutation
(``numpy.random.default_rng(0)``), or of the units in their order when they are already in
random order (``shuffle=False``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CALIBRATION_FOLDS", "LOO_MAX", "calibration_folds", "fold_units"]

#: Corpus sizes up to this use leave-one-out refits for the calibration scores, larger ones
#: CALIBRATION_FOLDS folds (the kNN scorer is always exact leave-one-out).
LOO_MAX = 50
CALIBRATION_FOLDS = 10


def fold_units(n: int, loo_max: int, shuffle: bool = True) -> list[np.ndarray]:
    """The test parts of the rule (module docstring) as arrays of unit indices into
    ``range(n)``: ``[[0], [1], ...]`` for ``n <= loo_max``, else ``CALIBRATION_FOLDS`` arrays
    (``numpy.array_split`` of the seeded permutation, or of ``arange(n)`` without ``shuffle``)."""
    if n <= loo_max:
        return [np.array([i]) for i in range(n)]
    order = np.random.default_rng(0).permutation(n) if shuffle else np.arange(n)
    return np.array_split(order, CALIBRATION_FOLDS)


def calibration_folds(n: int, loo_max: int, groups: np.ndarray | None = None):
    """(train, test) row-index pairs over ``n`` series by :func:`fold_units`. With duplicate
    ``groups`` (one id per series, :func:`novelty.detector._members.duplicate_groups`) the units
    are the
    groups: every copy of a series lies in the same test part (for groups ``arange(n)``, the
    folds of the series themselves)."""
    if groups is None:
        for test in fold_units(n, loo_max):
            yield np.setdiff1d(np.arange(n), test), test
        return
    groups = np.asarray(groups)
    for units in fold_units(int(groups.max()) + 1, loo_max):
        test = np.flatnonzero(np.isin(groups, units))
        yield np.setdiff1d(np.arange(n), test), test
