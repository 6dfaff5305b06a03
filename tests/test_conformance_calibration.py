"""Issue 25, item 3: the conformance scorer's conformal promise, P(flag) <= contamination for
exchangeable normal series. The score grows with the corpus it is fitted on (one whitened
dimension per series), so new series scored by the N-series fit were flagged at about 0.19
(contamination 0.1, N = 30); they are now scored, like the calibration, by the held-out refits.
"""

import math

import numpy as np
import pytest

import novelty
import tskernels


def _flag_rate(n_corpus: int, n_fits: int, n_fresh: int, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    rates = []
    for _ in range(n_fits):
        X = rng.normal(size=(n_corpus, 20, 3))
        Y = rng.normal(size=(n_fresh, 20, 3))
        det = novelty.KernelNoveltyDetector(
            tskernels.FlattenedKernel(tskernels.RBF(5.0)), scorer="conformance", contamination=0.1
        ).fit(X)
        rates.append(float((det.predict(Y) == -1).mean()))
    r = np.asarray(rates)
    return float(r.mean()), float(r.std(ddof=1) / math.sqrt(n_fits))


def test_conformance_flag_rate_within_contamination():
    # 20 fits x 500 fresh series at N = 30: before the fix 0.19 (se 0.015)
    mean, se = _flag_rate(30, 20, 500)
    assert mean < 0.1 + 3 * max(se, 0.01), (mean, se)


@pytest.mark.slow
@pytest.mark.parametrize("n_corpus", [50, 80])
def test_conformance_flag_rate_within_contamination_slow(n_corpus):
    mean, se = _flag_rate(n_corpus, 30, 1000, seed=n_corpus)
    assert mean < 0.1 + 3 * max(se, 0.005), (mean, se)


def test_conformance_scores_new_series_with_held_out_refits():
    X = np.random.default_rng(1).normal(size=(12, 20, 3))
    det = novelty.KernelNoveltyDetector(
        tskernels.FlattenedKernel(tskernels.RBF(5.0)), scorer="conformance", contamination=0.1
    ).fit(X)
    member = det.members_[0]
    assert len(member.held_out_models_) == 12
    # a corpus series is scored by the mean over refits, among them the one without it
    s = member.novelty(X[:1])
    assert np.isfinite(s).all() and s[0] >= 0
