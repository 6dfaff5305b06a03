"""The results store and the runner: determinism, a run stopped or killed mid-way and
resumed (same store, no cell computed twice), Dask (LocalCluster) equals the local run; with
worker processes, no process outlives its parent and SIGINT / SIGTERM stop a run cleanly
(issue 14, item 5)."""

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


CLI = [sys.executable, "-m", "experiments", "run", "--dataset", "BasicMotions", "--kernels",
       *FAST_KERNELS, "--scorers", *FAST_SCORERS, "--folds", "2", "--repeats", "1",
       "--max-rank", "8", "--time-channel", "both", "--no-progress"]  # fmt: skip


def _proc_state(pid: int) -> str | None:
    """The state letter of a process from /proc (None: gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2]


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                out.append(int(d))
    return out


def _alive(pids) -> list[int]:
    """The processes of ``pids`` still running (a zombie waiting to be reaped has ended)."""
    return [p for p in pids if _proc_state(p) not in (None, "Z")]


def _sigint_default() -> None:
    """A run started from a terminal: SIGINT at its default. A test runner launched as a
    background job of a non-interactive shell inherits SIGINT ignored, and Python (like any
    program started so) then keeps ignoring it, as a nohup'd job should."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_and_wait_for_cells(path, n_cells: int, *extra, require_running: bool = True):
    """Start the CLI run with ``extra`` options; return (process, its child processes) once
    ``n_cells`` CV cells are committed and (``require_running``) while the run is still going."""
    proc = subprocess.Popen([*CLI, "--store", str(path), *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_sigint_default)  # fmt: skip
    deadline = time.time() + 90
    while time.time() < deadline and proc.poll() is None:
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
            n_rows = con.execute("SELECT COUNT(*) FROM cv").fetchone()[0]
            con.close()
        except sqlite3.Error:
            n_rows = 0
        if n_rows >= n_cells * len(FAST_SCORERS):
            break
        time.sleep(0.01)
    kids = _children(proc.pid)
    if require_running:
        assert proc.poll() is None, "the run finished before it could be stopped"
    return proc, kids


def _cells_done(path) -> int:
    con = sqlite3.connect(str(path))
    cv_done = con.execute("SELECT COUNT(*) FROM cv").fetchone()[0]
    test_done = con.execute("SELECT COUNT(*) FROM test").fetchone()[0]
    con.close()
    assert cv_done % len(FAST_SCORERS) == 0 and test_done % len(FAST_SCORERS) == 0
    return cv_done // len(FAST_SCORERS) + test_done // len(FAST_SCORERS)


def _wait_gone(pids, seconds: float = 10.0) -> list[int]:
    deadline = time.time() + seconds
    while _alive(pids) and time.time() < deadline:
        time.sleep(0.05)
    return _alive(pids)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads processes from /proc")
def test_sigkill_of_the_parent_leaves_no_worker_and_resumes(tmp_path, reference_store):
    """`run --workers 2` killed with SIGKILL: its workers and the resource tracker end with
    it (today they stayed alive, idle, until killed by hand); the resumed run ends with the
    tables of an uninterrupted run."""
    ref_path, ref = reference_store
    path = tmp_path / "killed.sqlite"
    proc, kids = _start_and_wait_for_cells(path, 2, "--workers", "2")
    try:
        assert len(_alive(kids)) >= 2  # the two workers (and the resource tracker)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        left = _wait_gone(kids)
    finally:
        for pid in _alive(kids):  # only if the test fails: do not leave them running
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes outlived their parent: {left}"
    done = _cells_done(path)
    assert 0 < done < ref["cells_total"]
    resumed = run_benchmark(_opts(path))
    assert resumed["cells_computed"] == ref["cells_total"] - done
    assert _test_table(path) == _test_table(ref_path)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads processes from /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_run_cleanly(tmp_path, reference_store, sig):
    """SIGTERM (`kill PID`) or SIGINT to the whole process group (Ctrl-C in a terminal) of
    `run --workers 2`: the run stops at once (today the workers went on computing after a
    SIGTERM), every arrived result is committed, the run row is finished, exit status
    128 + signal, no process left; the same command resumes."""
    ref_path, ref = reference_store
    # the whole run takes a fraction of a second: on a loaded machine it can finish between
    # the second committed cell and the signal, which then stops nothing; such a race is
    # retried with a fresh store (a stopped run is what this test is about)
    for attempt in range(5):
        path = tmp_path / f"stopped{attempt}.sqlite"
        proc, kids = _start_and_wait_for_cells(path, 2, "--workers", "2", require_running=False)
        try:
            if proc.poll() is None:
                if sig == signal.SIGINT:
                    os.killpg(proc.pid, sig)  # the workers get it too, and leave it to the parent
                else:
                    os.kill(proc.pid, sig)
            _, err = proc.communicate(timeout=30)
            left = _wait_gone(kids)
        finally:
            for pid in _alive(kids):
                os.kill(pid, signal.SIGKILL)
        finished_first = proc.returncode == 0 and _cells_done(path) == ref["cells_total"]
        if not finished_first:
            break
    assert proc.returncode == 128 + sig, err
    assert left == [], f"processes outlived their parent: {left}"
    assert "Traceback" not in err
    name = signal.Signals(sig).name
    done = _cells_done(path)
    assert f"run stopped by {name}: {done} of {ref['cells_total']} cells computed" in err
    con = sqlite3.connect(str(path))
    ((cells, finished),) = con.execute("SELECT cells_computed, finished FROM runs").fetchall()
    con.close()
    assert cells == done and finished is not None
    resumed = run_benchmark(_opts(path))
    assert resumed["cells_computed"] == ref["cells_total"] - done
    assert _test_table(path) == _test_table(ref_path)


def test_stop_request_abandons_a_serial_cell(tmp_path):
    """In one process the signal handler interrupts the cell being computed; the run
    commits what it had and raises RunInterrupted with the summary."""
    import experiments._runner as runner

    calls = []
    real = runner.run_cell

    def entry(cell, data, config):
        calls.append(cell.kind)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while "computing"
            time.sleep(5)
            raise AssertionError("the handler did not interrupt the cell")
        return real(cell, data, config)

    path = tmp_path / "serial.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "run_cell", entry)
        with pytest.raises(runner.RunInterrupted) as info:
            run_benchmark(_opts(path))
    assert info.value.signum == signal.SIGTERM
    assert info.value.summary["cells_computed"] == 2 == _cells_done(path)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored


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
