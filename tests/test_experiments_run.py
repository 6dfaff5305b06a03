"""The benchmark end to end on BasicMotions (shipped with sktime): every kernel and scorer,
the CV cell against a brute-force loop with scikit-learn's metrics, CV selection, the
report and the CLI."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
import torch
from experiment_helpers import (
    SMALL,
    _test_table,
)
from sklearn.metrics import average_precision_score, roc_auc_score

from experiments import load_uea
from experiments._grids import PRESETS, build_kernel
from experiments._protocol import cv_splits, load_dataset, run_cv_cell, select
from experiments._runner import RunOptions, run_benchmark
from experiments._store import ResultStore


def test_every_kernel_and_scorer_end_to_end(tmp_path):
    import tskernels
    from experiments._report import summary, write_report

    store = tmp_path / "all.sqlite"
    s = run_benchmark(
        RunOptions(
            **dict(SMALL, time_channel=[False]),
            scorers=["conformance", "mahalanobis", "sse", "sosrep", "baselines"],
            levels=[1, 2],
            store=str(store),
        )  # fmt: skip
    )
    assert s["complete"]
    default = {name for name, grid in PRESETS["quick"].grids.items() if grid.default}
    registered = set(tskernels.kernel_registry()) & default
    assert set(s["kernels"]) == registered
    assert {"conformance", "mahalanobis", "sse", "sosrep", "knn"} <= set(s["scorers"])
    rows = _test_table(store)
    assert len(rows) == 4 * len(s["kernels"]) * len(s["scorers"])  # 4 classes
    ok = [r for r in rows if r[-1] is None]
    # only SOSREP may fail (it needs a non-negative Gram; the linear kernel's is not)
    assert all(r[3] == "sosrep" for r in rows if r[-1] is not None)
    assert all(0.0 <= r[9] <= 1.0 and 0.0 < r[10] <= 1.0 for r in ok)
    with ResultStore(store) as st:
        res = summary(st)
    assert res[("BasicMotions", "flat_rbf", "conformance")]["n_classes"] == 4
    rep = write_report(store, tmp_path / "report", reference_csv=None)
    for name in ["report.md", "tables.tex", "results.csv", "conformance_vs_mahalanobis.png",
                 "selected_hyperparameters.png"]:  # fmt: skip
        assert (tmp_path / "report" / name).stat().st_size > 0, name
    assert str(tmp_path / "report" / "report.md") in rep["files"]
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| mean rank |" in text and "ROC-AUC, conformance" in text
    assert "No critical-difference diagram for conformance, mahalanobis" in text


def test_cv_cell_against_brute_force_loop():
    from novelty import VarianceNorm
    from tskernels.transforms import Preprocessor

    data = load_dataset("BasicMotions")
    config = {"folds": 3, "repeats": 2, "seed": 5, "share": "fold", "alphas": [1e-8, 1e-2],
              "max_rank": 6, "sse_lams": [1e-3], "threshold": 1e-10, "device": None,
              "threads": 1, "preprocessing": {"max_length": 100, "clip": 5.0, "eps": 1e-4,
                                              "basepoint": True}}  # fmt: skip
    cell = {"dataset": "BasicMotions", "cls": "walking", "kernel": "integral_rbf",
            "point": {"sigma": 1.0}, "levels": None, "time_channel": True,
            "scorers": ["conformance", "mahalanobis"]}  # fmt: skip
    rows = {r["scorer"]: r for r in run_cv_cell(cell, data, config)}
    X, y = load_uea("BasicMotions", "train")
    roc = {s: np.zeros((2, 6)) for s in rows}
    pr = {s: np.zeros((2, 6)) for s in rows}
    splits = cv_splits(y, 3, 2, 5)
    for tr, va in splits:
        corpus = tr[y[tr] == "walking"]
        pre = Preprocessor(time_channel=True).fit(X[corpus])
        C, V = pre.transform(X[corpus]), pre.transform(X[va])
        kernel = build_kernel("integral_rbf", {"sigma": 1.0}, C.shape[2], C.shape[1])
        vn = VarianceNorm(max_rank=6).fit(kernel.gram(C, normalize=True))
        Kvc = kernel.gram(V, C, normalize=True)
        for s in rows:
            for i, a in enumerate([1e-8, 1e-2]):
                for r in range(6):
                    rank = min(r + 1, vn.n_components_)
                    method = vn.conformance if s == "conformance" else vn.mahalanobis
                    score = 1.0 / (method(Kvc, a, rank=rank).numpy() + 1e-3)
                    roc[s][i, r] += roc_auc_score(y[va] == "walking", score) / len(splits)
                    pr[s][i, r] += average_precision_score(y[va] == "walking", score) / len(splits)
    for s, row in rows.items():
        assert row["error"] is None and row["n_folds"] == 6
        np.testing.assert_allclose(row["roc"], roc[s], atol=1e-9)
        np.testing.assert_allclose(row["pr"], pr[s], atol=1e-9)


def test_share_class_slices_one_gram_per_class():
    data = load_dataset("BasicMotions")
    config = {"folds": 2, "repeats": 1, "seed": 0, "share": "class", "alphas": [1e-5],
              "max_rank": 4, "sse_lams": [1e-3], "threshold": 1e-10, "device": None,
              "threads": 1, "preprocessing": {"max_length": 100, "clip": 5.0, "eps": 1e-4,
                                              "basepoint": True}}  # fmt: skip
    cell = {"dataset": "BasicMotions", "cls": "running", "kernel": "flat_rbf",
            "point": {"sigma": 1.0}, "levels": None, "time_channel": False,
            "scorers": ["mahalanobis"]}  # fmt: skip
    (row,) = run_cv_cell(cell, data, config)
    # brute force: pre-processing on the whole class, Grams per fold from scratch
    from novelty import VarianceNorm
    from tskernels.transforms import Preprocessor

    X, y = data.X_train, data.y_train
    pre = Preprocessor().fit(X[y == "running"])
    Z = pre.transform(X)
    kernel = build_kernel("flat_rbf", {"sigma": 1.0}, Z.shape[2], Z.shape[1])
    roc = np.zeros((1, 4))
    for tr, va in cv_splits(y, 2, 1, 0):
        corpus = tr[y[tr] == "running"]
        vn = VarianceNorm(max_rank=4).fit(kernel.gram(Z[corpus], normalize=True))
        d = vn.mahalanobis(kernel.gram(Z[va], Z[corpus], normalize=True), [1e-5], rank="all")
        d = torch.cat([d, d[:, -1:].expand(-1, 4 - d.shape[1], -1)], dim=1)
        for r in range(4):
            roc[0, r] += roc_auc_score(y[va] == "running", -d[0, r].numpy()) / 2
    np.testing.assert_allclose(row["roc"], roc, atol=1e-9)


def test_select_first_optimum_and_errors():
    a = {"axis": [1.0, 2.0], "roc": np.array([[0.5, 0.9], [0.9, 0.1]]),
         "pr": np.array([[0.5, 0.5], [0.5, 0.1]]), "error": None}  # fmt: skip
    b = {"axis": [1.0, 2.0], "roc": np.full((2, 2), 0.9), "pr": np.full((2, 2), 0.5),
         "error": None}  # fmt: skip
    bad = {"axis": None, "roc": None, "pr": None, "error": "FloatingPointError: x"}
    sel = select({("p1", False): a, ("p2", True): b, ("p3", False): bad},
                 [("p3", False), ("p1", False), ("p2", True)])  # fmt: skip
    assert sel["params"] == "p1" and sel["alpha"] == 1.0 and sel["rank"] == 2
    assert sel["cv_objective"] == pytest.approx(1.4)
    assert select({("p1", False): a}, [("p1", False), ("p2", True)]) is None
    assert "every candidate failed" in select({("p3", False): bad}, [("p3", False)])["error"]


def test_cli_list_run_and_report(tmp_path, capsys):
    from experiments.__main__ import main

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "flat_rbf" in out and "conformance" in out and "BasicMotions" in out
    store = tmp_path / "cli.sqlite"
    argv = ["run", "--dataset", "BasicMotions", "--kernels", "flat_linear", "--scorers",
            "mahalanobis", "--folds", "2", "--max-rank", "5", "--time-channel", "no",
            "--grid", "flat_linear.nothing=1", "--store", str(store), "--no-progress"]  # fmt: skip
    assert main(argv) == 2  # one line on stderr, no traceback, no store created
    err = capsys.readouterr().err
    assert err.startswith("error: --grid flat_linear.nothing") and err.count("\n") == 1
    assert not store.exists()
    argv = argv[:-5] + argv[-3:]
    assert main([*argv, "--report", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    assert "BasicMotions: test ROC-AUC / PR-AUC" in out and "flat_linear" in out
    assert (tmp_path / "rep" / "tables.tex").read_text().count(r"\begin{tabular}") == 2
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "r2"),
                 "--no-plots"]) == 0  # fmt: skip
    settings = json.loads(
        sqlite3.connect(str(store)).execute("SELECT json FROM settings").fetchone()[0]
    )
    assert settings["folds"] == 2 and settings["max_rank"] == 5
