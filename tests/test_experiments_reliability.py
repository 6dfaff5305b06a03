"""Reliability of ``python -m experiments`` (issue 25, items 1, 6, 7, 8, 9): a signal to the
whole process group while the workers start ends the run at once (it hung for ever), bad
labels and a class missing from the test part are refused before any work, one store
takes one run at a time (a second gets one line naming the first, not an IntegrityError),
a reference CSV is checked at start-up, and every option error is one line with exit 2."""

from __future__ import annotations

import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest
from experiment_helpers import ROOT

from experiments.__main__ import main
from experiments._store import ResultStore, StoreError
from experiments.data import DataError, check_test_classes, load_data

needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")

KERNELS = ["flat_rbf", "integral_poly"]
SCORERS = ["conformance", "mahalanobis"]


def _argv(store, *extra, dataset="BasicMotions", kernels=KERNELS) -> list[str]:
    return ["run", "--preset", "quick", "--dataset", str(dataset), "--kernels", *kernels,
            "--scorers", *SCORERS, "--folds", "2", "--time-channel", "no", "--max-rank", "8",
            "--store", str(store), "--no-progress", *extra]  # fmt: skip


def _cli(store, *extra, **kw) -> list[str]:
    return [sys.executable, "-m", "experiments", *_argv(store, *extra, **kw)]


def _error_line(capsys) -> str:
    """The one line the CLI printed on stderr (asserts there is exactly one, no traceback)."""
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ----------------------------------------------------------------------------- processes
def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()  # state, ppid, ...


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descendants(pid: int) -> set[int]:
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := _stat(int(d))) is not None:
            parent[int(d)] = int(st[1])
    out, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - out
        out |= frontier
    return out


def _alive(pids) -> list[int]:
    return [p for p in pids if (st := _stat(p)) is not None and st[0] != "Z"]


def _sigint_default() -> None:
    # as from a terminal: a test runner started in the background may inherit SIGINT ignored,
    # and one started under nohup SIGHUP ignored (which the run then rightly keeps ignoring)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _cells(path) -> tuple[int, list[tuple]]:
    """(cells committed, runs rows (cells_computed, finished)); the file checked intact."""
    con = sqlite3.connect(str(path))
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        cv = con.execute("SELECT COUNT(*) FROM cv").fetchone()[0]
        test = con.execute("SELECT COUNT(*) FROM test").fetchone()[0]
        runs = con.execute("SELECT cells_computed, finished FROM runs ORDER BY id").fetchall()
    finally:
        con.close()
    assert cv % len(SCORERS) == 0 and test % len(SCORERS) == 0  # cells are committed whole
    return (cv + test) // len(SCORERS), runs


# ----------------------------------------------------------------------------- item 1
@needs_proc
@pytest.mark.parametrize(
    "sig, moment, delay",
    [
        (signal.SIGTERM, "store", 0.0),  # before any worker: the store was just created
        (signal.SIGTERM, "worker", 0.0),  # the first worker is starting (the hang)
        pytest.param(signal.SIGINT, "worker", 0.0, marks=pytest.mark.slow),
        (signal.SIGHUP, "worker", 0.3),
    ],
    ids=[
        "SIGTERM-before-workers",
        "SIGTERM-worker-starting",
        "SIGINT-worker-starting",
        "SIGHUP-worker-started",
    ],  # fmt: skip
)
def test_signal_to_the_group_while_workers_start_ends_the_run(tmp_path, sig, moment, delay):
    """`run --workers 2` in its own session, the signal sent to the whole group (a closing
    terminal, a batch scheduler) before the workers or while the first one starts: the
    parent ends within seconds (it blocked for ever writing start-up data to the dead
    worker) with status 128 + signal and its one-line stop message, no process of the run
    is left, and the store is intact with every run row finished and honest."""
    store, tmp = tmp_path / "g.sqlite", tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(_cli(store, "--workers", "2"), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_sigint_default, env={**os.environ, "TMPDIR": str(tmp)},
                            )  # fmt: skip
    seen: set[int] = set()
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            kids = _descendants(proc.pid)
            seen |= kids
            if moment == "store" and store.exists():
                break
            workers = [k for k in kids if "spawn_main" in _cmdline(k)
                       and "resource_tracker" not in _cmdline(k)]  # fmt: skip
            if moment == "worker" and workers:
                break
            time.sleep(0.002)
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(delay)
        seen |= _descendants(proc.pid)
        t0 = time.time()
        os.killpg(proc.pid, sig)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run did not end within 30 s of {signal.Signals(sig).name}")
        took = time.time() - t0
        deadline = time.time() + 10
        while _alive(seen) and time.time() < deadline:
            time.sleep(0.05)
        left = _alive(seen)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in _alive(seen):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, err
    assert took < 30
    assert left == [], f"processes outlived the run: {left}"
    assert "Traceback" not in err
    name = signal.Signals(sig).name
    assert f"run stopped by {name}: " in err
    done, runs = _cells(store)
    assert len(runs) == 1 and runs[0][1] is not None and runs[0][0] == done
    assert [p for p in os.listdir(tmp) if p.startswith("experiments-shared-")] == []


def test_worker_start_up_data_travel_by_file_not_pipe():
    """What goes through the pipe that starts a worker is a few bytes (a file name and a
    pid) however large the shared data, so the parent can never block on it; the file is
    private while the executor lives and removed by close(), which also puts the signal
    handlers back."""
    from experiments._executor import Executor

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    shared = {"big": np.arange(1_000_000, dtype=np.float64)}  # 8 MB
    ex = Executor("local", 2, shared, print, {})
    try:
        initargs = ex.pool._initargs  # what each worker's start-up pipe carries
        assert len(pickle.dumps(initargs)) < 1024
        path = initargs[0]
        assert os.stat(os.path.dirname(path)).st_mode & 0o077 == 0  # private folder
        with open(path, "rb") as f:
            np.testing.assert_array_equal(pickle.load(f)["big"], shared["big"])
        assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]  # handled now
    finally:
        ex.close()
    assert not os.path.exists(os.path.dirname(path))
    assert {s: signal.getsignal(s) for s in before} == before
    ex.close()  # a second close does nothing


def test_a_signal_before_execute_is_a_stop_request():
    """A signal between making the executor and running the cells is not lost and does not
    kill the process: execute() then runs nothing and reports the signal."""
    from experiments._executor import Executor, execute

    before = signal.getsignal(signal.SIGTERM)
    ex = Executor("local", 1, {"d": None}, lambda cell, data, config: 1, {})
    try:
        assert signal.getsignal(signal.SIGTERM) is not before  # else the kill ends pytest
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        got = []
        n = execute(ex, [object()], lambda cell, result: got.append(result))
    finally:
        ex.close()
    assert n == 0 and got == [] and ex.stop.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


# ----------------------------------------------------------------------------- items 6, 7
def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def _toy(n, rng, T=12, d=2):
    return rng.normal(size=(n, T, d))


def test_a_class_without_test_series_is_refused_before_any_work(tmp_path, capsys):
    """The issue's npz (class 'c' absent from the test part): one line naming the class,
    exit 2, no store created and an existing store left byte for byte (it failed with a
    traceback mid-run, after the store existed)."""
    rng = np.random.default_rng(0)
    data = _npz(tmp_path / "d.npz", X_train=_toy(30, rng), y_train=np.repeat(["a", "b", "c"], 10),
                X_test=_toy(12, rng), y_test=np.repeat(["a", "b"], 6))  # fmt: skip
    store = tmp_path / "s.sqlite"
    assert main(_argv(store, dataset=data)) == 2
    line = _error_line(capsys)
    assert "'c'" in line and "no series in the test part" in line and str(data) in line
    assert not store.exists()
    with ResultStore(store) as st:  # an existing store is not touched either
        st.add_setting({"other": 1})
    before = store.read_bytes()
    assert main(_argv(store, dataset=data)) == 2
    _error_line(capsys)
    assert store.read_bytes() == before


def test_check_test_classes():
    """Each class made normal needs test series of its own and of another class; a class
    that is not made normal may be absent from the test part."""
    ytr = np.array(["a", "b", "c"] * 3)
    check_test_classes("x", ytr, np.array(["a", "b", "c"]))
    check_test_classes("x", ytr, np.array(["a", "b"]), normal=["a", "b"])
    with pytest.raises(DataError, match=r"class\(es\) 'c' have no series in the test part"):
        check_test_classes("x", ytr, np.array(["a", "b"]))
    with pytest.raises(DataError, match="holds only class 'a': no anomalies"):
        check_test_classes("x", ytr, np.array(["a", "a"]), normal=["a"])


def _csv(path, labels, per_series=4):
    lines = ["series,time,x,label"]
    for i, lab in enumerate(labels):
        lines += [f"{i},{t},{np.sin(i + t):.4f},{lab}" for t in range(per_series)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_rows_without_a_label_are_refused_naming_them(tmp_path, capsys):
    """A CSV row with an empty label became class '' and a NaN in y class 'nan', both
    benchmarked; now one line names the rows (CSV lines, npz indices), exit 2, no store."""
    labels = ["a", "b"] * 5
    labels[3] = ""
    path = _csv(tmp_path / "d.csv", labels)
    with pytest.raises(DataError, match=r"4 row\(s\) have no class label .* line 14, 15, 16, 17"):
        load_data(str(path))
    store = tmp_path / "s.sqlite"
    assert main(_argv(store, dataset=path)) == 2
    assert "line 14, 15, 16, 17" in _error_line(capsys) and not store.exists()
    # one row of a series unlabelled: that row is named (not "two labels")
    lines = _csv(tmp_path / "e.csv", ["a", "b"] * 5).read_text().splitlines()
    lines[6] = lines[6][: lines[6].rindex(",") + 1]
    (tmp_path / "e.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"1 row\(s\) have no class label .* line 7;"):
        load_data(str(tmp_path / "e.csv"))

    rng = np.random.default_rng(1)
    y = np.array([0.0, 1.0] * 10)
    y[[5, 12]] = np.nan
    with pytest.raises(DataError, match=r"y has 2 missing class label\(s\) .* index 5, 12;"):
        load_data(str(_npz(tmp_path / "nan.npz", X=_toy(20, rng), y=y)))
    ys = np.array(["a", "b"] * 10, dtype="<U8")
    ys[[0, 7, 8]] = ["", "nan", " "]
    with pytest.raises(DataError, match=r"y_test has 3 missing class label\(s\) .* 0, 7, 8;"):
        ytr = np.array(["a", "b"] * 10)
        path = _npz(tmp_path / "s.npz", X_train=_toy(20, rng), y_train=ytr,
                    X_test=_toy(20, rng), y_test=ys)  # fmt: skip
        load_data(str(path))
    assert main(_argv(store, dataset=tmp_path / "nan.npz")) == 2
    assert "index 5, 12" in _error_line(capsys) and not store.exists()
    # numeric labels without NaN stay usable
    assert load_data(str(_npz(tmp_path / "ok.npz", X=_toy(20, rng), y=np.array([0, 1] * 10)))
                     ).y_train.dtype.kind == "U"  # fmt: skip


# ----------------------------------------------------------------------------- item 8
_HOLDER = ("import sys, time; from experiments._store import ResultStore; "
           "s = ResultStore(sys.argv[1]); print('open', flush=True); time.sleep(60)")  # fmt: skip


@needs_proc
def test_a_store_takes_one_writer_at_a_time(tmp_path):
    """A second process opening a store for writing is refused at once, naming the pid
    that holds it; reading still works; the lock goes with its holder, even killed with
    SIGKILL; one process may open its store twice."""
    path = tmp_path / "s.sqlite"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "open"
        t0 = time.time()
        with pytest.raises(StoreError, match=f"being written by another process \\(pid "
                                             f"{holder.pid}\\)"):  # fmt: skip
            ResultStore(path)
        assert time.time() - t0 < 5
        with ResultStore(path, mode="read") as st:
            assert st.settings() == {}
    finally:
        holder.kill()
        holder.wait()
    with ResultStore(path) as a, ResultStore(path) as b:  # one process, twice
        a.add_setting({"x": 1})
        assert b.settings()
    with ResultStore(path):  # and released when both are closed: a child may take it
        pass
    out = subprocess.run(
        [sys.executable, "-c", _HOLDER.replace("time.sleep(60)", "0"), str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == "open", out.stderr  # fmt: skip


@needs_proc
def test_two_identical_runs_on_one_store(tmp_path, capsys):
    """The issue's case: the same `run` twice at once on one store. The second stops at
    once with one line naming the first's pid, exit 2, and adds no runs row (it died with
    sqlite3.IntegrityError and a row saying finished with 0 cells); the first is stopped and
    its row counts exactly the cells it committed."""
    store = tmp_path / "s.sqlite"
    # enough cells that the first run is still computing when the second starts (with GAK
    # alone the first could commit every cell first, and the second found nothing to do)
    kernels = [*KERNELS, "gak", "pde_sig_rbf", "trunc_sig_rbf", "reservoir"]
    first = subprocess.Popen(_cli(store, kernels=kernels), cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
    try:
        deadline = time.time() + 120
        while time.time() < deadline and first.poll() is None:
            try:  # the first run has started (its runs row): it holds the store
                con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1)
                started = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
                con.close()
            except sqlite3.Error:
                started = 0
            if started:
                break
            time.sleep(0.05)
        assert first.poll() is None, first.communicate()[1]
        rc = main(_argv(store, kernels=kernels))
        line = _error_line(capsys)
        assert first.poll() is None, "the first run ended before the second was refused"
        os.kill(first.pid, signal.SIGTERM)
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert rc == 2
    assert f"being written by another process (pid {first.pid})" in line
    assert first.returncode == 128 + signal.SIGTERM, err
    done, runs = _cells(store)
    assert len(runs) == 1 and runs[0][0] == done and runs[0][1] is not None


# ----------------------------------------------------------------------------- item 9
def test_reference_csv_is_checked_at_start_up(tmp_path, capsys):
    """A reference CSV without the columns it needs failed with KeyError: 'kernel' after
    every cell was computed; now `run` and `report` stop before any work with one line
    naming the missing columns (or the first bad value), exit 2, nothing written."""
    ref = tmp_path / "ref.csv"
    ref.write_text("data,scorer,model,roc\nBasicMotions,conformance,flat_rbf,0.9\n")
    store = tmp_path / "s.sqlite"
    assert main(_argv(store, "--reference", str(ref))) == 2
    line = _error_line(capsys)
    assert "lacks the column(s) dataset, kernel, roc_auc, pr_auc" in line
    assert "(it has: data, scorer, model, roc)" in line and not store.exists()
    ref.write_text("dataset,scorer,kernel,roc_auc,pr_auc\nB,conformance,flat_rbf,87.5,0.8\n")
    assert main(_argv(store, "--reference", str(ref))) == 2
    assert "line 2: roc_auc must be in [0, 1], got '87.5'" in _error_line(capsys)
    assert not store.exists()
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "rep"),
                 "--reference", str(ref)]) == 2  # fmt: skip
    assert "roc_auc must be in [0, 1]" in _error_line(capsys)
    assert not (tmp_path / "rep").exists()


# ----------------------------------------------------------------------------- options
@pytest.mark.parametrize(
    "argv, says",
    [
        (["demo", "--device", "bogus"], "--device 'bogus'"),
        (["demo", "--data-dir", "/no/such/folder"], "--data-dir /no/such/folder: no such"),
        (["list", "--data-dir", "/no/such/folder"], "--data-dir /no/such/folder: no such"),
    ],
)
def test_option_errors_are_one_line_with_exit_2(argv, says, capsys):
    assert main(argv) == 2
    assert says in _error_line(capsys)
