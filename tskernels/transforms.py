"""Pre-processing of the reference protocol (section 3), fitted on the normal corpus.

1. average pooling in time with window ``1 + (T - 1) // max_length`` when T > max_length
   (non-overlapping windows; a trailing partial window is dropped, so 206 -> 68 at 100);
2. z-scoring with the corpus mean and standard deviation per (time step, channel),
   ``(x - mean) / (std + eps)``; per channel when the corpus has unequal lengths;
3. clipping to [-clip, clip];
4. a zero basepoint prepended;
5. optionally a time channel ``linspace(0, 1, T)`` appended.

Every step has one implementation, on a :class:`~tskernels.validation.SeriesBatch` (the
forward-fill padded tensor and the lengths): it takes a batch and returns a batch, padded the
same way. The public entries also take float64 numpy arrays (n, T, d) or lists of (T_i, d)
arrays, checked once (:func:`tskernels.validation.as_series_batch`), and give back the same
kind: a SeriesBatch for a SeriesBatch, else an (n, T, d) array when every output series has
one length and a list otherwise (what happens depends on the lengths, never on the container).
A SeriesBatch is checked by construction and is not scanned again; the output of a step that
can overflow on finite input of extreme magnitude (pooling, z-score) is confirmed finite by one
reduction.

The arithmetic is numpy's, value for value: the reductions (the pooling's window means, the
z-score's statistics) are numpy's, on a view of the CPU batch, and the other steps are
elementwise, so a batch, an array and a list give the same bits.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._constraints import Interval, StrOptions, validate_estimator, validate_params
from .validation import SeriesBatch, all_finite, as_series_batch, check_finite

__all__ = [
    "pooling_window",
    "average_pool",
    "clip",
    "add_basepoint",
    "add_time_channel",
    "ZScore",
    "Preprocessor",
]


# ---------------------------------------------------------------------------- boundary
def _read(X, name: str = "X") -> tuple[SeriesBatch, str]:
    """(the series as a float64 CPU SeriesBatch, what to give back: "batch", "array" or
    "list"): checked once unless ``X`` is a SeriesBatch (checked by construction)."""
    if isinstance(X, SeriesBatch):
        return X.to(device="cpu", dtype=torch.float64), "batch"
    B = as_series_batch(X, name=name)
    return B, "array" if B.equal_length else "list"


def _give_back(B: SeriesBatch, kind: str):
    """``B`` as the caller's kind (:func:`_read`): the batch; numpy (n, T, d) for input
    series of one length; a list of (T_i, d) arrays for input series of several lengths."""
    if kind == "batch":
        return B
    return B.numpy() if kind == "array" else list(B)


def _confirmed(B: SeriesBatch) -> SeriesBatch:
    """``B``, a step's output, confirmed finite by one reduction (the full scan, naming the
    first bad value, only when it is not)."""
    if not all_finite(B.values):
        check_finite(B.values, "X", "impute or drop them first")
    return B


def _forward_filled(values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``values`` (n, T, d) with each row's steps from its length on set to its last step."""
    T = values.shape[1]
    t = torch.arange(T, device=values.device)
    idx = torch.minimum(t[None, :], (lengths - 1)[:, None])
    return values.gather(1, idx[:, :, None].expand(-1, -1, values.shape[2]))


# ---------------------------------------------------------------------------- steps
#: The constraints of the steps' parameters (the one dialect: ``tskernels._constraints``).
_COUNT = [Interval(Integral, 1, None, closed="left")]
#: A clipping bound: > 0, infinity allowed (no clipping), NaN refused; a bound <= 0 would
#: make every series constant.
_BOUND = [Interval(Real, 0, None, closed="right")]
_PER = [StrOptions({"step", "channel"})]
_EPS = [Interval(Real, 0, None, closed="left")]


@validate_params({"max_length": _COUNT})
def pooling_window(length: int, max_length: int = 100) -> int:
    """Window ``1 + (length - 1) // max_length`` (1, i.e. no pooling, when length <= max_length)."""
    return 1 + (int(length) - 1) // int(max_length)


@validate_params({"window": _COUNT})
def average_pool(X, window: int):
    """Means over non-overlapping windows of ``window`` steps; a trailing partial window is
    dropped (a series shorter than the window becomes its mean, one step)."""
    B, kind = _read(X)
    out = _pool(B, int(window))
    if out is B:  # window 1: a copy, never the input itself
        out = SeriesBatch(B.values.clone(), B.lengths.clone())
    return _give_back(out, kind)


def _pool(B: SeriesBatch, window: int) -> SeriesBatch:
    r"""Window means :math:`\bar x_j = (x_{jw} + \dots + x_{jw+w-1}) / w`, j < L_i // w, per
    series; a series shorter than the window: the mean of its L_i steps (one step). The means
    are numpy's (a view of the CPU batch), whose order of additions depends on the layout."""
    if window == 1:
        return B
    V, L = B.numpy(), B.lengths
    n, T, d = V.shape
    K = max(T // window, 1)
    k = torch.div(L, window, rounding_mode="floor")
    S = np.zeros((n, K, d))
    if T // window:
        S = V[:, : K * window].reshape(n, K, window, d).mean(axis=2)
    for i in torch.nonzero(k == 0).flatten().tolist():  # shorter than one window (rare)
        S[i, 0] = V[i, : int(L[i])].mean(axis=0)
    out_len = k.clamp_min(1)
    S = torch.from_numpy(S[:, : int(out_len.max())])
    return SeriesBatch(_forward_filled(S, out_len).contiguous(), out_len)


@validate_params({"bound": _BOUND})
def clip(X, bound: float = 5.0):
    """Clip every value to [-bound, bound] (``bound`` > 0; inf: no clipping)."""
    B, kind = _read(X)
    return _give_back(_clip(B, float(bound)), kind)


def _clip(B: SeriesBatch, bound: float) -> SeriesBatch:
    return SeriesBatch(B.values.clamp(-bound, bound), B.lengths)


def add_basepoint(X):
    """Prepend a zero vector to every series: (n, T, d) -> (n, T + 1, d)."""
    B, kind = _read(X)
    return _give_back(_basepoint(B), kind)


def _basepoint(B: SeriesBatch) -> SeriesBatch:
    V = B.values
    return SeriesBatch(torch.cat([V.new_zeros((V.shape[0], 1, V.shape[2])), V], 1), B.lengths + 1)


def add_time_channel(X):
    """Append the channel linspace(0, 1, T_i) to every series: (n, T, d) -> (n, T, d + 1)."""
    B, kind = _read(X)
    return _give_back(_time_channel(B), kind)


def _time_channel(B: SeriesBatch) -> SeriesBatch:
    V, L = B.values, B.lengths
    t = V.new_ones((V.shape[0], V.shape[1], 1))  # 1.0 past the end: the last value, held
    for length in torch.unique(L).tolist():
        rows = torch.nonzero(L == length).flatten()
        t[rows, :length, 0] = torch.from_numpy(np.linspace(0.0, 1.0, length)).to(V)
    return SeriesBatch(torch.cat([V, t], 2), L)


# ---------------------------------------------------------------------------- z-score
class ZScore(BaseEstimator, TransformerMixin):
    """z-score with corpus statistics, ``(x - mean) / (std + eps)``.

    ``per="step"`` (the protocol's): per (time step, channel) when the corpus has equal
    lengths, per channel otherwise; transforming then needs the corpus length.
    ``per="channel"``: per channel, pooled over series and time, for any length.
    """

    _parameter_constraints = {"eps": _EPS, "per": _PER}

    def __init__(self, eps: float = 1e-4, per: str = "step"):
        self.eps = eps
        self.per = per

    def fit(self, X, y=None):
        return self._fit(_read(X)[0])

    def _fit(self, B: SeriesBatch) -> ZScore:
        """``fit`` on a checked batch: numpy's mean and std of the valid steps."""
        validate_estimator(self)
        self.per_step_ = B.equal_length and self.per == "step"
        if self.per_step_:
            X = B.numpy()
            self.mean_, self.std_ = X.mean(axis=0), X.std(axis=0)
        else:
            stacked = np.concatenate(list(B), axis=0)
            self.mean_, self.std_ = stacked.mean(axis=0), stacked.std(axis=0)
        return self

    def transform(self, X):
        check_is_fitted(self, "mean_")
        B, kind = _read(X)
        return _give_back(self._transform(B), kind)

    def _transform(self, B: SeriesBatch) -> SeriesBatch:
        """``transform`` of a checked batch (elementwise; padding stays forward-filled)."""
        d = self.mean_.shape[-1]
        if B.d != d:
            raise ValueError(f"channel mismatch: fitted on d={d} channels, got d={B.d}")
        if self.per_step_ and (not B.equal_length or B.length != self.mean_.shape[0]):
            raise ValueError(
                f"fitted per time step on T={self.mean_.shape[0]}; transform needs "
                "series of that same length"
            )
        mean, scale = self._torch_statistics()
        return SeriesBatch((B.values - mean.to(B.values)) / scale.to(B.values), B.lengths)

    def _torch_statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, std + eps) as float64 tensors, converted once per fit."""
        cached = self.__dict__.get("_statistics")  # (mean_, std_, eps, mean, scale)
        if cached is None or not (
            cached[0] is self.mean_ and cached[1] is self.std_ and cached[2] == self.eps
        ):
            scale = torch.from_numpy(np.asarray(self.std_ + self.eps, dtype=np.float64))
            mean = torch.from_numpy(np.asarray(self.mean_, dtype=np.float64))
            cached = (self.mean_, self.std_, self.eps, mean, scale)
            self.__dict__["_statistics"] = cached
        return cached[3], cached[4]


# ---------------------------------------------------------------------------- pipeline
class Preprocessor(BaseEstimator, TransformerMixin):
    """The protocol's pre-processing: pool, z-score (fitted on the corpus), clip, basepoint,
    time channel. ``fit`` on the normal corpus, ``transform`` any batch.

    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(5, 206, 3))
    >>> Preprocessor().fit_transform(X).shape  # pooled 206 -> 68, + basepoint
    (5, 69, 3)

    ``zscore="step"`` (default, the protocol's) z-scores per (time step, channel);
    ``zscore="channel"`` per channel, so that series of any length can be transformed.
    A :class:`~tskernels.validation.SeriesBatch` in gives a SeriesBatch out.
    """

    _parameter_constraints = {
        "max_length": _COUNT,
        "clip": [None, *_BOUND],
        "eps": _EPS,
        "basepoint": ["boolean"],
        "time_channel": ["boolean"],
        "zscore": _PER,
    }

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
        validate_estimator(self)
        B = _read(X)[0]
        self.window_ = pooling_window(int(B.lengths.max()), self.max_length)
        pooled = _confirmed(_pool(B, self.window_))
        self.zscore_ = ZScore(self.eps, per=self.zscore)._fit(pooled)
        self.n_channels_ = B.d
        return self

    def transform(self, X):
        """The fitted steps on ``X`` (checked once here, unless a SeriesBatch); the outputs of
        the steps that can overflow (pooling, z-score) are confirmed finite by one reduction."""
        check_is_fitted(self, "window_")
        validate_estimator(self)
        B, kind = _read(X)
        if self.window_ > 1:  # a window's sum can overflow on finite input
            B = _confirmed(_pool(B, self.window_))
        B = _confirmed(self.zscore_._transform(B))  # so can (x - mean) / scale
        # the later steps keep finite values finite: clip bounds them, the basepoint is 0
        # and the time channel lies in [0, 1]
        if self.clip is not None:
            B = _clip(B, float(self.clip))
        if self.basepoint:
            B = _basepoint(B)
        if self.time_channel:
            B = _time_channel(B)
        return _give_back(B, kind)
