r"""Synthetic anomalies made from normal series, for label-free model selection.

Each perturbation takes one normal series ``x`` of shape (T, d) and returns a changed copy;
scales are relative to the per-channel standard deviation ``sigma`` of the normal corpus
(pooled over time), so they mean the same on every data set. The family:

========================  =================================================================
``level_shift``           a segment of a random length in [T/4, T] of a random non-empty
                          channel subset shifted by :math:`\pm u\,\sigma_c`, u ~ U(1, 3)
``amplitude``             deviations from the series' channel means scaled by a factor in
                          U(0.1, 0.5) or U(2, 4) (shrink or grow), random channel subset
``noise``                 Gaussian noise of standard deviation U(0.3, 1) sigma_c added
``spikes``                1 to 3 single-step spikes of :math:`\pm U(3, 6)\,\sigma_c`
``time_warp``             read at warped times :math:`T t^\gamma`, gamma in U(0.4, 0.7) or
                          U(1.5, 2.5) (linear interpolation)
``segment_swap``          two disjoint segments of equal length (T/8 to T/3) exchanged
``channel_swap``          two channels exchanged (d >= 2; one channel: reversed in time)
``frequency``             played at speed 2 (twice, half length each) or 1/2 (its first half
                          stretched over the whole length)
========================  =================================================================

A selection score averages the ROC-AUC of held-out normal series against each kind, so that
no single kind decides.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PERTURBATIONS", "perturb", "corpus_scale"]


def corpus_scale(X) -> np.ndarray:
    """Per-channel standard deviation of the corpus pooled over series and time, (d,)."""
    P = np.concatenate(list(X))  # the (T_i, d) series of a SeriesBatch, array or list
    s = P.std(axis=0)
    return np.where(s > 0, s, 1.0)


def _channels(rng, d):
    k = rng.integers(1, d + 1)
    return rng.choice(d, size=k, replace=False)


def _interp(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    grid = np.arange(len(x), dtype=np.float64)
    return np.stack([np.interp(t, grid, x[:, c]) for c in range(x.shape[1])], axis=1)


def level_shift(x, sigma, rng):
    T, d = x.shape
    L = rng.integers(max(1, T // 4), T + 1)
    s = rng.integers(0, T - L + 1)
    ch = _channels(rng, d)
    y = x.copy()
    y[s : s + L, ch] += rng.choice([-1.0, 1.0]) * rng.uniform(1.0, 3.0) * sigma[ch]
    return y


def amplitude(x, sigma, rng):
    ch = _channels(rng, x.shape[1])
    a = rng.uniform(0.1, 0.5) if rng.random() < 0.5 else rng.uniform(2.0, 4.0)
    y = x.copy()
    m = x[:, ch].mean(axis=0)
    y[:, ch] = m + a * (x[:, ch] - m)
    return y


def noise(x, sigma, rng):
    return x + rng.uniform(0.3, 1.0) * sigma * rng.normal(size=x.shape)


def spikes(x, sigma, rng):
    T, d = x.shape
    y = x.copy()
    for _ in range(rng.integers(1, 4)):
        t, c = rng.integers(T), rng.integers(d)
        y[t, c] += rng.choice([-1.0, 1.0]) * rng.uniform(3.0, 6.0) * sigma[c]
    return y


def time_warp(x, sigma, rng):
    T = len(x)
    if T < 3:
        return noise(x, sigma, rng)
    g = rng.uniform(0.4, 0.7) if rng.random() < 0.5 else rng.uniform(1.5, 2.5)
    return _interp(x, (T - 1) * np.linspace(0.0, 1.0, T) ** g)


def segment_swap(x, sigma, rng):
    T = len(x)
    L = rng.integers(max(1, T // 8), max(2, T // 3) + 1)
    if 2 * L > T:
        return noise(x, sigma, rng)
    a = rng.integers(0, T - 2 * L + 1)
    b = rng.integers(a + L, T - L + 1)
    y = x.copy()
    y[a : a + L], y[b : b + L] = x[b : b + L], x[a : a + L]
    return y


def channel_swap(x, sigma, rng):
    d = x.shape[1]
    if d == 1:
        return x[::-1].copy()
    i, j = rng.choice(d, size=2, replace=False)
    y = x.copy()
    y[:, [i, j]] = x[:, [j, i]]
    return y


def frequency(x, sigma, rng):
    T = len(x)
    if T < 4:
        return noise(x, sigma, rng)
    if rng.random() < 0.5:  # speed 2: the series twice over, at half length each
        t = (2.0 * np.arange(T)) % T
    else:  # speed 1/2: the first half stretched over the whole length
        t = 0.5 * np.arange(T)
    return _interp(x, t)


PERTURBATIONS = {
    "level_shift": level_shift,
    "amplitude": amplitude,
    "noise": noise,
    "spikes": spikes,
    "time_warp": time_warp,
    "segment_swap": segment_swap,
    "channel_swap": channel_swap,
    "frequency": frequency,
}


def perturb(x: np.ndarray, kind: str, sigma: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One synthetic anomaly of ``kind`` made from the normal series ``x`` (T, d)."""
    try:
        fn = PERTURBATIONS[kind]
    except KeyError:
        known = ", ".join(PERTURBATIONS)
        raise ValueError(f"unknown perturbation {kind!r}; known: {known}") from None
    return np.asarray(fn(np.asarray(x, dtype=np.float64), sigma, rng), dtype=np.float64)
