"""The aeon adapter (issue 23, item 3): ``AeonKernelNoveltyDetector`` passes aeon's estimator
checks, its scores are minus the detector's ``score_samples`` on the transposed series, and
it takes unequal lengths, NaN gaps and aeon's anomaly labels."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("aeon")

import tskernels  # noqa: E402
from novelty import AeonKernelNoveltyDetector, KernelNoveltyDetector  # noqa: E402

# aeon's checks that may fail, with the reason; every other check must pass (none expected)
EXPECTED_FAILURES: dict[str, str] = {}


def _fast_kernel():
    return tskernels.FlattenedKernel(tskernels.RBF(3.0))


def _data(n=24, d=2, T=16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d, T))  # aeon's layout (n_cases, n_channels, n_timepoints)


def test_aeon_check_estimator():
    from aeon.testing.estimator_checking import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small corpora: "no series can be flagged" warnings
        results = check_estimator(AeonKernelNoveltyDetector)
    assert len(results) > 20
    failed = {k: v for k, v in results.items() if v != "PASSED"}
    unexpected = {
        k: v for k, v in failed.items() if not any(k.startswith(e) for e in EXPECTED_FAILURES)
    }
    assert unexpected == {}


def test_tags():
    tags = AeonKernelNoveltyDetector.get_class_tags()
    assert tags["capability:multivariate"] and tags["capability:unequal_length"]
    assert tags["capability:missing_values"] and not tags["fit_is_empty"]
    assert set(tags["X_inner_type"]) == {"numpy3D", "np-list"}
    assert tags["anomaly_output_type"] == "anomaly_scores"


def test_scores_are_minus_score_samples_on_transposed_data():
    X, Y = _data(), _data(n=7, seed=1)
    Y[3] += 4.0
    ad = AeonKernelNoveltyDetector(kernel=_fast_kernel(), detector_params={"scorer": "knn"})
    scores = ad.fit(X).predict(Y)
    ref = KernelNoveltyDetector(kernel=_fast_kernel(), scorer="knn", random_state=0)
    ref.fit(np.ascontiguousarray(X.transpose(0, 2, 1)))
    expected = -ref.score_samples(np.ascontiguousarray(Y.transpose(0, 2, 1)))
    assert scores.dtype == np.float64 and scores.shape == (7,)
    np.testing.assert_array_equal(scores, expected)
    assert np.argmax(scores) == 3  # higher = more anomalous
    np.testing.assert_array_equal(ad.detector_.calibration_scores_, ref.calibration_scores_)


def test_default_recipe_matches_detector():
    X, Y = _data(n=20), _data(n=4, seed=2)
    scores = AeonKernelNoveltyDetector().fit(X).predict(Y)
    ref = KernelNoveltyDetector().fit(X.transpose(0, 2, 1).copy())
    np.testing.assert_array_equal(scores, -ref.score_samples(Y.transpose(0, 2, 1).copy()))


def test_unequal_lengths():
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(2, int(T))) for T in rng.integers(12, 25, size=20)]
    Y = [rng.normal(size=(2, 15)), rng.normal(size=(2, 30)) + 5.0]
    kernel = tskernels.IntegralKernel(tskernels.RBF(3.0), n_grid=20)
    scores = AeonKernelNoveltyDetector(kernel=kernel).fit(X).predict(Y)
    ref = KernelNoveltyDetector(kernel=kernel).fit([x.T.copy() for x in X])
    np.testing.assert_array_equal(scores, -ref.score_samples([y.T.copy() for y in Y]))
    assert scores[1] > scores[0]


def test_nan_gaps():
    X, Y = _data(), _data(n=3, seed=4)
    X[2, 0, 5:8] = np.nan
    Y[0, 1, 3] = np.nan
    scores = AeonKernelNoveltyDetector(kernel=_fast_kernel()).fit(X).predict(Y)
    assert np.isfinite(scores).all()
    ref = KernelNoveltyDetector(kernel=_fast_kernel()).fit(X.transpose(0, 2, 1).copy())
    np.testing.assert_array_equal(scores, -ref.score_samples(Y.transpose(0, 2, 1).copy()))


def test_trailing_nan_is_a_gap_not_padding():
    X, Y = _data(), _data(n=3, seed=5)
    X[1, :, -3:] = np.nan  # aeon's numpy3D is equal length: a gap at the end, not padding
    Y[2, :, -2:] = np.nan
    scores = AeonKernelNoveltyDetector(kernel=_fast_kernel()).fit(X).predict(Y)
    ref = KernelNoveltyDetector(kernel=_fast_kernel()).fit([x.T.copy() for x in X])
    np.testing.assert_array_equal(scores, -ref.score_samples([y.T.copy() for y in Y]))
    assert np.isfinite(scores).all()


def test_y_marks_anomalies_fit_on_normals_only():
    X = _data()
    y = np.zeros(len(X), dtype=int)
    y[:4] = 1  # aeon: 1 = anomaly
    X[:4] += 6.0
    ad = AeonKernelNoveltyDetector(kernel=_fast_kernel()).fit(X, y)
    assert ad.detector_.n_corpus_ == len(X) - 4
    ref = KernelNoveltyDetector(kernel=_fast_kernel()).fit(X[4:].transpose(0, 2, 1).copy())
    np.testing.assert_array_equal(ad.predict(X), -ref.score_samples(X.transpose(0, 2, 1).copy()))
    with pytest.raises(ValueError):  # aeon's own check: y needs both labels
        AeonKernelNoveltyDetector(kernel=_fast_kernel()).fit(X, np.ones(len(X), dtype=int))
    with pytest.raises(ValueError, match="every training series"):  # the adapter's guard
        AeonKernelNoveltyDetector(kernel=_fast_kernel())._fit(X, np.ones(len(X), dtype=bool))


def test_import_novelty_does_not_import_aeon():
    import subprocess
    import sys

    code = "import sys, novelty; novelty.KernelNoveltyDetector; print('aeon' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_detector_params_clash():
    with pytest.raises(ValueError, match="detector_params"):
        AeonKernelNoveltyDetector(detector_params={"contamination": 0.1}).fit(_data())
