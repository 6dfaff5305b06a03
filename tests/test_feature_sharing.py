"""Shared random-convolution features (tskernels._random_convolution.sharing_features): kernels
with equal raw-feature parameters fitted on equal corpora inside one block compute sktime's
transform once, and every result is bit for bit the one computed without sharing (the oracle:
the same calls outside a block, or inside ``sharing_features(False)``)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from novelty import KernelNoveltyDetector
from tskernels import RandomConvolutionKernel
from tskernels._random_convolution import _SHARED, sharing_features

N_KERNELS = 84


def _walks(n, T=30, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1)


def _count_transforms(monkeypatch) -> list:
    calls = []
    original = RandomConvolutionKernel._raw_features

    def counted(self, transformer, X, length):
        calls.append(X.n)
        return original(self, transformer, X, length)

    monkeypatch.setattr(RandomConvolutionKernel, "_raw_features", counted)
    return calls


def _pair(**params):
    return (
        RandomConvolutionKernel(n_kernels=N_KERNELS, seed=3, **params),
        RandomConvolutionKernel(n_kernels=N_KERNELS, seed=3, power_transform=False, **params),
    )


def test_equal_kernels_share_and_results_equal_unshared(monkeypatch):
    corpus, others = _walks(12, seed=1), _walks(5, seed=2)
    fresh = []
    for k in _pair():
        k.fit(corpus)
        fresh.append((k.gram(corpus), k.gram(others, corpus), pickle.dumps(k.transformer_)))
    calls = _count_transforms(monkeypatch)
    with sharing_features() as memo:
        kernels = [k.fit(corpus) for k in _pair()]
        shared = [(k.gram(corpus), k.gram(others, corpus)) for k in kernels]
        # one transform fitted, the corpus and the others transformed once each
        assert (memo.computed, len(calls)) == (3, 2)
        # the first kernel's Grams reuse its corpus twice; the second reuses its fit, then
        # its corpus three times and the others once
        assert memo.reused == 2 + 5
        assert 0 < memo.nbytes
    assert _SHARED.get() is None  # released at the end of the block
    for (K, Kt, blob), (Ks, Kts), k in zip(fresh, shared, kernels):
        assert np.array_equal(K.numpy(), Ks.numpy()) and np.array_equal(Kt.numpy(), Kts.numpy())
        assert pickle.dumps(k.transformer_) == blob  # the saved model is unchanged
    assert kernels[0].transformer_ is not kernels[1].transformer_  # each kernel its own copy


@pytest.mark.parametrize(
    "change", ["seed", "n_kernels", "corpus", "disabled", "budget"], ids=lambda c: c
)
def test_no_sharing_when_anything_differs(monkeypatch, change):
    corpus = _walks(12, seed=1)
    other_corpus = corpus.copy()
    second = RandomConvolutionKernel(n_kernels=N_KERNELS, seed=3)
    if change == "seed":
        second.set_params(seed=4)
    elif change == "n_kernels":
        second.set_params(n_kernels=2 * N_KERNELS)
    elif change == "corpus":
        other_corpus[3, 7, 1] += 1e-12  # one value, one step apart
    first = RandomConvolutionKernel(n_kernels=N_KERNELS, seed=3)
    if change == "budget":
        first.set_params(max_memory=1000)
        second.set_params(max_memory=1000)
    expected = pickle.dumps(RandomConvolutionKernel(**second.get_params()).fit(other_corpus))
    calls = _count_transforms(monkeypatch)
    with sharing_features(change != "disabled"):
        first.fit(corpus)
        second.fit(other_corpus)
        Phi = second.features(other_corpus)
    # each fit transforms its own corpus; the features of the second's corpus are then
    # reused from its fit, unless sharing is off or over budget
    assert len(calls) == (3 if change in ("disabled", "budget") else 2)
    assert pickle.dumps(second) == expected
    assert np.array_equal(
        Phi, RandomConvolutionKernel(**second.get_params()).fit(other_corpus).features(other_corpus)
    )


def test_nested_block_joins_and_disabled_stays_disabled():
    with sharing_features() as outer, sharing_features() as inner:
        assert inner is outer is _SHARED.get()
    with sharing_features(False) as off, sharing_features() as inner:
        assert off is None and inner is None
    assert _SHARED.get() is None


@pytest.mark.parametrize("d", [1, pytest.param(3, marks=pytest.mark.slow)])  # d=3: + GAK
def test_default_detector_shares_and_equals_unshared(monkeypatch, d):
    X, Y = _walks(25, T=24, d=d, seed=5), _walks(8, T=24, d=d, seed=6)
    calls = _count_transforms(monkeypatch)
    with sharing_features(False):
        plain = KernelNoveltyDetector().fit(X)
    n_plain = len(calls)
    shared = KernelNoveltyDetector().fit(X)
    n_shared = len(calls) - n_plain
    # two MiniRocket members: per fold and for the final fit, the training part and the
    # held-out part once (not once per member), and the final Gram reuses the fit's features
    assert n_plain == 2 * (2 * 10 + 2) and n_shared == 2 * 10 + 1
    assert _SHARED.get() is None
    assert np.array_equal(plain.score_samples(Y), shared.score_samples(Y))
    assert np.array_equal(plain.p_values(Y), shared.p_values(Y))
    assert np.array_equal(plain.calibration_scores_, shared.calibration_scores_)
    for a, b in zip(plain.members_, shared.members_, strict=True):
        assert np.array_equal(a.calibration_, b.calibration_)
        assert pickle.dumps(a.kernel_) == pickle.dumps(b.kernel_)
