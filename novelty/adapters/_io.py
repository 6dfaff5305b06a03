"""Reading a user's series files for the detection CLI: columns by name, never by position,
rows placed on the time grid of their time column.

:func:`read_series` reads one of

- a **long CSV** (``.csv``): one row per (series, time step), a header line naming the columns.
  Column roles, by name (compared case-insensitively; an explicit ``id_col``, ``time_col`` or
  ``label_col`` always wins):

  - series id: ``id``, ``series`` or ``series_id``;
  - time: ``time``, ``t``, ``timestamp`` or ``step``;
  - label (optional): the column named ``label``, nothing else. ``class``, ``y`` or ``target``
    are channels like any other column unless named by ``label_col``; ``label_col=False``
    reads no label at all (a column named ``label`` is then a channel);
  - ``split`` (``train``/``test`` per series, read into ``SeriesFile.split``);
  - every other column is a channel; ``channels`` picks and orders them by name.

  Rows may come in any order: each series is sorted by its time values (a time value twice in
  one series is an error). An empty channel cell is a missing value (NaN, which the detector
  interpolates by default); an empty id or time is an error naming the line, and rows without
  a label (empty or ``nan``) are an error naming them. A row with more or fewer cells than the
  header is an error naming its line (a file cut off mid-line is refused, never read with NaN).
- a **folder of CSVs** (``*.csv``): the files read as one long CSV, with the same column roles
  (``id_col``, ``time_col``, ``label_col`` are honoured); a file without an id column holds one
  series whose id is the file name's stem; the time column is optional there (without one the
  rows are in time order). Every file has the same channels (by name); a series id found in two
  files is an error.
- an **npz** (``.npz``): ``X`` as (n, T, d) (unequal lengths: padded with trailing all-NaN
  rows); optional ``y`` (labels) and ``ids``. Read with ``allow_pickle=False``: an object array
  (pickled Python objects, which can run code when loaded) is refused.
- a **.ts** file (sktime's format), read by sktime's loader; labels when the file has them.

**The time column and the grid.** The time column holds numbers or ISO 8601 date-times
(``2024-01-01T00:00:00``, ``2024-01-01 00:00``, ``2024-01-01``, with or without a UTC offset
``Z`` / ``+01:00``, converted to UTC; every cell of the column the same way). A mix of numbers
and dates, or of dates with and without an offset, or a cell that is neither, is an error
naming its line. The sampling step is the median step between consecutive time values of the
series in the file (``SeriesFile.grid``); scoring passes the fitted corpus's grid (``grid=``)
so that new series are read on the same grid. Each series starts at its first time value;
row ``k`` of a series is the time ``start + k * step``. A time value missing from a series
(a dropped row) is a row of NaN there: a missing value for the detector's ``missing`` rule,
exactly as if the row had been written with empty cells (a warning gives the share of grid
times without a row). A series whose time values are off the grid (steps that are not whole
multiples of it) is resampled onto it by linear interpolation per channel, between the
observations on either side of each grid time (a grid time whose neighbouring observations are
two steps or more apart stays a gap, NaN); a warning gives the share of rows off the grid.
``irregular="error"`` refuses such series instead. A series whose rows leave more than 90 % of
its grid steps empty is refused (the step does not fit it).

**Errors by series.** After reading, each series is checked: a channel with no value at all in
a series, a value beyond +-1e150 (or infinite: squared distances overflow float64 there), a
cell that is not a number, time values off the grid under ``irregular="error"``. The error
names the series id and the channel. With ``on_error="skip"`` these series are left out and
listed in ``SeriesFile.skipped`` ((id, reason) pairs), and the other series are read.

A missing id or time column, a channel missing at scoring, a 2-D ``X`` in an npz: a
:class:`SeriesFileError` whose one-line message names the columns (or keys) found. CSV files
are read with pyarrow in blocks (memory about the size of the parsed numbers, not of the text).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "IRREGULAR_OPTIONS",
    "ON_ERROR_OPTIONS",
    "SeriesFile",
    "SeriesFileError",
    "TimeGrid",
    "read_series",
]

ID_NAMES = ("id", "series", "series_id")
TIME_NAMES = ("time", "t", "timestamp", "step")
LABEL_NAMES = ("label",)
#: Columns often holding a class that are read as channels unless named as the label.
_LABEL_LIKE = ("class", "y", "target")
#: What a series with time values off the grid gets: resampled (default) or refused.
IRREGULAR_OPTIONS = ("resample", "error")
#: What a series that cannot be read gets: an error (default) or left out and listed.
ON_ERROR_OPTIONS = ("raise", "skip")
#: Largest magnitude accepted in a channel: squared distances of values beyond overflow float64.
MAX_ABS = 1e150
#: Tolerance (in steps) for a numeric time value to count as on the grid.
_GRID_TOL = 1e-6
#: Largest share of a series' grid steps that may be missing.
_MAX_MISSING = 0.9
_BLOCK = 1 << 20  # bytes of CSV text per block read by pyarrow (memory ~ 5 blocks)
_THREADS = True


class SeriesFileError(ValueError):
    """A series file that cannot be read as asked (one-line message)."""


@dataclass(frozen=True)
class TimeGrid:
    """The sampling grid of a time column: ``kind`` ``"number"`` (``step`` in the column's
    units) or ``"datetime"`` (``step`` in seconds). Stored with a fitted model as
    :meth:`to_dict` so that scoring reads new series on the corpus's grid."""

    kind: str
    step: float

    def to_dict(self) -> dict:
        return {"kind": self.kind, "step": float(self.step)}

    @classmethod
    def from_dict(cls, d) -> TimeGrid:
        if not isinstance(d, dict) or d.get("kind") not in ("number", "datetime"):
            raise SeriesFileError(f"not a time grid: {d!r}")
        step = float(d.get("step", math.nan))
        if not (math.isfinite(step) and step > 0):
            raise SeriesFileError(f"a time grid needs a positive step, got {d.get('step')!r}")
        return cls(d["kind"], step)

    @property
    def step_ns(self) -> int:
        return int(round(self.step * 1e9))

    def describe(self) -> str:
        if self.kind == "datetime":
            return f"step {self.step_ns / 1e9:g} s"
        return f"step {self.step:g}"


@dataclass(frozen=True)
class SeriesFile:
    """Series read from a file: ``X`` an (n, T, d) float64 array when the lengths are equal,
    else a list of (T_i, d) arrays; ``ids`` one string per series (order of first appearance
    in the file); ``labels`` an array (n,) of strings or None; ``channels`` the channel names
    in the order of the last axis. ``grid`` the time grid the rows lie on (None without a time
    column), ``starts`` the time of each series' first row (float64, or datetime64[ns] for
    dates; None without a time column): :meth:`time_values` gives the time of every row.
    ``skipped``: (id, reason) of the series left out under ``on_error="skip"``."""

    X: object
    ids: list
    labels: np.ndarray | None
    channels: list
    source: str
    split: np.ndarray | None = None  # "train" / "test" per series, from a ``split`` column
    grid: TimeGrid | None = None
    starts: np.ndarray | None = None
    skipped: tuple = ()

    def __len__(self) -> int:
        return len(self.ids)

    def time_values(self, i: int) -> np.ndarray:
        """The time of each row of series ``i``: ``starts[i] + k * step`` (floats, or
        datetime64[ns]); the step numbers 0, 1, ... without a time column."""
        T = len(self.X[i])
        k = np.arange(T)
        if self.starts is None:
            return k
        if self.grid is None:  # a one-row series: no step
            return self.starts[i : i + 1].repeat(T)
        if self.grid.kind == "datetime":
            return self.starts[i] + k * np.timedelta64(self.grid.step_ns, "ns")
        return self.starts[i] + k * self.grid.step


def read_series(
    path,
    *,
    id_col=None,
    time_col=None,
    label_col=None,
    channels=None,
    grid=None,
    irregular: str = "resample",
    on_error: str = "raise",
) -> SeriesFile:
    """The series in ``path`` (a long CSV, a folder of CSVs, an npz or a .ts file; module
    docstring). ``channels``: the channel names to read, in this order (CSV only).
    ``label_col``: None (the column named ``label`` if any), a column name, or False (no
    label). ``grid``: a :class:`TimeGrid` (or its dict) to read the time column on, as fitted;
    None infers it from the file. ``irregular``: ``"resample"`` or ``"error"`` for series off
    the grid; ``on_error``: ``"raise"`` or ``"skip"`` (module docstring)."""
    if irregular not in IRREGULAR_OPTIONS:
        raise SeriesFileError(f"irregular must be one of {IRREGULAR_OPTIONS}, got {irregular!r}")
    if on_error not in ON_ERROR_OPTIONS:
        raise SeriesFileError(f"on_error must be one of {ON_ERROR_OPTIONS}, got {on_error!r}")
    if isinstance(grid, dict):
        grid = TimeGrid.from_dict(grid)
    path = Path(path)
    where = str(path)
    opts = {"irregular": irregular, "on_error": on_error, "grid": grid}
    roles = {"id_col": id_col, "time_col": time_col, "label_col": label_col}
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".csv")
        if not files:
            raise SeriesFileError(f"{where}: a folder of per-series .csv files, found none")
        return _read_csv(files, where, roles, channels, opts, folder=True)
    if not path.exists():
        raise SeriesFileError(f"{where}: no such file or folder")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _read_csv([path], where, roles, channels, opts, folder=False)
    if channels is not None:
        raise SeriesFileError(f"{where}: channels are chosen by name in CSV files only")
    if suffix == ".npz":
        return _read_npz(path, on_error)
    if suffix == ".ts":
        return _read_ts(path, on_error)
    raise SeriesFileError(
        f"{where}: unknown format {suffix or '(no suffix)'!r}; give a long .csv, a folder of "
        "per-series .csv files, an .npz or a .ts file"
    )


# ------------------------------------------------------------------------------ header
def _header(path: Path) -> list:
    """The header line's names (stripped), with a hint when the file is not comma-separated."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            row = next(csv.reader(f), None)
    except UnicodeDecodeError as exc:
        raise SeriesFileError(
            f"{path}: not UTF-8 text ({_first_line(exc)}); save the file as UTF-8"
        ) from None
    except (OSError, csv.Error) as exc:
        raise SeriesFileError(f"{path}: cannot be read as CSV ({_first_line(exc)})") from None
    if not row or not any(c.strip() for c in row):
        raise SeriesFileError(f"{path}: empty file (a header line and data rows)")
    header = [c.strip() for c in row]
    for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "'|'")):
        if any(sep in h for h in header):
            raise SeriesFileError(
                f"{path}: the header line {','.join(header)!r} holds {name}: the file seems "
                f"separated by {sep!r}, but CSV files are read comma-separated; write it with "
                f"commas (e.g. pandas.read_csv(path, sep={sep!r}).to_csv(new_path, index=False))"
            )
    if len(set(header)) != len(header):
        raise SeriesFileError(f"{path}: a column name appears twice ({', '.join(header)})")
    if any(h == "" for h in header):
        raise SeriesFileError(f"{path}: a column has no name ({', '.join(header)})")
    return header


def _pick(header: list, wanted, names: tuple, what: str, where: str):
    """The column named ``wanted`` (or the first of ``names`` present), None if absent and
    ``wanted`` is None; an explicit ``wanted`` that is absent is an error."""
    if wanted is not None:
        if wanted not in header:
            raise SeriesFileError(
                f"{where}: no {what} column named {wanted!r} (columns found: {', '.join(header)})"
            )
        return wanted
    lower = {h.lower(): h for h in header}
    for n in names:
        if n in lower:
            return lower[n]
    return None


def _missing_column(what, names, header, where, option) -> SeriesFileError:
    return SeriesFileError(
        f"{where}: no {what} column (looked for {', '.join(names)}; columns found: "
        f"{', '.join(header)}); name it with {option}"
    )


@dataclass(frozen=True)
class _Roles:
    sid: str | None
    tcol: str | None
    lcol: str | None
    scol: str | None
    chans: list


def _roles(header, roles: dict, channels, where, folder: bool) -> _Roles:
    sid = _pick(header, roles["id_col"], ID_NAMES, "series id", where)
    if sid is None and not folder:
        raise _missing_column("series id", ID_NAMES, header, where, "--id-col")
    tcol = _pick(header, roles["time_col"], TIME_NAMES, "time", where)
    if tcol is None and not folder:
        raise _missing_column("time", TIME_NAMES, header, where, "--time-col")
    label_col = roles["label_col"]
    lcol = None if label_col is False else _pick(header, label_col, LABEL_NAMES, "label", where)
    scol = next((h for h in header if h.lower() == "split"), None)
    taken = [c for c in (sid, tcol, lcol, scol) if c is not None]
    if len(set(taken)) != len(taken):
        raise SeriesFileError(f"{where}: one column named for two roles ({', '.join(taken)})")
    chans = _channels(header, set(taken), channels, where)
    return _Roles(sid, tcol, lcol, scol, chans)


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


# ------------------------------------------------------------------------------ reading
class _Rows:
    """Growing row store of the parsed columns (preallocated from a count of the lines)."""

    def __init__(self, capacity: int, d: int):
        self.cap = max(capacity, 1)
        self.n = 0
        self.codes = np.empty(self.cap, dtype=np.int32)
        self.values = np.empty((self.cap, d), dtype=np.float64)
        self.times = None  # float64 or int64 (ns), allocated with the time kind
        self.lab = None
        self.split = None

    def reserve(self, k: int) -> slice:
        if self.n + k > self.cap:  # more rows than lines counted: cannot happen, but grow
            new = max(self.n + k, 2 * self.cap)
            for name in ("codes", "values", "times", "lab", "split"):
                a = getattr(self, name)
                if a is not None:
                    b = np.empty((new, *a.shape[1:]), dtype=a.dtype)
                    b[: self.n] = a[: self.n]
                    setattr(self, name, b)
            self.cap = new
        sl = slice(self.n, self.n + k)
        self.n += k
        return sl

    def column(self, name: str, dtype):
        if getattr(self, name) is None:
            setattr(self, name, np.empty(self.cap, dtype=dtype))
        return getattr(self, name)


def _count_lines(paths) -> int:
    total = 0
    for p in paths:
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                total += chunk.count(b"\n")
        total += 1
    return total


class _Dict:
    """Strings -> integer codes in order of first appearance (arrow's unique keeps it)."""

    def __init__(self):
        self.codes: dict = {}
        self.names: list = []

    def encode(self, col):
        import pyarrow.compute as pc

        uniq = pc.unique(col)
        local = pc.index_in(col, value_set=uniq).to_numpy(zero_copy_only=False)
        g = np.fromiter((self._code(u) for u in uniq.to_pylist()), dtype=np.int64, count=len(uniq))
        return g[local], g

    def _code(self, u):
        c = self.codes.get(u)
        if c is None:
            c = self.codes[u] = len(self.names)
            self.names.append(u)
        return c


@dataclass
class _TimeKind:
    kind: str | None = None  # "number" or "datetime"
    aware: bool | None = None  # dates with a UTC offset
    example: str = ""
    example_line: int = 0


def _read_csv(files, where, roles: dict, channels, opts: dict, folder: bool) -> SeriesFile:
    headers = [_header(f) for f in files]
    first = _roles(headers[0], roles, channels, str(files[0]), folder)
    chans = first.chans
    per_file = [first]
    for f, h in zip(files[1:], headers[1:]):
        r = _roles(h, roles, chans if channels is None else channels, str(f), folder)
        present = set(h) - {c for c in (r.sid, r.tcol, r.lcol, r.scol) if c is not None}
        if channels is None and present != set(chans):
            raise SeriesFileError(
                f"{f}: channels {', '.join(sorted(present))} differ from {files[0].name}'s "
                f"({', '.join(chans)})"
            )
        if (r.tcol is None) != (first.tcol is None):
            raise SeriesFileError(
                f"{f}: {'no' if r.tcol is None else 'a'} time column, unlike {files[0].name}"
            )
        if (r.lcol is None) != (first.lcol is None):
            raise SeriesFileError(
                f"{f}: {'no' if r.lcol is None else 'a'} label column, unlike {files[0].name}"
            )
        per_file.append(r)
    rows = _Rows(_count_lines(files), len(chans))
    ids, labs, splits = _Dict(), _Dict(), _Dict()
    owner: dict = {}  # id code -> file
    tk = _TimeKind()
    bad_cells: dict = {}  # series code -> reason (on_error="skip")
    for f, r in zip(files, per_file):
        _read_file(f, r, chans, rows, ids, labs, splits, owner, tk, bad_cells, opts, folder)
    if rows.n == 0:
        raise SeriesFileError(f"{where}: no data rows below the header")
    return _assemble(rows, ids, labs, splits, tk, bad_cells, first, chans, where, opts)


def _read_file(f, r: _Roles, chans, rows, ids, labs, splits, owner, tk, bad_cells, opts, folder):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    header = _header(f)
    invalid = []

    def on_invalid(row):
        invalid.append(row)
        return "skip"

    used = [c for c in (r.sid, r.tcol, r.lcol, r.scol) if c is not None] + list(chans)
    try:
        reader = pacsv.open_csv(
            f,
            read_options=pacsv.ReadOptions(
                column_names=header,
                skip_rows=1,
                block_size=_BLOCK,
                encoding="utf8",
                use_threads=_THREADS,
            ),
            parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(
                column_types={h: pa.string() for h in used},
                include_columns=used,
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, OSError) as exc:
        if invalid:
            raise _invalid_row(f, len(header)) from None
        raise SeriesFileError(f"{f}: cannot be read as CSV ({_first_line(exc)})") from None
    file_code = None
    if r.sid is None:  # one series per file, its id the file's stem
        file_code = ids._code(f.stem)
        if file_code in owner:
            raise SeriesFileError(f"{f}: series {f.stem!r} is also in {owner[file_code]}")
        owner[file_code] = f
    line0 = 2  # the line of the block's first row
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            break
        except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
            if invalid:
                raise _invalid_row(f, len(header)) from None
            raise SeriesFileError(f"{f}: cannot be read as CSV ({_first_line(exc)})") from None
        if invalid:
            raise _invalid_row(f, len(header))
        k = batch.num_rows
        if k == 0:
            continue
        sl = rows.reserve(k)
        if file_code is None:
            col = _trimmed(batch.column(r.sid))
            _no_empty(col, r.sid, "series id", f, line0)
            codes, new = ids.encode(col)
            for c in new.tolist():
                o = owner.setdefault(c, f)
                if o != f:
                    raise SeriesFileError(
                        f"{f}: series {ids.names[c]!r} is also in {o}; a series is in one file"
                    )
            rows.codes[sl] = codes
        else:
            rows.codes[sl] = file_code
        if r.tcol is not None:
            col = _trimmed(batch.column(r.tcol))
            _no_empty(col, r.tcol, "time", f, line0)
            times = _parse_times(col, r.tcol, f, line0, tk)
            rows.column("times", times.dtype)[sl] = times
        for name, store, dct in (("lab", r.lcol, labs), ("split", r.scol, splits)):
            if store is not None:
                col = _trimmed(batch.column(store))
                rows.column(name, np.int64)[sl] = dct.encode(col)[0]
                if name == "lab":
                    _check_labels(col, store, f, line0)
        for j, c in enumerate(chans):
            rows.values[sl, j] = _parse_channel(
                batch.column(c), c, f, line0, rows.codes[sl], ids, bad_cells, opts
            )
        line0 += k


def _parse_channel(col, name, f, line0, codes, ids, bad_cells, opts) -> np.ndarray:
    """A block of a channel column as float64 (empty cells NaN), parsed by arrow (correctly
    rounded, as Python's ``float``); cells with spaces around are trimmed first, and a cell that
    is not a number goes to :func:`_parse_numbers_slowly`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for attempt in (0, 1):
        try:
            nulled = pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)
            return pc.cast(nulled, pa.float64()).to_numpy(zero_copy_only=False)
        except pa.ArrowInvalid:
            if attempt == 0:
                col = _trimmed(col)
    return _parse_numbers_slowly(col, name, f, line0, codes, ids, bad_cells, opts)


def _trimmed(col):
    import pyarrow.compute as pc

    return pc.utf8_trim_whitespace(col)


def _no_empty(col, name, what, f, line0):
    import pyarrow.compute as pc

    empty = pc.equal(col, "")
    if pc.any(empty).as_py():
        idx = np.flatnonzero(empty.to_numpy(zero_copy_only=False))
        raise SeriesFileError(
            f"{f}: line {line0 + idx[0]}: empty {what} ({name!r}); {idx.size} row(s) in this block"
        )


def _check_labels(col, name, f, line0):
    import pyarrow.compute as pc

    bad = pc.or_(pc.equal(col, ""), pc.equal(pc.utf8_lower(col), "nan"))
    if pc.any(bad).as_py():
        idx = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
        raise SeriesFileError(
            f"{f}: {idx.size} row(s) have no class label (empty or nan) in column {name!r}: "
            f"line {_listed(idx + line0)}; give every row its series' label, or leave those "
            "rows out"
        )


def _invalid_row(f, n_fields: int) -> SeriesFileError:
    """The first row whose cell count differs from the header's, by its line number."""
    import csv

    with open(f, newline="", encoding="utf-8-sig", errors="replace") as fh:
        reader = csv.reader(fh)
        next(reader, None)
        rows = list(enumerate(reader))  # error path only
    with open(f, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(size - 1, 0))
        ends_with_newline = fh.read(1) in (b"\n", b"\r")
    for i, row in rows:
        if row and len(row) != n_fields:
            last = i == len(rows) - 1
            if last and not ends_with_newline and len(row) < n_fields:
                return SeriesFileError(
                    f"{f}: line {i + 2} has {len(row)} of {n_fields} cells and the file does "
                    "not end with a newline: the file looks cut off mid-line (truncated); "
                    "write it again completely"
                )
            return SeriesFileError(
                f"{f}: line {i + 2} has {len(row)} cells, the header {n_fields}; every row "
                "needs one cell per column (an empty cell for a missing value)"
            )
    return SeriesFileError(f"{f}: a row does not have {n_fields} cells, as the header")


def _parse_times(col, name, f, line0, tk: _TimeKind) -> np.ndarray:
    """The time column's cells as float64 (numbers) or int64 nanoseconds since the epoch, UTC
    (ISO 8601 date-times); the kind is set by the first cell of the file(s) and every cell
    must follow it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if tk.kind is None:
        tk.example, tk.example_line = col[0].as_py(), line0
        tk.kind = "number" if _is_float(tk.example) else "datetime"
    seen = f"the column holds {'numbers' if tk.kind == 'number' else 'dates'}, e.g. " + (
        f"{tk.example!r} on line {tk.example_line}"
    )
    if tk.kind == "number":
        try:
            t = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
        except pa.ArrowInvalid:
            cells = col.to_pylist()
            r = next(i for i, c in enumerate(cells) if not _is_float(c))
            raise SeriesFileError(
                f"{f}: line {line0 + r}: column {name!r} holds {cells[r]!r}, not a number "
                f"({seen}); a time column holds numbers or ISO 8601 dates, not a mix"
            ) from None
        bad = ~np.isfinite(t)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise SeriesFileError(
                f"{f}: line {line0 + r}: time {col[r].as_py()!r} in column {name!r} is not a "
                "finite number"
            )
        return t
    import pandas as pd

    aware = pc.match_substring_regex(col, r"(Z|[+-]\d\d(:?\d\d)?)$").to_numpy(zero_copy_only=False)
    if tk.aware is None:
        tk.aware = bool(aware[0])
    mixed = np.flatnonzero(aware != tk.aware)
    if mixed.size:
        r = int(mixed[0])
        has = "has" if aware[r] else "has no"
        raise SeriesFileError(
            f"{f}: line {line0 + r}: time {col[r].as_py()!r} {has} a UTC offset, unlike "
            f"{tk.example!r} on line {tk.example_line}: give every time with an offset, or none"
        )
    text = col.to_numpy(zero_copy_only=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dt = pd.to_datetime(text, format="ISO8601", utc=tk.aware)
    except (ValueError, OverflowError, TypeError):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dt = pd.to_datetime(text, format="ISO8601", utc=tk.aware, errors="coerce")
        r = int(np.flatnonzero(pd.isna(dt))[0]) if pd.isna(dt).any() else 0
        raise SeriesFileError(
            f"{f}: line {line0 + r}: column {name!r} holds {text[r]!r}, neither a number nor an "
            f"ISO 8601 date-time such as 2024-01-31T12:00:00 ({seen})"
        ) from None
    if dt.tz is not None:
        dt = dt.tz_convert("UTC").tz_localize(None)
    return np.asarray(dt.as_unit("ns").asi8, dtype=np.int64)


def _is_float(cell) -> bool:
    try:
        float(cell)
    except (TypeError, ValueError):
        return False
    return True


def _parse_numbers_slowly(col, name, f, line0, codes, ids, bad_cells, opts) -> np.ndarray:
    """A block whose column ``name`` has a cell that is not a number: the error naming its
    line, or (``on_error="skip"``) NaN there and the series marked as failed."""
    cells = col.to_pylist()
    out = np.empty(len(cells))
    for i, c in enumerate(cells):
        if c == "":
            out[i] = np.nan
            continue
        try:
            out[i] = float(c)
        except ValueError:
            hint = (
                f"; if it is the label, name it with --label-col {name}"
                if name.lower() in _LABEL_LIKE + LABEL_NAMES
                else ""
            )
            msg = f"line {line0 + i}: column {name!r} holds {c!r}, not a number{hint}"
            if opts["on_error"] == "raise":
                raise SeriesFileError(f"{f}: {msg}") from None
            code = int(codes[i])
            bad_cells.setdefault(code, f"series {ids.names[code]!r}: {f.name} {msg}")
            out[i] = np.nan
    return out


# ------------------------------------------------------------------------------ assembling
def _assemble(rows, ids, labs, splits, tk, bad_cells, r, chans, where, opts) -> SeriesFile:
    N, n = rows.n, len(ids.names)
    codes = rows.codes[:N]
    values = rows.values[:N]
    times = None if rows.times is None else rows.times[:N]
    lab = None if rows.lab is None else rows.lab[:N]
    spl = None if rows.split is None else rows.split[:N]
    names = ids.names
    # group the rows by series, in time order (no copy when they already are)
    ordered = _in_order(codes, times)
    if not ordered:
        if times is None:
            order = np.argsort(codes, kind="stable")
        else:
            order = np.lexsort((times, codes))
        codes = codes[order]
        for j in range(values.shape[1]):  # in place, one column at a time (memory)
            values[:, j] = values[order, j]
        times = None if times is None else times[order]
        lab = None if lab is None else lab[order]
        spl = None if spl is None else spl[order]
    bounds = np.searchsorted(codes, np.arange(n + 1))
    if times is not None:
        i = _first_repeat(codes, times)
        if i is not None:
            raise SeriesFileError(
                f"{where}: series {names[codes[i]]!r} has the time "
                f"{_fmt_time(times[i], tk.kind)} twice"
            )
    labels = None if lab is None else _per_series(lab, codes, bounds, labs, names, where, "label")
    split = None
    if spl is not None:
        split = _per_series(spl, codes, bounds, splits, names, where, "split")
        split = np.char.lower(split.astype(str))
        bad = np.flatnonzero(~np.isin(split, ["train", "test"]))
        if bad.size:
            raise SeriesFileError(
                f"{where}: series {names[bad[0]]!r}: split must be train or test, got "
                f"{str(split[bad[0]])!r}"
            )
    failures = dict(bad_cells)
    grid, starts, resampled = None, None, None
    if times is None:
        series, views = [values[bounds[i] : bounds[i + 1]] for i in range(n)], True
    else:
        grid = _grid(opts["grid"], times, codes, tk.kind, where)
        starts = times[bounds[:-1]]
        series, resampled, views, gaps = _on_grid(
            values, times, codes, bounds, grid, tk.kind, names, opts, failures
        )
        if gaps[0]:
            warnings.warn(
                f"{where}: {gaps[0]} of {n} series miss time steps ({grid.describe()}): "
                f"{gaps[1]} of their {gaps[2]} grid times ({gaps[1] / gaps[2]:.1%}) have no row, "
                "read as missing values (NaN, filled by the detector's missing rule, linear "
                "interpolation by default), as empty cells would be",
                UserWarning,
                stacklevel=4,
            )
        starts = starts.astype("datetime64[ns]") if tk.kind == "datetime" else starts
    if resampled is not None and opts["irregular"] == "resample":
        k_series, k_rows = resampled
        warnings.warn(
            f"{where}: {k_series} of {n} series have time values off the grid ({grid.describe()}, "
            f"the {'fitted corpus' if opts['grid'] is not None else 'median'} step): "
            f"{k_rows} of {N} rows ({k_rows / N:.1%}) lie between grid times; those series are "
            "resampled linearly onto the grid (irregular='error', or --irregular error, refuses "
            "them)",
            UserWarning,
            stacklevel=4,
        )
    X = _stack_series(series, values, views)
    return _finish(X, names, labels, chans, where, split, grid, starts, failures, opts)


def _stack_series(series, values, views: bool):
    """(n, T, d) when the lengths are equal (a view of the rows when every series is a slice
    of them in order), else a list."""
    if len({len(s) for s in series}) != 1:
        return series
    if views:
        n, T = len(series), len(series[0])
        return values[: n * T].reshape(n, T, values.shape[1])
    return np.stack(series)


def _per_series(codes_rows, codes, bounds, dct, names, where, what) -> np.ndarray:
    """One value per series from a per-row column (the same in every row of a series)."""
    first = codes_rows[bounds[:-1]]
    clash = np.flatnonzero(codes_rows != first[codes])
    if clash.size:
        r = clash[0]
        a, b = dct.names[first[codes[r]]], dct.names[codes_rows[r]]
        word = "two labels" if what == "label" else "two splits"
        raise SeriesFileError(
            f"{where}: series {names[codes[r]]!r} has {word} ({a!r}, {b!r}); a series has one "
            f"{what}"
        )
    return np.asarray([dct.names[c] for c in first], dtype=str)


def _chunks(N: int, size: int = 1 << 18):
    """(start, stop) of consecutive row ranges: temporaries of one range at a time."""
    return ((a, min(a + size, N)) for a in range(0, max(N, 0), size))


def _in_order(codes, times) -> bool:
    """Rows grouped by series (codes non-decreasing) and, with times, increasing in time."""
    for a, b in _chunks(len(codes) - 1):
        c0, c1 = codes[a:b], codes[a + 1 : b + 1]
        if (c1 < c0).any():
            return False
        if times is not None and ((c1 == c0) & (times[a + 1 : b + 1] <= times[a:b])).any():
            return False
    return True


def _first_repeat(codes, times):
    """The first row whose series and time equal the next row's (rows in order), or None."""
    for a, b in _chunks(len(codes) - 1):
        same = codes[a + 1 : b + 1] == codes[a:b]
        hit = np.flatnonzero(same & (times[a + 1 : b + 1] == times[a:b]))
        if hit.size:
            return a + int(hit[0])
    return None


def _grid(given, times, codes, kind, where) -> TimeGrid | None:
    if given is not None:
        if given.kind != kind:
            have = "numbers" if kind == "number" else "dates"
            want = "numbers" if given.kind == "number" else "dates"
            raise SeriesFileError(
                f"{where}: the time column holds {have}, the model's corpus had {want} "
                f"({given.describe()})"
            )
        return given
    # the median of the steps within series, in place (one array of the steps, no copies)
    steps = np.subtract(times[1:], times[:-1])
    n_steps = len(steps) - int(np.count_nonzero(codes[1:] != codes[:-1]))
    if n_steps == 0:
        return None  # every series one row: no step to infer
    steps[codes[1:] != codes[:-1]] = np.iinfo(np.int64).max if kind == "datetime" else np.inf
    k = [(n_steps - 1) // 2, n_steps // 2]
    steps.partition(k)
    step = (float(steps[k[0]]) + float(steps[k[1]])) / 2
    del steps
    if kind == "datetime":
        return TimeGrid("datetime", round(step) / 1e9)
    return TimeGrid("number", step)


def _on_grid(values, times, codes, bounds, grid, kind, names, opts, failures):
    """Each series' rows placed on the grid: views of the rows when they fill it, NaN rows for
    missing times, linear resampling for times off it. Returns (series, None or (number of
    series resampled, rows off the grid), whether every series is a view of the rows)."""
    n = len(bounds) - 1
    d = values.shape[1]
    if grid is None:
        return [values[bounds[i] : bounds[i + 1]] for i in range(n)], None, True, [0, 0, 0]
    step = grid.step_ns if kind == "datetime" else grid.step
    # per series: does any of its rows (after the first) not follow the previous by one step?
    broken = np.zeros(n, dtype=bool)
    for a, b in _chunks(len(times) - 1):
        diffs = times[a + 1 : b + 1] - times[a:b]
        if kind == "datetime":
            regular = diffs == step
        else:
            regular = np.abs(diffs - step) <= _GRID_TOL * step
        regular |= codes[a + 1 : b + 1] != codes[a:b]  # a series' first row follows nothing
        broken[codes[a + 1 : b + 1][~regular]] = True
    series, off_series, off_rows, views = [], 0, 0, True
    gaps = [0, 0, 0]  # series with missing grid times, those times, their grid times
    for i in range(n):
        a, b = bounds[i], bounds[i + 1]
        if not broken[i]:
            series.append(values[a:b])
            continue
        views = False
        t = times[a:b]
        if kind == "datetime":
            rel = t - t[0]
            on = rel % step == 0
            k = rel // step
            pos = rel / step
        else:
            pos = (t - t[0]) / step
            k = np.rint(pos).astype(np.int64)
            on = np.abs(pos - k) <= _GRID_TOL
        name = names[i]
        if on.all() and np.any(np.diff(k) == 0):  # two times within the tolerance of one
            failures.setdefault(
                i,
                f"series {name!r}: two of its rows fall on the same grid time "
                f"({grid.describe()}); check its time column",
            )
            series.append(values[a:b])
            continue
        if on.all():
            L = int(k[-1]) + 1
            if 1 - (b - a) / L > _MAX_MISSING:
                failures.setdefault(i, _sparse(name, b - a, L, grid))
                series.append(values[a:b])
                continue
            x = np.full((L, d), np.nan)
            x[k] = values[a:b]
            series.append(x)
            gaps[0] += 1
            gaps[1] += L - (b - a)
            gaps[2] += L
            continue
        off_series += 1
        off_rows += int((~on).sum())
        first_off = t[np.flatnonzero(~on)[0]]
        if opts["irregular"] == "error":
            failures.setdefault(
                i,
                f"series {name!r}: time {_fmt_time(first_off, kind)} is off the grid "
                f"({grid.describe()}, times {_fmt_time(t[0], kind)} + k steps): irregular "
                "sampling refused (irregular='resample', or --irregular resample, resamples it)",
            )
            series.append(values[a:b])
            continue
        L = int(math.floor(pos[-1] + _GRID_TOL)) + 1
        if 1 - (b - a) / L > _MAX_MISSING:
            failures.setdefault(i, _sparse(name, b - a, L, grid))
            series.append(values[a:b])
            continue
        series.append(_resample(values[a:b], pos, L))
    return series, ((off_series, off_rows) if off_series else None), views, gaps


def _sparse(name, rows, L, grid) -> str:
    return (
        f"series {name!r}: its {rows} rows spread over {L} grid times ({grid.describe()}), "
        f"{1 - rows / L:.0%} of them missing: the step does not fit this series; check its "
        "time column"
    )


def _resample(x, pos, L) -> np.ndarray:
    """Linear interpolation per channel of rows at (fractional) grid positions ``pos`` onto
    the grid 0..L-1; a grid point whose neighbouring observations (of that channel) lie two
    steps or more apart is a gap (NaN)."""
    out = np.full((L, x.shape[1]), np.nan)
    g = np.arange(L, dtype=np.float64)
    for c in range(x.shape[1]):
        seen = ~np.isnan(x[:, c])
        p, v = pos[seen], x[seen, c]
        if p.size == 0:
            continue
        j = np.searchsorted(p, g)  # p[j-1] < g <= p[j]
        exact = (j < p.size) & (p[np.minimum(j, p.size - 1)] == g)
        lo, hi = np.clip(j - 1, 0, p.size - 1), np.clip(j, 0, p.size - 1)
        inside = (j > 0) & (j < p.size)
        near = inside & (p[hi] - p[lo] < 2.0 - 1e-9)
        w = np.where(near, (g - p[lo]) / np.where(near, p[hi] - p[lo], 1.0), 0.0)
        out[near, c] = v[lo[near]] + w[near] * (v[hi[near]] - v[lo[near]])
        out[exact, c] = v[np.minimum(j, p.size - 1)[exact]]
    return out


def _fmt_time(t, kind) -> str:
    if kind == "datetime":
        return str(np.datetime64(int(t), "ns"))
    return f"{float(t):g}"


def _finish(X, names, labels, chans, where, split, grid, starts, failures, opts) -> SeriesFile:
    """Checks each series (empty channel, range), then raises the first failure or leaves the
    failing series out (``on_error="skip"``)."""
    _check_values(X, names, chans, failures)
    skipped = ()
    if failures:
        order = sorted(failures)
        if opts["on_error"] == "raise":
            msg = failures[order[0]]
            more = f" ({len(order) - 1} more series fail; on_error='skip' leaves them out)"
            raise SeriesFileError(f"{where}: {msg}{more if len(order) > 1 else ''}")
        if len(order) == len(names):
            raise SeriesFileError(
                f"{where}: no series can be read; the first: {failures[order[0]]}"
            )
        keep = np.setdiff1d(np.arange(len(names)), order)
        skipped = tuple((names[i], failures[i]) for i in order)
        X = X[keep] if isinstance(X, np.ndarray) else _stack_list([X[i] for i in keep])
        names = [names[i] for i in keep]
        labels = None if labels is None else labels[keep]
        split = None if split is None else split[keep]
        starts = None if starts is None else starts[keep]
    return SeriesFile(X, list(map(str, names)), labels, list(chans), where, split, grid, starts,
                      skipped)  # fmt: skip


def _stack_list(series):
    if len({s.shape for s in series}) == 1:
        return np.stack(series)
    return series


def _check_values(X, names, chans, failures) -> None:
    """Per series: a channel without any value, or values beyond +-MAX_ABS (Inf included)."""
    if isinstance(X, np.ndarray):
        k = max(1, (1 << 18) // max(1, X.shape[1] * X.shape[2]))  # ~2 MB of values a block
        blocks = ((s, X[s : s + k]) for s in range(0, len(X), k))
    else:
        blocks = ((i, x[None]) for i, x in enumerate(X))
    for s, B in blocks:
        empty = np.isnan(B).all(axis=1)  # (b, d)
        with np.errstate(invalid="ignore"):
            big = np.abs(B) > MAX_ABS  # NaN compares False; Inf is beyond
        big_any = big.any(axis=1)
        for i, c in zip(*np.nonzero(empty | big_any)):
            j = s + int(i)
            if j in failures:
                continue
            if empty[i, c]:
                failures[j] = (
                    f"series {names[j]!r}: channel {chans[c]!r} has no value (every cell of it "
                    "is empty or NaN), nothing to fill its missing values from"
                )
            else:
                t = int(np.argmax(big[i, :, c]))
                v = B[i, t, c]
                failures[j] = (
                    f"series {names[j]!r}: channel {chans[c]!r} holds {v:.3g} at row {t}, "
                    f"beyond +-{MAX_ABS:.0e}: the detector's squared distances overflow "
                    "float64 there; rescale the channel (e.g. another unit)"
                )


# ------------------------------------------------------------------------------ npz, .ts
def _read_npz(path: Path, on_error: str) -> SeriesFile:
    where = str(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {}
            for k in z.files:
                try:
                    data[k] = z[k]
                except ValueError as exc:
                    if "allow_pickle" not in str(exc):
                        raise
                    raise SeriesFileError(
                        f"{where}: {k} is an object array (pickled Python objects), which is "
                        "never loaded: unpickling can run code from the file. Save numbers "
                        "(series of unequal lengths as one (n, T_max, d) array padded with "
                        "trailing all-NaN rows) and strings as a str array"
                    ) from None
    except SeriesFileError:
        raise
    except Exception as exc:  # a zip error, a truncated file: say it is not a readable npz
        raise SeriesFileError(f"{where}: not a readable .npz ({_first_line(exc)})") from None
    if "X" not in data:
        raise SeriesFileError(
            f"{where}: needs an array X (keys found: {', '.join(data) or 'none'})"
        )
    X = data["X"]
    if X.ndim == 2:
        a, b = X.shape
        raise SeriesFileError(
            f"{where}: X is 2-D ({a}, {b}), which reads two ways: save one recording as "
            f"X[None] (1, {a}, {b}) or {a} univariate series as X[..., None] ({a}, {b}, 1)"
        )
    if X.ndim != 3:
        raise SeriesFileError(f"{where}: X must be (n, T, d), got {X.ndim} dimension(s)")
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
    X = _unpad(X)
    d = X.shape[2] if isinstance(X, np.ndarray) else X[0].shape[1]
    opts = {"on_error": on_error}
    return _finish(X, ids, labels, [f"channel_{j}" for j in range(d)], where, None, None, None,
                   {}, opts)  # fmt: skip


def _unpad(X: np.ndarray):
    """Series of an (n, T_max, d) array without their trailing all-NaN rows (padding of
    unequal lengths); the array itself when there is none. An all-NaN series keeps one row
    (reported as channels without values)."""
    rows_nan = np.isnan(X).all(axis=2)
    if not rows_nan[:, -1].any():
        return X
    T = X.shape[1]
    lengths = np.where(rows_nan.all(axis=1), 1, T - np.argmax(~rows_nan[:, ::-1], axis=1))
    return _stack_list([X[i, :L] for i, L in enumerate(lengths)])


def _read_ts(path: Path, on_error: str) -> SeriesFile:
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
    return _finish(Xs, [str(i) for i in range(n)], labels, list(map(str, X.columns))[:d], where,
                   None, None, None, {}, {"on_error": on_error})  # fmt: skip


def _listed(lines, most: int = 10) -> str:
    shown = ", ".join(str(int(v)) for v in lines[:most])
    return shown + (f", ... ({len(lines)} in all)" if len(lines) > most else "")


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
