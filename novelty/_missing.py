"""Missing values (NaN gaps) inside one series, filled by linear interpolation per channel.

The rule, for each channel of a series ``x`` (T, d) on its own: the observed (non-NaN) steps
are kept as they are; a NaN between two observed steps ``t0 < t < t1`` becomes
``x[t0] + (x[t1] - x[t0]) (t - t0) / (t1 - t0)`` (``np.interp`` over the observed time
indices, steps equally spaced); a NaN before the first observed step holds that first value,
a NaN after the last observed step holds that last value. A channel with no observed step
(all NaN in that series) has nothing to interpolate from and is an error, as is an all-NaN
series. Inf is never filled: it is an error, not a missing value.

Used by :func:`novelty.as_series_collection` with ``missing="interpolate"`` (the default of
``KernelNoveltyDetector``), once per series, after trailing all-NaN padding rows of an array
have been cut off (a gap at the very end of a series in an array cannot be told from padding).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "MISSING_OPTIONS",
    "check_missing",
    "interpolate_missing",
    "resample_collection",
    "resample_linear",
]

#: The accepted values of the ``missing`` option.
MISSING_OPTIONS = ("error", "interpolate")


def check_missing(missing) -> str:
    """``missing`` if it is one of :data:`MISSING_OPTIONS`, else ValueError listing them."""
    if not (isinstance(missing, str) and missing in MISSING_OPTIONS):
        options = ", ".join(repr(m) for m in MISSING_OPTIONS)
        raise ValueError(f"`missing` must be one of {options}, got {missing!r}")
    return missing


def interpolate_missing(x, name: str = "X") -> np.ndarray:
    """A float64 copy of one series ``x`` (T, d) (or (T,), univariate) whose NaN values are
    filled per channel by linear interpolation between the neighbouring observed values of that
    channel; NaN before the first / after the last observed value hold that edge value.

    Raises ValueError (naming ``name``) when ``x`` holds an infinite value (never filled), when
    the whole series is NaN, or when one channel is NaN at every step (nothing to interpolate
    from); and when ``x`` is not 1-D or 2-D.

    >>> import numpy as np
    >>> interpolate_missing(np.array([np.nan, 1.0, np.nan, 3.0, np.nan])).tolist()
    [1.0, 1.0, 2.0, 3.0, 3.0]
    """
    a = np.array(x, dtype=np.float64)  # a copy
    if a.ndim not in (1, 2):
        raise ValueError(f"`{name}` must be one series (T, d) or (T,), got shape {a.shape}")
    univariate = a.ndim == 1
    if univariate:
        a = a[:, None]
    finite = np.isfinite(a)
    if finite.all():
        return a[:, 0] if univariate else a
    inf = np.isinf(a)
    if inf.any():
        t, c = np.argwhere(inf)[0]
        raise ValueError(
            f"`{name}` contains an infinite value at time step {t}, channel {c}: Inf is not "
            "allowed (only NaN is read as a missing value and interpolated)"
        )
    observed = finite  # no Inf: not finite means NaN
    if not observed.any():
        raise ValueError(f"`{name}` is all NaN: nothing to interpolate from")
    empty = ~observed.any(axis=0)
    if empty.any():
        c = int(np.argmax(empty))
        raise ValueError(f"`{name}` channel {c} is all NaN: nothing to interpolate from")
    steps = np.arange(a.shape[0], dtype=np.float64)
    for c in np.flatnonzero(~observed.all(axis=0)):  # only the channels with gaps
        seen = observed[:, c]
        gaps = ~seen
        # np.interp holds the first / last observed value outside their range
        a[gaps, c] = np.interp(steps[gaps], steps[seen], a[seen, c])
    return a[:, 0] if univariate else a


def resample_linear(x, length: int) -> np.ndarray:
    """One series ``(T, d)`` resampled linearly to ``length`` steps on relative time [0, 1]
    (both ends kept: step ``i`` of the result sits at ``i / (length - 1)``); a one-step series
    is repeated. A new float64 array, also when ``T == length``."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) == length:
        return x.copy()
    src = np.linspace(0.0, 1.0, len(x)) if len(x) > 1 else np.zeros(1)
    dst = np.linspace(0.0, 1.0, length) if length > 1 else np.zeros(1)
    return np.stack([np.interp(dst, src, x[:, j]) for j in range(x.shape[1])], axis=1)


def resample_collection(X, length: int) -> np.ndarray:
    """The series of ``X`` (an (n, T, d) array or a list of (T_i, d) arrays) as one
    (n, ``length``, d) float64 array, each resampled by :func:`resample_linear` (an array whose
    series already have ``length`` steps: its values as float64, not copied when already
    float64)."""
    if isinstance(X, np.ndarray) and X.ndim == 3 and X.shape[1] == length:
        return np.asarray(X, dtype=np.float64)
    return np.stack([resample_linear(x, length) for x in X])
