"""The results store and the runner: determinism, a run stopped or killed mid-way and
resumed (same store, no cell computed twice), Dask (LocalCluster) equals the local run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest
from experiment_helpers import (
    FAST_KERNELS,
    FAST_SCORERS,
    ROOT,
    _cv_table,
    _opts,
    _test_table,
)

from experiments._runner import run_benchmark
from experiments._store import ResultStore


@pytest.fixture(scope="module")
def reference_store(tmp_path_factory):
    """An uninterrupted serial run of the small configuration."""
    path = tmp_path_factory.mktemp("ref") / "ref.sqlite"
    summary = run_benchmark(_opts(path))
    assert summary["complete"]
    return path, summary


def test_deterministic_and_resume_recomputes_nothing(tmp_path, reference_store):
    ref_path, ref = reference_store
    again = run_benchmark(_opts(tmp_path / "again.sqlite"))
    assert _test_table(tmp_path / "again.sqlite") == _test_table(ref_path)
    assert _cv_table(tmp_path / "again.sqlite") == _cv_table(ref_path)
    # an interrupted run (stopped after 7 cells) resumed computes exactly the rest
    path = tmp_path / "resumed.sqlite"
    first = run_benchmark(_opts(path, max_cells=7))
    assert not first["complete"] and first["cells_computed"] == 7
    second = run_benchmark(_opts(path))
    assert second["complete"]
    assert first["cells_computed"] + second["cells_computed"] == ref["cells_total"]
    assert _test_table(path) == _test_table(ref_path)
    third = run_benchmark(_opts(path))
    assert third["cells_total"] == 0 and third["cells_computed"] == 0
    assert again["cells_computed"] == ref["cells_total"]


def test_killed_run_resumes_to_the_same_store(tmp_path, reference_store):
    ref_path, ref = reference_store
    path = tmp_path / "killed.sqlite"
    cmd = [sys.executable, "-m", "experiments", "run", "--dataset", "BasicMotions",
           "--kernels", *FAST_KERNELS, "--scorers", *FAST_SCORERS, "--folds", "2",
           "--repeats", "1", "--max-rank", "8", "--time-channel", "both", "--store", str(path),
           "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    n_rows = 0
    deadline = time.time() + 60
    try:
        while time.time() < deadline and proc.poll() is None:
            if path.exists():
                try:
                    con = sqlite3.connect(str(path), timeout=1)
                    n_rows = con.execute("SELECT COUNT(*) FROM cv").fetchone()[0]
                    con.close()
                except sqlite3.OperationalError:
                    n_rows = 0
                if n_rows >= 3 * len(FAST_SCORERS):
                    break
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    con = sqlite3.connect(str(path))
    cv_done = con.execute("SELECT COUNT(*) FROM cv").fetchone()[0]
    test_done = con.execute("SELECT COUNT(*) FROM test").fetchone()[0]
    con.close()
    assert cv_done % len(FAST_SCORERS) == 0  # cells are committed whole
    cells_done = cv_done // len(FAST_SCORERS) + test_done // len(FAST_SCORERS)
    assert 0 < cells_done < ref["cells_total"]
    resumed = run_benchmark(_opts(path))
    assert resumed["cells_computed"] == ref["cells_total"] - cells_done
    assert _test_table(path) == _test_table(ref_path)


def test_dask_local_cluster_equals_local_run(tmp_path, reference_store):
    distributed = pytest.importorskip("distributed")
    ref_path, _ = reference_store
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        s = run_benchmark(_opts(tmp_path / "dask.sqlite", scheduler=cluster.scheduler_address))
    assert s["complete"]
    assert _test_table(tmp_path / "dask.sqlite") == _test_table(ref_path)
    assert _cv_table(tmp_path / "dask.sqlite") == _cv_table(ref_path)


def test_store_roundtrip_and_no_duplicate_cells(tmp_path):
    from experiments._store import decode_array, encode_array, setting_id

    a = np.arange(6, dtype=float).reshape(2, 3) / 7
    np.testing.assert_array_equal(decode_array(encode_array(a)), a)
    assert setting_id({"a": 1, "b": [1, 2]}) == setting_id({"b": [1, 2], "a": 1})
    with ResultStore(tmp_path / "s.sqlite") as st:
        sid = st.add_setting({"folds": 2})
        row = {"setting": sid, "dataset": "D", "cls": "c", "kernel": "k", "params": "{}",
               "time_channel": 0, "scorer": "mahalanobis", "axis": "[1.0]", "n_rank": 3,
               "roc": encode_array(a), "pr": encode_array(a)}  # fmt: skip
        st.add_cell(cv_rows=[row])
        with pytest.raises(sqlite3.IntegrityError):
            st.add_cell(cv_rows=[row])
        got = st.cv_rows(sid, "D", "c", "k", "mahalanobis")[("{}", False)]
        np.testing.assert_array_equal(got["roc"], a)
        assert st.cv_keys(sid) == {("D", "c", "k", "{}", False, "mahalanobis")}
        with pytest.raises(ValueError, match="unknown cv columns"):
            st.add_cell(cv_rows=[{**row, "bogus": 1}])
