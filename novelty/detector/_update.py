r"""``KernelNoveltyDetector.update(X_new)``: add confirmed-normal series to the corpus without a
refit.

Let :math:`A` be the corpus of the fit (:math:`N` series) and :math:`B` the new series
(:math:`m` of them), read and checked as ``fit`` reads its input (same channels, the
detector's ``missing`` rule). ``update(B)`` turns the fitted detector into one whose corpus is
:math:`A \cup B` (in that order).

**What stays frozen** (``refit=False``, the default): everything fitted on :math:`A` other than
the scorer, namely the pre-processing statistics (pooling window, z-score means and standard
deviations), the kernels' corpus-fitted parameters (GAK's median-heuristic bandwidth, the
random convolutions' biases and power transform), the members and their hyper-parameters (a
selection of ``scorer="auto"`` is not rerun). Each member then:

- computes the kernel values of the new series against the corpus and among themselves,
  :math:`K_{BA}` (:math:`m \times N`) and :math:`K_{BB}` (:math:`m \times m`): :math:`O(mN)`
  kernel evaluations, never the :math:`N \times N` Gram again;
- **kNN scorer**: appends the rows. Its fit kept, per corpus series, the :math:`k`
  (``n_neighbors``) smallest squared feature-space distances to the series outside its
  duplicate group (an :math:`N \times k` array); the union's are those merged with the new
  distances, so the leave-one-out scores of every series of :math:`A \cup B` are exact
  (:func:`~novelty.scorers._baselines.knn_leave_one_out` on the union Gram) at :math:`O(mNk)` cost;
- **other Gram scorers** (conformance, Mahalanobis, SSE, SOS-rep, mean embedding, OC-SVM):
  the fit kept the corpus Gram :math:`K_{AA}` (the :math:`N \times N` float64 matrix the fit
  builds anyway); the union Gram :math:`\begin{pmatrix}K_{AA} & K_{BA}^\top\\ K_{BA} &
  K_{BB}\end{pmatrix}` is assembled and the scorer refitted on it, with its held-out refits
  (:func:`~novelty.detector._members.held_out_scores`). This is exact; no rank-one update of the
  eigendecompositions is attempted, since the held-out refits need the whole Gram anyway.

So a member is, after the update, **exactly** the member a fit on :math:`A \cup B` gives when
its pre-processing and kernel are fixed to those fitted on :math:`A` (tested to 1e-10 against
that fit), except for the calibration of cross-fitted members below.

**Calibration** (what is exchangeable with what). The conformal guarantee needs the held-out
score of a new normal series :math:`x` to be exchangeable with the calibration scores.

- *Plain members* (kernel fitted on no data, or GAK's bandwidth; pre-processing as fitted): the
  held-out scores of every distinct series of :math:`A \cup B` are recomputed against the
  union (kNN: leave-one-out, each series against the other :math:`N + m - 1`; other scorers:
  leave-one-out refits up to ``LOO_MAX`` distinct series, else ``CALIBRATION_FOLDS`` folds of
  the union). Given the frozen parameters, :math:`x` scored against :math:`A \cup B` is
  exchangeable with the series of :math:`A \cup B` held out of it, exactly as after a fit on
  :math:`A \cup B` (the series of :math:`B` did not even enter the frozen statistics; those of
  :math:`A` did, the same approximation as in ``fit``). For the kNN scorer a held-out score
  that does not see :math:`x` is never below its full-conformal counterpart (a larger
  reference set only brings neighbours closer), so the leave-one-out errs on the safe side.
- *Cross-fitted members* (``needs_fit`` kernels, the MiniRocket features of the default
  recipe, fitted on at least 3 distinct series): the frozen feature map :math:`\phi_A` was
  learned on :math:`A`, so a series of :math:`A` held out of the scorer alone would be
  optimistic. The held-out scores of :math:`A` are **kept** (each computed by a kernel and
  scorer refitted without its fold, against the rest of :math:`A`); every new distinct
  series gets its score under :math:`\phi_A` against :math:`A \cup B` without it (kNN:
  leave-one-out; other scorers: the scorer refitted on the union without its fold, the folds
  of the new distinct series: leave-one-out up to ``LOO_MAX`` of them, else
  ``CALIBRATION_FOLDS`` folds). Conditionally on :math:`A`, :math:`\phi_A` is fixed and the
  new series and :math:`x` are i.i.d., scored alike against the union: exchangeable (kNN:
  conservatively, as above). The kept scores of :math:`A` were computed against a smaller
  reference set (:math:`A` minus a fold instead of :math:`A \cup B`) by models fitted on fewer
  series, so they are, if anything, larger than :math:`x`'s score: conservative, as the
  cross-fitted calibration of ``fit`` is. With many more new series than corpus series this
  conservatism grows; ``refit=True`` removes it.
- A member whose kernel needs a fit but was fitted on fewer than 3 distinct series (no
  cross-fitting at fit) is updated as a plain member, as ``fit`` treats it.

**Exact duplicates.** Groups are those of the union
(:func:`~novelty.detector._members.duplicate_groups`
of :math:`A \cup B`, numbered by first occurrence, so :math:`A`'s numbering is kept): a new
series that copies a corpus series joins its group (held out with it; no calibration score of
its own), copies among the new series form new groups. ``duplicate_groups_`` becomes the
union's (None when every series is distinct).

**The detector afterwards**: ``n_corpus_`` :math:`= N + m`; each member's ``calibration_`` has
one score per distinct series of the union in order of first occurrence; ``scales_`` (several
members) are recomputed from the updated calibrations
(:func:`~novelty.detector._members.robust_scale`),
``calibration_scores_`` is their combination as in ``fit``, ``threshold_`` the conformal
threshold of those at ``contamination`` and ``offset_ = -threshold_``.

``refit=True`` is ``fit`` on :math:`A \cup B` (every statistic, kernel, selection and
calibration refitted): the same detector as ``fit`` on the union, at the cost of a fit.

**Approximate members** (``approximation=`` with more corpus series than ``n_components``)
keep a feature map whose landmarks and calibration set are drawn from the corpus; they are not
updated without a refit (``NotImplementedError``; use ``refit=True``). A detector fitted with
``approximation`` on at most ``n_components`` series has exact members, which are updated
as above and stay exact even when the union exceeds ``n_components``.

**Who does what.** ``update_detector`` reads ``X_new``, forms the union and its duplicate groups,
and asks each member for its updated copy (``Member.update``; an approximate member raises, as
above); the detector's calibration is then set from the members' by the one rule that ``fit``
uses (``KernelNoveltyDetector._set_calibration``: scales, combination, threshold, warnings).
A member extends its scorer by the scorer's own
:meth:`~novelty.scorers._gram_scorer.GramScorer.extend` (kNN: the corpus diagonal with the new
one appended; others: the refit on the union Gram) and its calibration by the functions here
(:func:`knn_calibration`, :func:`gram_calibration`). Members are updated on copies: an error
leaves the detector as it was.

State kept by the fit for this (``Member.update_state_``,
:func:`~novelty.detector._members.fit_state`): the checked raw corpus (for ``refit=True`` and
the duplicate groups; the pre-processed corpus ``corpus_`` is kept anyway), and the kNN
distances (:math:`N \times k`) or the corpus Gram (:math:`N \times N`, non-kNN scorers). It is
saved with the detector.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from ..scorers._baselines import aggregate_nearest, squared_feature_distances
from ..scorers._folds import LOO_MAX, fold_units
from ._members import (
    _n_distinct,
    duplicate_groups,
    first_occurrences,
    held_out_scores,
    make_scorer,
)

__all__ = ["gram_calibration", "knn_calibration", "update_detector"]

NO_STATE = (
    "this detector keeps no update state (fitted by a version without update): refit "
    "it on the union of its corpus and X_new, or use a detector fitted by this version"
)


def update_detector(det, X_new, refit: bool = False):
    """``det.update(X_new, refit)`` (module docstring); returns ``det``."""
    check_is_fitted(det, "members_")
    if not isinstance(refit, (bool, np.bool_)):
        raise ValueError(f"`refit` must be a bool (True or False), got {refit!r}")
    try:
        empty = len(X_new) == 0
    except TypeError:
        empty = False
    if empty:
        raise ValueError("`X_new` is empty: update needs at least one new normal series")
    Xs = det._series(X_new, reset=False)
    det._check_channels(X_new, Xs.d)
    state = getattr(det.members_[0], "update_state_", None)
    if refit:
        if state is None:
            raise ValueError(
                "this detector keeps no corpus (fitted by a version without update): fit it "
                "on the union of its corpus and X_new instead"
            )
        raw = concat_series(state["raw"], Xs)
        n_features = getattr(det, "n_features_in_", None)
        det.fit(raw)
        if n_features is not None:  # fitted on 2-D (n, T) input: scored the same way
            det.n_features_in_ = n_features
        return det
    for m in det.members_:  # before any work (an approximate member is never updated)
        m.check_updatable()
    raw = concat_series(state["raw"], Xs)
    groups = duplicate_groups(raw)
    # updated copies of every member first: an error leaves the detector as it was
    members = [m.update(Xs, raw, groups) for m in det.members_]
    det._set_calibration(members, len(raw), context="after update: ")
    return det


# ------------------------------------------------------------------ a member's calibration
def knn_calibration(member, state: dict, K_ba, K_bb, diag, g, groups) -> np.ndarray:
    """The calibration of the kNN ``member`` with the new rows appended (module docstring,
    "kNN scorer"): ``K_ba`` (m, N) and ``K_bb`` (m, m) the new series' kernel values, ``diag``
    the union's kernel diagonal, ``g`` the union's duplicate groups as a tensor (``groups``
    as given: None without copies). Plain members: ``state["nearest_d2"]`` is replaced by the
    union's (``state`` is the member's new state, a copy)."""
    template = make_scorer(member.spec)
    N, n_new = K_ba.shape[1], K_ba.shape[0]
    diag_old, diag_new = diag[:N], diag[N:]
    scale = float(diag.abs().max()) + 1.0
    d2_ba = squared_feature_distances(K_ba, diag_new, diag_old, scale)
    d2_bb = squared_feature_distances(K_bb, diag_new, diag_new, scale)
    d2_ba = d2_ba.masked_fill(g[N:, None] == g[None, :N], math.inf)
    d2_bb = d2_bb.masked_fill(g[N:, None] == g[None, N:], math.inf)
    k = min(int(template.n_neighbors), N + n_new)
    rows_new = torch.topk(torch.cat([d2_ba, d2_bb], dim=1), k, dim=1, largest=False).values
    if state["cross_fitted"]:
        new_scores = _knn_scores(template, rows_new, g[N:], g, N + n_new)
        return _append_new_units(member.calibration_, new_scores, g[N:], _n_distinct(member))
    old = torch.cat([state["nearest_d2"], d2_ba.T], dim=1)
    rows_old = torch.topk(old, k, dim=1, largest=False).values
    nearest = torch.cat([rows_old, rows_new])
    state["nearest_d2"] = nearest
    scores = _knn_scores(template, nearest, g, g, N + n_new)
    return _first_units(scores, groups)


def gram_calibration(member, state: dict, scorer, K, g, groups) -> tuple[np.ndarray, list | None]:
    """(calibration, held-out models or None) of the Gram-keeping ``member`` on the union Gram
    ``K`` (module docstring, "other Gram scorers"), ``scorer`` its extended scorer; ``g`` and
    ``groups`` as :func:`knn_calibration`. Also for a union of one distinct series (the
    caller empties that calibration)."""
    spec, N = member.spec, len(state["raw"])
    diag = torch.diagonal(K).clone()
    if state["cross_fitted"]:
        new_scores = _new_unit_scores(spec, K, diag, g, N)
        return _append_new_units(member.calibration_, new_scores, g[N:], _n_distinct(member)), None
    if int(g.max()) + 1 > 1:
        return _plain_scores(spec, scorer, K, diag, groups)
    return np.empty(0), None


def _plain_scores(spec, scorer, K, diag, groups) -> tuple[np.ndarray, list | None]:
    """Held-out scores of the union by scorer refits, as ``Member.fit`` computes them, and the
    held-out models when the scorer scores new series by them
    (:meth:`~novelty.scorers._gram_scorer.GramScorer.scores_by_refits`), else None."""
    models = [] if scorer.keeps_refits else None
    cal = held_out_scores(spec, K, diag, groups, models, scorer)
    keep = models if models and scorer.scores_by_refits(models) else None
    return _first_units(cal, groups), keep


def _new_unit_scores(spec, K, diag, g: torch.Tensor, N: int) -> np.ndarray:
    """Held-out scores of the new rows (``N:``) of the union Gram ``K``: the scorer refitted
    on the union without each fold of the new distinct series (the groups that start among
    the new rows; rows copying a corpus series are left out with their group and get no
    score). Folds: leave-one-out up to ``LOO_MAX`` new units, else ``CALIBRATION_FOLDS``
    seeded folds. Array (n_new,), NaN on the rows that get no score."""
    groups = g.cpu().numpy()
    first_new = int(groups[:N].max()) + 1
    units = np.arange(first_new, int(groups.max()) + 1)
    out = np.full(K.shape[0], np.nan)
    folds = [units[f] for f in fold_units(units.size, LOO_MAX)]  # the one fold rule
    template = make_scorer(spec)
    for fold in folds:
        test = np.flatnonzero(np.isin(groups, fold))
        train = np.setdiff1d(np.arange(K.shape[0]), test)
        tr, te = torch.from_numpy(train), torch.from_numpy(test)
        scorer = clone(template).fit(K[tr][:, tr])
        out[test] = scorer.score(K[te][:, tr], diag[te])
    return out[N:]


def _append_new_units(old_cal: np.ndarray, new_scores, g_new: torch.Tensor, n_groups_old: int):
    """The kept calibration of the corpus, then the scores of the new distinct series (the
    first row of each group that starts among the new rows)."""
    g_new = g_new.cpu().numpy()
    groups, rows = np.unique(g_new, return_index=True)
    rows = rows[groups >= n_groups_old]
    return np.concatenate([old_cal, np.asarray(new_scores)[rows]])


def _first_units(scores: np.ndarray, groups) -> np.ndarray:
    return scores if groups is None else scores[first_occurrences(groups)]


def _knn_scores(template, nearest, g_rows, g, n: int) -> np.ndarray:
    """kNN held-out scores of the rows with groups ``g_rows`` from their ascending squared
    distances ``nearest`` to the series outside their group (``g``: the groups of all ``n``
    series): k lowered to the series available (as
    :func:`~novelty.scorers._baselines.knn_leave_group_out`)."""
    available = n - torch.bincount(g, minlength=int(g.max()) + 1)[g_rows]
    k_row = available.clamp(min=1, max=int(template.n_neighbors))
    dist = nearest[:, : int(k_row.max())].sqrt()
    return aggregate_nearest(dist, k_row, template.aggregate)


def concat_series(A, B):
    """The checked batches ``A`` then ``B`` as one :class:`tskernels.SeriesBatch` (a model
    saved by an earlier version may hold its corpus as numpy: read as checked)."""
    from tskernels import SeriesBatch

    return SeriesBatch.concat([SeriesBatch.from_checked(A), SeriesBatch.from_checked(B)])
