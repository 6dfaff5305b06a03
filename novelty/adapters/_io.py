"""Reading a user's series files for the detection CLI: columns by name, never by position.

:func:`read_series` reads one of

- a **long CSV** (``.csv``): one row per (series, time step), a header line naming the columns.
  The series id column is the one named ``id``, ``series`` or ``series_id``, the time column
  ``time``, ``t``, ``timestamp`` or ``step``, the optional label column ``label``, ``class``
  or ``y`` (names compared case-insensitively; ``id_col``, ``time_col``, ``label_col`` name
  them explicitly). Every other column is a channel, except ``split`` (``train``/``test`` per
  series, read into ``SeriesFile.split``); ``channels`` picks and orders them by name. Rows
  may come in any order: each series is sorted by its time values (a time value twice in one
  series is an error). An empty channel cell is a missing
  value (NaN, which the detector interpolates by default); an empty id or time is an error
  naming the line, and rows without a label (empty or ``nan``) are an error naming them.
- a **folder of per-series CSVs** (``*.csv``): one series per file, its id the file name's
  stem; a header line; a time column (named as above) orders the rows when there is one,
  else the rows are in time order; every other column is a channel (the same names in
  every file).
- an **npz** (``.npz``): ``X`` as (n, T, d), or an object array of (T_i, d) arrays;
  optional ``y`` (labels) and ``ids``.
- a **.ts** file (sktime's format), read by sktime's loader; labels when the file has them.

A missing id or time column, a channel missing at scoring, a 2-D ``X`` in an npz: a
:class:`SeriesFileError` whose one-line message names the columns (or keys) found.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["SeriesFile", "SeriesFileError", "read_series"]

ID_NAMES = ("id", "series", "series_id")
TIME_NAMES = ("time", "t", "timestamp", "step")
LABEL_NAMES = ("label", "class", "y")


class SeriesFileError(ValueError):
    """A series file that cannot be read as asked (one-line message)."""


@dataclass(frozen=True)
class SeriesFile:
    """Series read from a file: ``X`` an (n, T, d) float64 array when the lengths are equal,
    else a list of (T_i, d) arrays; ``ids`` one string per series (order of first appearance
    in the file); ``labels`` an array (n,) of strings or None; ``channels`` the channel names
    in the order of the last axis."""

    X: object
    ids: list
    labels: np.ndarray | None
    channels: list
    source: str
    split: np.ndarray | None = None  # "train" / "test" per series, from a ``split`` column

    def __len__(self) -> int:
        return len(self.ids)


def read_series(path, *, id_col=None, time_col=None, label_col=None, channels=None) -> SeriesFile:
    """The series in ``path`` (a long CSV, a folder of per-series CSVs, an npz or a .ts file;
    module docstring). ``channels``: the channel names to read, in this order (CSV only)."""
    path = Path(path)
    where = str(path)
    if path.is_dir():
        return _read_folder(path, time_col, channels)
    if not path.exists():
        raise SeriesFileError(f"{where}: no such file or folder")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _read_long_csv(path, id_col, time_col, label_col, channels)
    if channels is not None:
        raise SeriesFileError(f"{where}: channels are chosen by name in CSV files only")
    if suffix == ".npz":
        return _read_npz(path)
    if suffix == ".ts":
        return _read_ts(path)
    raise SeriesFileError(
        f"{where}: unknown format {suffix or '(no suffix)'!r}; give a long .csv, a folder of "
        "per-series .csv files, an .npz or a .ts file"
    )


def _read_frame(path):
    """(the CSV's cells as stripped text, its header) with pandas; one-line errors."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise SeriesFileError(f"{path}: cannot be read as CSV ({_first_line(exc)})") from None
    except pd.errors.EmptyDataError:
        raise SeriesFileError(f"{path}: empty file (a header line and data rows)") from None
    header = [str(c).strip() for c in frame.columns]
    frame.columns = header
    return frame, header


def _pick(header: list, wanted, names: tuple, what: str, where: str, option: str):
    """The column named ``wanted`` (or the first of ``names`` present), None if absent and
    ``wanted`` is None; an explicit ``wanted`` that is absent is an error."""
    lower = {h.lower(): h for h in header}
    if wanted is not None:
        if wanted not in header:
            raise SeriesFileError(
                f"{where}: no {what} column named {wanted!r} (columns found: {', '.join(header)})"
            )
        return wanted
    for n in names:
        if n in lower:
            return lower[n]
    return None


def _missing_column(what, names, header, where, option) -> SeriesFileError:
    return SeriesFileError(
        f"{where}: no {what} column (looked for {', '.join(names)}; columns found: "
        f"{', '.join(header)}); name it with {option}"
    )


def _read_long_csv(path, id_col, time_col, label_col, channels) -> SeriesFile:

    where = str(path)
    frame, header = _read_frame(path)
    if len(set(header)) != len(header):
        raise SeriesFileError(f"{where}: a column name appears twice ({', '.join(header)})")
    sid = _pick(header, id_col, ID_NAMES, "series id", where, "--id-col")
    if sid is None:
        raise _missing_column("series id", ID_NAMES, header, where, "--id-col")
    tcol = _pick(header, time_col, TIME_NAMES, "time", where, "--time-col")
    if tcol is None:
        raise _missing_column("time", TIME_NAMES, header, where, "--time-col")
    lcol = _pick(header, label_col, LABEL_NAMES, "label", where, "--label-col")
    scol = next((h for h in header if h.lower() == "split"), None)
    reserved = {sid, tcol, lcol, scol}
    chans = _channels(header, reserved, channels, where)
    if frame.empty:
        raise SeriesFileError(f"{where}: no data rows below the header")
    for col, what in ((sid, "series id"), (tcol, "time")):
        if col is not None:
            empty = np.flatnonzero(frame[col].str.strip().to_numpy() == "")
            if empty.size:
                raise SeriesFileError(
                    f"{where}: line {empty[0] + 2}: empty {what} ({col!r}); "
                    f"{empty.size} row(s) in all"
                )
    times = _numbers(frame, [tcol], where, allow_empty=False)[:, 0]
    values = _numbers(frame, chans, where, allow_empty=True)
    ids_col = frame[sid].str.strip().to_numpy()
    codes, first = _codes_in_order(ids_col)
    n = len(first)
    ids = [str(ids_col[i]) for i in first]
    order = np.lexsort((times, codes))  # by series, then by time
    codes_s, times_s = codes[order], times[order]
    twice = np.flatnonzero((codes_s[1:] == codes_s[:-1]) & (times_s[1:] == times_s[:-1]))
    if twice.size:
        raise SeriesFileError(
            f"{where}: series {ids[codes_s[twice[0]]]!r} has the time {times_s[twice[0]]:g} twice"
        )
    bounds = np.searchsorted(codes_s, np.arange(n + 1))
    vs = values[order]
    series = [np.ascontiguousarray(vs[bounds[i] : bounds[i + 1]]) for i in range(n)]
    labels = None
    if lcol is not None:
        lab = frame[lcol].str.strip().to_numpy()
        missing = np.flatnonzero((lab == "") | (np.char.lower(lab.astype(str)) == "nan"))
        if missing.size:
            raise SeriesFileError(
                f"{where}: {missing.size} row(s) have no class label (empty or nan) in column "
                f"{lcol!r}: line {_listed(missing + 2)}; give every row its series' label, or "
                "leave those rows out"
            )
        per = lab[first]
        clash = np.flatnonzero(lab != per[codes])
        if clash.size:
            r = clash[0]
            raise SeriesFileError(
                f"{where}: series {ids[codes[r]]!r} has two labels ({per[codes[r]]!r}, "
                f"{lab[r]!r}); a series has one label"
            )
        labels = per.astype(str)
    split = None if scol is None else _split_column(frame[scol], codes, first, ids, where)
    return SeriesFile(_stack(series), ids, labels, chans, where, split)


def _split_column(column, codes, first, ids, where) -> np.ndarray:
    """``train`` / ``test`` per series from a ``split`` column (one value per series)."""
    sp = np.char.lower(column.str.strip().to_numpy().astype(str))
    bad = np.flatnonzero(~np.isin(sp, ["train", "test"]))
    if bad.size:
        raise SeriesFileError(
            f"{where}: line {bad[0] + 2}: split must be train or test, got {str(sp[bad[0]])!r}"
        )
    per = sp[first]
    clash = np.flatnonzero(sp != per[codes])
    if clash.size:
        raise SeriesFileError(f"{where}: series {ids[codes[clash[0]]]!r} is in both train and test")
    return per


def _listed(lines, most: int = 10) -> str:
    shown = ", ".join(str(int(v)) for v in lines[:most])
    return shown + (f", ... ({len(lines)} in all)" if len(lines) > most else "")


def _channels(header, reserved, channels, where) -> list:
    present = [h for h in header if h not in reserved]
    if channels is None:
        if not present:
            raise SeriesFileError(
                f"{where}: no channel column (columns found: {', '.join(header)})"
            )
        return present
    channels = [str(c) for c in channels]
    missing = [c for c in channels if c not in present]
    if missing:
        raise SeriesFileError(
            f"{where}: channel column(s) {', '.join(missing)} not found (channel columns "
            f"found: {', '.join(present) or 'none'})"
        )
    if len(set(channels)) != len(channels):
        raise SeriesFileError(f"{where}: a channel is named twice ({', '.join(channels)})")
    return channels


def _numbers(frame, cols, where, allow_empty: bool) -> np.ndarray:
    """The columns as float64 (n_rows, len(cols)), parsed exactly as Python's ``float`` parses
    (round trip of written floats); empty cells NaN when allowed; a cell that is not a number
    is an error naming its line and column."""
    out = np.empty((len(frame), len(cols)))
    for j, c in enumerate(cols):
        text = frame[c].str.strip().to_numpy().astype(str)
        empty = text == ""
        try:
            out[:, j] = np.where(empty, "nan", text).astype(np.float64)
        except ValueError:
            for r, cell in enumerate(text):
                try:
                    float(cell or "nan")
                except ValueError:
                    raise SeriesFileError(
                        f"{where}: line {r + 2}: column {c!r} holds {str(cell)!r}, not a number"
                    ) from None
        if not allow_empty and np.isnan(out[:, j]).any():
            r = int(np.flatnonzero(np.isnan(out[:, j]))[0])
            raise SeriesFileError(f"{where}: line {r + 2}: column {c!r} is empty or NaN")
    return out


def _codes_in_order(values: np.ndarray):
    """Integer codes of ``values`` numbered in order of first appearance, and the first rows."""
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    return rank[inverse], np.sort(first)


def _stack(series: list):
    if len({s.shape for s in series}) == 1:
        return np.stack(series)
    return series


def _read_folder(path: Path, time_col, channels) -> SeriesFile:

    where = str(path)
    files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".csv")
    if not files:
        raise SeriesFileError(f"{where}: a folder of per-series .csv files, found none")
    series, names = [], None
    for f in files:
        frame, header = _read_frame(f)
        tcol = _pick(header, time_col, TIME_NAMES, "time", str(f), "--time-col")
        chans = _channels(header, {tcol}, channels, str(f))
        if names is None:
            names = chans
        elif chans != names:
            raise SeriesFileError(
                f"{f}: channels {', '.join(chans)} differ from {files[0].name}'s "
                f"({', '.join(names)})"
            )
        if frame.empty:
            raise SeriesFileError(f"{f}: no data rows below the header")
        values = _numbers(frame, chans, str(f), allow_empty=True)
        if tcol is not None:
            times = _numbers(frame, [tcol], str(f), allow_empty=False)[:, 0]
            order = np.argsort(times, kind="stable")
            if np.any(np.diff(times[order]) == 0):
                raise SeriesFileError(f"{f}: a time value appears twice")
            values = values[order]
        series.append(np.ascontiguousarray(values))
    return SeriesFile(_stack(series), [f.stem for f in files], None, names, where)


def _read_npz(path: Path) -> SeriesFile:
    where = str(path)
    try:
        with np.load(path, allow_pickle=True) as z:
            data = {k: z[k] for k in z.files}
    except Exception as exc:  # a zip error, a truncated file: say it is not a readable npz
        raise SeriesFileError(f"{where}: not a readable .npz ({_first_line(exc)})") from None
    if "X" not in data:
        raise SeriesFileError(
            f"{where}: needs an array X (keys found: {', '.join(data) or 'none'})"
        )
    X = data["X"]
    if X.dtype == object:
        X = [np.asarray(x, dtype=np.float64) for x in X]
        bad = [i for i, x in enumerate(X) if x.ndim != 2]
        if bad:
            raise SeriesFileError(f"{where}: X[{bad[0]}] must be 2-D (T_i, d)")
        X = _stack(X)
    elif X.ndim == 2:
        a, b = X.shape
        raise SeriesFileError(
            f"{where}: X is 2-D ({a}, {b}), which reads two ways: save one recording as "
            f"X[None] (1, {a}, {b}) or {a} univariate series as X[..., None] ({a}, {b}, 1)"
        )
    elif X.ndim != 3:
        raise SeriesFileError(f"{where}: X must be (n, T, d), got {X.ndim} dimension(s)")
    else:
        try:
            X = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise SeriesFileError(f"{where}: X must hold numbers, got {X.dtype}") from None
    n = len(X)
    labels = None
    if "y" in data:
        y = np.asarray(data["y"]).ravel()
        if len(y) != n:
            raise SeriesFileError(f"{where}: y has {len(y)} labels for {n} series")
        labels = y.astype(str)
    ids = [str(i) for i in (data["ids"].ravel() if "ids" in data else range(n))]
    if len(ids) != n:
        raise SeriesFileError(f"{where}: ids has {len(ids)} entries for {n} series")
    d = X.shape[2] if isinstance(X, np.ndarray) else X[0].shape[1]
    return SeriesFile(X, ids, labels, [f"channel_{j}" for j in range(d)], where)


def _read_ts(path: Path) -> SeriesFile:
    where = str(path)
    try:
        from sktime.datasets import load_from_tsfile

        X, y = load_from_tsfile(str(path), return_data_type="nested_univ")
    except Exception as exc:  # sktime's parser errors have no common base
        raise SeriesFileError(f"{where}: not a readable .ts file ({_first_line(exc)})") from None
    from .._layouts import as_series_collection

    Xs = as_series_collection(X, missing="interpolate")
    n = len(Xs)
    d = Xs.shape[2] if isinstance(Xs, np.ndarray) else Xs[0].shape[1]
    labels = None if y is None or len(y) != n else np.asarray(y).astype(str)
    return SeriesFile(Xs, [str(i) for i in range(n)], labels, list(map(str, X.columns))[:d], where)


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
