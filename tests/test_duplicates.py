"""Exact duplicates in the corpus (issue 25, item 2): every copy of a series is held out with it,
a duplicated series is one calibration unit, and a corpus without copies is calibrated exactly
as before. The false-alarm rate with duplicated corpora is simulated within binomial bounds."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from scipy.stats import binom
from sklearn.base import clone

import tskernels as tk
from novelty import KernelNoveltyDetector, KNNScorer
from novelty.detector import _members
from novelty.detector._members import (
    Member,
    MemberSpec,
    duplicate_groups,
    held_out_scores,
    make_scorer,
)
from novelty.scorers._baselines import knn_leave_one_out
from novelty.scorers._folds import CALIBRATION_FOLDS, LOO_MAX, calibration_folds


def _walks(rng, n, T=16, d=2):
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1)


def _kernel():
    return tk.FlattenedKernel(tk.RBF(8.0))


# ------------------------------------------------------------------ finding the copies
def test_duplicate_groups_arrays_lists_and_signed_zeros():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4, 5, 2))
    assert duplicate_groups(X) is None  # all distinct
    Y = np.stack([X[0], X[1], X[0], X[2], X[1], X[0]])
    np.testing.assert_array_equal(duplicate_groups(Y), [0, 1, 0, 2, 1, 0])
    Z = X.copy()
    Z[1] = X[0]
    Z[1, 0, 0] = np.nextafter(X[0, 0, 0], np.inf)  # one ulp apart: distinct
    assert duplicate_groups(Z) is None
    zeros = np.zeros((3, 4, 1))
    zeros[1, 2, 0] = -0.0  # equal values, different bytes
    np.testing.assert_array_equal(duplicate_groups(zeros), [0, 0, 0])
    # lists: equal values of different lengths are distinct series
    a = rng.normal(size=(6, 2))
    L = [a, a[:5], a.copy(), np.r_[a, a[-1:]], a[:5].copy()]
    np.testing.assert_array_equal(duplicate_groups(L), [0, 1, 0, 2, 1])


def test_a_hash_collision_never_merges_distinct_series(monkeypatch):
    class Constant:  # every series gets the same digest
        def __init__(self, *args, **kwargs):
            pass

        def update(self, data):
            pass

        def digest(self):
            return b"same"

    monkeypatch.setattr(_members.hashlib, "blake2b", Constant)
    X = np.random.default_rng(1).normal(size=(4, 3, 1))
    assert duplicate_groups(X) is None
    np.testing.assert_array_equal(duplicate_groups(np.r_[X, X[:1]]), [0, 1, 2, 3, 0])


# ------------------------------------------------------------------ the held-out scores
def _brute_force_knn(K, diag, groups, n_neighbors, aggregate):
    d2 = (diag[:, None] + diag[None, :] - 2.0 * K).clamp_min(0.0).numpy()
    out = []
    for i in range(len(groups)):
        others = np.sort(np.sqrt(d2[i, groups != groups[i]]))
        k = min(n_neighbors, others.size)
        out.append(others[k - 1] if aggregate == "kth" else others[:k].mean())
    return np.array(out)


@pytest.mark.parametrize("n_neighbors, aggregate", [(1, "kth"), (3, "kth"), (5, "mean")])
def test_knn_leave_one_out_leaves_out_every_copy(n_neighbors, aggregate):
    rng = np.random.default_rng(2)
    C = _walks(rng, 6)
    X = C[[0, 1, 0, 2, 3, 0, 4, 5, 1, 0]]  # series 0 four times: 6 rows left for it
    groups = duplicate_groups(X)
    K = _kernel().gram(X, normalize=True)
    diag = torch.diagonal(K).clone()
    scorer = make_scorer(
        MemberSpec(
            _kernel(), "knn", scorer_params={"n_neighbors": n_neighbors, "aggregate": aggregate}
        )
    )
    got = knn_leave_one_out(scorer, K, diag, groups)
    want = _brute_force_knn(K, diag, groups, n_neighbors, aggregate)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert (got > 1e-3).all()  # no series scored against its own copy


@pytest.mark.parametrize("n_groups, loo_max", [(7, LOO_MAX), (60, 50), (30, 20)])
def test_folds_keep_the_copies_of_a_series_together(n_groups, loo_max):
    rng = np.random.default_rng(3)
    groups = np.r_[np.arange(n_groups), rng.integers(0, n_groups, size=n_groups // 2)]
    rng.shuffle(groups)
    folds = list(calibration_folds(len(groups), loo_max, groups))
    tests = np.concatenate([test for _, test in folds])
    np.testing.assert_array_equal(np.sort(tests), np.arange(len(groups)))  # a partition
    for train, test in folds:
        assert not set(groups[train]) & set(groups[test])
        assert len(train) + len(test) == len(groups)
    n_folds = n_groups if n_groups <= loo_max else CALIBRATION_FOLDS
    assert len(folds) == n_folds


def _committed_folds(n, loo_max):
    """The calibration folds as committed before the duplicate groups (3b60d58)."""
    if n <= loo_max:
        folds = [np.array([i]) for i in range(n)]
    else:
        folds = np.array_split(np.random.default_rng(0).permutation(n), CALIBRATION_FOLDS)
    for test in folds:
        yield np.setdiff1d(np.arange(n), test), test


@pytest.mark.parametrize("n", [5, 60])
def test_folds_of_singleton_groups_are_the_former_folds(n):
    for (a, b), (c, d) in zip(
        calibration_folds(n, LOO_MAX, np.arange(n)), _committed_folds(n, LOO_MAX), strict=True
    ):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, np.sort(d))  # the same test part (sorted)


def _committed_held_out(spec, K, diag):
    """held_out_scores as committed before the duplicate groups (3b60d58)."""
    n = K.shape[0]
    template = make_scorer(spec)
    if isinstance(template, KNNScorer):
        k = min(int(template.n_neighbors), n - 1)
        d2 = (diag[:, None] + diag[None, :] - 2.0 * K).clamp_min(0.0)
        d2.fill_diagonal_(float("inf"))
        nearest = torch.topk(d2, k, dim=1, largest=False).values.sqrt()
        out = nearest[:, -1] if template.aggregate == "kth" else nearest.mean(dim=1)
        return out.numpy()
    out = np.empty(n)
    for train, test in _committed_folds(n, LOO_MAX):
        tr, te = torch.from_numpy(train), torch.from_numpy(test)
        scorer = clone(template).fit(K[tr][:, tr])
        out[test] = scorer.score(K[te][:, tr], diag[te])
    return out


@pytest.mark.parametrize(
    "scorer, params, n",
    [
        ("knn", {}, 24),
        ("knn", {"n_neighbors": 5, "aggregate": "mean"}, 24),
        ("conformance", {}, 24),
        ("mahalanobis", {}, 60),  # 10 folds
    ],
)
def test_a_corpus_without_copies_is_calibrated_bit_for_bit_as_before(scorer, params, n):
    X = _walks(np.random.default_rng(4), n)
    spec = MemberSpec(_kernel(), scorer, scorer_params=params, preprocess=False)
    member = Member(spec).fit(X, {})
    assert member.duplicate_groups_ is None
    K = member.kernel_.gram(X, normalize=True)
    want = _committed_held_out(spec, K, torch.diagonal(K).clone())
    np.testing.assert_array_equal(member.calibration_, want)
    np.testing.assert_array_equal(held_out_scores(spec, K, torch.diagonal(K).clone(), None), want)


def test_a_duplicated_corpus_calibrates_like_its_distinct_series_for_1nn():
    # 1-NN: a held-out series against the others (each twice) is its score against the
    # distinct others: the calibration of C twice is that of C (one score per distinct series)
    C = _walks(np.random.default_rng(5), 15)
    once = KernelNoveltyDetector(_kernel(), contamination=0.1).fit(C)
    twice = KernelNoveltyDetector(_kernel(), contamination=0.1).fit(np.r_[C, C[::-1]])
    assert twice.calibration_scores_.shape == (15,)
    np.testing.assert_allclose(twice.calibration_scores_, once.calibration_scores_, rtol=1e-10)
    assert twice.threshold_ == pytest.approx(once.threshold_, rel=1e-10)
    np.testing.assert_array_equal(twice.members_[0].duplicate_groups_, np.r_[0:15, 14:-1:-1])


def test_corpus_fitted_kernel_refits_without_the_copies():
    # the random-convolution kernel is cross-fitted: a copy in the training part would give
    # a held-out score of ~0 (the series' own features)
    C = _walks(np.random.default_rng(6), 8, T=20)
    spec = MemberSpec(tk.RandomConvolutionKernel(n_kernels=84), "knn", preprocess=False)
    member = Member(spec).fit(np.r_[C, C, C[:3]], {})
    assert member.calibration_.shape == (8,)
    ref = Member(spec).fit(C, {}).calibration_
    assert member.calibration_.min() > 0.2 * np.median(ref)


def test_a_corpus_of_copies_of_one_series_flags_nothing_and_says_so():
    x = _walks(np.random.default_rng(7), 1)
    with pytest.warns(UserWarning, match=r"10 corpus series.* no series can be flagged"):
        det = KernelNoveltyDetector(_kernel(), contamination=0.1).fit(np.repeat(x, 10, axis=0))
    assert det.calibration_scores_.size == 0
    assert (det.predict(_walks(np.random.default_rng(8), 5) + 50) == 1).all()


# ------------------------------------------------------------------ false alarms, simulated
def _flag_count(make, reps, copies, eps=0.1, seed=11):
    """``reps`` independent repetitions: 20 fresh normal series, the corpus made of their
    ``copies`` (rows per distinct series), and one fresh normal test series each; the flags are
    i.i.d. Bernoulli(p), p <= eps for exchangeable distinct series."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(20), copies)
    flags = 0
    for _ in range(reps):
        X = _walks(rng, 21)
        det = make(eps).fit(X[rows])
        flags += int(det.predict(X[20:])[0] == -1)
    return flags


def _within_binomial_bounds(flags, reps, eps=0.1):
    """flags <= eps + 3 binomial standard errors (as a count), and not far below eps (the
    detector still flags: it is not conservative beyond the O(1/N) of held-out scores)."""
    hi = reps * eps + 3.0 * np.sqrt(reps * eps * (1 - eps))
    lo = binom.ppf(0.001, reps, 0.75 * eps)
    assert lo <= flags <= hi, (flags / reps, lo / reps, hi / reps)


@pytest.mark.parametrize("copies", [2, np.r_[21, np.ones(19, dtype=int)]], ids=["x2", "one_x21"])
def test_false_alarm_rate_knn_duplicated_corpus(copies):
    # each series twice (40 rows), or one series 21 times and 19 once (40 rows: counting the
    # copies as calibration units would flag ~17 % here)
    reps = 500

    def make(eps):
        return KernelNoveltyDetector(_kernel(), contamination=eps)

    _within_binomial_bounds(_flag_count(make, reps, copies), reps)


def test_false_alarm_rate_conformance_duplicated_corpus():
    reps = 150

    def make(eps):
        return KernelNoveltyDetector(_kernel(), scorer="conformance", contamination=eps)

    _within_binomial_bounds(_flag_count(make, reps, 2, seed=12), reps)


def test_default_recipe_on_a_duplicated_corpus_no_longer_flags_everything():
    rng = np.random.default_rng(13)
    X = _walks(rng, 220)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        det = KernelNoveltyDetector(contamination=0.1).fit(np.r_[X[:20], X[:20]])
    assert det.calibration_scores_.shape == (20,)
    rate = float((det.predict(X[20:]) == -1).mean())
    assert rate < 0.3, rate  # 1.0 before; one corpus: its conditional rate varies ~ 0.06


@pytest.mark.slow
def test_false_alarm_rate_default_recipe_duplicated_corpus():
    # 40 repetitions of 25 fresh normal series each: flags of one corpus are correlated, so
    # the standard error is that of the per-repetition rates
    rng = np.random.default_rng(14)
    reps, m, eps = 40, 25, 0.1
    rates = []
    for _ in range(reps):
        X = _walks(rng, 20 + m)
        det = KernelNoveltyDetector(contamination=eps).fit(np.r_[X[:20], X[:20]])
        rates.append(float((det.predict(X[20:]) == -1).mean()))
    rates = np.array(rates)
    se = max(rates.std(ddof=1), np.sqrt(eps * (1 - eps) / m)) / np.sqrt(reps)
    assert rates.mean() <= eps + 3 * se, (rates.mean(), se)


# ------------------------------------------------------------------ approximate members
def test_feature_knn_leave_one_out_leaves_out_every_copy():
    from novelty import FeatureKNN

    rng = np.random.default_rng(20)
    Phi = rng.normal(size=(12, 4))
    Phi[[3, 7, 9]] = Phi[1]  # a series and three copies
    Phi[5] = Phi[0]
    groups = _members.duplicate_groups(Phi[:, :, None])
    diag = (Phi**2).sum(1)
    for k, aggregate in ((1, "kth"), (3, "mean")):
        knn = FeatureKNN(n_neighbors=k, aggregate=aggregate).fit(
            torch.from_numpy(Phi), torch.from_numpy(diag)
        )
        rows = np.array([0, 1, 2])
        got = knn.leave_one_out(torch.from_numpy(rows), groups).numpy()
        for r, g in zip(rows, got):
            others = np.flatnonzero(groups != groups[r])
            d = np.sort(np.sqrt(((Phi[others] - Phi[r]) ** 2).sum(1)))[:k]
            assert g == pytest.approx(d[-1] if aggregate == "kth" else d.mean(), rel=1e-10)


@pytest.mark.parametrize("scorer", ["knn", "conformance"])
def test_false_alarm_rate_approximate_member_duplicated_corpus(scorer):
    # approximation="nystroem" on a corpus of 30 distinct series twice (60 rows > 20
    # landmarks): before, a held-out series saw its copy and ~all fresh normals were flagged
    rng = np.random.default_rng(21)
    reps, eps, flags = 200, 0.1, 0
    rows = np.repeat(np.arange(30), 2)
    for _ in range(reps):
        X = _walks(rng, 31)
        det = KernelNoveltyDetector(
            _kernel(), scorer=scorer, contamination=eps, approximation="nystroem",
            n_components=20,
        ).fit(X[rows])  # fmt: skip
        flags += int(det.predict(X[30:])[0] == -1)
    assert det.members_[0].calibration_.shape == (15,)  # one per held-out distinct series
    hi = reps * eps + 3.0 * np.sqrt(reps * eps * (1 - eps))
    assert binom.ppf(0.001, reps, 0.5 * eps) <= flags <= hi, flags / reps
