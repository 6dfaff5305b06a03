"""False-discovery-rate control of a batch: the Benjamini-Hochberg rule against a brute-force
(exact rational) implementation and statsmodels, and the FDR promise of
``KernelNoveltyDetector.predict(X, fdr=q)`` simulated with fresh corpora and batches."""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from novelty import KernelNoveltyDetector
from novelty.detector._calibration import benjamini_hochberg, fdr_min_corpus, fdr_shortfall
from tskernels import RBF, FlattenedKernel


def _bh_brute(p, q) -> np.ndarray:
    """The step-up rule as written, in exact arithmetic: sort (stable), k = max{i : p_(i) <=
    i q / m}, reject the k first sorted positions (ties split by position if the rule did)."""
    m = len(p)
    order = sorted(range(m), key=lambda j: p[j])
    k = max((i for i in range(1, m + 1) if p[order[i - 1]] <= i * q / m), default=0)
    out = np.zeros(m, dtype=bool)
    out[order[:k]] = True
    return out


def _conformal_grid(rng, m, n):
    """m p-values j / (n + 1) (conformal p-values against n calibration scores: many ties),
    exact and as floats."""
    j = rng.integers(1, n + 2, size=m)
    j[: m // 3] = rng.integers(1, 3, size=m // 3)  # some small ones, so that BH rejects
    rng.shuffle(j)
    return [Fraction(int(v), n + 1) for v in j], j / (n + 1.0)


@pytest.mark.parametrize("q", [Fraction(1, 20), Fraction(1, 10), Fraction(1, 5), Fraction(1, 3)])
def test_bh_equals_brute_force_with_ties(q):
    rng = np.random.default_rng(int(1 / q))
    n_rejecting = 0
    for _ in range(300):
        m = int(rng.integers(1, 80))
        n = int(rng.choice([9, 19, 49, 99, 199]))
        exact, p = _conformal_grid(rng, m, n)
        got = benjamini_hochberg(p, float(q))
        np.testing.assert_array_equal(got, _bh_brute(exact, q), err_msg=f"m={m} n={n}")
        n_rejecting += got.any()
    assert n_rejecting > 30  # the comparison is not all "reject nothing"


def test_bh_p_values_equal_to_their_critical_value_are_rejected():
    # 43 p-values 5/50 at q = 0.1: exactly p_(43) = 43 q / 43, but in floats 43 * 0.1 / 43 is
    # 0.09999999999999999 < 0.1; the rule rejects all of them
    assert 43 * 0.1 / 43 < 5 / 50
    assert benjamini_hochberg(np.full(43, 5 / 50), 0.1).all()
    assert not benjamini_hochberg(np.full(43, 5 / 50 + 1e-9), 0.1).any()


@pytest.mark.parametrize("q", [0.01, 0.05, 0.1, 0.25])
def test_bh_equals_statsmodels(q):
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    rng = np.random.default_rng(7)
    for _ in range(200):
        m = int(rng.integers(1, 300))
        p = np.concatenate([rng.uniform(size=m), rng.beta(0.2, 5.0, size=m // 4)])
        p[rng.integers(0, p.size, size=p.size // 5)] = p[rng.integers(0, p.size)]  # ties
        np.testing.assert_array_equal(
            benjamini_hochberg(p, q), multipletests(p, alpha=q, method="fdr_bh")[0]
        )


def test_bh_does_not_depend_on_input_order():
    rng = np.random.default_rng(11)
    for _ in range(100):
        _, p = _conformal_grid(rng, 60, 49)
        got = benjamini_hochberg(p, 0.1)
        perm = rng.permutation(p.size)
        np.testing.assert_array_equal(benjamini_hochberg(p[perm], 0.1), got[perm])
        # tied p-values are all rejected or all kept
        for v in np.unique(p):
            assert len(set(got[p == v].tolist())) == 1
    # any shape, the result in that shape
    np.testing.assert_array_equal(benjamini_hochberg(p.reshape(6, 10), 0.1), got.reshape(6, 10))


def test_bh_edge_cases_and_errors():
    assert benjamini_hochberg([], 0.1).shape == (0,)
    assert benjamini_hochberg(np.array([]), 0.1).dtype == bool
    assert not benjamini_hochberg(np.ones(50), 0.5).any()
    assert benjamini_hochberg([0.0, 1.0], 0.05).tolist() == [True, False]
    assert benjamini_hochberg([0.04], 0.05).tolist() == [True]  # m = 1: a plain test at q
    assert benjamini_hochberg([0.01, 0.02, 0.03, 0.04], 0.04).all()  # p_(4) = 4 q / 4
    for bad in (0, 0.0, 1, 1.0, -0.1, 1.5, math.nan, math.inf, True, "0.1", None, [0.1]):
        bad_q = r"The 'q' parameter of benjamini_hochberg must be a float in the range \(0"
        with pytest.raises(ValueError, match=bad_q):
            benjamini_hochberg([0.01, 0.5], bad)
    with pytest.raises(ValueError, match="NaN"):
        benjamini_hochberg([0.01, math.nan, 0.5], 0.1)
    for bad_p in ([-0.01, 0.5], [0.5, 1.01]):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            benjamini_hochberg(bad_p, 0.1)


def _detector(N, rng, T=10, d=2):
    return KernelNoveltyDetector(FlattenedKernel(RBF(3.0)), scorer="knn").fit(
        rng.normal(size=(N, T, d))
    )


def test_predict_fdr_flags_exactly_what_bh_rejects():
    rng = np.random.default_rng(3)
    det = _detector(60, rng)
    Y = rng.normal(size=(80, 10, 2))
    Y[:15] += 2.0
    p = det.p_values(Y)
    for q in (0.05, 0.1, 0.3):
        pred = det.predict(Y, fdr=q)
        np.testing.assert_array_equal(pred, np.where(benjamini_hochberg(p, q), -1, 1))
        assert set(pred.tolist()) <= {-1, 1}
    assert (det.predict(Y, fdr=0.1) == -1).sum() >= 10
    # fdr=None: today's per-series rule, unchanged
    np.testing.assert_array_equal(det.predict(Y, fdr=None), det.predict(Y))
    np.testing.assert_array_equal(det.predict(Y) == -1, p <= det.contamination)
    np.testing.assert_array_equal(det.predict(Y) == -1, det.decision_function(Y) < 0)
    for bad in (0, 1.0, -0.2, math.nan, True, "0.1"):
        with pytest.raises(ValueError, match="The 'fdr' parameter of predict must be None or a"):
            det.predict(Y, fdr=bad)


def test_predict_fdr_tiny_corpus_flags_nothing():
    rng = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "no series can be flagged"
        det = _detector(1, rng)
    assert det.calibration_scores_.size == 0
    Y = 100.0 + rng.normal(size=(5, 10, 2))
    assert (det.p_values(Y) == 1).all()
    with pytest.warns(UserWarning, match="fdr=0.5 can flag nothing: .* at least 1 held-out"):
        assert (det.predict(Y, fdr=0.5) == 1).all()


def test_realised_fdr_within_q_and_power():
    # R repetitions, each a fresh corpus of N normal series and a fresh batch of m series of
    # which m1 are shifted by 1.5 per value: conformal p-values of the m - m1 normal ones are
    # exchangeable with the (leave-one-out) calibration scores, so E[FDP] <= q m0 / m.
    # N = 200: with p-values >= 1/(N+1), BH can flag k series only if 1/(N+1) <= k q / m, so
    # flagging the 20 anomalies at q = 0.05 needs N >= 99.
    R, N, m, m1 = 200, 200, 100, 20
    qs = (0.05, 0.1)
    rng = np.random.default_rng(2023)
    fdp = {q: np.empty(R) for q in qs}
    power = {q: np.empty(R) for q in qs}
    fdp_per_series = np.empty(R)  # predict() at contamination = 0.05, for contrast
    for r in range(R):
        det = _detector(N, rng)
        batch = rng.normal(size=(m, 10, 2))
        batch[:m1] += 1.5
        p = det.p_values(batch)
        for q in qs:
            flag = benjamini_hochberg(p, q)
            fdp[q][r] = flag[m1:].sum() / max(1, flag.sum())
            power[q][r] = flag[:m1].mean()
        flag = p <= 0.05
        fdp_per_series[r] = flag[m1:].sum() / max(1, flag.sum())
    for q in qs:
        mean, se = fdp[q].mean(), fdp[q].std(ddof=1) / math.sqrt(R)
        print(
            f"q={q}: realised FDR {mean:.4f} (SE {se:.4f}, bound q m0/m = {q * (m - m1) / m}), "
            f"power {power[q].mean():.3f}"
        )
        assert mean <= q + 3 * se, (q, mean, se)
        # BH, not something much more conservative (Bonferroni at q/m would flag nothing here)
        assert mean >= 0.4 * q * (m - m1) / m, (q, mean)
        assert power[q].mean() > 0.5, (q, power[q].mean())
    print(
        f"per-series rule p <= 0.05 on the same batches: realised FDR {fdp_per_series.mean():.3f}"
    )
    assert fdp_per_series.mean() > 0.05  # why a batch wants fdr=


# ------------------------------------------------------- issue 31, finding 13: when BH cannot flag
@pytest.mark.parametrize("q", [0.01, 0.05, 0.1, 0.2, 0.3, 1 / 3, 0.5])
def test_fdr_min_corpus_against_bh_itself(q):
    # a lone series with the smallest conformal p-value 1/(n+1), the others p = 1: BH flags it
    # exactly when n >= fdr_min_corpus(q, m)
    for m in (1, 2, 3, 7, 10, 40, 100):
        n = fdr_min_corpus(q, m)
        assert n >= 0
        for k, expect in ((n, True), (n - 1, False)):
            if k < 0:
                continue
            p = np.r_[1.0 / (k + 1.0), np.ones(m - 1)]
            assert bool(benjamini_hochberg(p, q)[0]) is expect, (q, m, k)
    # with fewer than fdr_min_corpus(q, 1) nothing is ever flagged, whatever the batch
    n0 = fdr_min_corpus(q, 1)
    for m in (1, 5, 50):
        if n0 > 0:
            assert not benjamini_hochberg(np.full(m, 1.0 / n0), q).any()
        assert benjamini_hochberg(np.full(m, 1.0 / (n0 + 1.0)), q).all()


def test_fdr_shortfall_group_size_against_bh():
    q, m, n = 0.1, 40, 10  # the README's BasicMotions case: 10 normal series, 40 test series
    msg = fdr_shortfall(n, q, m)
    assert "at least 37 series" in msg and "needs at least 399" in msg and "has 10" in msg
    for k in (36, 37):  # k series tied at 1/(n+1), the rest at 1
        p = np.r_[np.full(k, 1.0 / (n + 1)), np.ones(m - k)]
        assert benjamini_hochberg(p, q).any() == (k >= 37)
    assert fdr_shortfall(399, q, m) is None and fdr_shortfall(398, q, m) is not None
    assert fdr_shortfall(5, 0.1, 3) == (
        "fdr=0.1 can flag nothing: it needs at least 9 held-out normal series (conformal "
        "p-values are at least 1/(n+1)); this detector has 5"
    )
    with pytest.raises(ValueError, match="n_series"):
        fdr_min_corpus(0.1, 0)
    with pytest.raises(ValueError, match="The 'q' parameter of fdr_shortfall"):
        fdr_shortfall(10, 1.5, 3)


def test_predict_fdr_warns_naming_the_corpus_needed():
    rng = np.random.default_rng(7)
    det = _detector(10, rng)
    Y = rng.normal(size=(40, 10, 2))
    Y[10:] += 5.0  # 30 obvious anomalies: still not flaggable at fdr=0.1 with 10 normal series
    with pytest.warns(UserWarning, match="needs at least 399 held-out normal series"):
        assert (det.predict(Y, fdr=0.1) == 1).all()
    with warnings.catch_warnings():  # a batch small enough: flagged, no warning
        warnings.simplefilter("error")
        assert (det.predict(Y[10:11], fdr=0.1) == -1).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        small = _detector(5, rng)
    with pytest.warns(UserWarning, match="needs at least 9 held-out normal series.*has 5"):
        assert (small.predict(Y[10:], fdr=0.1) == 1).all()
