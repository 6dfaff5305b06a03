"""The ADBench harness (experiments.adbench) on small synthetic .npz files: split, run/resume,
tables and the bandwidth-sensitivity summary."""

import sqlite3

import numpy as np
import pytest

from experiments import adbench
from experiments.adbench._run import ADBenchResult


def _write_npz(path, n=300, d=3, frac=0.1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.zeros(n, dtype=int)
    k = int(frac * n)
    X[:k] += 6.0  # anomalies far from the bulk
    y[:k] = 1
    np.savez(path, X=X, y=y)


def test_load_split_is_stratified_and_scaled_on_train(tmp_path):
    p = tmp_path / "1_toy.npz"
    _write_npz(p)
    Xtr, Xte, ytr, yte = adbench.load_split(p, seed=0)
    assert len(Xtr) == 210 and len(Xte) == 90
    assert ytr.sum() == 21 and yte.sum() == 9
    np.testing.assert_allclose(Xtr.min(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Xtr.max(0), 1.0, atol=1e-12)


def test_load_split_subsamples_to_max_rows(tmp_path, monkeypatch):
    p = tmp_path / "1_toy.npz"
    _write_npz(p, n=400)
    monkeypatch.setattr(adbench._data, "MAX_ROWS", 100)
    Xtr, Xte, ytr, yte = adbench.load_split(p, seed=1)
    assert len(Xtr) + len(Xte) == 100
    assert ytr.sum() + yte.sum() == 10  # stratified: 10 % anomalies kept


def _rows(db):
    con = sqlite3.connect(db)
    return {
        (d, m, s): (auc, fin, err)
        for d, m, s, auc, fin, err in con.execute(
            "SELECT dataset, method, seed, auc, finished, error FROM results"
        )
    }


def test_run_records_every_key_and_resume_recomputes_nothing(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _write_npz(data / "1_toy.npz")
    _write_npz(data / "2_other.npz", seed=1)
    db = tmp_path / "r.sqlite"
    argv = ["run", "--data-dir", str(data), "--db", str(db), "--seeds", "0", "1"]
    argv += ["--methods", "HBOS", "KDE-Gauss", "KDE-SDO@2"]
    adbench.main(argv)
    first = _rows(db)
    assert len(first) == 2 * 2 * 3
    for auc, _, err in first.values():
        assert err is None and auc > 0.9  # anomalies 6 standard deviations away
    adbench.main(argv)
    assert _rows(db) == first  # same finish times: nothing recomputed


def test_fixed_factor_method_fits_at_that_length_scale(tmp_path):
    p = tmp_path / "1_toy.npz"
    _write_npz(p)
    Xtr, Xte, _, _ = adbench.load_split(p, seed=0)
    _, info = adbench.ALL_METHODS["KDE-SDO@2"](Xtr, Xte, 0)
    r = max(adbench.nn_spacing(Xtr, 0), adbench.median_distance(Xtr, 0) / 8)
    m = Xtr.shape[1] // 2 + 1
    assert info["length_factor"] == 2.0
    assert info["bandwidth"] == pytest.approx((2.0 * r) ** (2 * m), rel=1e-12)
    _, wide = adbench.ALL_METHODS["SOSREP-SDO-wide"](Xtr, Xte, 0)
    assert len(wide["fisher"]) == len(adbench.WIDE_FACTORS)


def _fake_db(path, table):
    stamp = {"revision": "x", "device": "cpu", "created": 0.0}
    with adbench.ADBenchStore(path) as store:
        for (ds, m), aucs in table.items():
            rows = [ADBenchResult(ds, m, s, auc, 1.0, 10, 5, 2, None, {}, "cpu")
                    for s, auc in enumerate(aucs)]  # fmt: skip
            store.add_results(rows, stamp)


def test_table_mean_auc_and_rank(tmp_path):
    db = tmp_path / "t.sqlite"
    _fake_db(
        db,
        {
            ("1_a", "IForest"): [0.9, 0.7],  # mean 0.8
            ("1_a", "HBOS"): [0.6, 0.6],
            ("2_b", "IForest"): [0.5, 0.5],
            ("2_b", "HBOS"): [0.7, 0.9],  # mean 0.8
            ("2_b", "KDE-SDO@2"): [0.99, 0.99],  # diagnostic: not in the default table
            ("1_a", "COF"): [0.1, 0.1],  # quadratic, small data sets only: named to be shown
        },
    )
    text, mean_auc, mean_rank = adbench.table(db)
    assert set(mean_auc) == {"IForest", "HBOS"}
    assert mean_auc["IForest"] == pytest.approx(0.65)
    assert mean_auc["HBOS"] == pytest.approx(0.7)
    assert mean_rank == {"IForest": 1.5, "HBOS": 1.5}
    assert "KDE-SDO@2" not in text and "COF" not in text
    assert "| 2_b (2s) |" in text  # not dropped for lacking COF
    _, with_cof, _ = adbench.table(db, methods=["IForest", "COF"])
    assert set(with_cof) == {"IForest", "COF"} and with_cof["IForest"] == pytest.approx(0.8)
    _, only_seed0, _ = adbench.table(db, seeds=[0])
    assert only_seed0["IForest"] == pytest.approx(0.7)


def test_sensitivity_table_oracle_and_place(tmp_path):
    db = tmp_path / "s.sqlite"
    table = {}
    for ds, base in (("1_a", 0.6), ("2_b", 0.7)):
        for i, f in enumerate(adbench.SENSITIVITY_FACTORS):
            # SOSREP peaks at factor index 1 on 1_a and index 4 on 2_b; KDE is flat
            bump = 0.2 if (ds, i) in (("1_a", 1), ("2_b", 4)) else 0.0
            table[(ds, f"SOSREP-SDO@{adbench._factor_tag(f)}")] = [base + bump]
            table[(ds, f"KDE-SDO@{adbench._factor_tag(f)}")] = [base + 0.05]
        table[(ds, "SOSREP-SDO-wide")] = [0.5]
        table[(ds, "SOSREP-SDO")] = [base]
        table[(ds, "KDE-SDO")] = [base + 0.05]
        table[(ds, "IForest")] = [0.82]
    _fake_db(db, table)
    text = adbench.sensitivity_table(db)
    lines = {ln.split(" | ")[0].lstrip("| "): ln for ln in text.splitlines() if ln.startswith("|")}
    oracle = lines["best fixed factor per data set, chosen with test labels"]
    # oracle SOSREP = mean(0.8, 0.9) = 0.85 beats IForest's 0.82: first of 3 methods
    assert "| 0.850 | 1 of 3 |" in oracle
    assert oracle.endswith("| 2 of 2 |")  # beats the flat KDE on both
    assert "| 0.650 | 3 of 3 |" in lines["fixed l = 1 r"]  # below IForest and KDE-SDO
    assert "| 0.500 |" in lines["Fisher divergence, grid r x 2^-4..2^5"]


def test_method_groups_and_unknown_method(tmp_path):
    assert adbench.expand_methods(None) == list(adbench.METHODS)
    groups = adbench.expand_methods(["sensitivity", "IForest", "IForest"])
    assert groups == [*adbench.DIAGNOSTIC_METHODS, "IForest"]
    assert "SOSREP-SDO-wide" not in adbench.METHODS  # diagnostics stay out of the default run
    data = tmp_path / "data"
    data.mkdir()
    _write_npz(data / "1_toy.npz")
    with pytest.raises(SystemExit, match="unknown method 'Nope'"):
        adbench.main(
            [
                "run",
                "--data-dir",
                str(data),
                "--db",
                str(tmp_path / "x.sqlite"),
                "--methods",
                "Nope",
            ]
        )


def test_clean_variant_trains_on_the_normal_rows_only(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _write_npz(data / "1_toy.npz")
    db = tmp_path / "c.sqlite"
    adbench.main(["run", "--data-dir", str(data), "--db", str(db), "--seeds", "0",
                  "--methods", "KDE-SDO@1", "KDE-SDO@1-clean"])  # fmt: skip
    con = sqlite3.connect(db)
    n_train = dict(con.execute("SELECT method, n_train FROM results"))
    assert n_train == {"KDE-SDO@1": 210, "KDE-SDO@1-clean": 189}  # 21 training anomalies out
