"""``KernelNoveltyDetector.update(X_new)`` (issue 23, item 4): new normal series join the corpus
without a refit. Where the member is exact (fixed kernel and pre-processing) the updated
detector equals a fit on the union to 1e-10; the default recipe equals a hand-built oracle of
what is promised (frozen features, kept cross-fitted calibration of the corpus); ``refit=True``
equals a fit on the union; the false-alarm rate after an update is simulated within binomial
bounds; errors and persistence."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from scipy.stats import binom
from sklearn.exceptions import NotFittedError

import tskernels as tk
from novelty import KernelNoveltyDetector
from novelty.detector._calibration import conformal_threshold
from novelty.detector._members import Member, MemberSpec, robust_scale

TOL = 1e-10


def _walks(rng, n, T=16, d=2):
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1)


def _rbf():
    return tk.FlattenedKernel(tk.RBF(8.0))


def _assert_same(d1, d2, X):
    """Scores, p-values, calibration, threshold and the members' calibrations equal (1e-10)."""
    np.testing.assert_allclose(d1.score_samples(X), d2.score_samples(X), rtol=0, atol=TOL)
    np.testing.assert_allclose(d1.p_values(X), d2.p_values(X), rtol=0, atol=TOL)
    np.testing.assert_allclose(d1.calibration_scores_, d2.calibration_scores_, rtol=0, atol=TOL)
    assert abs(d1.threshold_ - d2.threshold_) <= TOL and d1.offset_ == -d1.threshold_
    assert d1.n_corpus_ == d2.n_corpus_
    assert (d1.predict(X) == d2.predict(X)).all()
    for m1, m2 in zip(d1.members_, d2.members_):
        np.testing.assert_allclose(m1.calibration_, m2.calibration_, rtol=0, atol=TOL)


EXACT = [
    (_rbf(), "knn", None, True),
    (_rbf(), "knn", {"n_neighbors": 3, "aggregate": "mean"}, False),
    (_rbf(), "knn", {"n_neighbors": 4}, True),
    (tk.GAK(sigma=3.0), "knn", None, True),
    (_rbf(), "conformance", None, True),
    (_rbf(), "mahalanobis", None, True),
    (tk.IntegralKernel(tk.RBF(2.0)), "mean_embedding", None, True),
]
IDS = ["rbf-1nn", "rbf-3nn-mean-unnormalised", "rbf-4nn", "gak-1nn", "conformance", "mahal", "me"]


# ------------------------------------------------------------------ exact members
@pytest.mark.parametrize("kernel, scorer, params, normalize", EXACT, ids=IDS)
@pytest.mark.parametrize("n_a, n_b", [(30, 25), (8, 3)])
def test_update_equals_a_fit_on_the_union(kernel, scorer, params, normalize, n_a, n_b):
    # 30 + 25: leave-one-out refits at fit, 10 folds on the union (55 > LOO_MAX)
    rng = np.random.default_rng(0)
    X = _walks(rng, n_a + n_b + 12)
    A, B, test = X[:n_a], X[n_a : n_a + n_b], X[n_a + n_b :]
    kw = dict(kernel=kernel, scorer=scorer, scorer_params=params, normalize=normalize)
    kw |= dict(preprocess=False, contamination=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small corpora cannot flag at 0.1
        updated = KernelNoveltyDetector(**kw).fit(A).update(B)
        union = KernelNoveltyDetector(**kw).fit(np.r_[A, B])
    _assert_same(updated, union, np.r_[test, test[:3] + 4.0])


@pytest.mark.parametrize("n_a", [1, 2])
def test_a_corpus_of_one_or_two_series_grows_into_a_calibrated_one(n_a):
    rng = np.random.default_rng(8)
    X = _walks(rng, 30)
    kw = dict(kernel=_rbf(), preprocess=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = KernelNoveltyDetector(**kw, contamination=0.1).fit(X[:n_a])
    assert small.calibration_scores_.size == (0 if n_a == 1 else 2)
    small.update(X[n_a:25])
    _assert_same(small, KernelNoveltyDetector(**kw, contamination=0.1).fit(X[:25]), X[25:])


@pytest.mark.parametrize("scorer", ["knn", "conformance"])
def test_successive_updates_with_copies_equal_a_fit_on_the_union(scorer):
    # B copies two corpus series and one of its own: copies join the group of their first
    # occurrence (one held-out unit), as in a fit on the union
    rng = np.random.default_rng(1)
    X = _walks(rng, 40)
    A, B1, B2, test = X[:12], X[12:20], X[20:26], X[26:]
    B1 = np.r_[B1, A[[3, 7]], B1[[0]]]
    B2 = np.r_[B2, A[[3]], B1[[2]]]
    kw = dict(kernel=_rbf(), scorer=scorer, preprocess=False, contamination=0.1)
    updated = KernelNoveltyDetector(**kw).fit(A).update(B1).update(list(B2))
    union = KernelNoveltyDetector(**kw).fit(np.r_[A, B1, B2])
    _assert_same(updated, union, test)
    g1, g2 = updated.members_[0].duplicate_groups_, union.members_[0].duplicate_groups_
    assert g1 is not None and (g1 == g2).all()
    assert updated.calibration_scores_.size == int(g2.max()) + 1 == 26


def test_frozen_preprocessing_equals_a_fit_on_the_preprocessed_union():
    # preprocess=True: the z-score fitted on A is frozen; the oracle fits on the union
    # pre-processed by A's statistics, with no pre-processing of its own
    rng = np.random.default_rng(2)
    X = _walks(rng, 50)
    A, B, test = X[:20], X[20:40] * 1.5 + 2.0, X[40:]
    det = KernelNoveltyDetector(tk.GAK(sigma=2.0), contamination=0.1).fit(A).update(B)
    pre = det.preprocessor_
    oracle = KernelNoveltyDetector(tk.GAK(sigma=2.0), preprocess=False, contamination=0.1)
    oracle.fit(pre.transform(np.r_[A, B]))
    np.testing.assert_allclose(
        det.score_samples(test), oracle.score_samples(pre.transform(test)), rtol=0, atol=TOL
    )
    np.testing.assert_allclose(det.calibration_scores_, oracle.calibration_scores_, atol=TOL)
    assert det.threshold_ == pytest.approx(oracle.threshold_, abs=TOL)


def test_update_never_forms_the_corpus_gram_again():
    # O(n_new N) kernel values: every Gram the update asks for has the new series on one side
    rng = np.random.default_rng(3)
    X = _walks(rng, 46)
    for scorer in ("knn", "conformance"):
        det = KernelNoveltyDetector(_rbf(), scorer=scorer, preprocess=False).fit(X[:40])
        kernel, shapes = det.members_[0].kernel_, []
        gram = kernel.gram

        def counting(Xa, Ya=None, gram=gram, shapes=shapes, **kw):
            K = gram(Xa, Ya, **kw)
            shapes.append(tuple(K.shape))
            return K

        kernel.gram = counting
        det.update(X[40:])
        del kernel.gram
        assert shapes and all(min(s) <= 6 for s in shapes), shapes


# ------------------------------------------------------------------ the default recipe
def _knn_loo_brute(D2, rows, exclude, k=1):
    """Mean distance of each of ``rows`` to its ``k`` nearest series not in its ``exclude``
    set (fewer where fewer are left; k = 1: the 1-NN distance), by loops."""
    out = []
    for i in rows:
        d = sorted(np.sqrt(max(D2[i, j], 0.0)) for j in range(D2.shape[0]) if j not in exclude[i])
        out.append(np.mean(d[:k]))
    return np.array(out)


def test_default_recipe_update_equals_its_oracle_and_refit_equals_a_fit():
    rng = np.random.default_rng(4)
    X = _walks(rng, 36)
    A, B, test = X[:21], np.r_[X[21:27], X[[5]]], X[27:]  # B's last series copies A[5]
    # the default recipe on two channels: ROCKAD's MiniRocket mean 5-NN, MiniRocket 1-NN (both
    # features fitted on the corpus, frozen by the update) and GAK 1-NN
    det = KernelNoveltyDetector(contamination=0.1).fit(A)
    cals = [m.calibration_.copy() for m in det.members_]
    refit = copy.deepcopy(det).update(B, refit=True)
    det.update(B)
    U = np.r_[A, B]
    n_a, n = len(A), len(U)
    recipe, mr, gak = det.members_
    exclude = {i: {i} for i in range(n)}
    exclude[5] |= {n - 1}
    exclude[n - 1] |= {5}
    # MiniRocket members: features frozen; corpus scores kept, new ones leave-one-out (the
    # copy of A[5] is held out with it and has no score of its own)
    for member, cal, k in ((recipe, cals[0], 5), (mr, cals[1], 1)):
        assert member.kernel_.needs_fit
        K = member.kernel_.gram(U).numpy()
        D2 = np.diag(K)[:, None] + np.diag(K)[None, :] - 2 * K
        new = _knn_loo_brute(D2, range(n_a, n - 1), exclude, k=k)
        np.testing.assert_allclose(member.calibration_, np.r_[cal, new], rtol=0, atol=1e-8)
    # GAK member: a fit on the union with A's z-score and A's fitted bandwidth injected
    assert not gak.kernel_.needs_fit
    spec = MemberSpec(
        kernel=tk.GAK(sigma=gak.kernel_.sigma_), preprocess=False, normalize=True, name="g"
    )
    oracle = Member(spec).fit(gak.preprocessor_.transform(U), {})
    np.testing.assert_allclose(gak.calibration_, oracle.calibration_, rtol=0, atol=TOL)
    assert gak.calibration_.size == n - 1 and not np.allclose(gak.calibration_[:n_a], cals[2])
    # the detector: scales, calibration, threshold from the members' calibrations
    member_cals = [recipe.calibration_, mr.calibration_, oracle.calibration_]
    scales = [robust_scale(c) for c in member_cals]
    assert np.allclose(det.scales_, scales, rtol=0, atol=TOL)
    z = [(c - m) / s for c, (m, s) in zip(member_cals, scales)]
    np.testing.assert_allclose(det.calibration_scores_, np.mean(z, axis=0), atol=1e-8)
    assert det.threshold_ == pytest.approx(conformal_threshold(np.mean(z, axis=0), 0.1), 1e-8)
    novelty = []
    for member, k in ((recipe, 5), (mr, 1)):  # the test series against the whole union
        K = member.kernel_.gram(U).numpy()
        Kt = member.kernel_.gram(test, U).numpy()
        D2t = np.maximum(member.kernel_.diag(test).numpy()[:, None] + np.diag(K) - 2 * Kt, 0)
        novelty.append(np.sort(np.sqrt(D2t), axis=1)[:, :k].mean(axis=1))
    novelty.append(oracle.novelty(gak.preprocessor_.transform(test)))
    expected = -np.mean([(s - m) / q for s, (m, q) in zip(novelty, scales)], axis=0)
    np.testing.assert_allclose(det.score_samples(test), expected, rtol=0, atol=1e-8)
    assert (
        det.n_corpus_ == n and (det.members_[0].duplicate_groups_ == oracle.duplicate_groups_).all()
    )
    # refit=True is a fit on the union
    union = KernelNoveltyDetector(contamination=0.1).fit(U)
    _assert_same(refit, union, test)


# ------------------------------------------------------------------ false alarms, simulated
def _flag_count(make, reps, n_a, n_b, eps=0.1, seed=21):
    """``reps`` independent repetitions: ``fit`` on n_a fresh normal series, ``update`` with
    n_b more, one fresh normal test series: the flags are i.i.d. Bernoulli(p), p <= eps for
    held-out scores exchangeable with the test series' (module docstring of
    novelty.detector._update)."""
    rng = np.random.default_rng(seed)
    flags = 0
    for _ in range(reps):
        X = _walks(rng, n_a + n_b + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            det = make(eps).fit(X[:n_a]).update(X[n_a : n_a + n_b])
        flags += int(det.predict(X[-1:])[0] == -1)
    return flags


@pytest.mark.parametrize(
    "make, reps, lo_factor",
    [
        (lambda e: KernelNoveltyDetector(_rbf(), contamination=e), 200, 0.75),
        pytest.param(
            lambda e: KernelNoveltyDetector(_rbf(), scorer="conformance", contamination=e),
            150,
            0.5,
            marks=pytest.mark.slow,
        ),
        # a corpus-fitted kernel (cross-fitted calibration of the corpus kept): conservative
        pytest.param(
            lambda e: KernelNoveltyDetector(
                tk.RandomConvolutionKernel(n_kernels=84),
                preprocess=False,
                normalize=False,
                contamination=e,
            ),
            150,
            0.0,
            marks=pytest.mark.slow,
        ),
    ],
    ids=["rbf-knn", "rbf-conformance", "rocket-knn-crossfitted"],
)
def test_false_alarm_rate_after_an_update_within_binomial_bounds(make, reps, lo_factor):
    eps = 0.1
    flags = _flag_count(make, reps, 20, 19, eps)
    hi = binom.ppf(0.999, reps, eps)
    lo = binom.ppf(0.001, reps, lo_factor * eps) if lo_factor else 0
    assert lo <= flags <= hi, (flags / reps, lo / reps, hi / reps)


# ------------------------------------------------------------------ errors
def test_errors():
    rng = np.random.default_rng(5)
    X = _walks(rng, 12)
    with pytest.raises(NotFittedError):
        KernelNoveltyDetector(_rbf()).update(X)
    det = KernelNoveltyDetector(_rbf(), missing="error").fit(X)
    before = det.calibration_scores_.copy()
    with pytest.raises(ValueError, match="channel mismatch.*d=2.*d=3"):
        det.update(_walks(rng, 3, d=3))
    for empty in (X[:0], []):
        with pytest.raises(ValueError, match="X_new` is empty"):
            det.update(empty)
    bad = _walks(rng, 2)
    bad[1, 4, 0] = np.nan
    with pytest.raises(ValueError, match="NaN|missing"):
        det.update(bad)
    with pytest.raises(ValueError, match="`refit` must be a bool"):
        det.update(X[:2], refit="yes")
    with pytest.raises(ValueError):  # the flattened kernel needs the corpus length
        det.update(_walks(rng, 3, T=9))
    # untouched by every failed update
    assert det.n_corpus_ == 12 and np.array_equal(det.calibration_scores_, before)
    assert len(det.corpus_) == 12 and len(det.members_[0].update_state_["raw"]) == 12
    # missing="interpolate" fills a gap in X_new as in fit
    det = KernelNoveltyDetector(_rbf()).fit(X).update(bad)
    assert det.n_corpus_ == 14


def test_approximate_members_need_a_refit():
    rng = np.random.default_rng(6)
    X = _walks(rng, 30)
    kw = dict(kernel=_rbf(), approximation="nystroem", n_components=10, contamination=0.1)
    det = KernelNoveltyDetector(**kw).fit(X[:24])
    with pytest.raises(NotImplementedError, match="refit=True"):
        det.update(X[24:])
    det.update(X[24:], refit=True)
    union = KernelNoveltyDetector(**kw).fit(X)
    np.testing.assert_array_equal(det.score_samples(X[:5]), union.score_samples(X[:5]))


# ------------------------------------------------------------------ persistence
def test_save_load_after_update_gives_identical_scores_and_updates_again(tmp_path):
    rng = np.random.default_rng(7)
    X = _walks(rng, 40)
    det = KernelNoveltyDetector(_rbf(), scorer="conformance").fit(X[:15]).update(X[15:25])
    path = det.save(tmp_path / "det.joblib")
    loaded = KernelNoveltyDetector.load(path)
    np.testing.assert_array_equal(loaded.score_samples(X[35:]), det.score_samples(X[35:]))
    assert loaded.n_corpus_ == 25
    loaded.update(X[25:35])
    det.update(X[25:35])
    np.testing.assert_array_equal(loaded.score_samples(X[35:]), det.score_samples(X[35:]))
    assert torch.equal(
        loaded.members_[0].update_state_["gram"], det.members_[0].update_state_["gram"]
    )
