"""Series of another length than an equal-length corpus (issue 25, item 5): the MiniRocket
features with ``other_lengths="native"`` (the fitted convolutions at each series' own length),
and the default detector fitted on one length scoring others."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

import tskernels as tk
from novelty import KernelNoveltyDetector
from novelty.detector._auto import default_members
from tskernels import RandomConvolutionKernel

N_KERNELS = 168


def _walks(n, T=20, d=2, seed=0):
    return np.random.default_rng(seed).normal(size=(n, T, d)).cumsum(1)


def _sines(rng, n, T, d=2):
    t = np.arange(T)[None, :, None]
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, d))
    return np.sin(2 * np.pi * t / 10 + phase) + 0.3 * rng.normal(size=(n, T, d))


def _edge_pad(x, T):
    return np.concatenate([x, np.repeat(x[-1:], T - len(x), axis=0)])


@pytest.fixture(scope="module")
def corpus():
    return _walks(12)


@pytest.fixture(scope="module")
def kernels(corpus):
    native = RandomConvolutionKernel(n_kernels=N_KERNELS, other_lengths="native").fit(corpus)
    error = RandomConvolutionKernel(n_kernels=N_KERNELS).fit(corpus)
    return native, error


def test_the_corpus_features_do_not_change(kernels, corpus):
    native, error = kernels
    np.testing.assert_array_equal(native.features(corpus), error.features(corpus))
    assert torch.equal(native.gram(corpus), error.gram(corpus))
    fresh = _walks(4, seed=1)
    assert torch.equal(native.gram(fresh, corpus), error.gram(fresh, corpus))


def test_fitted_length_rows_of_a_mixed_batch_keep_their_features(kernels, corpus):
    native, error = kernels
    rng = np.random.default_rng(2)
    mixed = [corpus[0], rng.normal(size=(37, 2)).cumsum(0), corpus[3], rng.normal(size=(12, 2))]
    F = native.features(mixed)
    np.testing.assert_array_equal(F[[0, 2]], error.features(corpus[[0, 3]]))
    assert np.isfinite(F).all() and F.shape == (4, native.n_features_)
    K = native.gram(mixed, corpus)
    assert K.shape == (4, 12) and torch.isfinite(K).all()
    with pytest.raises(ValueError, match="fitted on series of length 20.*other_lengths='native'"):
        error.gram(mixed)


def test_other_lengths_get_the_fitted_transform_at_their_own_length(kernels):
    native, _ = kernels
    span = native._native_span(native.transformer_)
    dilations = native.transformer_.parameters[2]
    assert span == 8 * int(np.max(dilations)) + 1 <= 20
    long = _walks(3, T=37, seed=3)
    raw = np.asarray(native.transformer_.transform(long.transpose(0, 2, 1)), dtype=np.float64)
    np.testing.assert_array_equal(native.features(long), native.scaler_.transform(raw))
    # shorter than the widest kernel: extended by its last time point to that span
    short = _walks(3, T=span - 5, seed=4)
    padded = np.stack([_edge_pad(x, span) for x in short])
    np.testing.assert_array_equal(native.features(short), native.features(padded))


def test_short_fitted_corpus_and_native_lengths_agree():
    # a corpus of length 5 is transformed as its series extended to 9 steps; a length-9 series
    # is then another length, and its native features are the same rule
    X = _walks(8, T=5, seed=5)
    k = RandomConvolutionKernel(n_kernels=84, other_lengths="native").fit(X)
    padded = np.stack([_edge_pad(x, 9) for x in X])
    np.testing.assert_array_equal(k.features(padded), k.features(X))


def test_native_features_do_not_scale_with_length():
    # a stationary process: PPV features are proportions, so longer series land near the
    # corpus (1-NN distance in feature space no larger than at the fitted length)
    rng = np.random.default_rng(6)
    C = _sines(rng, 30, 20)
    k = RandomConvolutionKernel(n_kernels=840, other_lengths="native").fit(C)
    F = k.features(C)

    def nn(X):
        D = ((k.features(X)[:, None, :] - F[None]) ** 2).sum(-1)
        return float(np.median(np.sqrt(D.min(1))))

    same, longer = nn(_sines(rng, 20, 20)), nn(_sines(rng, 20, 60))
    assert longer < 1.2 * same, (same, longer)


def test_other_lengths_parameter_is_checked():
    with pytest.raises(ValueError, match="other_lengths"):
        RandomConvolutionKernel(other_lengths="resample").fit(_walks(3))
    with pytest.raises(ValueError, match="needs transform='minirocket'"):
        RandomConvolutionKernel("multirocket", n_kernels=84, other_lengths="native").fit(_walks(3))
    # after an unequal-length fit every length is accepted either way
    X = [_walks(1, T=T, seed=T)[0] for T in (12, 20, 15)]
    for mode in ("error", "native"):
        k = RandomConvolutionKernel(n_kernels=84, other_lengths=mode).fit(X)
        assert torch.isfinite(k.gram(_walks(2, T=41), X)).all()


def test_default_recipe_kernel_accepts_other_lengths():
    spec = default_members(_walks(5))[0]
    assert isinstance(spec.kernel, tk.RandomConvolutionKernel)
    assert spec.kernel.other_lengths == "native"


def test_default_detector_fitted_on_one_length_scores_others():
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        det = KernelNoveltyDetector().fit(_sines(rng, 30, 20))
    for T in (37, 12):
        normal = det.score_samples(_sines(rng, 20, T))
        shifted = det.score_samples(_sines(rng, 20, T) + 5.0)
        assert np.isfinite(normal).all() and np.isfinite(shifted).all()
        labels = np.r_[np.zeros(20), np.ones(20)]
        auc = roc_auc_score(labels, -np.r_[normal, shifted])  # higher novelty = anomalous
        assert auc == 1.0, (T, auc)
        assert (det.predict(_sines(rng, 5, T) + 5.0) == -1).all()
