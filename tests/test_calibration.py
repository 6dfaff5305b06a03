"""Conformal calibration: thresholds and p-values against brute force, and the false-alarm
guarantee of the detector simulated within binomial bounds."""

import math
import warnings

import numpy as np
import pytest
from scipy.stats import binom

from novelty import KernelNoveltyDetector
from novelty.detector._calibration import conformal_p_values, conformal_threshold, min_corpus_for
from tskernels import RBF, FlattenedKernel, IntegralKernel


def test_p_values_equal_brute_force():
    rng = np.random.default_rng(0)
    cal = rng.normal(size=37)
    cal[5] = cal[7]  # a tie
    s = np.r_[rng.normal(size=50), cal[:4], np.inf, -np.inf]
    brute = np.array([(1 + np.sum(cal >= v)) / (len(cal) + 1) for v in s])
    np.testing.assert_array_equal(conformal_p_values(cal, s), brute)


@pytest.mark.parametrize("eps", [0.01, 0.05, 0.1, 0.25, 0.5])
@pytest.mark.parametrize("n", [1, 5, 19, 20, 39, 100])
def test_threshold_flags_exactly_where_p_value_is_small(eps, n):
    rng = np.random.default_rng(n)
    cal = rng.normal(size=n)
    t = conformal_threshold(cal, eps)
    s = np.r_[rng.normal(size=200) * 2, cal]
    np.testing.assert_array_equal(s > t, conformal_p_values(cal, s) <= eps)
    # rank-count form: m = floor(eps (n + 1)) calibration scores at or above the threshold
    m = math.floor(eps * (n + 1))
    assert (t == math.inf) == (m == 0)
    if m:
        assert np.sum(cal >= t) >= m and np.sum(cal > t) < m


def test_min_corpus_for():
    for eps in (0.05, 0.1, 0.2, 0.3):
        n = min_corpus_for(eps)
        assert conformal_threshold(np.arange(n, dtype=float), eps) < math.inf
        if n > 1:
            assert conformal_threshold(np.arange(n - 1, dtype=float), eps) == math.inf


def test_nan_calibration_scores_raise():
    with pytest.raises(ValueError, match="NaN"):
        conformal_threshold([0.0, np.nan, 1.0], 0.1)
    with pytest.raises(ValueError, match="NaN"):
        conformal_p_values([0.0, 1.0], [np.nan])


def _walks(rng, n, T=16, d=2):
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1)


@pytest.mark.parametrize(
    "kernel, scorer, N",
    [
        (FlattenedKernel(RBF(8.0)), "knn", 39),
        pytest.param(IntegralKernel(RBF(2.0)), "mahalanobis", 39, marks=pytest.mark.slow),
        pytest.param(IntegralKernel(RBF(2.0)), "mahalanobis", 79, marks=pytest.mark.slow),
        pytest.param(None, "knn", 39, marks=pytest.mark.slow),  # the default recipe
    ],
)
def test_false_alarm_rate_within_binomial_bounds(kernel, scorer, N):
    # 300 independent repetitions: a fresh corpus of N normal series and one fresh normal test
    # series each; the flags are then i.i.d. Bernoulli(p) with p <= m / (N + 1) = eps exactly
    # for exchangeable scores (leave-one-out calibration, and 10-fold above 50 series, are
    # conservative by O(1/N)).
    reps, eps = 300, 0.1
    rng = np.random.default_rng(1)
    flags = 0
    for _ in range(reps):
        X = _walks(rng, N + 1)
        det = KernelNoveltyDetector(kernel, scorer=scorer, contamination=eps).fit(X[:N])
        flags += int(det.predict(X[N:])[0] == -1)
    hi = binom.ppf(0.999, reps, eps)
    lo = binom.ppf(0.001, reps, 0.75 * eps)  # allows the O(1/N) conservative bias
    assert lo <= flags <= hi, (flags, lo, hi)


def test_predict_decision_and_p_values_agree():
    rng = np.random.default_rng(3)
    det = KernelNoveltyDetector(FlattenedKernel(RBF(8.0)), contamination=0.1).fit(_walks(rng, 30))
    Y = np.concatenate([_walks(rng, 40), 3 * _walks(rng, 10)])
    p = det.p_values(Y)
    np.testing.assert_array_equal(det.predict(Y) == -1, p <= 0.1)
    np.testing.assert_array_equal(det.decision_function(Y) < 0, p <= 0.1)
    assert ((p > 0) & (p <= 1)).all()


def test_tiny_corpus_warns_and_flags_nothing():
    rng = np.random.default_rng(4)
    with pytest.warns(UserWarning, match="no series can be flagged"):
        det = KernelNoveltyDetector(FlattenedKernel(RBF(8.0)), contamination=0.05).fit(
            _walks(rng, 10)
        )
    assert det.offset_ == -math.inf
    assert (det.predict(100 * _walks(rng, 5)) == 1).all()


def test_non_finite_scores_never_give_a_nan_threshold():
    # SOSREP log-densities can be -inf (novelty +inf) for held-out series far from the corpus
    rng = np.random.default_rng(5)
    X = _walks(rng, 25)
    X[:3] *= 50.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        det = KernelNoveltyDetector(FlattenedKernel(RBF(0.5)), scorer="sosrep").fit(X)
    assert not np.isnan(det.offset_)
    assert set(np.unique(det.predict(_walks(rng, 5)))) <= {-1, 1}
