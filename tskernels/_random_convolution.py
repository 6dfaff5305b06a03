r"""Random-convolution features (MiniRocket, MultiRocket) and the kernels they induce.

The features come from sktime's transformers; this module only chooses the transformer,
converts our layouts to sktime's, applies the corpus-fitted power transform (as ROCKAD,
Theissler et al. 2023) and puts a static kernel on the feature vectors, so that every
Gram-level scorer applies to ROCKET-type features.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import hashlib
import warnings
from numbers import Integral

import numpy as np
import torch

from ._base import Kernel
from ._constraints import Interval, StrOptions
from ._registry import KernelSpec, register
from ._static import RBF, Linear, StaticKernel
from ._threads import threads
from .validation import SeriesBatch, as_series_batch

__all__ = ["RandomConvolutionKernel", "sharing_features"]

#: Shortest series each transform accepts: MiniRocket's kernels have 9 taps; MultiRocket also
#: convolves the first differences, which must have 9 points.
MIN_LENGTH = {"minirocket": 9, "multirocket": 10}

_NOT_FITTED = "RandomConvolutionKernel is not fitted: call fit(X) on the corpus first"
#: sktime's random_state is cast to int32.
_MAX_SEED = 2**31 - 1
#: What an equal-length fit does with series of another length (``other_lengths``).
OTHER_LENGTHS = ("error", "native")
#: Taps of MiniRocket's kernels: a kernel of dilation D spans 8 D + 1 time steps.
_TAPS = 9


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _pad_short(x: np.ndarray, minimum: int) -> np.ndarray:
    """Series (T, d) extended to ``minimum`` time steps by repeating its last time point."""
    if x.shape[0] >= minimum:
        return x
    return np.concatenate([x, np.repeat(x[-1:], minimum - x.shape[0], axis=0)])


class _MemoEntry:
    """The features of one batch, remembered by ``RandomConvolutionKernel._reusing_features``:
    the batch's values (kept alive, so their memory is never another batch's), their memory
    location, layout and torch version, its lengths, and its raw features (as sktime gives
    them) or, once asked for, the power-transformed ones."""

    __slots__ = ("values", "key", "lengths", "raw", "phi")

    def __init__(self, X: SeriesBatch, raw: np.ndarray):
        self.values = X.values
        self.key = _batch_key(X)
        self.lengths = X.lengths.clone()
        self.raw = raw
        self.phi = None

    def matches(self, X: SeriesBatch) -> bool:
        return _batch_key(X) == self.key and torch.equal(X.lengths, self.lengths)


def _batch_key(X: SeriesBatch) -> tuple:
    """Where and how the batch's values lie, and their torch version (bumped by every in-place
    change made through torch): equal for the same batch, a view of all of it, or a tensor
    sharing its numpy memory."""
    v = X.values
    try:
        version = v._version
    except RuntimeError:  # an inference-mode tensor keeps no version: never reused
        version = object()
    return (v.data_ptr(), tuple(v.shape), v.stride(), v.dtype, v.device, version)


class _SharedFeatures:
    """The raw features shared by the random-convolution kernels fitted inside one
    :func:`sharing_features` block. A fit is keyed by what determines sktime's fitted transform
    (transform, n_kernels, seed, n_jobs, other_lengths and the corpus batch's values and
    lengths); the raw features of a batch by its fit's key and the batch. Batches are keyed by a
    BLAKE2b digest of their float64 values, shape and lengths, and a digest match is confirmed
    by comparing the values, so a collision never shares features of distinct batches.

    Memory: the entries (raw features, float32 when that is exact, as MiniRocket's are, plus
    one float64 copy of each batch's values) total at most the ``max_memory`` budget of the
    kernel storing them (default 512 MiB); a batch beyond it is computed afresh and not kept.
    The default detector at N = 100 series (10 calibration folds and the final fit, 10,000
    kernels) keeps about 1,100 rows x 9,996 features x 4 bytes = 44 MB."""

    def __init__(self):
        self.fits: dict = {}  # fit key -> post-fit transformer (a copy, never transformed)
        self.raw: dict = {}  # (fit key, batch digest) -> (values, lengths, raw features)
        self.owners: dict = {}  # id(transformer) -> (transformer, fit key)
        self.nbytes = 0
        self.computed = 0  # transforms fitted or features computed
        self.reused = 0  # transforms or features taken from the memo

    def clear(self) -> None:
        self.fits.clear()
        self.raw.clear()
        self.owners.clear()
        self.nbytes = 0

    def own(self, transformer, key) -> None:
        self.owners[id(transformer)] = (transformer, key)

    def key_of(self, transformer):
        owner = self.owners.get(id(transformer))
        return None if owner is None or owner[0] is not transformer else owner[1]

    def lookup(self, key, digest: bytes, V: np.ndarray, L: np.ndarray) -> np.ndarray | None:
        entry = self.raw.get((key, digest))
        if entry is None or not (
            np.array_equal(entry[1], L) and np.array_equal(entry[0], V, equal_nan=True)
        ):
            return None
        self.reused += 1
        return entry[2].astype(np.float64)  # a fresh float64 copy: the caller may keep it

    def store(self, key, digest: bytes, V: np.ndarray, L: np.ndarray, raw, budget: int) -> None:
        small = raw.astype(np.float32)
        if not np.array_equal(small, raw):  # kept as float64 unless float32 is exact
            small = raw.copy()
        size = small.nbytes + V.nbytes + L.nbytes
        if (key, digest) in self.raw or self.nbytes + size > budget:
            return
        self.raw[(key, digest)] = (V.copy(), L.copy(), small)
        self.nbytes += size


#: The memo of the enclosing :func:`sharing_features` block: None outside one, False in a block
#: that disables sharing.
_SHARED: contextvars.ContextVar = contextvars.ContextVar("random_convolution_shared", default=None)


@contextlib.contextmanager
def sharing_features(enabled: bool = True):
    """Within the block, :class:`RandomConvolutionKernel` fits with equal raw-feature parameters
    (transform, n_kernels, seed, n_jobs, other_lengths) on equal corpora (values and lengths)
    share one fitted transform (each kernel gets its own copy) and the raw features of every
    batch that they transform: each is computed once. The results are bit for bit those
    computed afresh (sktime's transform is a deterministic function of its fit and the batch;
    the power transform or standardisation, fitted per kernel, is not shared). The memory is
    released when the outermost block ends; a nested block joins the outer one, and
    ``enabled=False`` turns sharing off inside it (nested blocks included). Yields the memo
    (``computed`` and ``reused`` count transforms), or None when disabled. The detector's fit
    runs its members in one block (its MiniRocket members cross-fit on the same folds)."""
    current = _SHARED.get()
    if current is not None:  # nested: join the outer block (or stay disabled)
        yield current or None
        return
    memo = _SharedFeatures() if enabled else False
    token = _SHARED.set(memo)
    try:
        yield memo or None
    finally:
        _SHARED.reset(token)
        if memo:
            memo.clear()


def _batch_digest(X: SeriesBatch) -> tuple[bytes, np.ndarray, np.ndarray]:
    """(BLAKE2b digest, float64 values, lengths) of a batch, as the shared memo keys it."""
    V = np.ascontiguousarray(X.values.detach().cpu().numpy(), dtype=np.float64)
    L = np.ascontiguousarray(X.lengths.cpu().numpy(), dtype=np.int64)
    h = hashlib.blake2b(repr((V.shape, V.dtype.str)).encode(), digest_size=32)
    h.update(L.tobytes())
    h.update(V.tobytes())
    return h.digest(), V, L


def _writeable_parameters(transformer) -> None:
    """sktime's compiled transforms take writeable arrays only; a transformer unpickled from a
    read-only memory map holds read-only ones: give it copies."""
    for name in ("parameters", "parameter", "parameter1"):
        params = getattr(transformer, name, None)
        if isinstance(params, tuple) and any(
            isinstance(p, np.ndarray) and not p.flags.writeable for p in params
        ):
            setattr(
                transformer,
                name,
                tuple(np.array(p) if isinstance(p, np.ndarray) else p for p in params),
            )


def check_transform_parameters(transformer, n_channels: int, length: int | None) -> None:
    """Refuse a fitted sktime MiniRocket / MultiRocket whose parameter arrays could not come
    from a fit on ``n_channels`` channels (and series of ``length`` steps, None: unequal):
    sktime's compiled transforms index with them unchecked, so a crafted model file could
    otherwise read or write out of bounds. Each tuple is ``(channels per kernel, channel
    indices, dilations, features per dilation, biases)`` with ``84`` kernels per dilation:
    ``len(channels per kernel) = 84 * len(dilations)``, ``sum(channels per kernel) =
    len(channel indices)``, indices in ``[0, n_channels)``, ``1 <= dilation <= max(1, (L -
    1) // 8)`` (sktime's largest; ``L = max(length, 9)``, 2**20 for unequal lengths), and
    ``len(biases) = 84 * sum(features per dilation)``, all finite. ValueError otherwise."""
    names = [n for n in ("parameters", "parameter", "parameter1") if hasattr(transformer, n)]
    if not names:
        raise ValueError(f"a {type(transformer).__name__} without its fitted parameters")
    top = max(1, (max(int(length), 9) - 1) // 8) if length is not None else 2**20
    for name in names:
        params = getattr(transformer, name)
        bad = f"{type(transformer).__name__}.{name} is not a fitted transform's"
        if not isinstance(params, tuple) or len(params) != 5:
            raise ValueError(f"{bad} (5 arrays expected)")
        if not all(isinstance(a, np.ndarray) and a.ndim == 1 for a in params):
            raise ValueError(f"{bad} (1-D arrays expected)")
        per_kernel, indices, dilations, per_dilation, biases = params
        if any(a.dtype.kind not in "iu" for a in params[:4]) or biases.dtype.kind != "f":
            raise ValueError(f"{bad} (integer arrays and float biases expected)")
        checks = (
            dilations.size >= 1 and per_dilation.size == dilations.size,
            per_kernel.size == 84 * dilations.size,
            bool(np.all(per_kernel >= 1)) and bool(np.all(per_kernel <= n_channels)),
            int(per_kernel.sum()) == indices.size,
            bool(np.all(indices >= 0)) and bool(np.all(indices < n_channels)),
            bool(np.all(dilations >= 1)) and bool(np.all(dilations <= top)),
            bool(np.all(per_dilation >= 0)),
            biases.size == 84 * int(per_dilation.sum()),
            bool(np.isfinite(biases).all()),
        )
        if not all(checks):
            raise ValueError(
                f"{bad}: its arrays do not fit {n_channels} channel(s) and "
                f"{'unequal lengths' if length is None else f'{length} steps'}"
            )


class RandomConvolutionKernel(Kernel):
    r"""Kernel on random-convolution features: MiniRocket or MultiRocket (from sktime),
    power-transformed on the corpus, then a static kernel.

    .. math::
        K(x, y) = k_s\big(\phi(x), \phi(y)\big),\qquad \phi(x) = P\big(R(x)\big) \in
        \mathbb{R}^F,

    with :math:`R` sktime's transform (``"minirocket"``: the proportion of positive values
    (PPV) of each dilated, biased convolution; ``"multirocket"``: PPV, mean of positive values,
    mean of indices of positive values and longest stretch of positive values, on the series
    and on its first differences), :math:`P` the Yeo-Johnson power transform followed by
    standardisation (``tskernels._yeo_johnson.YeoJohnson``: the maximum-likelihood criterion
    of sklearn's ``PowerTransformer(method="yeo-johnson")``, vectorised over features, with
    :math:`\lambda` searched in [-4, 4]), or standardisation alone (sklearn's
    ``StandardScaler``, ``power_transform=False``), and :math:`k_s`
    the static kernel, by default :math:`k_s(u, v) = \langle u, v\rangle / F`, so that
    :math:`K(x, x) \approx 1` on the corpus.

    Both :math:`R` (dilations and biases, drawn from the corpus) and :math:`P` are fitted by
    ``fit(X)`` on the corpus; ``gram``, ``diag`` and ``features`` before ``fit`` raise
    sklearn's ``NotFittedError`` (a ``ValueError``). A corpus of equal-length series uses
    ``MiniRocketMultivariate`` (or ``MultiRocketMultivariate``); a corpus of unequal lengths uses
    ``MiniRocketMultivariateVariable`` (MultiRocket has no unequal-length version: ValueError),
    which accepts any length afterwards.

    Other lengths after an equal-length fit (``other_lengths``): ``"error"`` (default), the
    fitted length only (ValueError otherwise). ``"native"`` (MiniRocket only): a series of
    another length gets the *same* features, the fitted convolutions (dilations counted in
    time steps, biases, MiniRocket's alternating padding) applied to the series at its own
    length by the same fitted transform: the time scale of the series is kept, and since each
    feature is a proportion of positions (PPV), it does not grow or shrink with the length.
    A series shorter than the widest dilated kernel, :math:`8 D_{max} + 1` time steps
    (:math:`D_{max}` the largest fitted dilation; at most the fitted length), is first extended
    to that span by repeating its last time point (the short-series rule below, which is the
    case :math:`D_{max} = 1`), so that every feature has positions to count. Series of the
    fitted length get exactly the features they get with ``"error"``, the corpus's included.
    MultiRocket refuses ``"native"``: two of its pooling operators (the mean index and the
    longest stretch of positive values) grow with the length. A feature that is constant on
    the corpus is never NaN: the power transform maps it to 0 for every series;
    ``StandardScaler`` leaves it unscaled (the deviation from the constant).

    Short series: a series shorter than 9 time steps (10 for MultiRocket) is extended to that
    length by repeating its last time point, before fitting and before transforming.

    Parameters
    ----------
    transform : {"minirocket", "multirocket"}
    n_kernels : int, default 10_000
        sktime's ``num_kernels``, rounded down to a multiple of 84 (at least 84). MiniRocket
        gives F = that many features; MultiRocket gives 8 times as many (4 pooling operators
        on the series and on its differences).
    static : StaticKernel or None
        Kernel on the feature vectors. ``None``: ``Linear(scale=1/F)``. The features are
        standardised, so a typical squared distance is about 2F: an ``RBF`` needs a sigma of
        the order of sqrt(F).
    power_transform : bool, default True
        Yeo-Johnson then standardisation (True) or standardisation only (False).
    seed : int, default 0
        sktime's ``random_state`` (0 <= seed < 2**31): the same features for the same seed.
    other_lengths : {"error", "native"}, default "error"
        After an equal-length fit, what a series of another length gets: a ValueError, or the
        same fitted features computed at its own length (see above). Ignored after a fit on
        unequal lengths (every length is accepted).
    n_jobs : None (default), -1 or int > 0
        Threads: sktime's ``n_jobs`` of the transform (None: sktime's default, 1), numba's
        for the power transform's lambda search and torch's for the Gram (None: the current
        settings); -1: all cores.

    Attributes (after ``fit``)
    --------------------------
    transformer_ : the fitted sktime transformer
    scaler_ : the fitted ``YeoJohnson`` or ``StandardScaler``
    static_ : the static kernel in use
    n_features_ : F
    n_channels_ : d of the corpus
    series_length_ : the corpus length for an equal-length corpus, None otherwise

    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(10, 20, 2))  # (n, T, d)
    >>> k = RandomConvolutionKernel(n_kernels=84).fit(X)
    >>> k.features(X).shape, tuple(k.gram(X[:3]).shape)
    ((10, 84), (3, 3))
    """

    _tags = {"unequal_length": True, "needs_fit": True, "fit_is_empty": False}
    _parameter_constraints = {
        "transform": [StrOptions(set(MIN_LENGTH))],
        "n_kernels": [Interval(Integral, 1, None, closed="left")],
        "static": [None, StaticKernel],
        "power_transform": ["boolean"],
        "seed": [Interval(Integral, 0, _MAX_SEED, closed="both")],  # sktime's int32
        "other_lengths": [StrOptions(set(OTHER_LENGTHS))],
    }
    _divergence_hint = (
        "The features or the static kernel overflowed: use power_transform=False or a "
        "static kernel that fits the scale of the features."
    )

    def __init__(
        self,
        transform: str = "minirocket",
        n_kernels: int = 10_000,
        static: StaticKernel | None = None,
        power_transform: bool = True,
        seed: int = 0,
        other_lengths: str = "error",
        **execution,
    ):
        super().__init__(**execution)
        self.transform = transform
        self.n_kernels = n_kernels
        self.static = static
        self.power_transform = power_transform
        self.seed = seed
        self.other_lengths = other_lengths

    # ------------------------------------------------------------------ options
    def _check_parameters(self) -> None:
        super()._check_parameters()
        if self.other_lengths == "native" and self.transform == "multirocket":
            raise ValueError(
                "other_lengths='native' needs transform='minirocket': MultiRocket's mean index "
                "and longest stretch of positive values grow with the series length"
            )

    def _is_fitted(self) -> bool:
        return "transformer_" in self.__dict__

    def _check_loaded_state(self) -> None:
        """Called by the model-file loader once this kernel's state is read: the transform's
        parameter arrays must be a fit's (:func:`check_transform_parameters`)."""
        if self._is_fitted():
            check_transform_parameters(
                self.transformer_, int(self.n_channels_), self.series_length_
            )

    def _check_fitted(self) -> None:
        if not self._is_fitted():
            from sklearn.exceptions import NotFittedError  # only when raising

            raise NotFittedError(_NOT_FITTED)

    def _check_params(self, d: int) -> None:
        if hasattr(self, "n_channels_") and d != self.n_channels_:
            raise ValueError(
                f"channel mismatch: the kernel was fitted on series with d={self.n_channels_} "
                f"channels, got d={d}"
            )

    # ------------------------------------------------------------------ fitting
    def _make_transformer(self, equal_length: bool):
        from sktime.transformations.rocket import (
            MiniRocketMultivariate,
            MiniRocketMultivariateVariable,
            MultiRocketMultivariate,
        )

        opts = dict(
            num_kernels=int(self.n_kernels), n_jobs=1 if self.n_jobs is None else int(self.n_jobs)
        )
        opts["random_state"] = int(self.seed)  # sktime checks isinstance(seed, int)
        if self.transform == "multirocket":
            return MultiRocketMultivariate(**opts)
        if equal_length:
            return MiniRocketMultivariate(**opts)
        return MiniRocketMultivariateVariable(**opts)

    def fit(self, X, y=None) -> RandomConvolutionKernel:
        """Fit the transform (dilations, biases) and the power transform on the corpus ``X``,
        an (n, T, d) array or a list of (T_i, d) arrays; returns self."""
        from sklearn.preprocessing import StandardScaler

        from ._yeo_johnson import YeoJohnson

        self._check_parameters()
        batch = as_series_batch(X, name="X", dtype=self._dtype, device=self._device)
        if self.transform == "multirocket" and not batch.equal_length:
            raise ValueError(
                "transform='multirocket' needs an equal-length corpus (sktime has no "
                "unequal-length MultiRocket): use transform='minirocket' or resample the series"
            )
        length = batch.length if batch.equal_length else None
        shared = _SHARED.get() or None
        key = transformer = None
        if shared is not None:
            digest, V, L = _batch_digest(batch)
            params = (self.transform, int(self.n_kernels), int(self.seed), self.n_jobs)
            key = (params, self.other_lengths, digest)
            known = shared.fits.get(key)
            if known is not None and np.array_equal(
                shared.raw[(key, digest)][0], V, equal_nan=True
            ):
                transformer = copy.deepcopy(known)
                shared.reused += 1
        if transformer is None:
            transformer = self._fit_transformer(batch, length)
            if shared is not None:
                shared.computed += 1
        if shared is not None:
            shared.own(transformer, key)
        raw = self._fitted_raw(transformer, batch, length)
        if shared is not None and key not in shared.fits and (key, digest) in shared.raw:
            shared.fits[key] = copy.deepcopy(transformer)  # sktime's transform keeps no state
        if self.power_transform:
            scaler = YeoJohnson()  # sklearn's criterion, vectorised (its Brent: 10 ms/feature)
        else:
            scaler = StandardScaler()
        with warnings.catch_warnings(), threads(self.n_jobs, "numba"):
            # the lambda search on a (nearly) constant column overflows harmlessly
            warnings.filterwarnings("ignore", category=RuntimeWarning)
            scaler.fit(raw)  # YeoJohnson's lambda search runs on numba's threads
        self.transformer_ = transformer
        self.scaler_ = scaler
        memo = self.__dict__.get("_feature_memo")
        if memo is not None:  # inside _reusing_features: the old features are stale
            memo.clear()
            memo.append(_MemoEntry(batch, raw))
        self.n_features_ = raw.shape[1]
        self.n_channels_ = batch.d
        self.series_length_ = length
        self.static_ = Linear(scale=1.0 / self.n_features_) if self.static is None else self.static
        return self

    def _fit_transformer(self, batch: SeriesBatch, length: int | None):
        """sktime's transform fitted on the checked corpus ``batch``."""
        transformer = self._make_transformer(batch.equal_length)
        data = self._to_sktime(batch, length, "X")
        # MultiRocket seeds numpy's legacy global generator: restore the caller's state
        state = np.random.get_state()  # noqa: NPY002
        try:
            with warnings.catch_warnings():
                # MiniRocketMultivariateVariable suggests MiniRocket for d = 1, and
                # MiniRocketMultivariate when every series was padded to the same length
                warnings.filterwarnings("ignore", message="X is univariate")
                warnings.filterwarnings("ignore", message="X is of equal length")
                transformer.fit(data)
        finally:
            np.random.set_state(state)  # noqa: NPY002
        return transformer

    def _fitted_raw(self, transformer, X: SeriesBatch, length: int | None) -> np.ndarray:
        """:meth:`_raw_features`, taken from (and given to) the enclosing
        :func:`sharing_features` block when ``transformer`` was fitted in it."""
        shared = _SHARED.get() or None
        key = None if shared is None else shared.key_of(transformer)
        if key is None:
            return self._raw_features(transformer, X, length)
        digest, V, L = _batch_digest(X)
        raw = shared.lookup(key, digest, V, L)
        if raw is None:
            raw = self._raw_features(transformer, X, length)
            shared.computed += 1
            shared.store(key, digest, V, L, raw, self._budget)
        return raw

    # ------------------------------------------------------------------ features
    def _to_sktime(self, X: SeriesBatch, length: int | None, name: str):
        """numpy3D (n, d, T) for an equal-length fit (series of the fitted ``length``
        only), else sktime's df-list: one DataFrame (T_i, d) per series. Short series are
        extended by repeating their last time point."""
        minimum = MIN_LENGTH[self.transform]
        V = X.values.detach().cpu().numpy().astype(np.float64, copy=False)
        top = float(np.nanmax(np.abs(V))) if V.size else 0.0
        if top > _FLOAT32_MAX:  # sktime's transforms compute in float32: inf, then NaN
            raise ValueError(
                f"overflow: `{name}` holds values up to {top:.3g}, beyond float32's "
                f"{_FLOAT32_MAX:.3g}, in which sktime's MiniRocket / MultiRocket compute; "
                "rescale the series (or let the detector z-score them)"
            )
        if length is not None:
            if not X.equal_length or X.length != length:
                lo, hi = int(X.lengths.min()), int(X.lengths.max())
                raise ValueError(
                    f"RandomConvolutionKernel was fitted on series of length {length}, "
                    f"got lengths {lo}..{hi} in `{name}`: the equal-length transform accepts "
                    "the fitted length only with other_lengths='error'; use "
                    "other_lengths='native' (the same features at each series' own length), "
                    "resample the series or fit on a corpus of unequal lengths"
                )
            V = np.stack([_pad_short(v, minimum) for v in V]) if length < minimum else V
            return np.ascontiguousarray(V.transpose(0, 2, 1))
        L = X.lengths.cpu().numpy()
        import pandas as pd  # only here: pandas costs ~0.5 s to import

        return [pd.DataFrame(_pad_short(V[i, : L[i]], minimum)) for i in range(X.n)]

    def _chunk_rows(self, X: SeriesBatch, n_features: int) -> int:
        """Series per transform call: ``block_size``, else as many as fit in ``max_memory``
        (raw float32, float64 and transformed copies of the features plus the series)."""
        if self.block_size is not None:  # block_size and max_memory checked at the call
            return int(self.block_size)
        budget = self._budget
        per_series = 20 * n_features + 16 * X.length * X.d
        return max(1, budget // per_series)

    def _raw_features(self, transformer, X: SeriesBatch, length: int | None) -> np.ndarray:
        """sktime's features (n, F) as float64, transformed in chunks of series (the
        transforms act on each series separately)."""
        estimate = (
            8 * int(self.n_kernels) if self.transform == "multirocket" else int(self.n_kernels)
        )
        rows = self._chunk_rows(X, max(84, estimate))
        _writeable_parameters(transformer)
        parts = []
        for i in range(0, X.n, rows):
            chunk = X[i : i + rows]
            if self._other_length(chunk, length):
                parts.append(self._native_features(transformer, chunk))
                continue
            data = self._to_sktime(chunk, length, "X")
            parts.append(np.asarray(transformer.transform(data), dtype=np.float64))
        # C order in every case: the scaler's column reductions then sum in the same order
        # whether or not the series were chunked
        return np.ascontiguousarray(np.concatenate(parts) if len(parts) > 1 else parts[0])

    def _other_length(self, X: SeriesBatch, length: int | None) -> bool:
        """``X`` holds a series of another length than an equal-length fit's, and
        ``other_lengths="native"`` computes its features at its own length."""
        if length is None or self.other_lengths != "native":
            return False
        return not (X.equal_length and X.length == length)

    def _native_span(self, transformer) -> int:
        """Time steps of the widest fitted kernel, 8 D_max + 1 (at least MiniRocket's 9)."""
        dilations = transformer.parameters[2]
        return max(MIN_LENGTH[self.transform], (_TAPS - 1) * int(np.max(dilations)) + 1)

    def _native_features(self, transformer, X: SeriesBatch) -> np.ndarray:
        """Raw features (n, F) of series of any lengths by the fitted equal-length transform:
        each series at its own length (extended by its last time point to the widest kernel's
        span when shorter), the series of one length transformed together."""
        V = X.values.detach().cpu().numpy().astype(np.float64, copy=False)
        L = X.lengths.cpu().numpy()
        steps = np.maximum(L, self._native_span(transformer))
        out = None
        for T in np.unique(steps):
            rows = np.flatnonzero(steps == T)
            block = np.stack([_pad_short(V[i, : L[i]], int(T)) for i in rows])
            data = np.ascontiguousarray(block.transpose(0, 2, 1))  # numpy3D (m, d, T)
            raw = np.asarray(transformer.transform(data), dtype=np.float64)
            if out is None:
                out = np.empty((X.n, raw.shape[1]))
            out[rows] = raw
        return out

    def _features(self, X: SeriesBatch) -> np.ndarray:
        memo = self.__dict__.get("_feature_memo")
        if memo is None:
            raw = self._fitted_raw(self.transformer_, X, self.series_length_)
            return self.scaler_.transform(raw)
        entry = next((e for e in memo if e.matches(X)), None)
        if entry is None:
            entry = _MemoEntry(X, self._fitted_raw(self.transformer_, X, self.series_length_))
            memo.append(entry)
        if entry.phi is None:
            entry.phi, entry.raw = self.scaler_.transform(entry.raw), None
        return entry.phi

    @contextlib.contextmanager
    def _reusing_features(self):
        """Within the block, the features of each batch are computed once: ``fit`` remembers
        those of its corpus, and every later feature computation (``gram``, ``diag``,
        ``features``) those of its batch, which a call on the same batch (the same
        SeriesBatch, a view of all of it, or arrays sharing its memory) then reuses; the
        results are bit for bit those computed afresh. A ``fit`` in the block forgets the
        features of the previous fit. The caller must not modify the batches in the block (a
        change through numpy memory is not seen); the memory is released when it ends.
        Cross-fitting uses it (``novelty.detector._members.cross_fitted_scores``): the corpus
        part's features are computed by ``fit`` and reused by the Grams of the fold."""
        outer = "_feature_memo" in self.__dict__
        if not outer:
            self._feature_memo = []
        try:
            yield self
        finally:
            if not outer:
                del self._feature_memo

    def _feature_tensor(self, X: SeriesBatch) -> torch.Tensor:
        return torch.from_numpy(self._features(X)).to(device=self._device, dtype=self._dtype)

    def features(self, X) -> np.ndarray:
        """The power-transformed features phi(x), float64 array of shape (n, F)."""
        self._check_fitted()
        self._check_parameters()
        Phi = self._features(self._check_input(X, "X"))
        self._check_result(torch.from_numpy(Phi), "feature")
        return Phi

    # ------------------------------------------------------------------ Kernel interface
    def gram(self, X, Y=None, *, normalize: bool = False) -> torch.Tensor:
        self._check_fitted()
        return super().gram(X, Y, normalize=normalize)

    gram.__doc__ = Kernel.gram.__doc__
    __call__ = gram

    def diag(self, X) -> torch.Tensor:
        self._check_fitted()
        return super().diag(X)

    diag.__doc__ = Kernel.diag.__doc__

    def _assemble(self, X: SeriesBatch, Y: SeriesBatch | None) -> torch.Tensor:
        FX = self._feature_tensor(X)
        if Y is None:
            K = self.static_.cross(FX, FX)
            return torch.triu(K) + torch.triu(K, 1).T
        return self.static_.cross(FX, self._feature_tensor(Y))

    def _gram_block(self, X: SeriesBatch, Y: SeriesBatch, symmetric: bool) -> torch.Tensor:
        return self.static_.cross(self._feature_tensor(X), self._feature_tensor(Y))

    def _diag(self, X: SeriesBatch) -> torch.Tensor:
        return self.static_.self_values(self._feature_tensor(X))

    def _pair_bytes(self, X: SeriesBatch, Y: SeriesBatch) -> int:
        return 4 * self._itemsize  # features are computed per series; a pair holds one value


#: The examples use the smallest transform (84 features), for fast contract tests.
register(
    KernelSpec(
        "rocket_linear",
        RandomConvolutionKernel,
        lambda: RandomConvolutionKernel(n_kernels=84),
        description="MiniRocket features (sktime), Yeo-Johnson on the corpus, linear kernel / F",
    )
)
register(
    KernelSpec(
        "rocket_rbf",
        RandomConvolutionKernel,
        lambda: RandomConvolutionKernel(n_kernels=84, static=RBF(10.0)),
        description="MiniRocket features (sktime), Yeo-Johnson on the corpus, RBF on them "
        "(sigma 10 ~ sqrt(F) for the 84 features)",
    )
)
