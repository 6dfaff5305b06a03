"""The ADBench package on the shared store, recorder and executor (issue 13, item 5): the
device and provenance recorded, the data folder's resolution, the method table's hook,
one-line errors, worker processes equal to the serial run."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from experiments import adbench
from experiments.__main__ import main as experiments_main
from experiments._recorder import device_label


def _write_npz(path, n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.zeros(n, dtype=int)
    X[:20] += 6.0
    y[:20] = 1
    np.savez(path, X=X, y=y)


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    _write_npz(folder / "1_toy.npz")
    _write_npz(folder / "2_other.npz", seed=1)
    return folder


def _results(db):
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT dataset, method, seed, auc, error, git_rev, device FROM results "
        "ORDER BY dataset, method, seed"
    ).fetchall()
    runs = con.execute("SELECT revision, device, versions, cells_computed FROM runs").fetchall()
    con.close()
    return rows, runs


def test_run_records_the_device_and_the_run(tmp_path, data):
    db = tmp_path / "r.sqlite"
    argv = ["adbench", "run", "--data-dir", str(data), "--db", str(db), "--seeds", "0",
            "--methods", "HBOS", "KDE-Gauss", "--device", "cpu"]  # fmt: skip
    assert experiments_main(argv) == 0
    rows, runs = _results(db)
    assert len(rows) == 4 and all(r[4] is None and r[3] > 0.8 for r in rows)
    assert {r[6] for r in rows} == {device_label("cpu")}
    ((revision, device, versions, cells),) = runs
    assert cells == 4 and device == device_label("cpu") and revision == rows[0][5]
    assert {"numpy", "torch", "python"} <= set(json.loads(versions))


def test_workers_equal_the_serial_run(tmp_path, data):
    base = ["run", "--data-dir", str(data), "--seeds", "0", "--methods", "HBOS", "IForest"]
    adbench.main([*base, "--db", str(tmp_path / "a.sqlite")])
    adbench.main([*base, "--db", str(tmp_path / "b.sqlite"), "--workers", "2"])
    auc = [[r[:4] for r in _results(tmp_path / p)[0]] for p in ("a.sqlite", "b.sqlite")]
    assert auc[0] == auc[1] and len(auc[0]) == 4


def test_data_folder_from_the_environment_and_errors(tmp_path, data, monkeypatch, capsys):
    db = tmp_path / "e.sqlite"
    monkeypatch.setenv(adbench._data.ENV_VAR, str(data))
    assert adbench._data.data_dir() == data
    adbench.main(["run", "--db", str(db), "--seeds", "0", "--methods", "HBOS"])
    assert len(_results(db)[0]) == 2
    monkeypatch.setenv(adbench._data.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit, match=r"error: \$ADBENCH_DATA .*nowhere: no such folder"):
        adbench.main(["run", "--db", str(db)])
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database " * 100)
    with pytest.raises(SystemExit, match="is not a SQLite database") as info:
        adbench.main(["run", "--data-dir", str(data), "--db", str(text), "--methods", "HBOS"])
    assert "\n" not in str(info.value.code)
    with pytest.raises(SystemExit, match="unknown data set 'nope'"):
        adbench.main(["run", "--data-dir", str(data), "--db", str(db), "--datasets", "nope"])


def test_a_registered_method_runs_by_name(tmp_path, data, monkeypatch):
    monkeypatch.setattr(adbench._methods, "ALL_METHODS", dict(adbench.ALL_METHODS))
    monkeypatch.setattr(adbench._run, "ALL_METHODS", adbench._methods.ALL_METHODS)
    monkeypatch.setattr(adbench._methods, "DIAGNOSTIC_METHODS", dict(adbench.DIAGNOSTIC_METHODS))

    def norm(Xtr, Xte, seed, device=None):
        return np.linalg.norm(Xte - Xtr.mean(0), axis=1), {"seed": seed}

    adbench.register_method("centre-distance", adbench.Method(norm), diagnostic=True)
    with pytest.raises(ValueError, match="exists already"):
        adbench.register_method("centre-distance", adbench.Method(norm), diagnostic=True)
    db = tmp_path / "m.sqlite"
    adbench.main(["run", "--data-dir", str(data), "--db", str(db), "--seeds", "3",
                  "--methods", "centre-distance"])  # fmt: skip
    con = sqlite3.connect(db)
    rows = con.execute("SELECT method, seed, auc, info FROM results").fetchall()
    con.close()
    assert len(rows) == 2 and all(m == "centre-distance" and a > 0.9 for m, _, a, _ in rows)
    assert json.loads(rows[0][3]) == {"seed": 3}


def test_pyod_table_names_constructors():
    assert list(adbench.PYOD)[:2] == ["IForest", "ECOD"]
    assert adbench.PYOD["COF"].max_train == adbench.QUADRATIC_MAX_TRAIN
    X = np.random.default_rng(0).random((30, 3))
    det = adbench.PYOD["IForest"].build(X, 7)
    assert type(det).__name__ == "IForest" and det.random_state == 7
    assert set(adbench.PYOD) <= set(adbench.METHODS)


def test_a_signal_stops_a_run_cleanly_and_the_same_command_resumes(tmp_path, data, capsys):
    import os
    import signal
    import time

    run_mod = adbench._run
    real, calls = run_mod.run_cell, []

    def entry(cell, path, config):
        calls.append(cell)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while "computing"
            time.sleep(5)
            raise AssertionError("the handler did not interrupt the cell")
        return real(cell, path, config)

    db = tmp_path / "s.sqlite"
    argv = ["run", "--data-dir", str(data), "--db", str(db), "--seeds", "0",
            "--methods", "HBOS", "IForest"]  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_mod, "run_cell", entry)
        assert adbench.main(argv) == 128 + signal.SIGTERM
    assert "run stopped by SIGTERM: 1 of 4 runs computed" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored
    rows, runs = _results(db)
    assert len(rows) == 1 and runs[0][3] == 1
    assert adbench.main(argv) == 0
    assert len(_results(db)[0]) == 4 and _results(db)[1][1][3] == 3
