"""ADBench harness reliability (issue 25, items 10, 12, 13): one-line errors with exit status 2
before the store exists, memory-bounded pairwise helpers, a per-cell time limit, the
transductive protocol, and SDO cells at 600 and 1,555 columns."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import tracemalloc

import numpy as np
import pytest

from experiments import adbench


def _write(path, n=120, d=3, n_anomalies=12, seed=0, **overrides):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.zeros(n, dtype=int)
    X[:n_anomalies] += 6.0
    y[:n_anomalies] = 1
    arrays = {"X": X, "y": y, **overrides}
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    _write(folder / "1_toy.npz")
    return folder


def _rows(db):
    con = sqlite3.connect(db)
    rows = con.execute("SELECT method, seed, auc, error, info, n_train FROM results").fetchall()
    con.close()
    return {(m, s): (auc, err, json.loads(info), n) for m, s, auc, err, info, n in rows}


# ------------------------------------------------------------------ item 12: the command line
@pytest.mark.parametrize(
    "case, extra, match",
    [
        ("negative seed", ["--seeds", "-1"], r"--seeds must be integers in \[0, 2\^32 - 1\]"),
        ("no seeds", ["--seeds"], "--seeds needs at least one seed"),
        ("no y", [], r"2_bad\.npz has no array 'y'"),
        ("one anomaly", [], r"2_bad\.npz: 1 anomalies and 99 normal rows"),
        ("1-D X", [], r"2_bad\.npz: X must be 2-D"),
        ("labels 0/1", [], r"2_bad\.npz: y must hold labels 0 \(normal\) and 1"),
        ("NaN in X", [], r"2_bad\.npz: X holds 1 NaN or inf values"),
        ("workers 0", ["--workers", "0"], "--workers must be an integer >= 1, got 0"),
        ("timeout -1", ["--cell-timeout", "-1"], "--cell-timeout must be a finite number"),
    ],
)
def test_bad_input_is_one_line_exit_2_before_the_store(tmp_path, data, capsys, case, extra,
                                                       match):  # fmt: skip
    bad = data / "2_bad.npz"
    if case == "no y":
        _write(bad, y=None)
    elif case == "one anomaly":
        _write(bad, n=100, n_anomalies=1)
    elif case == "1-D X":
        np.savez(bad, X=np.arange(10.0), y=np.r_[np.zeros(8), np.ones(2)])
    elif case == "labels 0/1":
        _write(bad, y=np.r_[np.zeros(100), np.full(20, 2)])
    elif case == "NaN in X":
        X = np.random.default_rng(0).normal(size=(120, 3))
        X[5, 1] = np.nan
        _write(bad, X=X)
    db = tmp_path / "r.sqlite"
    argv = ["run", "--data-dir", str(data), "--db", str(db), "--methods", "HBOS", *extra]
    with pytest.raises(SystemExit, match=match) as info:
        adbench.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not db.exists()


def test_a_bad_option_exits_2_through_the_experiments_command(tmp_path, data):
    import subprocess
    import sys

    db = tmp_path / "r.sqlite"
    out = subprocess.run(
        [sys.executable, "-m", "experiments", "adbench", "run", "--data-dir", str(data),
         "--db", str(db), "--seeds", "-1"],
        capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)),
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().startswith("error: --seeds") and "Traceback" not in out.stderr
    assert not db.exists()


def test_a_subsample_short_of_a_class_is_found_before_the_store(tmp_path, data, monkeypatch):
    """Two anomalies among many rows: the stratified subsample (here 40 of 60 rows) of some
    seed keeps only one; found on the labels, for every seed, before the store."""
    _write(data / "2_rare.npz", n=60, n_anomalies=2)
    monkeypatch.setattr(adbench._data, "MAX_ROWS", 40)
    y = np.r_[np.ones(2, dtype=int), np.zeros(58, dtype=int)]
    bad = [s for s in range(50) if y[adbench._data._subsample(y, s)].sum() < 2]
    assert bad
    db = tmp_path / "r.sqlite"
    with pytest.raises(SystemExit, match=f"subsample of seed {bad[0]} keeps 1 anomalies"):
        adbench.main(["run", "--data-dir", str(data), "--db", str(db), "--methods", "HBOS",
                      "--seeds", "0", str(bad[0])])  # fmt: skip
    assert not db.exists()


def test_a_test_part_with_one_class_is_found_before_the_store(tmp_path, data, monkeypatch):
    """(sklearn's stratified split gives each class of >= 2 rows a test row; the check does
    not rely on it): a split whose test part lacks the anomalies is refused."""
    real = adbench._data.split_indices

    def normals_only(y, seed):
        tr, te = real(y, seed)
        return np.r_[tr, te[y[te] == 1]], te[y[te] == 0]

    monkeypatch.setattr(adbench._data, "split_indices", normals_only)
    db = tmp_path / "r.sqlite"
    with pytest.raises(SystemExit, match=r"1_toy\.npz: the test part of seed 3 holds one"):
        adbench.main(["run", "--data-dir", str(data), "--db", str(db), "--methods", "HBOS",
                      "--seeds", "3"])  # fmt: skip
    assert not db.exists()


def test_load_split_is_the_old_split(tmp_path):
    """The split by indices is the one the harness always made (sklearn on X, y)."""
    from sklearn.model_selection import train_test_split

    p = tmp_path / "1_toy.npz"
    _write(p, n=300)
    with np.load(p) as z:
        X, y = z["X"], z["y"]
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=4)
    lo, hi = Xtr.min(0), Xtr.max(0)
    got = adbench.load_split(p, 4)
    np.testing.assert_allclose(got[0], (Xtr - lo) / (hi - lo), rtol=1e-12)
    np.testing.assert_allclose(got[1], (Xte - lo) / (hi - lo), rtol=1e-12)
    np.testing.assert_array_equal(got[3], yte)


# ------------------------------------------------------------------ item 13: memory
def _median_distance_unblocked(X, seed, n=1000):
    rng = np.random.default_rng(seed)
    S = X[rng.choice(len(X), size=min(n, len(X)), replace=False)]
    d = np.sqrt(((S[:, None, :] - S[None, :, :]) ** 2).sum(-1)[np.triu_indices(len(S), 1)])
    return float(np.median(d[d > 0])) if (d > 0).any() else 1.0


def _nn_spacing_unblocked(X, seed, n=1000):
    rng = np.random.default_rng(seed)
    S = X[rng.choice(len(X), size=min(n, len(X)), replace=False)]
    d2 = ((S[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    d2[d2 <= 0] = np.inf
    best = d2.min(1)
    best = best[np.isfinite(best)]
    return float(np.sqrt(np.median(best))) if len(best) else 1.0


@pytest.mark.parametrize("max_memory", [None, 1, 4096])
def test_pairwise_helpers_equal_the_unblocked_result(max_memory):
    rng = np.random.default_rng(0)
    X = np.round(rng.random((150, 4)), 1)  # quantised: exact duplicates among the rows
    X[:10] = X[10]
    for seed in (0, 1):
        for n in (40, 1000):
            assert adbench.median_distance(X, seed, n, max_memory=max_memory) == pytest.approx(
                _median_distance_unblocked(X, seed, n), rel=1e-12
            )
            assert adbench.nn_spacing(X, seed, n, max_memory=max_memory) == pytest.approx(
                _nn_spacing_unblocked(X, seed, n), rel=1e-12
            )
    A, B = rng.random((37, 5)), rng.random((23, 5))
    blocks = list(adbench.sqdist_blocks(A, B, max_memory=8 * 23 * 5))  # 5 rows a block
    assert [s for s, _ in blocks] == [0, 5, 10, 15, 20, 25, 30, 35]
    full = np.concatenate([b for _, b in blocks])
    np.testing.assert_allclose(full, ((A[:, None] - B[None]) ** 2).sum(-1), rtol=1e-13)
    assert adbench.median_distance(np.ones((5, 2)), 0) == 1.0  # all rows equal
    with pytest.raises(ValueError, match="`max_memory` must be None or a positive integer"):
        adbench.nn_spacing(X, 0, max_memory=0)


def test_pairwise_helpers_stay_under_the_memory_bound():
    """1,000 sampled rows against 1,500 rows of 80 columns: the old helpers built a
    1000 x 1500 x 80 float64 array (960 MB); blocked, the traced peak stays near the bound."""
    X = np.random.default_rng(0).random((1500, 80))
    bound = 2**22  # 4 MiB of distance block
    sample = 1000 * 80 * 8  # the sampled rows themselves
    for helper in (adbench.nn_spacing, adbench.median_distance):
        tracemalloc.start()
        try:
            helper(X, 0, max_memory=bound)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # median_distance also keeps the n (n - 1) / 2 distances (4 MB), stated in its docstring
        kept = 8 * 1000 * 999 // 2 * 2 if helper is adbench.median_distance else 0
        assert peak < 3 * bound + 2 * sample + kept, (helper.__name__, peak)


# ------------------------------------------------------------------ item 13: time limit
def _patched_methods(monkeypatch):
    monkeypatch.setattr(adbench._methods, "ALL_METHODS", dict(adbench.ALL_METHODS))
    monkeypatch.setattr(adbench._run, "ALL_METHODS", adbench._methods.ALL_METHODS)
    monkeypatch.setattr(adbench._methods, "DIAGNOSTIC_METHODS", dict(adbench.DIAGNOSTIC_METHODS))


def test_a_cell_past_the_limit_is_a_timeout_failure_and_the_run_goes_on(tmp_path, data,
                                                                        monkeypatch):  # fmt: skip
    _patched_methods(monkeypatch)
    pid_file = tmp_path / "pid"

    def stuck(Xtr, Xte, seed, device=None):  # defined here: travels by value to the child
        import time

        pid_file.write_text(str(os.getpid()))
        time.sleep(120)

    def killed(Xtr, Xte, seed, device=None):  # the kernel's OOM killer, as it acts
        os.kill(os.getpid(), signal.SIGKILL)

    def first(Xtr, Xte, seed, device=None):  # cheap: the limit is short
        return Xte[:, 0], {}

    for name, fn in (("stuck", stuck), ("killed", killed), ("first", first)):
        adbench.register_method(name, adbench.Method(fn), diagnostic=True)
    adbench.register_method("first2", adbench.Method(first), diagnostic=True)
    db = tmp_path / "t.sqlite"
    argv = ["run", "--data-dir", str(data), "--db", str(db), "--seeds", "0", "--methods",
            "stuck", "first", "killed", "first2", "--cell-timeout", "5"]  # fmt: skip
    assert adbench.main(argv) == 0
    rows = _rows(db)
    auc, err, info, n_train = rows[("stuck", 0)]
    assert auc is None and err.startswith("timeout: the cell ran past --cell-timeout 5 s")
    assert info == {"failure": "timeout", "cell_timeout_s": 5.0} and n_train == 84
    auc, err, info, _ = rows[("killed", 0)]
    assert info["failure"] == "died" and "signal 9" in err and "out of memory" in err
    for m in ("first", "first2"):  # the cells after each failure ran
        assert rows[(m, 0)][1] is None and rows[(m, 0)][0] > 0.9
    stuck_pid = int(pid_file.read_text())
    assert not os.path.exists(f"/proc/{stuck_pid}")  # killed and reaped: no orphan
    assert adbench._run._RUNNER.pid != stuck_pid


def test_no_limit_computes_in_this_process(tmp_path, data, monkeypatch):
    _patched_methods(monkeypatch)
    seen = []

    def here(Xtr, Xte, seed, device=None):
        seen.append(os.getpid())
        return Xte[:, 0], {}

    adbench.register_method("here", adbench.Method(here), diagnostic=True)
    db = tmp_path / "n.sqlite"
    adbench.main(["run", "--data-dir", str(data), "--db", str(db), "--seeds", "0",
                  "--methods", "here", "--cell-timeout", "0"])  # fmt: skip
    assert seen == [os.getpid()] and _rows(db)[("here", 0)][1] is None


# ------------------------------------------------------------------ item 13: the protocols
def test_protocol_names_the_density_methods_and_leaves_the_others():
    assert adbench.expand_methods(["SOSREP-SDO", "HBOS", "KDE-SDO@1"], "transductive") == [
        "SOSREP-SDO/T",
        "HBOS",
        "KDE-SDO@1",
    ]
    main = adbench.expand_methods(None, "transductive")
    assert {m for m in main if m.endswith("/T")} == set(adbench.TRANSDUCTIVE_METHODS)
    assert adbench.expand_methods(["SOSREP-SDO"]) == ["SOSREP-SDO"]


def test_transductive_run_selects_on_the_test_features(tmp_path, data):
    import density as dn

    db = tmp_path / "p.sqlite"
    adbench.main(["run", "--data-dir", str(data), "--db", str(db), "--seeds", "0",
                  "--methods", "KDE-Gauss", "--protocol", "transductive",
                  "--cell-timeout", "0"])  # fmt: skip
    auc, err, info, _ = _rows(db)[("KDE-Gauss/T", 0)]
    assert err is None and 0 <= auc <= 1 and info["protocol"] == "transductive"
    Xtr, Xte, _, _ = adbench.load_split(data / "1_toy.npz", 0)
    r = adbench.length_floor(Xtr, 0)
    grid = r * np.asarray(adbench.TRANSDUCTIVE_FACTORS)
    sel = dn.select_bandwidth(dn.KDE(dn.GaussianKernel()), Xtr, grid, X_select=Xte,
                              rule="first_stable")  # fmt: skip
    assert info["bandwidth"] == pytest.approx(sel.bandwidth_, rel=1e-12)
    assert info["length_factor"] in adbench.TRANSDUCTIVE_FACTORS
    np.testing.assert_allclose(
        [math.nan if v is None else v for v in info["fisher"]], sel.bandwidth_scores_,
        rtol=1e-12,
    )  # fmt: skip


def test_the_benchmark_uses_the_packages_protocols(tmp_path, data):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_sosrep_protocols.py"
    spec = importlib.util.spec_from_file_location("bench_sosrep_protocols", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    Xtr, Xte, _, yte = adbench.load_split(data / "1_toy.npz", 0)
    auc, info = bench.density_method("SOSREP-Lap/T", Xtr, Xte, yte, 0)
    score, ref = adbench.ALL_METHODS["SOSREP-Lap/T"](Xtr, Xte, 0)
    assert info["factor"] == ref["length_factor"] and info["fallback"] == ref["fallback"]
    from sklearn.metrics import roc_auc_score

    assert auc == pytest.approx(roc_auc_score(yte, score), rel=1e-12)


# ------------------------------------------------------------------ item 10 in the harness
@pytest.mark.parametrize("d", [600, 1555])
def test_sdo_cells_at_large_d(tmp_path, d):
    """The harness's SDO grid in log space: a = l^(2m) is inf at these d (the old "`grid`
    must hold positive finite bandwidths"); the cell now gives finite scores."""
    rng = np.random.default_rng(0)
    Xtr, Xte = rng.random((50, d)), rng.random((20, d))
    Xte[:4] += 0.5
    r = adbench.length_floor(Xtr, 0)
    with np.errstate(over="ignore"):
        assert np.isinf(np.float64(r) ** (2 * (d // 2 + 1)))
    score, info = adbench.ALL_METHODS["KDE-SDO@1"](Xtr, Xte, 0)
    assert np.isfinite(score).all() and info["bandwidth"] is None
    assert info["log_bandwidth"] == pytest.approx(2 * (d // 2 + 1) * math.log(r), rel=1e-12)
