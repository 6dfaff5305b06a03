"""The results store: one SQLite file (standard library ``sqlite3``), one row per evaluated
cell, committed as each cell finishes.

Tables
------
``settings``: setting id -> the JSON of the settings it stands for (protocol: folds, repeats,
seed, Gram sharing, scorer grids; and the run's kernel grids: the preset, the time channel,
the levels and every ``--grid`` override). Every result row carries its setting id, so runs
with other settings never mix.

``cv``: one row per (setting, dataset, class, kernel, kernel parameters, time channel,
scorer): the ROC-AUC and PR-AUC averaged over the CV folds for every (alpha, rank) of the
scorer, as float64 arrays (n_alpha, n_rank), with the seconds spent.

``test``: one row per (setting, dataset, class, kernel, scorer): the hyper-parameters chosen by
CV and the test-split ROC-AUC and PR-AUC.

``runs``: one row per invocation (command, start, end, cells computed, wall seconds, git
revision, device, package versions).

:class:`SQLiteStore` is the file handling shared with the ADBench store
(``experiments.adbench``): opening and checking, one transaction per write, the ``runs``
table of provenance. A subclass names its tables (``SCHEMA``, ``TABLES``) and how a finished
cell's rows are written (``add_results``). :class:`DetectorBenchStore` is the detector
benchmark's (``benchmarks/bench_detector.py``): one row per (data set, class, method, seed).

One writer at a time. A store opened for writing is locked (an exclusive ``flock`` on the
file, released when the store is closed or its process ends, however it ends) until it is
closed: a second process that opens it for writing, e.g. the same ``run`` started twice, gets
a :class:`StoreError` at once naming the process that holds it (its pid, from
``/proc/locks`` on Linux), before it writes anything, so no ``runs`` row is left by a run
that could not go on. Reading (``report``) takes no lock and works during a run. Within one
process a store may be opened for writing more than once (the lock is shared). On a file
system without locks the store is opened unlocked.

Opening checks the file before anything is read or written: a missing file (``mode="read"``),
a file that is not SQLite, a damaged one (``PRAGMA integrity_check``), a SQLite file of other
tables or of an older layout, and a location that cannot be written (``mode="write"``) raise
:class:`StoreError`, whose one-line message names the file and the cause. Reading needs no
write access (a store on a read-only file system is opened immutable).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

import numpy as np

__all__ = [
    "DetectorBenchStore",
    "ResultStore",
    "SQLiteStore",
    "StoreError",
    "setting_id",
    "encode_array",
    "decode_array",
]


class StoreError(Exception):
    """A store that cannot be used: the message names the file and the cause (one line)."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (
    setting TEXT PRIMARY KEY,
    json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cv (
    setting TEXT NOT NULL, dataset TEXT NOT NULL, cls TEXT NOT NULL, kernel TEXT NOT NULL,
    params TEXT NOT NULL, time_channel INTEGER NOT NULL, scorer TEXT NOT NULL,
    axis TEXT, n_rank INTEGER, roc BLOB, pr BLOB, n_folds INTEGER,
    gram_seconds REAL, score_seconds REAL, error TEXT,
    revision TEXT, device TEXT, created REAL,
    PRIMARY KEY (setting, dataset, cls, kernel, params, time_channel, scorer)
);
CREATE TABLE IF NOT EXISTS test (
    setting TEXT NOT NULL, dataset TEXT NOT NULL, cls TEXT NOT NULL, kernel TEXT NOT NULL,
    scorer TEXT NOT NULL, grid TEXT NOT NULL,
    params TEXT, time_channel INTEGER, alpha REAL, rank INTEGER, cv_objective REAL,
    roc_auc REAL, pr_auc REAL, seconds REAL, error TEXT,
    revision TEXT, device TEXT, created REAL,
    PRIMARY KEY (setting, dataset, cls, kernel, scorer, grid)
);
"""
#: The provenance of every invocation, in every store of this package.
RUNS_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, setting TEXT, command TEXT, preset TEXT,
    started REAL, finished REAL, cells_computed INTEGER, wall_seconds REAL,
    revision TEXT, device TEXT, workers INTEGER, scheduler TEXT, versions TEXT
);
"""

CV_COLUMNS = (
    "setting", "dataset", "cls", "kernel", "params", "time_channel", "scorer", "axis",
    "n_rank", "roc", "pr", "n_folds", "gram_seconds", "score_seconds", "error", "revision",
    "device", "created",
)  # fmt: skip
TEST_COLUMNS = (
    "setting", "dataset", "cls", "kernel", "scorer", "grid", "params", "time_channel", "alpha",
    "rank", "cv_objective", "roc_auc", "pr_auc", "seconds", "error", "revision", "device",
    "created",
)  # fmt: skip
RUNS_COLUMNS = (
    "id", "setting", "command", "preset", "started", "finished", "cells_computed",
    "wall_seconds", "revision", "device", "workers", "scheduler",
)  # fmt: skip


def setting_id(setting: dict) -> str:
    """A short, stable id of a settings dict (SHA-1 of its canonical JSON)."""
    return hashlib.sha1(json.dumps(setting, sort_keys=True).encode()).hexdigest()[:12]


def encode_array(a: np.ndarray) -> bytes:
    """float64 C-order bytes with the shape in front (two int32)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"store arrays are 2-D, got shape {a.shape}")
    return np.asarray(a.shape, dtype="<i4").tobytes() + a.astype("<f8").tobytes()


def decode_array(b: bytes) -> np.ndarray:
    """Inverse of :func:`encode_array`; a blob of the wrong length raises ``ValueError``."""
    if b is None or len(b) < 8:
        raise ValueError("a stored array is truncated (fewer than 8 bytes)")
    shape = tuple(int(v) for v in np.frombuffer(b[:8], dtype="<i4"))
    if min(shape) < 0 or (len(b) - 8) != 8 * shape[0] * shape[1]:
        raise ValueError(f"a stored array is damaged (shape {shape}, {len(b) - 8} data bytes)")
    return np.frombuffer(b[8:], dtype="<f8").reshape(shape).copy()


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _unwritable(path: Path) -> str | None:
    """Why ``path`` (a file, or the folder a new file goes into) cannot be written, or None."""
    if os.access(path, os.W_OK):
        return None
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:  # pragma: no cover - statvfs missing or refused
        pass
    return "permission denied"


#: Write locks this process holds: (pid, st_dev, st_ino) -> [file descriptor, users].
_LOCKS: dict[tuple[int, int, int], list[int]] = {}


def _lock_holder(st: os.stat_result) -> int | None:
    """The pid holding a ``flock`` on the file of ``st`` (Linux ``/proc/locks``), or None."""
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 5 and parts[1] == "FLOCK" and parts[5] == want:
                    pid = int(parts[4])
                    return pid if pid > 0 else None  # 0: a process of another pid namespace
    except (OSError, ValueError):
        pass
    return None


def _acquire_lock(path: Path) -> tuple[int, int, int] | None:
    """Lock ``path`` for writing by this process (see the module docstring); returns the key
    to :func:`_release_lock`, None on a file system without locks. StoreError when another
    process holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        fd = os.open(path, os.O_RDONLY)  # not inherited by child processes
    except OSError as exc:
        raise StoreError(f"cannot lock the store {path}: {exc.strerror}") from None
    st = os.fstat(fd)
    key = (os.getpid(), st.st_dev, st.st_ino)
    if key in _LOCKS:
        _LOCKS[key][1] += 1
        os.close(fd)
        return key
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            pid = _lock_holder(st)
            who = f"another process (pid {pid})" if pid is not None else "another process"
            raise StoreError(
                f"the store {path} is being written by {who}, e.g. the same run started "
                "twice; a store takes one run at a time: wait for it to end, or name another "
                "store file"
            ) from None
        if exc.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            return None  # a file system without locks
        raise StoreError(f"cannot lock the store {path}: {exc.strerror}") from None
    _LOCKS[key] = [fd, 1]
    return key


def _release_lock(key: tuple[int, int, int] | None) -> None:
    held = _LOCKS.get(key) if key is not None else None
    if held is None:
        return
    held[1] -= 1
    if held[1] == 0:
        del _LOCKS[key]
        os.close(held[0])  # releases the flock


class SQLiteStore:
    """One SQLite file of result tables and the ``runs`` table (see the module docstring).

    Subclasses set ``SCHEMA`` (``CREATE TABLE IF NOT EXISTS`` statements; the runs table is
    added), ``TABLES`` (table -> the columns a file must have to be this store) and
    ``ADDED_COLUMNS`` (table -> {column: type} added to a file of an older layout when it is
    opened for writing, instead of refusing it).

    ``mode="write"`` (default) creates the file (and its folder) when missing and needs write
    access; ``mode="read"`` needs an existing store and never writes (``report``).
    ``check=False`` skips the integrity check (a store just checked in the same process).
    Every problem with the file raises :class:`StoreError`.
    """

    SCHEMA: str = ""
    TABLES: dict[str, tuple[str, ...]] = {}
    ADDED_COLUMNS: dict[str, dict[str, str]] = {"runs": {"versions": "TEXT"}}

    def __init__(self, path: str | Path, mode: str = "write", check: bool = True):
        if mode not in ("read", "write"):
            raise ValueError(f"`mode` must be 'read' or 'write', got {mode!r}")
        self.path = Path(path)
        self.mode = mode
        self.con = None
        self._lock = None
        if self.path.is_dir():
            raise StoreError(f"the store {self.path} is a folder, not a file")
        if mode == "read":
            self.con = self._open_read()
        else:
            self.con = self._open_write()
        try:
            if mode == "write":
                self._lock = _acquire_lock(self.path)
            self._check(check)
            if mode == "write":
                self.con.execute("PRAGMA journal_mode=WAL")
                self.con.execute("PRAGMA synchronous=NORMAL")
                self.con.executescript(self.SCHEMA + RUNS_SCHEMA)
                for table, added in self.ADDED_COLUMNS.items():
                    have = _columns(self.con, table)
                    for column, kind in added.items():
                        if column not in have:
                            self.con.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                self.con.commit()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise self._error(exc) from None
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening
    def _error(self, exc: BaseException, doing: str = "open") -> StoreError:
        cause = str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in cause:
            return StoreError(f"{self.path} is not a SQLite database ({cause})")
        if isinstance(exc, sqlite3.DatabaseError) and "malformed" in cause:
            return StoreError(f"the store {self.path} is damaged ({cause}); restore it from a "
                              "copy or start a new store")  # fmt: skip
        return StoreError(f"cannot {doing} the store {self.path}: {cause}")

    def _open_read(self) -> sqlite3.Connection:
        if not self.path.exists():
            raise StoreError(f"no store at {self.path} (file not found)")
        if not os.access(self.path, os.R_OK):
            raise StoreError(f"cannot read the store {self.path}: permission denied")
        uri = "file:" + quote(str(self.path.resolve()))
        if _unwritable(self.path) is None and _unwritable(self.path.parent) is None:
            tries = [uri]  # read-write open, but nothing is written; -wal/-shm are transient
        else:
            tries = [uri + "?mode=ro"]
            if not Path(str(self.path) + "-wal").exists():
                # a read-only location: nobody can write the file, so it cannot change under
                # us; SQLite cannot create the WAL index there without this
                tries.append(uri + "?mode=ro&immutable=1")
        err: BaseException | None = None
        for u in tries:
            con = sqlite3.connect(u, uri=True, timeout=60.0)
            try:
                con.execute("SELECT name FROM sqlite_master").fetchall()
                return con
            except sqlite3.DatabaseError as exc:
                con.close()
                err = exc
                if "not a database" in str(exc):
                    break
        raise self._error(err, "read")

    def _open_write(self) -> sqlite3.Connection:
        if self.path.exists():
            cause = _unwritable(self.path) or _unwritable(self.path.parent)
            if cause is not None:
                raise StoreError(f"cannot write the store {self.path}: {cause}")
        else:
            folder = self.path.parent
            existing = folder
            while not existing.exists() and existing != existing.parent:
                existing = existing.parent
            cause = _unwritable(existing)
            if cause is not None:
                raise StoreError(f"cannot create the store {self.path} in {existing}: {cause}")
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the store {self.path}: {exc.strerror}") from None
        try:
            con = sqlite3.connect(str(self.path), timeout=60.0)
            con.execute("SELECT name FROM sqlite_master").fetchall()
        except sqlite3.DatabaseError as exc:
            if "con" in locals():
                con.close()
            raise self._error(exc) from None
        return con

    def _check(self, integrity: bool) -> None:
        tables = {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE "
                                                 "type='table'")}  # fmt: skip
        ours = set(self.TABLES)
        if not tables:
            if self.mode == "read":
                raise StoreError(f"{self.path} holds no results store (an empty database)")
            return
        if not ours <= tables:
            missing = ", ".join(sorted(ours - tables))
            raise StoreError(f"{self.path} is not a results store (tables missing: {missing}); "
                             "name another file")  # fmt: skip
        for table, columns in self.TABLES.items():
            missing = set(columns) - _columns(self.con, table)
            if missing:
                lacks = ", ".join(sorted(missing))
                raise StoreError(
                    f"the store {self.path} has an older layout (table {table} lacks {lacks}); "
                    "start a new store"
                )
        if integrity:
            rows = self.con.execute("PRAGMA integrity_check(1)").fetchall()
            if rows != [("ok",)]:
                first = str(rows[0][0]).replace("\n", " ").replace("*** in database main *** ", "")
                raise StoreError(f"the store {self.path} is damaged ({first.strip()}); restore "
                                 "it from a copy or start a new store")  # fmt: skip

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None
        _release_lock(self._lock)
        self._lock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ writing
    def _write(self, fn, *args):
        """Run ``fn(*args)`` in one transaction; SQLite failures become :class:`StoreError`."""
        if self.mode != "write":
            raise StoreError(f"the store {self.path} was opened for reading")
        try:
            with self.con:
                return fn(*args)
        except sqlite3.IntegrityError:
            raise
        except sqlite3.DatabaseError as exc:
            raise self._error(exc, "write") from None

    def start_run(self, **fields) -> int:
        cur = self._write(
            self.con.execute,
            "INSERT INTO runs (setting, command, preset, started, revision, device, workers,"
            " scheduler, versions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                fields.get("setting"), fields.get("command"), fields.get("preset"),
                time.time(), fields.get("revision"), fields.get("device"),
                fields.get("workers"), fields.get("scheduler"), fields.get("versions"),
            ),
        )  # fmt: skip
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, cells: int, wall: float) -> None:
        self._write(
            self.con.execute,
            "UPDATE runs SET finished=?, cells_computed=?, wall_seconds=? WHERE id=?",
            (time.time(), cells, wall, run_id),
        )

    # ------------------------------------------------------------------ reading
    def _read(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        try:
            return self.con.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise self._error(exc, "read") from None

    def query(self, sql: str, params: tuple = ()) -> list[dict]:
        cur = self._read(sql, params)
        names = [c[0] for c in cur.description]
        return [dict(zip(names, r)) for r in cur]


class ResultStore(SQLiteStore):
    """The UEA results store: tables ``settings``, ``cv``, ``test`` and ``runs``. Rows are
    committed per cell (:meth:`add_cell`, :meth:`add_results`)."""

    SCHEMA = _SCHEMA
    TABLES = {"settings": ("setting", "json"), "cv": CV_COLUMNS, "test": TEST_COLUMNS,
              "runs": RUNS_COLUMNS}  # fmt: skip

    def add_setting(self, setting: dict) -> str:
        sid = setting_id(setting)
        self._write(
            self.con.execute,
            "INSERT OR IGNORE INTO settings VALUES (?, ?)",
            (sid, json.dumps(setting, sort_keys=True)),
        )
        return sid

    def add_cell(self, cv_rows: Iterable[dict] = (), test_rows: Iterable[dict] = ()) -> None:
        """Insert the rows of one finished cell in one transaction (committed on return).

        A key already present is an error (a finished cell is never computed twice)."""

        def insert():
            for row in cv_rows:
                self._insert("cv", CV_COLUMNS, row)
            for row in test_rows:
                self._insert("test", TEST_COLUMNS, row)

        self._write(insert)

    def _insert(self, table: str, columns: tuple[str, ...], row: dict) -> None:
        unknown = set(row) - set(columns)
        if unknown:
            raise ValueError(f"unknown {table} columns: {sorted(unknown)}")
        vals = [row.get(c) for c in columns]
        marks = ", ".join("?" * len(columns))
        self.con.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", vals)

    def delete_failed(self, setting: str, datasets, kernels, scorers) -> tuple[int, int]:
        """Delete the failed rows of ``setting`` within (datasets x kernels x scorers), so a
        run computes them again: every failed cv row, the test rows that depend on one (their
        selection would change), and every failed test row. Returns (cv rows, test rows)."""

        def scope(table):
            marks = [", ".join("?" * len(v)) for v in (datasets, kernels, scorers)]
            return (f"{table}.setting=? AND {table}.dataset IN ({marks[0]}) AND "
                    f"{table}.kernel IN ({marks[1]}) AND {table}.scorer IN ({marks[2]})",
                    (setting, *datasets, *kernels, *scorers))  # fmt: skip

        def delete():
            cv_where, cv_args = scope("cv")
            te_where, te_args = scope("test")
            n_test = self.con.execute(
                f"DELETE FROM test WHERE {te_where} AND (test.error IS NOT NULL OR EXISTS ("
                "SELECT 1 FROM cv WHERE cv.setting=test.setting AND cv.dataset=test.dataset "
                "AND cv.cls=test.cls AND cv.kernel=test.kernel AND cv.scorer=test.scorer AND "
                "cv.error IS NOT NULL))",
                te_args,
            ).rowcount
            n_cv = self.con.execute(
                f"DELETE FROM cv WHERE {cv_where} AND cv.error IS NOT NULL", cv_args
            ).rowcount
            return n_cv, n_test

        return self._write(delete)

    def add_results(self, rows, stamp: dict) -> None:
        """Insert the result rows of one finished cell (:class:`~experiments._cells.CVResult`
        or :class:`~experiments._cells.TestResult`), each with the columns of ``stamp``
        (setting, revision, device, created), in one transaction."""
        cv, test = [], []
        for r in rows:
            row = {**r.as_row(), **stamp}
            if r.table == "cv":
                row["roc"] = None if row["roc"] is None else encode_array(row["roc"])
                row["pr"] = None if row["pr"] is None else encode_array(row["pr"])
                cv.append(row)
            else:
                test.append(row)
        self.add_cell(cv_rows=cv, test_rows=test)

    def cv_keys(self, setting: str) -> set[tuple]:
        """(dataset, cls, kernel, params, time_channel, scorer) of every stored cv row."""
        cur = self._read(
            "SELECT dataset, cls, kernel, params, time_channel, scorer FROM cv WHERE setting=?",
            (setting,),
        )
        return {(a, b, c, d, bool(e), f) for a, b, c, d, e, f in cur}

    def test_keys(self, setting: str) -> set[tuple]:
        cur = self._read(
            "SELECT dataset, cls, kernel, scorer, grid FROM test WHERE setting=?", (setting,)
        )
        return set(cur)

    def cv_rows(self, setting: str, dataset: str, cls: str, kernel: str, scorer: str):
        cur = self._read(
            "SELECT params, time_channel, axis, roc, pr, error FROM cv WHERE setting=? AND "
            "dataset=? AND cls=? AND kernel=? AND scorer=?",
            (setting, dataset, cls, kernel, scorer),
        )
        out = {}
        for params, tc, axis, roc, pr, error in cur:
            try:
                out[(params, bool(tc))] = {
                    "axis": None if axis is None else json.loads(axis),
                    "roc": None if roc is None else decode_array(roc),
                    "pr": None if pr is None else decode_array(pr),
                    "error": error,
                }
            except ValueError as exc:
                raise StoreError(
                    f"the store {self.path} is damaged (cv row {dataset}/{cls}/{kernel}/"
                    f"{scorer} {params}: {exc}); restore it from a copy or start a new store"
                ) from None
        return out

    def settings(self) -> dict[str, dict]:
        return {s: json.loads(j) for s, j in self._read("SELECT setting, json FROM settings")}


# -------------------------------------------------------------------- the detector benchmark
#: One row per (data set, normal class, method, seed) of ``benchmarks/bench_detector.py``.
BENCH_COLUMNS = (
    "setting", "dataset", "class", "method", "seed", "n_classes", "auc", "ap", "far",
    "far_nominal", "fit_s", "score_s", "n_corpus", "n_test", "error", "params", "expr",
    "git_rev", "device", "finished",
)  # fmt: skip
_BENCH_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (
    setting TEXT PRIMARY KEY,
    json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS methods (
    method TEXT PRIMARY KEY,
    expr TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    setting TEXT NOT NULL, dataset TEXT NOT NULL, class TEXT NOT NULL, method TEXT NOT NULL,
    seed INTEGER NOT NULL, n_classes INTEGER, auc REAL, ap REAL, far REAL, far_nominal REAL,
    fit_s REAL, score_s REAL, n_corpus INTEGER, n_test INTEGER, error TEXT, params TEXT,
    expr TEXT, git_rev TEXT, device TEXT, finished REAL,
    PRIMARY KEY (setting, dataset, class, method, seed)
);
"""
#: The settings of the former layout (table ``meta``), all integers.
_BENCH_LEGACY_SETTINGS = ("max_corpus", "max_test", "max_classes")


class DetectorBenchStore(SQLiteStore):
    """The store of the detector benchmark (``benchmarks/bench_detector.py``): tables
    ``settings`` (the store's one setting: the subsampling limits), ``methods`` (method name
    -> the expression that identifies it), ``results`` (:data:`BENCH_COLUMNS`, one row per
    (setting, data set, class, method, seed)) and ``runs``.

    Its guarantees are :class:`SQLiteStore`'s: one transaction per committed problem
    (:meth:`add_results`, via :class:`~experiments._recorder.Recorder`), one writer at a time,
    one-line :class:`StoreError` for a file that is not this store. One setting per store:
    :meth:`add_setting` refuses a second one, so rows of other limits never mix.

    A file of the benchmark's former layout (tables ``meta``, ``methods``, ``results`` without
    ``setting``, written before this class) is converted: in place, in one transaction, when
    opened for writing; in a copy in memory when opened for reading (the file is untouched).
    Its rows keep every value; ``setting`` is the id of its ``meta`` limits, ``device`` NULL.
    """

    SCHEMA = _BENCH_SCHEMA
    TABLES = {"settings": ("setting", "json"), "methods": ("method", "expr"),
              "results": BENCH_COLUMNS, "runs": RUNS_COLUMNS}  # fmt: skip

    # ------------------------------------------------------------------ the former layout
    def _check(self, integrity: bool) -> None:
        tables = {r[0] for r in self._read("SELECT name FROM sqlite_master WHERE type='table'")}
        if {"meta", "methods", "results"} <= tables and "setting" not in _columns(
            self.con, "results"
        ):
            if self.mode == "read":  # never write a file opened for reading
                copy = sqlite3.connect(":memory:")
                self.con.backup(copy)
                self.con.close()
                self.con = copy
            self._convert_legacy()
        super()._check(integrity)

    def _convert_legacy(self) -> None:
        meta = dict(self._read("SELECT key, value FROM meta"))
        try:
            setting = {k: int(meta[k]) for k in _BENCH_LEGACY_SETTINGS}
        except (KeyError, ValueError):
            raise StoreError(
                f"the store {self.path} has the detector benchmark's former layout, but its "
                f"table meta lacks a whole-number {' / '.join(_BENCH_LEGACY_SETTINGS)}; "
                "start a new store"
            ) from None
        old = [c for c in BENCH_COLUMNS if c not in ("setting", "device")]
        missing = set(old) - _columns(self.con, "results")
        if missing:
            raise StoreError(
                f"the store {self.path} has an older layout (table results lacks "
                f"{', '.join(sorted(missing))}); start a new store"
            )
        sid = setting_id(setting)
        con = self.con
        con.isolation_level = None  # explicit transaction: the DDL is rolled back as well
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ALTER TABLE results RENAME TO results_former")
            for stmt in (_BENCH_SCHEMA + RUNS_SCHEMA).split(";"):
                if stmt.strip():
                    con.execute(stmt)
            cols = ", ".join(old)
            con.execute(
                f"INSERT INTO results (setting, {cols}) SELECT ?, {cols} FROM results_former "
                "ORDER BY rowid",
                (sid,),
            )
            con.execute("DROP TABLE results_former")
            con.execute("DROP TABLE meta")
            con.execute(
                "INSERT INTO settings VALUES (?, ?)", (sid, json.dumps(setting, sort_keys=True))
            )
            con.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise self._error(exc, "convert") from None
        finally:
            con.isolation_level = ""

    # ------------------------------------------------------------------ settings, methods
    def settings(self) -> dict[str, dict]:
        """Setting id -> settings dict (at most one)."""
        return {s: json.loads(j) for s, j in self._read("SELECT setting, json FROM settings")}

    def add_setting(self, setting: dict) -> str:
        """Record ``setting`` as the store's one setting and return its id; StoreError when
        the store holds another (naming the first key that differs)."""
        sid = setting_id(setting)
        for other, stored in self.settings().items():
            if other != sid:
                key = next((k for k in sorted(set(stored) | set(setting))
                            if stored.get(k) != setting.get(k)), "?")  # fmt: skip
                raise StoreError(
                    f"the store {self.path} holds results made with {key}={stored.get(key)}, "
                    f"not {setting.get(key)}; use the same settings or another store"
                )
        self._write(
            self.con.execute,
            "INSERT OR IGNORE INTO settings VALUES (?, ?)",
            (sid, json.dumps(setting, sort_keys=True)),
        )
        return sid

    def methods(self) -> dict[str, str]:
        """Method name -> the expression stored with it."""
        return dict(self._read("SELECT method, expr FROM methods"))

    def set_method(self, name: str, expr: str, drop_rows: bool = False) -> int:
        """Record ``name``'s expression; with ``drop_rows`` first delete its result rows (all
        settings), in the same transaction. Returns the rows deleted."""

        def write():
            n = 0
            if drop_rows:
                n = self.con.execute("DELETE FROM results WHERE method = ?", (name,)).rowcount
            self.con.execute("INSERT OR REPLACE INTO methods VALUES (?, ?)", (name, expr))
            return n

        return self._write(write)

    # ------------------------------------------------------------------ results
    def add_results(self, rows, stamp: dict) -> None:
        """Write one finished problem's rows (dicts of :data:`BENCH_COLUMNS` without the
        stamp) in one transaction, each stamped with ``stamp``'s setting, revision
        (``git_rev``), device and time (``finished``); a stored row of the same key is
        replaced (``--rerun``, ``--retry-errors``)."""
        marks = ", ".join("?" * len(BENCH_COLUMNS))
        sql = f"INSERT OR REPLACE INTO results ({', '.join(BENCH_COLUMNS)}) VALUES ({marks})"
        stamped = {"setting": stamp["setting"], "git_rev": stamp["revision"],
                   "device": stamp["device"], "finished": stamp["created"]}  # fmt: skip

        def insert():
            for r in rows:
                unknown = set(r) - set(BENCH_COLUMNS)
                if unknown:
                    raise ValueError(f"unknown results columns: {sorted(unknown)}")
                row = {**r, **stamped}
                self.con.execute(sql, [row.get(c) for c in BENCH_COLUMNS])

        self._write(insert)

    def keys(self, setting: str, failed: bool = True) -> set[tuple[str, str, str, int]]:
        """(dataset, class, method, seed) of the rows of ``setting`` (without the failed ones
        unless ``failed``)."""
        sql = "SELECT dataset, class, method, seed FROM results WHERE setting = ?"
        if not failed:
            sql += " AND error IS NULL"
        return {(d, c, m, int(s)) for d, c, m, s in self._read(sql, (setting,))}

    def rows(self, seeds: Iterable[int] | None = None) -> list[dict]:
        """Every result row (as a dict of :data:`BENCH_COLUMNS`), of ``seeds`` only if given,
        in the order they were written (a converted store: the former file's order), so that
        means over them are summed in the same order as before."""
        out = self.query(f"SELECT {', '.join(BENCH_COLUMNS)} FROM results ORDER BY rowid")
        if seeds is None:
            return out
        keep = set(seeds)
        return [r for r in out if r["seed"] in keep]
