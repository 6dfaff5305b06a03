r"""The automatic window: the dominant period of the normal data, bounded.

For each channel of each normal recording (standardised), the autocorrelation
:math:`\rho(\ell) = \sum_t x_t x_{t+\ell} / \sum_t x_t^2` is computed by FFT for lags
:math:`\ell \le L = \min(512, \lfloor T/4 \rfloor)`. The channel autocorrelations are averaged
(weighted by recording length). After its first local minimum, the peaks are the local maxima with
:math:`\rho > 0.1` that rise more than 0.1 above the lowest point before them (noise makes small
bumps); the period is the first peak at least 0.8 times as high as the highest one (a multiple
of the period can be a little higher than the period itself); the window is that period
clipped to ``[16, L]``. Without such a peak: ``L`` when the mean is still rising at ``L``
after going negative (a period longer than ``L``), otherwise (noise, trends) ``min(100, L)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_WINDOW", "MAX_WINDOW", "auto_window"]

MIN_WINDOW = 16
MAX_WINDOW = 512
DEFAULT_WINDOW = 100
MIN_PEAK = 0.1
HARMONIC = 0.8


def _acf(x: np.ndarray, max_lag: int) -> np.ndarray:
    """Autocorrelation of each column of ``x`` (T, d) for lags 0..max_lag, array (max_lag+1, d)."""
    x = x - x.mean(axis=0)
    n = x.shape[0]
    size = 1 << int(np.ceil(np.log2(2 * n)))
    f = np.fft.rfft(x, n=size, axis=0)
    r = np.fft.irfft(f * np.conj(f), n=size, axis=0)[: max_lag + 1]
    r0 = r[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(r0 > 0, r / np.where(r0 > 0, r0, 1.0), 0.0)
    return out


def auto_window(recordings: list[np.ndarray]) -> int:
    """The window for ``recordings`` (a list of standardised (T, d) arrays): the dominant period,
    clipped to ``[16, min(512, T_max // 4)]`` (module docstring). ValueError when the longest
    recording has fewer than 64 steps."""
    t_max = max(len(r) for r in recordings)
    upper = min(MAX_WINDOW, t_max // 4)
    if upper < MIN_WINDOW:
        raise ValueError(
            f'window="auto" needs a normal recording of at least {4 * MIN_WINDOW} steps (the '
            f"window is at least {MIN_WINDOW} and at most a quarter of the recording); the "
            f"longest has {t_max}: pass a smaller window=<int>"
        )
    total = np.zeros(upper + 1)
    weight = 0.0
    for r in recordings:
        lag = min(upper, len(r) - 2)
        if lag < 2:
            continue
        a = _acf(r, lag).mean(axis=1)
        total[: lag + 1] += len(r) * a
        weight += len(r)
    if weight == 0:
        return min(DEFAULT_WINDOW, upper)
    mean = total / weight
    inner = mean[1:-1]
    minima = np.flatnonzero((inner < mean[:-2]) & (inner <= mean[2:])) + 1
    if minima.size == 0:
        return min(DEFAULT_WINDOW, upper)
    first = int(minima[0])
    peaks = np.flatnonzero((inner > mean[:-2]) & (inner >= mean[2:])) + 1
    peaks = peaks[(peaks > first) & (mean[peaks] > MIN_PEAK)]
    # a peak must rise above the lowest point before it (noise makes small bumps)
    peaks = np.array([q for q in peaks if mean[q] - mean[first:q].min() > MIN_PEAK], dtype=int)
    if peaks.size:
        # the fundamental: the first peak reaching HARMONIC of the highest (a multiple of the
        # period can be a little higher than the period itself)
        period = int(peaks[np.flatnonzero(mean[peaks] >= HARMONIC * mean[peaks].max())[0]])
        return int(np.clip(period, MIN_WINDOW, upper))
    low = first + int(np.argmin(mean[first:]))
    if mean[low] < 0 and mean[upper] - mean[low] > MIN_PEAK:
        return upper  # still rising at the bound: the period is longer than the window may be
    return min(DEFAULT_WINDOW, upper)
