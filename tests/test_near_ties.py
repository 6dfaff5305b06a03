"""benchmarks/near_ties.py: its best candidate is the run's own selection (same test ROC-AUC
as the stored test row), the CV gaps grow with k, and ties keep the run's candidate order."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from experiment_helpers import _opts, _test_table

from experiments._runner import run_benchmark

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "near_ties.py"
_spec = importlib.util.spec_from_file_location("near_ties", _PATH)
nt = importlib.util.module_from_spec(_spec)
sys.modules["near_ties"] = nt
_spec.loader.exec_module(nt)


def test_ties_keep_candidate_order():
    axis = [1e-8]
    flat = {
        "axis": axis,
        "roc": np.array([[0.5, 0.9]]),
        "pr": np.array([[0.5, 0.9]]),
        "error": None,
    }
    low = {"axis": axis, "roc": np.array([[0.5, 0.6]]), "pr": np.array([[0.5, 0.6]]), "error": None}
    bad = {"axis": None, "roc": None, "pr": None, "error": "ValueError: x"}
    rows = {("b", False): flat, ("a", False): low, ("c", False): flat, ("d", False): bad}
    order = [("a", False), ("c", False), ("b", False), ("d", False), ("e", False)]
    got = nt.candidates_by_objective(rows, order, "ours")
    assert [s["params"] for s in got] == ["c", "b", "a"]  # ties: c before b; failed/missing out


@pytest.mark.parametrize("rank_rule", ["ours", "reference"])
def test_first_candidate_is_the_runs_selection(tmp_path, rank_rule):
    store = tmp_path / "s.sqlite"
    opts = _opts(store, kernels=["flat_rbf"], scorers=["conformance"], rank_rule=rank_rule)
    assert run_benchmark(opts)["complete"]
    res = nt.near_ties(opts, "flat_rbf", "conformance", top=2)["BasicMotions"]
    stored = [r[9] for r in _test_table(store) if r[2] == "flat_rbf" and r[3] == "conformance"]
    assert len(stored) == 4
    assert res[0, 0] == pytest.approx(np.mean(stored), abs=1e-12)
    assert res[0, 1] == 0.0 and (np.diff(res[:, 1]) >= 0).all()
