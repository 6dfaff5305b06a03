"""Input checks and converters of the project: one converter per kind of input, one rule per
kind of parameter. The other packages (``novelty``, ``density``, ``experiments``) import
these from here, never from a private module.

Converters (numpy or torch in, torch out on the requested device and dtype):

- :func:`as_series_batch`: a batch of series, an (n, T, d) array or a list of (T_i, d)
  arrays, as a :class:`SeriesBatch` (one forward-fill padded tensor plus the lengths), the
  one series type inside the project: kernels, pre-processing and detector members take and
  return it, index it by rows (``batch[idx]``) and join it (:meth:`SeriesBatch.concat`);
- :func:`as_series_arrays`: the same inputs as float64 numpy, for numpy-side callers;
- :func:`as_points`: points of R^d, an (n, d) array;
- :func:`as_gram`: a Gram matrix (or any kernel-valued array), float64.

Each converter checks shape, dtype (real numbers) and finiteness once. A :class:`SeriesBatch`
is checked by construction: passing one back to :func:`as_series_batch` (or to a kernel's
``gram``/``diag``) moves it to the requested device and dtype without a second scan, the
fast path for internal callers that validated at the outermost public call. ``as_points``
and ``as_gram`` take ``assume_checked=True`` for the same purpose (conversion only).

Parameters are no business of this module's functions: a class declares them
(``_parameter_constraints``, checked in one place: :func:`validate_estimator` for a
scikit-learn-style estimator) and a public function decorates itself with
:func:`validate_params` (scikit-learn's dialect; the constraint objects of
``tskernels._constraints`` are re-exported here for the other packages). A bad value raises
scikit-learn's ``InvalidParameterError`` naming the parameter, its owner and the allowed
values. The converters :func:`resolve_dtype` and :func:`resolve_device` turn a checked
setting into a torch object (and raise where it cannot be one on this machine: CUDA absent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ._constraints import (
    Constraint,
    DaskClient,
    HasMethods,
    Interval,
    IsInstance,
    Options,
    StrOptions,
    TorchDevice,
    validate_estimator,
    validate_params,
)

__all__ = [
    "SeriesBatch",
    "all_finite",
    "as_gram",
    "as_points",
    "as_series_arrays",
    "as_series_batch",
    "check_channels",
    "check_finite",
    "resolve_device",
    "resolve_dtype",
    "validate_estimator",
    "validate_params",
    "Constraint",
    "DaskClient",
    "HasMethods",
    "Interval",
    "IsInstance",
    "Options",
    "StrOptions",
    "TorchDevice",
]


# ---------------------------------------------------------------------------- parameters
def resolve_dtype(dtype) -> torch.dtype:
    """``None`` -> float64; accepts torch dtypes and the strings 'float32'/'float64'."""
    if dtype is None:
        return torch.float64
    if isinstance(dtype, str):
        try:
            dtype = getattr(torch, dtype)
        except AttributeError:
            raise ValueError(f"`dtype` must be float32 or float64, got {dtype!r}") from None
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"`dtype` must be torch.float32 or torch.float64, got {dtype!r}")
    return dtype


def resolve_device(device) -> torch.device:
    """``None`` -> cpu. A CUDA device that is not available raises."""
    try:
        device = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError):
        raise ValueError(f"`device` must be a torch device or its name, got {device!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"`device` is {device} but CUDA is not available on this machine")
    return device


# ---------------------------------------------------------------------------- values
def all_finite(t: torch.Tensor) -> bool:
    """True when every entry is finite. One reduction, no mask: a NaN or Inf entry makes the
    sum non-finite; only a sum that overflows needs the entrywise check."""
    if t.numel() == 0 or bool(torch.isfinite(t.sum())):
        return True
    return bool(torch.isfinite(t).all())


def _first_bad(t: torch.Tensor) -> tuple[tuple[int, ...], str, int]:
    bad = ~torch.isfinite(t)
    idx = tuple(int(i) for i in torch.nonzero(bad)[0].tolist())
    kind = "NaN" if bool(torch.isnan(t[idx])) else "infinite"
    return idx, kind, int(bad.sum())


def check_finite(t: torch.Tensor, name: str, remedy: str = "impute or drop them first") -> None:
    """ValueError naming the first NaN/Inf entry of ``t`` (one reduction when clean): the one
    finiteness check of the package (numpy arrays: :func:`_check_finite_numpy`)."""
    if all_finite(t):
        return
    idx, kind, count = _first_bad(t)
    where = f"row {idx[0]}, column {idx[1]}" if t.ndim == 2 else f"index {idx}"
    raise ValueError(
        f"`{name}` contains NaN or infinite values ({count} of {t.numel()}; first: {kind} at "
        f"{where}); {remedy}"
    )


def _to_tensor(a, name: str, dtype: torch.dtype | None, device) -> torch.Tensor:
    """A real tensor from a numpy array-like or a tensor, cast to ``dtype`` on ``device``
    (``None``: keep the tensor's device; numpy input lands on the CPU)."""
    if isinstance(a, torch.Tensor):
        t = a.detach()
    else:
        arr = np.asarray(a)
        if arr.dtype == object:
            raise TypeError(
                f"`{name}` holds objects; it must be a numeric array (numbers), got dtype object"
            )
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise TypeError(f"`{name}` must hold numbers (a numeric array), got dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.is_complex():
        raise TypeError(f"`{name}` must be real-valued, got {t.dtype}")
    out = t.to(device=t.device if device is None else device, dtype=dtype)
    if out.dtype != t.dtype and t.is_floating_point() and not all_finite(out) and all_finite(t):
        raise ValueError(
            f"`{name}` holds values beyond the {dtype} range (max |x| = "
            f"{float(t.abs().max()):.3g}); use dtype=torch.float64 or rescale the data"
        )
    return out


# ---------------------------------------------------------------------------- series
@dataclass(eq=False)  # compared by identity: == of tensors has no single truth value
class SeriesBatch:
    """A checked batch of series on one device and dtype (finite, n >= 1, T >= 1, d >= 1): the
    one internal series type of the project below its public calls.

    values: Tensor (n, T_max, d), forward-fill padded past each series' length.
    lengths: LongTensor (n,) of true lengths (all equal to T_max for an equal-length batch).

    It reads as a sequence of series: ``len(batch)`` is n, ``batch[i]`` (an integer) and
    ``iter(batch)`` give series i as a float64 numpy array (T_i, d) (a view on the CPU), and
    ``batch[rows]`` (a slice, a sequence or array of row indices, or a boolean mask) the
    SeriesBatch of those rows, trimmed to the longest of them. Built only by
    :func:`as_series_batch` (which checks) or by :meth:`from_checked` (which trusts).
    """

    values: torch.Tensor
    lengths: torch.Tensor

    @classmethod
    def from_checked(cls, X) -> SeriesBatch:
        """The batch of a collection already checked by the caller (finite, one channel count:
        the output of :func:`as_series_arrays` or ``novelty.as_series_collection``), built
        without a scan: an (n, T, d) array is shared (``from_numpy``, float64), a list of
        (T_i, d) arrays is forward-fill padded as :func:`as_series_batch` pads it."""
        if isinstance(X, SeriesBatch):
            return X
        if isinstance(X, np.ndarray):
            values = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float64))
            n, T = values.shape[:2]
            return cls(values, torch.full((n,), T, dtype=torch.long))
        items = [torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)) for x in X]
        return cls._padded(items)

    @classmethod
    def _padded(cls, items: list[torch.Tensor]) -> SeriesBatch:
        """Series (T_i, d) stacked, each forward-fill padded to the longest."""
        return cls._gathered(torch.cat(items), [t.shape[0] for t in items])

    @classmethod
    def _gathered(cls, flat: torch.Tensor, lengths: list[int]) -> SeriesBatch:
        """The series laid end to end in ``flat`` (sum T_i, d), of lengths ``lengths``, as a
        forward-fill padded batch: values[i, t] = flat[o_i + min(t, T_i - 1)], o_i the
        offset of series i (one gather, not one copy per series)."""
        L = np.asarray(lengths, dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(L)[:-1]))
        steps = np.minimum(np.arange(int(L.max()))[None, :], L[:, None] - 1)
        index = torch.from_numpy(offsets[:, None] + steps).to(flat.device)
        return cls(flat[index], torch.from_numpy(L).to(flat.device))

    @classmethod
    def concat(cls, batches: Sequence[SeriesBatch]) -> SeriesBatch:
        """The rows of several batches (one device, dtype and channel count) in order."""
        if len(batches) == 1:
            return batches[0]
        T = max(b.length for b in batches)
        values = torch.cat(
            [
                torch.cat([b.values, b.values[:, -1:].expand(-1, T - b.length, -1)], dim=1)
                for b in batches
            ]
        )
        return cls(values.contiguous(), torch.cat([b.lengths for b in batches]))

    @property
    def n(self) -> int:
        return self.values.shape[0]

    @property
    def length(self) -> int:
        return self.values.shape[1]

    @property
    def d(self) -> int:
        return self.values.shape[2]

    @property
    def equal_length(self) -> bool:
        return bool((self.lengths == self.values.shape[1]).all())

    def __len__(self) -> int:
        return self.values.shape[0]

    def __iter__(self):
        values = self.numpy()
        for i, L in enumerate(self.lengths.tolist()):
            yield values[i, :L]

    def __getitem__(self, index):
        """Series ``index`` (an integer) as a numpy array (T_i, d), or the rows ``index`` (a
        slice, index sequence/array/tensor or boolean mask) as a contiguous SeriesBatch."""
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            i = range(self.n)[index]  # negative indices, IndexError past the end
            return self.numpy()[i, : int(self.lengths[i])]
        if not isinstance(index, (slice, torch.Tensor)):
            index = np.asarray(index)  # torch indexes with numpy arrays as they are
            if index.dtype != np.bool_:
                index = index.astype(np.int64, copy=False)
        values, lengths = self.values[index], self.lengths[index]
        if lengths.numel() and int(lengths.max()) < values.shape[1]:
            values = values[:, : int(lengths.max())]
        return SeriesBatch(values.contiguous(), lengths)

    def numpy(self) -> np.ndarray:
        """The padded values as numpy (n, T_max, d): a view for a CPU batch."""
        return self.values.detach().cpu().numpy()

    def to_arrays(self) -> np.ndarray | list[np.ndarray]:
        """The series as numpy: the (n, T, d) array for equal lengths, else a list of
        (T_i, d) arrays (views on the CPU)."""
        return self.numpy() if self.equal_length else list(self)

    def to(self, *, device=None, dtype=None) -> SeriesBatch:
        """The batch on ``device`` in ``dtype`` (itself when both already match). A cast to a
        narrower dtype that overflows raises the same ValueError as :func:`as_series_batch`."""
        v = self.values
        if (device is None or v.device == torch.device(device)) and (
            dtype is None or v.dtype == dtype
        ):
            return self
        out = v.to(device=device, dtype=dtype)
        if out.dtype != v.dtype and not all_finite(out):
            raise ValueError(
                f"`X` holds values beyond the {dtype} range (max |x| = "
                f"{float(v.abs().max()):.3g}); use dtype=torch.float64 or rescale the data"
            )
        return SeriesBatch(out, self.lengths.to(device))

    def to_list(self) -> list[torch.Tensor]:
        return [self.values[i, : int(L)] for i, L in enumerate(self.lengths.tolist())]


def as_series_batch(
    X,
    *,
    name: str = "X",
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> SeriesBatch:
    """Validate and convert (n, T, d) arrays or lists of (T_i, d) arrays to a SeriesBatch.

    A :class:`SeriesBatch` is already checked: it is only moved (no copy when it is on
    ``device`` in ``dtype`` already, and no second NaN scan).
    """
    if isinstance(X, SeriesBatch):
        return X.to(device=device, dtype=dtype)
    device = torch.device(device)
    if isinstance(X, (list, tuple)):
        if len(X) == 0:
            raise ValueError(f"`{name}` is empty: need at least one series")
        batch = _plain_list_batch(X, dtype, device)
        if batch is not None:
            return batch
        items = []
        for i, x in enumerate(X):
            t = _to_tensor(x, f"{name}[{i}]", dtype, device)
            if t.ndim != 2:
                raise ValueError(
                    f"`{name}[{i}]` must be a 2-D array (T_i, d) in a list of series, "
                    f"got ndim={t.ndim}"
                )
            if t.shape[0] == 0:
                raise ValueError(f"`{name}[{i}]` has length 0: every series needs a time step")
            items.append(t)
        dims = {t.shape[1] for t in items}
        if len(dims) > 1:
            raise ValueError(f"series in `{name}` have different channel counts: {sorted(dims)}")
        if 0 in dims:
            raise ValueError(f"series in `{name}` have d = 0 channels")
        for i, t in enumerate(items):
            check_finite(t, f"{name}[{i}]", "impute or drop them before computing a kernel")
        return SeriesBatch._padded(items)
    t = _to_tensor(X, name, dtype, device)
    if t.ndim != 3:
        raise ValueError(
            f"`{name}` must be a 3-D array (n, T, d) or a list of (T_i, d) arrays, "
            f"got an array with ndim={t.ndim} and shape {tuple(t.shape)}"
        )
    if t.shape[0] == 0:
        raise ValueError(f"`{name}` is empty: need at least one series, got shape {tuple(t.shape)}")
    if t.shape[1] == 0 or t.shape[2] == 0:
        raise ValueError(f"`{name}` has a zero-sized axis: shape {tuple(t.shape)}")
    check_finite(t, name, "impute or drop them before computing a kernel")
    lengths = torch.full((t.shape[0],), t.shape[1], dtype=torch.long, device=device)
    return SeriesBatch(t.contiguous(), lengths)


#: numpy dtypes a list of series may share for :func:`_plain_list_batch`'s one-pass check
_PLAIN_DTYPES = frozenset(
    np.dtype(t)
    for t in (np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
              np.uint8, np.bool_)
)  # fmt: skip


def _plain_list_batch(X, dtype: torch.dtype, device: torch.device) -> SeriesBatch | None:
    """The batch of a list of plain series in one pass, or None where the per-series checks
    of :func:`as_series_batch` must run (they name the problem): every item a numpy array
    (T_i, d) with T_i >= 1 and one d >= 1, all of one real dtype, and every value finite
    after the cast. The series are laid end to end, cast once, checked by one reduction and
    padded by one gather: the same values as the per-series path (each entry cast alone from
    the same dtype; the padding copies entries), without its per-series tensor work (for a
    fold of 270 short series a kernel call spent 2 ms there)."""
    first = X[0]
    if type(first) is not np.ndarray or first.ndim != 2 or first.dtype not in _PLAIN_DTYPES:
        return None
    d, kind = first.shape[1], first.dtype
    if d == 0:
        return None
    for x in X:
        if type(x) is not np.ndarray or x.dtype != kind or x.ndim != 2:
            return None
        if x.shape[1] != d or x.shape[0] == 0:
            return None
    flat = torch.from_numpy(np.concatenate(X)).to(device=device, dtype=dtype)
    if not all_finite(flat):
        return None
    return SeriesBatch._gathered(flat, [x.shape[0] for x in X])


def _series_array(x, name: str) -> np.ndarray:
    """One float64 numpy series (T, d), checked non-empty and finite."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    x = np.asarray(x)
    if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
        raise TypeError(f"`{name}` must hold numbers (a numeric array), got dtype {x.dtype}")
    if np.iscomplexobj(x):
        raise TypeError(f"`{name}` must be real-valued, got {x.dtype}")
    return np.asarray(x, dtype=np.float64)


def _check_finite_numpy(x: np.ndarray, name: str) -> None:
    """:func:`check_finite` for a numpy array (one numpy reduction when clean; the message of
    :func:`check_finite`, from a copy, only when it is not)."""
    if not np.isfinite(x).all():
        check_finite(torch.tensor(x), name)


def as_series_arrays(X, *, name: str = "X") -> tuple[np.ndarray | list[np.ndarray], bool]:
    """The numpy side of :func:`as_series_batch`: ``(array (n, T, d), True)`` or ``(list of
    (T_i, d) arrays, False)``, float64, checked (non-empty, one channel count, finite). A list
    of equal-length series gives the stacked array (the container never changes a result)."""
    if isinstance(X, SeriesBatch):
        X = [x.cpu().numpy() for x in X.to_list()]
    if isinstance(X, (list, tuple)):
        if len(X) == 0:
            raise ValueError(f"`{name}` is empty: need at least one series")
        out = []
        for i, x in enumerate(X):
            x = _series_array(x, f"{name}[{i}]")
            if x.ndim != 2 or x.shape[0] == 0:
                raise ValueError(f"`{name}[{i}]` must be a non-empty 2-D array (T_i, d)")
            _check_finite_numpy(x, f"{name}[{i}]")
            out.append(x)
        if len({x.shape[1] for x in out}) > 1:
            raise ValueError(f"series in `{name}` have different channel counts")
        if len({x.shape[0] for x in out}) == 1:
            return np.stack(out), True
        return out, False
    X = _series_array(X, name)
    if X.ndim != 3:
        raise ValueError(f"`{name}` must be a 3-D array (n, T, d), got ndim={X.ndim}")
    if X.shape[0] == 0:
        raise ValueError(f"`{name}` is empty: need at least one series")
    _check_finite_numpy(X, name)
    return X, True


def check_channels(X: SeriesBatch, Y: SeriesBatch) -> None:
    if X.d != Y.d:
        raise ValueError(f"channel mismatch: `X` has d={X.d} channels but `Y` has d={Y.d}")


# ---------------------------------------------------------------------------- points
def as_points(
    X,
    *,
    name: str = "X",
    dtype: torch.dtype = torch.float64,
    device=None,
    min_samples: int = 1,
    n_features: int | None = None,
    assume_checked: bool = False,
) -> torch.Tensor:
    """Validated (n, d) tensor of points of R^d: real, finite, n >= ``min_samples``, d >= 1;
    ``n_features`` (when given) is the d seen at fit, a different d raises. ``device=None``
    keeps a tensor's device (numpy input lands on the CPU). ``assume_checked=True``: the
    caller checked ``X`` already (conversion only, no shape or finiteness scan)."""
    t = _to_tensor(X, name, dtype, device)
    if assume_checked:
        return t
    if t.ndim != 2:
        raise ValueError(
            f"`{name}` must be a 2-D array (n_samples, n_features) of points, got shape "
            f"{tuple(t.shape)}"
        )
    n, d = t.shape
    if d == 0:
        raise ValueError(f"`{name}` has d = 0 features; need at least one column")
    if n < min_samples:
        what = "is empty: it " if n == 0 else ""
        raise ValueError(f"`{name}` {what}has {n} sample(s); need at least {min_samples}")
    if n_features is not None and d != n_features:
        raise ValueError(f"`{name}` has {d} features but the estimator was fitted on {n_features}")
    check_finite(t, name)
    return t


# ---------------------------------------------------------------------------- Grams
def as_gram(
    K,
    *,
    name: str = "K",
    dtype: torch.dtype = torch.float64,
    device=None,
    assume_checked: bool = False,
) -> torch.Tensor:
    """A real, finite Gram matrix (or kernel-valued array of any shape) as a ``dtype`` torch
    tensor on ``device`` (``None``: a tensor's own device, the CPU for numpy).
    ``assume_checked=True``: conversion only (the caller checked ``K``)."""
    t = _to_tensor(K, name, dtype, device)
    if not assume_checked and not all_finite(t):
        idx, _, count = _first_bad(t)
        raise ValueError(
            f"`{name}` contains NaN or infinite entries ({count} of {t.numel()}, first "
            f"at {idx}); the kernel diverged or the data hold NaN: fix the kernel parameters or "
            "the data, the scorers never replace such entries"
        )
    return t
