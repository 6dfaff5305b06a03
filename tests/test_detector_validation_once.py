"""Issue 13, item 2: the detector checks its input once per public call (``fit``,
``score_samples``) and hands the members, their pre-processing and kernels checked objects
(``tskernels.SeriesBatch``), so nothing downstream scans the series again; the errors for NaN,
Inf, a wrong layout or a channel mismatch are still raised at that boundary, with their
messages."""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np
import pytest
import torch

import novelty._layouts
import tskernels as tk
import tskernels.validation as validation
from novelty import KernelNoveltyDetector

# counters of the checks that scan series: the boundary, and every downstream check of series
# (torch: as_series_batch and its NaN scan; numpy: the pre-processing's as_series_arrays)
BOUNDARY = "as_series_collection"
FULL_BATCH = "as_series_batch (full check)"
FAST_BATCH = "as_series_batch (SeriesBatch: moved only)"
ARRAYS = "as_series_arrays"
TORCH_SCAN = "check_finite"


@pytest.fixture
def counts(monkeypatch) -> Counter:
    """Counts calls of the series checks, wherever a module imported them by name."""
    c: Counter = Counter()

    def wrap(original, key):
        def counted(*args, **kwargs):
            c[key(*args) if callable(key) else key] += 1
            return original(*args, **kwargs)

        return counted

    def batch_key(X, *args):
        return FAST_BATCH if isinstance(X, validation.SeriesBatch) else FULL_BATCH

    patches = [
        (novelty._layouts, "as_series_collection", BOUNDARY),
        (validation, "as_series_batch", batch_key),
        (validation, "as_series_arrays", ARRAYS),
        (validation, "check_finite", TORCH_SCAN),
    ]
    for module, name, key in patches:
        original = getattr(module, name)
        replacement = wrap(original, key)
        for mod in list(sys.modules.values()):
            modname = getattr(mod, "__name__", "")
            if modname.split(".")[0] in ("tskernels", "novelty", "density"):
                if getattr(mod, name, None) is original:
                    monkeypatch.setattr(mod, name, replacement)
    return c


def _walks(rng, n, T=20, d=2, scale=1.0):
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1) * scale


def _unequal(rng, n, d=2):
    return [np.cumsum(rng.normal(size=(int(T), d)), axis=0) for T in rng.integers(12, 25, n)]


CONFIGS = {
    "flattened_rbf_knn": (
        lambda: KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.RBF(3.0))),
        "eq",
    ),
    "gak_mahalanobis_unequal": (
        lambda: KernelNoveltyDetector(kernel=tk.GAK(), scorer="mahalanobis"),
        "uneq",
    ),
    "integral_no_preprocess_diag": (
        lambda: KernelNoveltyDetector(
            kernel=tk.IntegralKernel(tk.RBF(2.0)), preprocess=False, normalize=False
        ),
        "eq",
    ),
    "random_convolution_cross_fitted": (
        lambda: KernelNoveltyDetector(
            kernel=tk.RandomConvolutionKernel(n_kernels=84, seed=0),
            normalize=False,
            contamination=0.2,
        ),
        "small",
    ),
    "nystroem": (
        lambda: KernelNoveltyDetector(
            kernel=tk.IntegralKernel(tk.RBF(2.0)),
            approximation="nystroem",
            n_components=8,
            landmarks="kmeans++",
            contamination=0.2,
        ),
        "eq",
    ),  # fmt: skip
    "default_recipe": (KernelNoveltyDetector, "eq"),
}


def _data(kind, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "uneq":
        return _unequal(rng, 24), _unequal(rng, 5)
    n = 12 if kind == "small" else 24
    return _walks(rng, n), _walks(rng, 5, scale=1.5)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_each_public_call_checks_the_input_once(config, counts):
    make, kind = CONFIGS[config]
    if config in ("default_recipe", "random_convolution_cross_fitted"):
        pytest.importorskip("sktime")
    X, X_new = _data(kind)
    det = make()

    det.fit(X)
    assert counts[BOUNDARY] == 1, counts
    assert counts[FULL_BATCH] == 0, counts  # no kernel checked the series again
    assert counts[ARRAYS] == 0, counts  # nor the pre-processing
    assert counts[TORCH_SCAN] == 0, counts
    assert counts[FAST_BATCH] >= 1, counts  # the kernels were handed checked batches

    counts.clear()
    scores = det.score_samples(X_new)
    assert counts[BOUNDARY] == 1, counts
    assert counts[FULL_BATCH] == counts[ARRAYS] == counts[TORCH_SCAN] == 0, counts
    assert counts[FAST_BATCH] >= 1, counts
    assert scores.shape == (5,) and np.isfinite(scores).all()


def test_scores_equal_those_of_the_kernels_checking_their_input():
    """The checked objects change no number: the member's cross Gram equals the kernel's Gram
    of the same pre-processed series given as plain arrays (checked by the kernel)."""
    X, X_new = _data("uneq", seed=3)
    det = KernelNoveltyDetector(kernel=tk.GAK(), scorer="knn").fit(X)
    member = det.members_[0]
    Kt, _ = member.grams(novelty._layouts.as_series_collection(X_new))
    Z_new = member.preprocessor_.transform(X_new)
    expected = member.kernel_.gram(Z_new, member.corpus_, normalize=True)
    assert torch.equal(Kt, expected)


@pytest.fixture
def fitted():
    X, _ = _data("eq")
    # missing="error": NaN is refused at the boundary (the default interpolates NaN gaps)
    return KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.RBF(3.0)), missing="error").fit(X)


def _series_with(value, T=20, d=2):
    X = _walks(np.random.default_rng(1), 6, T=T, d=d)
    X[2, 4, 1] = value
    return X


@pytest.mark.parametrize("call", ["fit", "score_samples"])
def test_nan_and_inf_raise_at_the_boundary(call, fitted, counts):
    for value, words in ((np.nan, "NaN"), (np.inf, "infinite")):
        X = _series_with(value)
        target = (
            KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.RBF(3.0)), missing="error")
            if call == "fit"
            else fitted
        )
        counts.clear()
        with pytest.raises(ValueError, match=words) as err:
            getattr(target, call)(X)
        assert "series 2" in str(err.value) and "time step 4" in str(err.value)
        assert counts[FAST_BATCH] == counts[FULL_BATCH] == 0  # no kernel was reached


def test_nan_in_a_list_names_the_series(fitted):
    X = list(_walks(np.random.default_rng(2), 4))
    X[3] = X[3].copy()
    X[3][0, 0] = np.nan
    with pytest.raises(ValueError, match=r"`X\[3\]` contains NaN at time step 0, channel 0"):
        fitted.score_samples(X)


def test_channel_mismatch_is_reported_by_the_detector(fitted, counts):
    X = _walks(np.random.default_rng(3), 4, d=3)
    with pytest.raises(
        ValueError,
        match=r"channel mismatch: the detector was fitted on series with d=2 channels, got d=3",
    ):
        fitted.score_samples(X)
    assert counts[FAST_BATCH] == counts[FULL_BATCH] == 0


def test_mixed_channel_counts_and_wrong_layout_raise_at_fit():
    rng = np.random.default_rng(4)
    X = [rng.normal(size=(10, 2)) for _ in range(4)] + [rng.normal(size=(10, 3))]
    det = KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.RBF(3.0)))
    with pytest.raises(ValueError, match="different channel counts"):
        det.fit(X)
    with pytest.raises(ValueError, match="must be a 3-D array"):
        det.fit(rng.normal(size=(4, 10, 2, 2)))


def test_a_float32_kernel_still_checks_the_range_of_its_cast():
    """Only float64 kernels are handed checked batches: a float32 kernel converts (and range
    checks) the series itself, as before."""
    X = _walks(np.random.default_rng(5), 8) * 1e300
    det = KernelNoveltyDetector(
        kernel=tk.FlattenedKernel(tk.RBF(3.0), dtype=torch.float32), preprocess=False
    )
    with pytest.raises(ValueError, match="beyond the torch.float32 range"):
        det.fit(X)


def test_preprocessing_overflow_still_raises_its_error():
    """Finite series near the float64 limit overflow inside the z-score; the pre-processing
    steps confirm their outputs finite, so the error is the one it always was."""
    X = np.random.default_rng(6).uniform(1e308, 1.7e308, size=(12, 10, 2))
    det = KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.RBF(1.0)))
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="NaN or infinite values"):
        det.fit(X)
