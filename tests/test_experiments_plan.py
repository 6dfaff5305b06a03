"""The pure plan of a run (issue 13, item 5): cells as frozen dataclasses, done cells skipped,
--normal-class honoured, a fixed order; the command line generated from RunOptions; the
rank rule in the config and the setting; the recorder's provenance."""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import sqlite3

import pytest
from experiment_helpers import _opts

from experiments._cells import CVCell, Done, RunSetup, TestCell, plan
from experiments._grids import KernelGrid
from experiments._options import ConfigError, RunOptions, add_arguments, from_namespace

GRIDS = {
    "a": KernelGrid({"sigma": [1.0, 2.0]}),
    "b": KernelGrid({}, levels=[1, 2]),
}


def _setup(**kw) -> RunSetup:
    base = dict(datasets={"D": ("x", "y"), "E": ("u",)}, kernels=("a", "b"),
                scorers=("s1", "s2"), grids=GRIDS, time_channels=(False, True))  # fmt: skip
    base.update(kw)
    return RunSetup(**base)


def _key(c):
    return (c.kind, c.dataset, c.cls, c.kernel, c["point"] if c.kind == "cv" else None,
            c.time_channel if c.kind == "cv" else None, c.scorers)  # fmt: skip


def test_plan_lists_every_cell_in_a_fixed_order():
    cells = plan(_setup(), Done())
    # per (data set, kernel, class): 2 points x 2 tc CV cells for a, 1 x 2 for b, one test
    assert len(cells) == 3 * (4 + 1) + 3 * (2 + 1)
    assert [_key(c) for c in cells] == [_key(c) for c in plan(_setup(), Done())]
    first = cells[:5]
    assert [c.kind for c in first] == ["cv"] * 4 + ["test"]
    assert [(c.dataset, c.cls, c.kernel) for c in first] == [("D", "x", "a")] * 5
    assert [(c["point"], c.time_channel) for c in first[:4]] == [
        ({"sigma": 1.0}, False), ({"sigma": 1.0}, True),
        ({"sigma": 2.0}, False), ({"sigma": 2.0}, True),
    ]  # fmt: skip
    test = first[4]
    assert isinstance(test, TestCell) and test.selections is None
    assert len(test.candidates) == 4 and test.candidates[0] == ('{"sigma": 1.0}', False)
    b = next(c for c in cells if c.kernel == "b" and c.kind == "cv")
    assert b["levels"] == [1, 2] and b["point"] == {}
    assert [c.dataset for c in cells[-3:]] == ["E"] * 3


def test_cells_are_frozen_pickle_and_read_as_mappings():
    cell = plan(_setup(), Done())[0]
    assert isinstance(cell, CVCell)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.cls = "y"
    assert pickle.loads(pickle.dumps(cell)) == cell
    assert cell["cls"] == "x" and cell["scorers"] == ["s1", "s2"] and cell.group == ("D", "x", "a")
    with pytest.raises(KeyError):
        cell["nope"]


def test_done_cells_are_skipped():
    setup = _setup(datasets={"D": ("x",)}, kernels=("a",))
    cells = plan(setup, Done())
    test = cells[-1]
    cv_done = {("D", "x", "a", '{"sigma": 1.0}', False, "s1"),
               ("D", "x", "a", '{"sigma": 1.0}', False, "s2"),
               ("D", "x", "a", '{"sigma": 2.0}', True, "s1")}  # fmt: skip
    partial = plan(setup, Done(cv=frozenset(cv_done)))
    cv = [c for c in partial if c.kind == "cv"]
    assert len(cv) == 3  # the first cell is complete; the last misses s2 only
    assert cv[-1]["point"] == {"sigma": 2.0} and cv[-1].time_channel and cv[-1].scorers == ("s2",)
    # a test row of one scorer: the test cell plans the other one (its CV cells, missing
    # every row, still compute both)
    half = plan(setup, Done(test=frozenset({("D", "x", "a", "s1", test.grid)})))
    assert len(half) == 5 and half[-1].scorers == ("s2",)
    # every test row stored: nothing to do, even with CV rows missing
    done = frozenset({("D", "x", "a", s, test.grid) for s in ("s1", "s2")})
    assert plan(setup, Done(test=done)) == []
    # a test row of another grid does not count
    assert len(plan(setup, Done(test=frozenset({("D", "x", "a", "s1", "other")})))) == 5


def test_normal_classes_and_skipped_pairs_are_honoured():
    cells = plan(_setup(normal_classes=("y",)), Done())
    assert {(c.dataset, c.cls) for c in cells} == {("D", "y")}
    cells = plan(_setup(skip=frozenset({("D", "b")})), Done())
    assert ("D", "b") not in {(c.dataset, c.kernel) for c in cells}
    assert ("E", "b") in {(c.dataset, c.kernel) for c in cells}


def _parse(argv):
    p = argparse.ArgumentParser()
    add_arguments(p, RunOptions)
    return from_namespace(RunOptions, p.parse_args(argv))


def test_command_line_is_generated_from_run_options():
    assert _parse([]) == dataclasses.replace(RunOptions(), verbose=True)
    opts = _parse(["--dataset", "A", "B", "--rank-rule", "reference", "--no-progress",
                   "--grid", "flat_rbf.sigma=1,2", "--time-channel", "both", "--retry-failed",
                   "--alphas", "1e-8,1e-2", "--folds", "3"])  # fmt: skip
    assert opts.datasets == ["A", "B"] and opts.rank_rule == "reference"
    assert opts.progress is False and opts.retry_failed is True and opts.folds == 3
    assert opts.grid == {"flat_rbf": {"sigma": [1, 2]}} and opts.time_channel == [False, True]
    assert opts.alphas == [1e-8, 1e-2]
    with pytest.raises(ConfigError, match="flat_rbf.sigma is given twice"):
        _parse(["--grid", "flat_rbf.sigma=1", "--grid", "flat_rbf.sigma=2"])
    # every field but `verbose` has a flag
    p = argparse.ArgumentParser()
    add_arguments(p, RunOptions)
    dests = {a.dest for a in p._actions} - {"help"}
    assert dests == {f.name for f in dataclasses.fields(RunOptions)} - {"verbose"}


def test_rank_rule_reaches_the_config_and_separates_settings(tmp_path, monkeypatch):
    import experiments._runner as runner

    seen = []
    real = runner.run_cell

    def entry(cell, data, config):
        seen.append(config["rank_rule"])
        return real(cell, data, config)

    monkeypatch.setattr(runner, "run_cell", entry)
    store = tmp_path / "s.sqlite"
    kw = dict(kernels=["flat_linear"], scorers=["mahalanobis"], time_channel=[False],
              normal_classes=["walking"])  # fmt: skip
    ours = runner.run_benchmark(_opts(store, **kw))
    ref = runner.run_benchmark(_opts(store, rank_rule="reference", **kw))
    assert ours["setting"] != ref["setting"] and ref["cells_computed"] == ours["cells_computed"]
    assert seen == ["ours"] * ours["cells_total"] + ["reference"] * ref["cells_total"]
    con = sqlite3.connect(store)
    settings = dict(con.execute("SELECT setting, json FROM settings"))
    runs = con.execute("SELECT revision, device, versions FROM runs").fetchall()
    con.close()
    assert "rank_rule" not in json.loads(settings[ours["setting"]])  # earlier settings kept
    assert json.loads(settings[ref["setting"]])["rank_rule"] == "reference"
    for revision, device, versions in runs:
        assert revision and device.startswith("cpu (") and "numpy" in json.loads(versions)
    with pytest.raises(ConfigError, match="--rank-rule must be ours or reference"):
        runner.run_benchmark(_opts(store, rank_rule="nope", **kw))
