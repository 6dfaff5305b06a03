"""The ADBench results store: one SQLite file with the table ``results``, one row per
(data set, method, seed), and the ``runs`` table of every store of this package.

It is a :class:`~experiments._store.SQLiteStore`: the same opening checks (a file that is
not SQLite, a damaged one, another database, an unwritable location: one-line
:class:`~experiments._store.StoreError`), one transaction per finished cell, and the
provenance of each invocation in ``runs``. A store written before the ``runs`` table existed
gets it when opened for writing.
"""

from __future__ import annotations

import json

from .._store import SQLiteStore

__all__ = ["ADBenchStore", "RESULT_COLUMNS"]

RESULT_COLUMNS = (
    "dataset", "method", "seed", "auc", "fit_score_s", "n_train", "n_test", "d", "error",
    "info", "git_rev", "device", "finished",
)  # fmt: skip


class ADBenchStore(SQLiteStore):
    """Rows keyed by (dataset, method, seed); ``git_rev``, ``device`` and ``finished`` are
    the revision, the device that computed the row and the time it was committed."""

    SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    dataset TEXT, method TEXT, seed INTEGER, auc REAL, fit_score_s REAL,
    n_train INTEGER, n_test INTEGER, d INTEGER, error TEXT, info TEXT,
    git_rev TEXT, device TEXT, finished REAL,
    PRIMARY KEY (dataset, method, seed)
);
"""
    TABLES = {"results": RESULT_COLUMNS}

    def add_results(self, rows, stamp: dict) -> None:
        """Write the rows of one finished cell (:class:`~experiments.adbench._run.ADBenchResult`),
        replacing a stored row of the same key (``--retry-failed``)."""

        def insert():
            for r in rows:
                vals = (
                    r.dataset, r.method, r.seed, r.auc, r.fit_score_s, r.n_train, r.n_test,
                    r.d, r.error, json.dumps(r.info), stamp["revision"],
                    r.device or stamp["device"], stamp["created"],
                )  # fmt: skip
                marks = ", ".join("?" * len(RESULT_COLUMNS))
                self.con.execute(f"INSERT OR REPLACE INTO results VALUES ({marks})", vals)

        self._write(insert)

    def keys(self, failed: bool = True) -> set[tuple[str, str, int]]:
        """(dataset, method, seed) of the stored rows (without the failed ones unless
        ``failed``)."""
        sql = "SELECT dataset, method, seed FROM results"
        if not failed:
            sql += " WHERE error IS NULL"
        return {(d, m, int(s)) for d, m, s in self._read(sql)}

    def aucs(self) -> list[tuple[str, str, int, float, float]]:
        """(dataset, method, seed, auc, fit_score_s) of every row without error."""
        sql = "SELECT dataset, method, seed, auc, fit_score_s FROM results WHERE auc IS NOT NULL"
        return [tuple(r) for r in self._read(sql)]
