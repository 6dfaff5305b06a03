"""The results store: one SQLite file (standard library ``sqlite3``), one row per evaluated
cell, committed as each cell finishes.

Tables
------
``settings``: setting id -> the JSON of the protocol settings it stands for (folds, repeats,
seed, Gram sharing, scorer grids). Every result row carries its setting id, so runs with other
settings never mix.

``cv``: one row per (setting, dataset, class, kernel, kernel parameters, time channel,
scorer): the ROC-AUC and PR-AUC averaged over the CV folds for every (alpha, rank) of the
scorer, as float64 arrays (n_alpha, n_rank), with the seconds spent.

``test``: one row per (setting, dataset, class, kernel, scorer): the hyper-parameters chosen by
CV and the test-split ROC-AUC and PR-AUC.

``runs``: one row per invocation (command, start, end, cells computed, wall seconds).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["ResultStore", "setting_id", "encode_array", "decode_array"]

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
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, setting TEXT, command TEXT, preset TEXT,
    started REAL, finished REAL, cells_computed INTEGER, wall_seconds REAL,
    revision TEXT, device TEXT, workers INTEGER, scheduler TEXT
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
    shape = tuple(np.frombuffer(b[:8], dtype="<i4"))
    return np.frombuffer(b[8:], dtype="<f8").reshape(shape).copy()


class ResultStore:
    """A results store in one SQLite file. Rows are committed per cell (:meth:`add_cell`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = sqlite3.connect(str(self.path), timeout=60.0)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=NORMAL")
        self.con.executescript(_SCHEMA)
        self.con.commit()

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ writing
    def add_setting(self, setting: dict) -> str:
        sid = setting_id(setting)
        with self.con:
            self.con.execute(
                "INSERT OR IGNORE INTO settings VALUES (?, ?)",
                (sid, json.dumps(setting, sort_keys=True)),
            )
        return sid

    def add_cell(self, cv_rows: Iterable[dict] = (), test_rows: Iterable[dict] = ()) -> None:
        """Insert the rows of one finished cell in one transaction (committed on return).

        A key already present is an error (a finished cell is never computed twice)."""
        with self.con:
            for row in cv_rows:
                self._insert("cv", CV_COLUMNS, row)
            for row in test_rows:
                self._insert("test", TEST_COLUMNS, row)

    def _insert(self, table: str, columns: tuple[str, ...], row: dict) -> None:
        unknown = set(row) - set(columns)
        if unknown:
            raise ValueError(f"unknown {table} columns: {sorted(unknown)}")
        vals = [row.get(c) for c in columns]
        marks = ", ".join("?" * len(columns))
        self.con.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", vals)

    def start_run(self, **fields) -> int:
        with self.con:
            cur = self.con.execute(
                "INSERT INTO runs (setting, command, preset, started, revision, device, workers,"
                " scheduler) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    fields.get("setting"), fields.get("command"), fields.get("preset"),
                    time.time(), fields.get("revision"), fields.get("device"),
                    fields.get("workers"), fields.get("scheduler"),
                ),
            )  # fmt: skip
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, cells: int, wall: float) -> None:
        with self.con:
            self.con.execute(
                "UPDATE runs SET finished=?, cells_computed=?, wall_seconds=? WHERE id=?",
                (time.time(), cells, wall, run_id),
            )

    # ------------------------------------------------------------------ reading
    def cv_keys(self, setting: str) -> set[tuple]:
        """(dataset, cls, kernel, params, time_channel, scorer) of every stored cv row."""
        cur = self.con.execute(
            "SELECT dataset, cls, kernel, params, time_channel, scorer FROM cv WHERE setting=?",
            (setting,),
        )
        return {(a, b, c, d, bool(e), f) for a, b, c, d, e, f in cur}

    def test_keys(self, setting: str) -> set[tuple]:
        cur = self.con.execute(
            "SELECT dataset, cls, kernel, scorer, grid FROM test WHERE setting=?", (setting,)
        )
        return set(cur)

    def cv_rows(self, setting: str, dataset: str, cls: str, kernel: str, scorer: str):
        cur = self.con.execute(
            "SELECT params, time_channel, axis, roc, pr, error FROM cv WHERE setting=? AND "
            "dataset=? AND cls=? AND kernel=? AND scorer=?",
            (setting, dataset, cls, kernel, scorer),
        )
        out = {}
        for params, tc, axis, roc, pr, error in cur:
            out[(params, bool(tc))] = {
                "axis": None if axis is None else json.loads(axis),
                "roc": None if roc is None else decode_array(roc),
                "pr": None if pr is None else decode_array(pr),
                "error": error,
            }
        return out

    def query(self, sql: str, params: tuple = ()) -> list[dict]:
        cur = self.con.execute(sql, params)
        names = [c[0] for c in cur.description]
        return [dict(zip(names, r)) for r in cur]

    def settings(self) -> dict[str, dict]:
        return {s: json.loads(j) for s, j in self.con.execute("SELECT setting, json FROM settings")}
