"""Pre-processing of the reference protocol (section 3), fitted on the normal corpus.

1. average pooling in time with window ``1 + (T - 1) // max_length`` when T > max_length
   (non-overlapping windows; a trailing partial window is dropped, so 206 -> 68 at 100);
2. z-scoring with the corpus mean and standard deviation per (time step, channel),
   ``(x - mean) / (std + eps)``; per channel when the corpus has unequal lengths;
3. clipping to [-clip, clip];
4. a zero basepoint prepended;
5. optionally a time channel ``linspace(0, 1, T)`` appended.

Inputs and outputs: float64 numpy arrays (n, T, d), or lists of (T_i, d) arrays. What happens
depends on the lengths, never on the container: a list of equal-length series is treated as
(and returned as) the stacked (n, T, d) array; only unequal lengths give lists.

Every public entry checks its input once (:func:`tskernels.validation.as_series_arrays`); the
steps inside :class:`Preprocessor` and :class:`ZScore` work on the checked arrays without a
second scan. A :class:`tskernels.validation.SeriesBatch` is checked by construction: it is
converted to numpy (no NaN scan), the fast path for callers that validated at their own
public boundary.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .validation import SeriesBatch, as_series_arrays

__all__ = [
    "pooling_window",
    "average_pool",
    "clip",
    "add_basepoint",
    "add_time_channel",
    "ZScore",
    "Preprocessor",
]


def _as_series(X, name: str = "X") -> tuple[np.ndarray | list[np.ndarray], bool]:
    """(array (n, T, d), True) or (list of (T_i, d), False), float64, checked
    (:func:`tskernels.validation.as_series_arrays`). A list of equal-length series gives the
    stacked array. A :class:`SeriesBatch` (checked by construction) is converted only."""
    if isinstance(X, SeriesBatch):
        if X.equal_length:
            return X.values.detach().cpu().to(torch.float64).numpy(), True
        return _restack([x.detach().cpu().to(torch.float64).numpy() for x in X.to_list()])
    return as_series_arrays(X, name=name)


def _restack(X) -> tuple[np.ndarray | list[np.ndarray], bool]:
    """``_as_series`` of series already checked (the output of a step here): no scan, a list
    of equal-length series stacked as :func:`as_series_arrays` stacks it."""
    if isinstance(X, np.ndarray):
        return X, True
    if len({x.shape[0] for x in X}) == 1:
        return np.stack(X), True
    return X, False


def _confirm_finite(X):
    """``X``, the output of a step here, confirmed finite by one reduction per array: a step
    can overflow on finite input of extreme magnitude (a mean of values near the float64
    limit). If it did, :func:`as_series_arrays` raises its error, as when every step checked
    its input in full."""
    arrays = [X] if isinstance(X, np.ndarray) else X
    with np.errstate(over="ignore", invalid="ignore"):
        finite = all(np.isfinite(a.sum()) or np.isfinite(a).all() for a in arrays)
    if not finite:
        as_series_arrays(X)
    return X


def _map(X, fn, checked: bool = False):
    """``fn`` on (n, T, d) arrays, series by series for unequal lengths; ``checked=True``: X is
    the output of a step here (no second scan)."""
    X, equal = _restack(X) if checked else _as_series(X)
    if equal:
        return fn(X)
    return [fn(x[None])[0] for x in X]


def pooling_window(length: int, max_length: int = 100) -> int:
    """Window ``1 + (length - 1) // max_length`` (1, i.e. no pooling, when length <= max_length)."""
    if max_length < 1:
        raise ValueError(f"`max_length` must be a positive integer, got {max_length}")
    return 1 + (int(length) - 1) // int(max_length)


def average_pool(X, window: int):
    """Means over non-overlapping windows of ``window`` steps; a trailing partial window is
    dropped (a series shorter than the window becomes its mean, one step)."""
    return _map(X, _pool(window))


def _pool(window: int):
    if window < 1:
        raise ValueError(f"`window` must be a positive integer, got {window}")

    def pool(a: np.ndarray) -> np.ndarray:
        n, T, d = a.shape
        if window == 1:
            return a.copy()
        k = T // window
        if k == 0:
            return a.mean(axis=1, keepdims=True)
        return a[:, : k * window].reshape(n, k, window, d).mean(axis=2)

    return pool


def clip(X, bound: float = 5.0):
    """Clip every value to [-bound, bound] (``bound`` > 0)."""
    return _map(X, _clip(bound))


def check_clip(bound, name: str = "bound", allow_none: bool = False):
    """``bound`` as a float > 0 (inf allowed: no clipping), or None where ``allow_none``; a
    ValueError otherwise (a bound <= 0 would make every series constant)."""
    if bound is None and allow_none:
        return None
    ok = isinstance(bound, (int, float, np.integer, np.floating)) and not isinstance(
        bound, (bool, np.bool_)
    )
    if not ok or not float(bound) > 0:  # NaN fails too
        what = "a number > 0 or None" if allow_none else "a number > 0"
        raise ValueError(
            f"`{name}` must be {what} (values are clipped to [-{name}, {name}]; 0 or less "
            f"would make every series constant), got {bound!r}"
        )
    return float(bound)


def _clip(bound: float):
    bound = check_clip(bound)
    return lambda a: np.clip(a, -bound, bound)


def add_basepoint(X):
    """Prepend a zero vector to every series: (n, T, d) -> (n, T + 1, d)."""
    return _map(X, _basepoint)


def _basepoint(a: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros_like(a[:, :1]), a], axis=1)


def add_time_channel(X):
    """Append the channel linspace(0, 1, T): (n, T, d) -> (n, T, d + 1)."""
    return _map(X, _time_channel)


def _time_channel(a: np.ndarray) -> np.ndarray:
    n, T, _ = a.shape
    t = np.broadcast_to(np.linspace(0.0, 1.0, T)[None, :, None], (n, T, 1))
    return np.concatenate([a, t], axis=2)


class ZScore(BaseEstimator, TransformerMixin):
    """z-score with corpus statistics, ``(x - mean) / (std + eps)``.

    ``per="step"`` (the protocol's): per (time step, channel) when the corpus has equal
    lengths, per channel otherwise; transforming then needs the corpus length.
    ``per="channel"``: per channel, pooled over series and time, for any length.
    """

    def __init__(self, eps: float = 1e-4, per: str = "step"):
        self.eps = eps
        self.per = per

    def fit(self, X, y=None):
        self._check_per()
        return self._fit(*_as_series(X))

    def _check_per(self) -> None:
        if self.per not in ("step", "channel"):
            raise ValueError(f'`per` must be "step" or "channel", got {self.per!r}')

    def _fit(self, X, equal: bool) -> ZScore:
        """``fit`` on checked arrays (``_as_series``'s output)."""
        self._check_per()
        if equal and self.per == "step":
            self.mean_, self.std_ = X.mean(axis=0), X.std(axis=0)
        else:
            stacked = np.concatenate(X, axis=0)
            self.mean_, self.std_ = stacked.mean(axis=0), stacked.std(axis=0)
        self.per_step_ = equal and self.per == "step"
        return self

    def transform(self, X):
        check_is_fitted(self, "mean_")
        return self._transform(*_as_series(X))

    def _transform(self, X, equal: bool):
        """``transform`` of checked arrays (``_as_series``'s output)."""
        d = self.mean_.shape[-1]
        if (X.shape[2] if equal else X[0].shape[1]) != d:
            got = X.shape[2] if equal else X[0].shape[1]
            raise ValueError(f"channel mismatch: fitted on d={d} channels, got d={got}")
        if self.per_step_:
            if not equal or X.shape[1] != self.mean_.shape[0]:
                raise ValueError(
                    f"fitted per time step on T={self.mean_.shape[0]}; transform needs "
                    "series of that same length"
                )
            return (X - self.mean_) / (self.std_ + self.eps)
        scale = self.std_ + self.eps
        if equal:
            return (X - self.mean_) / scale
        return [(x - self.mean_) / scale for x in X]


class Preprocessor(BaseEstimator, TransformerMixin):
    """The protocol's pre-processing: pool, z-score (fitted on the corpus), clip, basepoint,
    time channel. ``fit`` on the normal corpus, ``transform`` any batch.

    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(5, 206, 3))
    >>> Preprocessor().fit_transform(X).shape  # pooled 206 -> 68, + basepoint
    (5, 69, 3)

    ``zscore="step"`` (default, the protocol's) z-scores per (time step, channel);
    ``zscore="channel"`` per channel, so that series of any length can be transformed.
    """

    def __init__(
        self,
        max_length: int = 100,
        clip: float | None = 5.0,
        eps: float = 1e-4,
        basepoint: bool = True,
        time_channel: bool = False,
        zscore: str = "step",
    ):
        self.max_length = max_length
        self.clip = clip
        self.eps = eps
        self.basepoint = basepoint
        self.time_channel = time_channel
        self.zscore = zscore

    def fit(self, X, y=None):
        check_clip(self.clip, "clip", allow_none=True)
        X, equal = _as_series(X)
        longest = X.shape[1] if equal else max(x.shape[0] for x in X)
        self.window_ = pooling_window(longest, self.max_length)
        pooled = _confirm_finite(_map(X, _pool(self.window_), checked=True))
        self.zscore_ = ZScore(self.eps, per=self.zscore)._fit(*_restack(pooled))
        self.n_channels_ = X.shape[2] if equal else X[0].shape[1]
        return self

    def transform(self, X):
        """The fitted steps on ``X``, checked once here; each step's input is then only
        confirmed finite (``_confirm_finite``), not checked again."""
        check_is_fitted(self, "window_")
        X = _confirm_finite(_map(X, _pool(self.window_)))
        X = self.zscore_._transform(*_restack(X))
        check_clip(self.clip, "clip", allow_none=True)
        steps = [_clip(self.clip)] if self.clip is not None else []
        steps += [_basepoint] if self.basepoint else []
        steps += [_time_channel] if self.time_channel else []
        for step in steps:
            X = _map(_confirm_finite(X), step, checked=True)
        return X
