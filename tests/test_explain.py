"""Occlusion explanations (novelty.detector._explain): the injected channel and interval are
found, the
batched scoring equals scoring every occluded copy on its own (brute force), shapes, channel
permutation equivariance, errors, and the plot."""

from __future__ import annotations

import math
import warnings

import matplotlib
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.metrics import roc_auc_score

import tskernels as tk
from novelty import Explanation, KernelNoveltyDetector, plot_explanation
from novelty.detector._explain import occlusion_windows

matplotlib.use("Agg")

T, D, N = 48, 3, 24


def _normal(rng, n, T=T, d=D):
    """Sinusoids of random phase per channel (not aligned in time) with a little noise."""
    t = np.arange(T)[None, :, None]
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, d))
    return np.sin(2 * np.pi * t / 16 + phase) + 0.1 * rng.normal(size=(n, T, d))


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = _normal(rng, N)
    return KernelNoveltyDetector().fit(X), X, rng


@pytest.fixture(scope="module")
def injected(fitted):
    """Three new series, each with a level shift of 3 in channel j over [a, a + 10)."""
    det, X, _ = fitted
    rng = np.random.default_rng(1)
    Y = _normal(rng, 3)
    truth = [(0, 5), (1, 30), (2, 17)]
    for k, (j, a) in enumerate(truth):
        Y[k, a : a + 10, j] += 3.0
    return Y, truth, det.explain(Y)


def test_injected_channel_ranked_first_and_interval_recovered(injected):
    Y, truth, ex = injected
    for k, (j, a) in enumerate(truth):
        assert ex.ranking[k, 0] == j
        mask = np.zeros(T)
        mask[a : a + 10] = 1
        assert roc_auc_score(mask, ex.times[k]) > 0.9


def test_normal_series_get_small_attributions(fitted, injected):
    det, _, _ = fitted
    Y, truth, ex = injected
    clean = det.explain(_normal(np.random.default_rng(2), 3))
    injected_channel = ex.channels[np.arange(3), [j for j, _ in truth]]
    assert np.abs(clean.channels).max() < 0.5 * injected_channel.min()
    assert np.abs(np.stack(clean.times)).max() < 0.5 * np.stack(ex.times).max()


def _oracle(det, x, corpus, reference, time_channels, window=6, coverage=1):
    """Brute force: every occluded copy scored on its own by score_samples, the reference
    values found by explicit loops over the corpus."""
    starts, L = occlusion_windows(len(x), window, coverage)
    C = np.asarray(corpus)
    sd = C.reshape(-1, C.shape[2]).std(axis=0)
    s0 = -det.score_samples(x[None])[0]
    med = np.median(C, axis=0)

    def replaced(mask):  # mask (T, d): True inside the occluded part
        if reference == "median":
            r = med
        else:  # the corpus series nearest to x outside the part
            dist = [float((((c - x) / sd) ** 2)[~mask].sum()) for c in C]
            r = C[int(np.argmin(dist))]
        y = x.copy()
        y[mask] = r[mask]
        return s0 + det.score_samples(y[None])[0]

    channels = []
    for c in range(x.shape[1]):
        mask = np.zeros(x.shape, bool)
        mask[:, c] = True
        channels.append(replaced(mask))
    channels = np.array(channels)
    if time_channels == "all":
        S = np.ones(x.shape[1], bool)
    else:
        S = channels >= 0.5 * channels.max() if channels.max() > 0 else channels == channels.max()
    total, count = np.zeros(len(x)), np.zeros(len(x))
    for b in starts:
        mask = np.zeros(x.shape, bool)
        mask[b : b + L] = S
        total[b : b + L] += replaced(mask)
        count[b : b + L] += 1
    return s0, channels, total / count, S


@pytest.mark.parametrize(
    "reference, time_channels", [("nearest", "top"), ("nearest", "all"), ("median", "top")]
)
def test_batched_equals_one_copy_at_a_time(fitted, injected, reference, time_channels):
    det, X, _ = fitted
    Y, _, _ = injected
    Y2 = Y[1:].copy()
    Y2[1, :, 0] += 4.0  # series 2: two channels carry novelty (a shift the default sees in both)
    ex = det.explain(Y2, reference=reference, time_channels=time_channels, window=6, coverage=1)
    for k in range(2 if (reference, time_channels) == ("nearest", "top") else 1):
        s0, channels, times, S = _oracle(det, Y2[k], X, reference, time_channels)
        assert ex.novelty[k] == pytest.approx(s0, abs=1e-10)
        np.testing.assert_allclose(ex.channels[k], channels, atol=1e-10)
        np.testing.assert_allclose(ex.times[k], times, atol=1e-10)
        assert ex.time_channels[k].tolist() == S.tolist()
    if time_channels == "top" and reference == "nearest":
        assert ex.time_channels.sum(axis=1).tolist() == [1, 2]  # "top" picks 1 and 2 channels


def test_shapes_and_novelty(fitted, injected):
    det, _, _ = fitted
    Y, _, ex = injected
    assert isinstance(ex, Explanation) and len(ex) == 3
    assert ex.channels.shape == (3, D) and ex.times.shape == (3, T)
    np.testing.assert_allclose(ex.novelty, -det.score_samples(Y), atol=1e-10)
    assert ex.window.tolist() == [5, 5, 5] and ex.n_windows.tolist() == [19, 19, 19]
    assert ex.reference == "nearest"
    assert ex.time_channels.dtype == bool and ex.time_channels.shape == (3, D)


def test_unequal_lengths(fitted):
    det, _, _ = fitted
    rng = np.random.default_rng(3)
    Y = [_normal(rng, 1, T=t)[0] for t in (30, 48, 61)]
    Y[2][40:50, 1] += 3.0
    ex = det.explain(Y, batch_size=50)  # each series in a call of its own
    assert isinstance(ex.times, list) and [len(t) for t in ex.times] == [30, 48, 61]
    assert ex.channels.shape == (3, D)
    assert ex.window.tolist() == [3, 5, 6]
    np.testing.assert_allclose(ex.novelty, -det.score_samples(Y), atol=1e-10)
    assert ex.ranking[2, 0] == 1
    together = det.explain(Y)  # all copies in one call: the same numbers
    np.testing.assert_allclose(together.channels, ex.channels, atol=1e-10)
    for a, b in zip(together.times, ex.times):
        np.testing.assert_allclose(a, b, atol=1e-10)


def test_channel_permutation_permutes_the_attribution():
    # GAK on per-channel z-scores is symmetric in the channels (MiniRocket's random channel
    # combinations are not); the nearest reference is too
    rng = np.random.default_rng(4)
    X = _normal(rng, 12, T=32)
    Y = _normal(rng, 2, T=32)
    Y[0, 10:18, 2] += 3.0
    perm = np.array([2, 0, 1])
    kw = {"kernel": tk.GAK(), "preprocess": "channel"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 12 series cannot flag at contamination 0.05
        a = KernelNoveltyDetector(**kw).fit(X)
        b = KernelNoveltyDetector(**kw).fit(X[..., perm])
    ea = a.explain(Y, corpus=X)
    eb = b.explain(Y[..., perm], corpus=X[..., perm])
    np.testing.assert_allclose(eb.channels, ea.channels[:, perm], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(eb.times, ea.times, rtol=1e-8, atol=1e-10)
    assert ea.ranking[0, 0] == 2


def test_errors(fitted):
    det, X, _ = fitted
    with pytest.raises(NotFittedError):
        KernelNoveltyDetector().explain(X[:1])
    with pytest.raises(ValueError, match="channel mismatch"):
        det.explain(X[:1, :, :2])
    with pytest.raises(ValueError, match="The 'window' parameter of explain must be"):
        det.explain(X[:1], window=0.0)
    with pytest.raises(ValueError, match="The 'window' parameter of explain must be"):
        det.explain(X[:1], window=True)
    with pytest.raises(ValueError, match="The 'coverage' parameter of explain must be"):
        det.explain(X[:1], coverage=0)
    with pytest.raises(ValueError, match="The 'reference' parameter of explain must be"):
        det.explain(X[:1], reference="mean")
    with pytest.raises(ValueError, match="The 'time_channels' parameter of explain must be"):
        det.explain(X[:1], time_channels="some")
    with pytest.raises(ValueError, match="The 'top_share' parameter of explain must be"):
        det.explain(X[:1], top_share=0.0)
    with pytest.raises(ValueError, match="d=2 channels"):
        det.explain(X[:1], corpus=X[..., :2])
    gak = KernelNoveltyDetector(kernel=tk.GAK()).fit(X)  # every member pre-processes
    with pytest.raises(ValueError, match="pass corpus="):
        gak.explain(X[:1])


def test_windows_formula():
    for T_ in (1, 5, 19, 20, 37, 100, 1000):
        starts, L = occlusion_windows(T_)
        assert L == max(1, round(0.1 * T_))
        assert len(starts) == min(T_ - L + 1, 19) and len(set(starts.tolist())) == len(starts)
        assert starts[0] == 0 and starts[-1] + L == T_
    starts, L = occlusion_windows(100, window=8, coverage=3)
    assert L == 8 and len(starts) == math.ceil(3 * 92 / 8) + 1


def test_plot(fitted, injected):
    import matplotlib.pyplot as plt

    det, _, _ = fitted
    Y, _, ex = injected
    fig = plot_explanation(ex, Y, 1)
    assert isinstance(fig, matplotlib.figure.Figure)
    assert "channel 1" in fig.axes[1].get_title()  # the top-ranked channel first
    fig2 = det.plot_explanation(Y, 0, max_channels=2)
    assert len(fig2.axes) == 3
    with pytest.raises(ValueError, match="pass the X it explains"):
        plot_explanation(ex, Y[:2], 0)
    with pytest.raises(ValueError, match="out of range"):
        plot_explanation(ex, Y, 5)
    plt.close("all")
