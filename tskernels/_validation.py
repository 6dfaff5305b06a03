"""Input checks and conversion shared by every kernel.

Series come in as a numpy/torch array of shape (n, T, d) or as a list of (T_i, d) arrays
(unequal lengths). Internally they become a :class:`SeriesBatch`: one padded tensor
(n, T_max, d) on the kernel's device and dtype, padded by forward fill (repeating the last
observation, which leaves path signatures unchanged), plus the true lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real

import numpy as np
import torch

__all__ = [
    "SeriesBatch",
    "as_series_batch",
    "check_positive",
    "check_nonnegative",
    "check_int",
    "resolve_device",
    "resolve_dtype",
]


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
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"`device` is {device} but CUDA is not available on this machine")
    return device


def check_positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value):
        raise ValueError(f"`{name}` must be a positive float, got {value!r}")
    if value <= 0:
        raise ValueError(f"`{name}` must be a positive float, got {value!r}")
    return float(value)


def check_nonnegative(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value):
        raise ValueError(f"`{name}` must be a non-negative float, got {value!r}")
    if value < 0:
        raise ValueError(f"`{name}` must be a non-negative float, got {value!r}")
    return float(value)


def check_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    return int(value)


@dataclass
class SeriesBatch:
    """A batch of series on one device and dtype.

    values: Tensor (n, T_max, d), forward-fill padded past each series' length.
    lengths: LongTensor (n,) of true lengths (all equal to T_max for an equal-length batch).
    """

    values: torch.Tensor
    lengths: torch.Tensor

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

    def __getitem__(self, index: slice) -> SeriesBatch:
        values, lengths = self.values[index], self.lengths[index]
        if lengths.numel() and int(lengths.max()) < values.shape[1]:
            values = values[:, : int(lengths.max())]
        return SeriesBatch(values, lengths)

    def to_list(self) -> list[torch.Tensor]:
        return [self.values[i, : int(L)] for i, L in enumerate(self.lengths.tolist())]


def _to_tensor(a, name: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        t = a.detach()
    else:
        arr = np.asarray(a)
        if arr.dtype == object:
            raise TypeError(f"`{name}` holds objects; expected numbers, got dtype object")
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise TypeError(f"`{name}` must hold numbers, got dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.is_complex():
        raise TypeError(f"`{name}` must be real-valued, got {t.dtype}")
    out = t.to(device=device, dtype=dtype)
    if out.dtype != t.dtype and t.is_floating_point() and not all_finite(out) and all_finite(t):
        raise ValueError(
            f"`{name}` holds values beyond the {dtype} range (max |x| = "
            f"{float(t.abs().max()):.3g}); use dtype=torch.float64 or rescale the data"
        )
    return out


def all_finite(t: torch.Tensor) -> bool:
    """True when every entry is finite. One reduction, no mask: a NaN or Inf entry makes the
    sum non-finite; only a sum that overflows needs the entrywise check."""
    if t.numel() == 0 or bool(torch.isfinite(t.sum())):
        return True
    return bool(torch.isfinite(t).all())


def _check_finite(t: torch.Tensor, name: str) -> None:
    if all_finite(t):
        return
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        idx = tuple(int(i) for i in torch.nonzero(bad)[0].tolist())
        kind = "NaN" if bool(torch.isnan(t[idx])) else "infinite"
        raise ValueError(
            f"`{name}` contains NaN or infinite values (first: {kind} at index {idx}); "
            "impute or drop them before computing a kernel"
        )


def as_series_batch(
    X,
    *,
    name: str = "X",
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> SeriesBatch:
    """Validate and convert (n, T, d) arrays or lists of (T_i, d) arrays to a SeriesBatch."""
    if isinstance(X, SeriesBatch):
        return SeriesBatch(X.values.to(device=device, dtype=dtype), X.lengths.to(device))
    device = torch.device(device)
    if isinstance(X, (list, tuple)):
        if len(X) == 0:
            raise ValueError(f"`{name}` is empty: need at least one series")
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
        for i, t in enumerate(items):
            _check_finite(t, f"{name}[{i}]")
        lengths = torch.tensor([t.shape[0] for t in items], dtype=torch.long, device=device)
        T = int(lengths.max())
        values = torch.stack([torch.cat([t, t[-1:].expand(T - t.shape[0], -1)]) for t in items])
        return SeriesBatch(values.contiguous(), lengths)
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
    _check_finite(t, name)
    lengths = torch.full((t.shape[0],), t.shape[1], dtype=torch.long, device=device)
    return SeriesBatch(t.contiguous(), lengths)


def check_channels(X: SeriesBatch, Y: SeriesBatch) -> None:
    if X.d != Y.d:
        raise ValueError(f"channel mismatch: `X` has d={X.d} channels but `Y` has d={Y.d}")


def as_vectors(X, *, name: str, dtype: torch.dtype, device) -> torch.Tensor:
    """Validate a 2-D (n, d) array of points (static kernels on R^d)."""
    t = _to_tensor(X, name, dtype, torch.device(device))
    if t.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D array (n, d) of points, got ndim={t.ndim}")
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"`{name}` is empty: shape {tuple(t.shape)}")
    _check_finite(t, name)
    return t


def is_sequence_of_series(X) -> bool:
    return isinstance(X, Sequence) and not isinstance(X, (str, bytes))
