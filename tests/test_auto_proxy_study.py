"""The proxy study's join of test ROC-AUCs with the benchmark store's selection tables
(benchmarks/auto_proxy_study.py), on a hand-made store."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(_DIR))
_spec = importlib.util.spec_from_file_location("auto_proxy_study", _DIR / "auto_proxy_study.py")
aps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(aps)
bd = aps.bd


def _store(tmp_path):
    store = tmp_path / "s.sqlite"
    con = bd.open_store(store)
    selection = [
        {"kernel": "gak", "scorer": "knn", "params": {}, "score": 0.9, "z": 1.0, "chosen": False},
        {"kernel": "gak", "scorer": "knn", "params": {"n_neighbors": 5, "aggregate": "mean"},
         "score": 0.8, "z": 0.5, "chosen": False},
        {"kernel": "minirocket", "scorer": "knn", "params": {}, "score": 0.7, "z": 0.0,
         "chosen": False},
        {"kernel": "baseline", "scorer": "minirocket+knn + gak+knn", "params": None,
         "score": 0.75, "z": 0.0, "chosen": True},
    ]  # fmt: skip
    for method, auc, params in (
        ("ours_auto", 0.81, {"selection": selection}),
        ("ours_default", 0.8, {}),
    ):
        bd.write_row(
            con,
            {"dataset": "D", "class": "a", "method": method, "seed": 0, "n_classes": 1,
             "auc": auc, "params": json.dumps(params)},
        )  # fmt: skip
    con.close()
    return store


def test_report_joins_proxies_with_test_aucs(tmp_path):
    store = _store(tmp_path)
    sel = aps.selection_proxies(store, "D", "a")
    assert sel["chosen"] == "baseline" and sel["auto_auc"] == 0.81 and sel["default_auc"] == 0.8
    assert sel["proxies"]["gak+knn(k=5)"] == (0.8, 0.5)
    out = tmp_path / "study.jsonl"
    true = {"gak+knn": 0.95, "gak+knn(k=5)": 0.9, "minirocket+knn": 0.85}  # same order
    out.write_text(json.dumps({"dataset": "D", "class": "a", "test_auc": true}) + "\n")
    (rec,) = aps.joined(out, store)
    assert rec["spearman"] == pytest.approx(1.0)
    assert rec["best_proxy_auc"] == 0.95 and rec["oracle_auc"] == 0.95
    assert rec["default_members"] == [0.85, 0.95]
    text = aps.report(out, store)
    assert "problems: 1 on 1 data sets" in text and "baseline: 1" in text
    assert "default 0.800, auto 0.810" in text
    assert aps.selection_proxies(store, "D", "zz") is None


def test_members_by_data_set_ranks_the_default_against_its_members(tmp_path):
    store = _store(tmp_path)  # default 0.8 on the one problem; rockad absent -> chance
    out = tmp_path / "study.jsonl"
    true = {"gak+knn": 0.95, "minirocket+knn": 0.7}  # no 5-NN member: GAK stands in
    out.write_text(json.dumps({"dataset": "D", "class": "a", "test_auc": true}) + "\n")
    text = aps.members_by_data_set(out, store)
    assert "by data set (1): default 0.800 (rank 3.00), minirocket+knn 0.700 (rank 4.00)" in text
    assert "minirocket+knn(k=5) 0.950 (rank 1.50), gak+knn 0.950 (rank 1.50)" in text
    assert "rockad 0.500 (rank 5.00)" in text
    assert text.endswith("W/T/L: 1/0/0")
