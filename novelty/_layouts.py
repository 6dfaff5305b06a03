"""Input layouts read at the boundary: every accepted container becomes ``(n, T, d)`` or a list
of ``(T_i, d)`` float64 arrays, and the same series give the same result in any container.

============================================  ==============================================
input                                         read as
============================================  ==============================================
numpy array or torch tensor (n, T, d)         n series of T steps and d channels (kept)
numpy array or torch tensor (n, T)            n univariate series, (n, T, 1)
3-D array padded with trailing all-NaN rows   series i = its rows before the padding
(tslearn's ``to_time_series_dataset``)
list / tuple of (T_i, d) arrays or tensors    series i = ``X[i]``; (T_i,) arrays: univariate
pandas: sktime Panel mtypes (pd-multiindex,   detected by ``sktime.datatypes.check_is_scitype``
nested_univ, df-list, pd-wide)                and converted by ``sktime.datatypes.convert``
============================================  ==============================================

A 2-D input reads two ways; ``layout`` says which: ``"single"`` reads a 2-D numpy array,
torch tensor or DataFrame (flat index, numeric columns) as one recording (T, d), rows = time
steps, columns = channels, so a DataFrame and its ``to_numpy()`` give the same series;
``"univariate"`` (or None, the default) reads a 2-D array as n univariate series (n, T) and a
flat DataFrame as sktime's pd-wide (rows = series). ``layout`` changes nothing for other inputs.

Equal lengths give an array (n, T, d), unequal lengths a list. Numpy arrays are read as
(n, T, d); sktime's numpy3D layout is (n, d, T), so a 3-D array with more channels than time
steps draws a warning (it is never transposed). Values must be real; Inf is always an error.
Time indices of pandas containers are dropped: the rows are read in order, as equally spaced
steps.

Missing values (NaN), by the keyword ``missing``:

=========================  ========================================================
``missing``                NaN inside a series
=========================  ========================================================
``"error"`` (default)      ValueError naming the series and the time step
``"interpolate"``          filled per channel by linear interpolation between the
                           neighbouring observed values, edge values held before the
                           first / after the last observed value
                           (:func:`novelty._missing.interpolate_missing`)
=========================  ========================================================

With either value, trailing all-NaN rows of a 3-D (or 2-D) array are read as tslearn-style
padding of unequal lengths, never as missing values: a gap at the very end of a series in an
array cannot be told from padding (give such a series in a list, or a pandas container, to
have its trailing NaN held at the last observed value). With ``"interpolate"`` NaN may sit in
any layout: a 3-D array (also in only some channels of a row), a list of (T_i, d) arrays, a
2-D (n, T) array, any sktime container whose metadata says ``has_nans`` (in a pandas
container, NaN is always a missing value, never padding). A channel that is NaN at every step
of a series, or an all-NaN series, is an error (nothing to interpolate from).
"""

from __future__ import annotations

import warnings

import numpy as np

from ._missing import check_missing, interpolate_missing

__all__ = ["as_series_collection", "single_series_hint"]


def as_series_collection(
    X, *, name: str = "X", missing: str = "error", layout: str | None = None
) -> np.ndarray | list[np.ndarray]:
    """A collection of multivariate series as float64 ``(n, T, d)`` (equal lengths) or a list
    of float64 ``(T_i, d)`` arrays (unequal lengths); see the module docstring for the layouts.

    ``layout``: None or ``"univariate"``: a 2-D array is (n, T) univariate series, a flat
    DataFrame sktime's pd-wide; ``"single"``: a 2-D array, tensor or flat DataFrame is one
    recording (T, d) (module docstring).

    ``missing``: ``"error"`` (default): NaN other than trailing padding rows of an array is an
    error; ``"interpolate"``: NaN inside a series is filled by linear interpolation per channel,
    edge values held (:func:`novelty._missing.interpolate_missing`); trailing all-NaN rows of
    an array are padding either way.

    Raises ValueError on empty input, non-real or infinite values, NaN inside a series (with
    ``missing="error"``), an all-NaN channel or series (with ``"interpolate"``), differing
    channel counts, unrecognised pandas containers and an unknown ``missing``; warns
    (UserWarning) when a 3-D array has more channels than time steps.

    >>> import numpy as np
    >>> as_series_collection([np.zeros((4, 2)), np.ones((4, 2))]).shape
    (2, 4, 2)
    >>> [x.shape for x in as_series_collection([np.zeros((3, 2)), np.ones((5, 2))])]
    [(3, 2), (5, 2)]
    >>> as_series_collection(np.zeros((6, 10))).shape  # 6 univariate series
    (6, 10, 1)
    >>> as_series_collection([[1.0, np.nan, 3.0]], missing="interpolate")[0, :, 0].tolist()
    [1.0, 2.0, 3.0]
    """
    check_missing(missing)
    if layout not in (None, "single", "univariate"):
        raise ValueError(f"`layout` must be None, 'single' or 'univariate', got {layout!r}")
    if X is None:
        raise ValueError(f"`{name}` is None: expected a collection of time series")
    if layout == "single" and getattr(X, "ndim", None) == 2:
        if _is_pandas(X):
            X = _frame_values(X, name)
        return _from_array(_to_numpy(X, name)[None], name, missing)
    if _is_pandas(X) or (
        isinstance(X, (list, tuple)) and len(X) > 0 and all(_is_pandas(x) for x in X)
    ):
        return _from_sktime(X, name, missing)
    if isinstance(X, (list, tuple)) or (
        isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 1
    ):
        return _from_sequence(X, name, missing)
    return _from_array(_to_numpy(X, name), name, missing)


def single_series_hint(X, n_channels: int) -> str | None:
    """A hint for a channel-mismatch error: a message when ``X`` is a 2-D array (or tensor)
    whose second axis equals ``n_channels > 1`` (so probably one (T, d) series, which a 2-D
    array never means: it is read as (n, T) univariate series), else None."""
    shape = getattr(X, "shape", None)
    if shape is None or _is_pandas(X) or len(shape) != 2:
        return None
    T, d = int(shape[0]), int(shape[1])
    if n_channels > 1 and d == n_channels:
        return f"X is 2-D with shape (T, d)=({T}, {d}): a single series? pass X[None] or [X]"
    return None


# --------------------------------------------------------------------------- helpers
def _is_pandas(X) -> bool:
    return type(X).__module__.split(".")[0] == "pandas"


def _to_numpy(x, name: str) -> np.ndarray:
    """numpy view of an array-like or torch tensor, with a real numeric dtype."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch tensor
        if x.is_complex():
            raise ValueError(f"`{name}` has complex values: only real values are supported")
        x = x.detach().cpu()
        x = (x.double() if x.is_floating_point() else x).numpy()
    try:
        a = np.asarray(x)
    except ValueError as e:  # ragged nested sequences
        raise ValueError(
            f"`{name}` could not be read as an array ({e}); pass a list of (T_i, d) arrays "
            "for series of different lengths"
        ) from None
    if a.dtype.kind == "c":
        raise ValueError(f"`{name}` has complex values: only real values are supported")
    if a.dtype.kind not in "biuf":
        raise ValueError(
            f"`{name}` must hold real numbers, got dtype {a.dtype} (non-numeric values)"
        )
    return a


def _frame_values(X, name: str) -> np.ndarray:
    """A flat DataFrame's values (T, d) as float64, rows in order (the index is dropped)."""
    import pandas as pd

    if not isinstance(X, pd.DataFrame) or isinstance(X.index, pd.MultiIndex):
        raise ValueError(
            f'`{name}` ({type(X).__name__}) with layout="single" must be a DataFrame with a '
            "flat index (rows = time steps, columns = channels)"
        )
    text = [str(c) for c, t in X.dtypes.items() if not pd.api.types.is_numeric_dtype(t)]
    if text:
        raise ValueError(
            f"`{name}` has non-numeric column(s) {', '.join(text)}: channels hold numbers"
        )
    return X.to_numpy(dtype=np.float64, na_value=np.nan)


def _check_finite(a: np.ndarray, name: str) -> None:
    """ValueError naming the first NaN or Inf of one series ``a`` (T, d)."""
    if a.dtype.kind != "f" or np.isfinite(a).all():
        return
    t, c = np.argwhere(~np.isfinite(a))[0]
    what = "NaN" if np.isnan(a[t, c]) else "an infinite value"
    raise ValueError(
        f"`{name}` contains {what} at time step {t}, channel {c}: NaN and Inf are not allowed "
        "(missing values are not supported; only a 3-D array may carry tslearn-style "
        "trailing all-NaN padding rows)"
    )


def _collect(series: list[np.ndarray], name: str) -> np.ndarray | list[np.ndarray]:
    """Checks channel counts; stacks equal lengths into (n, T, d) (float64 copies)."""
    d0 = series[0].shape[1]
    for i, x in enumerate(series):
        if x.shape[1] != d0:
            raise ValueError(
                f"series have different channel counts: `{name}[0]` has d={d0} channels, "
                f"`{name}[{i}]` has d={x.shape[1]}"
            )
    if len({x.shape[0] for x in series}) == 1:
        return np.stack(series)
    return series


def _from_sequence(X, name: str, missing: str) -> np.ndarray | list[np.ndarray]:
    if len(X) == 0:
        raise ValueError(f"`{name}` is empty: need at least one series")
    series = []
    for i, x in enumerate(X):
        a = _to_numpy(x, f"{name}[{i}]")
        if a.ndim == 1:
            a = a[:, None]  # a univariate series
        if a.ndim != 2:
            raise ValueError(
                f"`{name}[{i}]` must be a 2-D array (T_i, d) (or 1-D for a univariate "
                f"series), got shape {a.shape}"
            )
        if a.shape[0] == 0 or a.shape[1] == 0:
            raise ValueError(f"`{name}[{i}]` is empty: shape {a.shape}")
        if missing == "interpolate":
            a = interpolate_missing(a, f"{name}[{i}]")  # a float64 copy
        else:
            a = np.array(a, dtype=np.float64)
            _check_finite(a, f"{name}[{i}]")
        series.append(a)
    return _collect(series, name)


def _from_array(a: np.ndarray, name: str, missing: str) -> np.ndarray | list[np.ndarray]:
    if a.ndim == 2:
        a = a[:, :, None]  # (n, T): n univariate series, scikit-learn style
    elif a.ndim == 3:
        n, T, d = a.shape
        if d > T > 0 and n > 0:
            warnings.warn(
                f"{name} has shape (n={n}, T={T}, d={d}): more channels than time steps. "
                "This package reads numpy arrays as (n, T, d); sktime's numpy3D is (n, d, T): "
                f"pass np.swapaxes({name}, 1, 2) or a pandas container",
                UserWarning,
                stacklevel=3,
            )
    else:
        raise ValueError(
            f"`{name}` must be a 3-D array (n, T, d), a 2-D array (n, T) of univariate series "
            f"or a list of (T_i, d) arrays, got an array of shape {a.shape}"
        )
    if 0 in a.shape:
        raise ValueError(f"`{name}` is empty: shape {a.shape}")
    a = np.array(a, dtype=np.float64)
    if np.isfinite(a).all():
        return a
    if np.isinf(a).any():
        i, t, c = np.argwhere(np.isinf(a))[0]
        raise ValueError(
            f"`{name}` series {i} contains an infinite value at time step {t}, channel {c}: "
            "Inf is not allowed"
        )
    return _unpad(a, name, missing)


def _unpad(a: np.ndarray, name: str, missing: str) -> np.ndarray | list[np.ndarray]:
    """Series of a NaN-padded (n, T_max, d) array: each one's rows before its trailing
    all-NaN rows; any other NaN raises (``missing="error"``) or is interpolated per channel
    (``missing="interpolate"``)."""
    nan = np.isnan(a)
    row_nan = nan.all(axis=2)  # (n, T_max)
    partial = nan.any(axis=2) & ~row_nan
    interpolate = missing == "interpolate"
    if partial.any() and not interpolate:
        i, t = np.argwhere(partial)[0]
        raise ValueError(
            f"`{name}` series {i} has NaN in only some channels at time step {t}: NaN is not "
            "allowed (missing values are not supported; NaN padding must fill whole rows)"
        )
    T = a.shape[1]
    # length = 1 + index of the last row that is not all-NaN (0 if none)
    lengths = np.where(row_nan.all(axis=1), 0, T - np.argmax(~row_nan[:, ::-1], axis=1))
    for i, L in enumerate(lengths):
        if L == 0:
            raise ValueError(f"`{name}` series {i} is all NaN: an empty series")
        if row_nan[i, :L].any() and not interpolate:
            t = int(np.argmax(row_nan[i, :L]))
            raise ValueError(
                f"`{name}` series {i} has NaN at time step {t} before its last observed step "
                f"{L - 1}: NaN is not allowed inside a series (only trailing all-NaN rows are "
                "read as padding of unequal lengths)"
            )
    series = [a[i, :L] for i, L in enumerate(lengths)]
    if interpolate:
        gaps = nan.any(axis=2)  # (n, T_max); only the rows before the padding are read
        series = [
            interpolate_missing(x, f"{name}[{i}]") if gaps[i, : len(x)].any() else x
            for i, x in enumerate(series)
        ]
    return _collect(series, name)


def _is_pd_wide(X) -> bool:
    """A DataFrame with a flat index and only numeric columns (sktime's pd-wide)."""
    import pandas as pd

    return (
        isinstance(X, pd.DataFrame)
        and not isinstance(X.index, pd.MultiIndex)
        and X.shape[0] > 0
        and X.shape[1] > 0
        and all(pd.api.types.is_numeric_dtype(t) for t in X.dtypes)
    )


def _from_sktime(X, name: str, missing: str) -> np.ndarray | list[np.ndarray]:
    """A pandas container (or list of DataFrames): detected as an sktime Panel mtype and
    converted to df-list by sktime's own functions, then read as (T_i, d) arrays (NaN: a
    missing value, an error or interpolated by ``missing``; never padding)."""
    from sktime.datatypes import check_is_scitype, convert

    keys = ["mtype", "n_instances", "has_nans", "is_empty"]
    valid, msgs, meta = check_is_scitype(X, "Panel", return_metadata=keys, var_name=name)
    if not valid:
        if not _is_pd_wide(X):
            details = "; ".join(f"{k}: {v}" for k, v in (msgs or {}).items())
            raise ValueError(
                f"`{name}` ({type(X).__name__}) is not an sktime Panel container "
                "(pd-multiindex, nested_univ, df-list or pd-wide). sktime says: "
                f"{details[:600]}"
            )
        # pd-wide (rows = instances, columns = time points, univariate) is an internal sktime
        # mtype without a check; it matches the (n, T) reading of 2-D numpy arrays
        X = convert(X, from_type="pd-wide", to_type="nested_univ", as_scitype="Panel")
        valid, msgs, meta = check_is_scitype(X, "Panel", return_metadata=keys, var_name=name)
        if not valid:
            raise ValueError(f"`{name}` (pd-wide) could not be read by sktime: {msgs}")
        label = "pd-wide"
    else:
        label = meta["mtype"]
    mtype = meta["mtype"]
    if meta.get("n_instances", 1) == 0 or meta.get("is_empty", False):
        raise ValueError(f"`{name}` ({label}) is empty: need at least one non-empty series")
    if meta.get("has_nans", False) and missing == "error":
        raise ValueError(f"`{name}` ({label}) contains NaN: missing values are not supported")
    dfs = X if mtype == "df-list" else convert(X, mtype, "df-list", as_scitype="Panel")
    series = []
    for i, df in enumerate(dfs):
        try:
            a = df.to_numpy(dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"`{name}` ({label}) series {i} has non-numeric values: {e}") from None
        if a.shape[0] == 0:
            raise ValueError(f"`{name}` ({label}) series {i} is empty")
        if missing == "interpolate":
            a = interpolate_missing(a, f"{name}[{i}]")
        else:
            _check_finite(a, f"{name}[{i}]")
        series.append(a)
    return _collect(series, name)
