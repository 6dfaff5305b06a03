"""``python -m experiments run`` on the user's own data tunes (issue 22, item 6): the ``own``
preset (real grids) is the default for data given by path and is named in the output; the
detector's MiniRocket kernels (``rocket_linear``, ``rocket_rbf``) run in the benchmark,
fitted on each fold's normal training series only; a selection at the edge of its grid and a
kernel below chance are reported. Every run is tiny (one kernel, one or two scorers, 2 folds,
no time channel)."""

from __future__ import annotations

import csv
import json
import math
import sqlite3

import numpy as np
import pytest
from experiment_helpers import run_cli

import tskernels as tk
from experiments._grids import PRESETS, build_kernel, kernel_grid_points
from experiments._options import RunOptions
from experiments._protocol import cv_splits
from experiments._report import _value_text, below_chance_notes, edge_is_preferred, grid_edges
from experiments._runner import resolve_kernels, resolve_preset

E = math.e


def _cli(argv, capsys) -> tuple[int, str, str]:
    return run_cli(argv, capsys)


def _write_csv(path, X, y, split=None) -> None:
    """Long format: id, time, channels..., label (and split when given)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "time", *(f"c{j}" for j in range(X.shape[2])), "label"]
                   + (["split"] if split is not None else []))  # fmt: skip
        for i, (x, lab) in enumerate(zip(X, y)):
            for t, row in enumerate(x):
                w.writerow([f"s{i:03d}", t, *row, lab] + ([split[i]] if split is not None else []))


def _sines(n_per_class=8, T=16, seed=0):
    """Two classes, sines a radian apart, noise 0.1: perfectly separable."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, T)
    X = [np.stack([np.sin(t + k), np.cos(t + k)], 1) + 0.1 * rng.standard_normal((T, 2))
         for k in (0, 1) for _ in range(n_per_class)]  # fmt: skip
    return np.asarray(X), np.repeat(["a", "b"], n_per_class)


def _run(data, store, capsys, *extra):
    argv = ["run", "--dataset", str(data), "--folds", "2", "--max-rank", "3",
            "--time-channel", "no", "--store", str(store), "--no-progress", *extra]  # fmt: skip
    return _cli(argv, capsys)


def _setting_json(store) -> dict:
    with sqlite3.connect(store) as con:
        ((blob,),) = con.execute("SELECT json FROM settings").fetchall()
    return json.loads(blob)


def _test_rows(store) -> list[tuple]:
    with sqlite3.connect(store) as con:
        return con.execute(
            "SELECT cls, kernel, scorer, params, roc_auc, error FROM test ORDER BY cls, scorer"
        ).fetchall()


# ------------------------------------------------------------------------- the preset
def test_own_preset_is_the_default_for_data_given_by_path(tmp_path, capsys):
    X, y = _sines()
    _write_csv(tmp_path / "mine.csv", X, y)
    rc, out, err = _run(tmp_path / "mine.csv", tmp_path / "s.sqlite", capsys,
                        "--kernels", "flat_rbf", "--scorers", "mahalanobis")  # fmt: skip
    assert rc == 0, err
    assert "preset own: the default for own data" in err
    # 2 x 8 series, 70 % for training: a refit has more components than --max-rank 3 keeps
    assert "--max-rank 3 is below the" in err and "--max-rank 6 keeps them all" in err
    assert "preset own)" in out.splitlines()[0]
    setting = _setting_json(tmp_path / "s.sqlite")
    assert setting["preset"] == "own" and (setting["folds"], setting["repeats"]) == (2, 1)
    # the own grid of flat_rbf was run: five bandwidths for each class
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        params = {p for (p,) in con.execute("SELECT DISTINCT params FROM cv")}
    assert len(params) == 5
    # a UEA name keeps the quick preset; --preset always wins
    assert resolve_preset(RunOptions(datasets=["BasicMotions"]))[0] == "quick"
    assert resolve_preset(RunOptions(datasets=None))[0] == "quick"
    assert resolve_preset(RunOptions(datasets=[str(tmp_path / "mine.csv")]))[0] == "own"
    assert resolve_preset(RunOptions(datasets=["sktime:basic_motions"]))[0] == "quick"
    assert resolve_preset(RunOptions(datasets=["x.npz"], preset="quick"))[0] == "quick"


def test_own_preset_has_real_grids_and_every_detector_kernel():
    own, quick = PRESETS["own"], PRESETS["quick"]
    default, _ = resolve_kernels(None, own.grids)
    assert {"rocket_linear", "rocket_rbf", "gak"} <= set(default)
    for name in default:
        n = len(kernel_grid_points(own.grids[name])) * len(own.grids[name].levels or [1])
        # every kernel with a hyper-parameter has a grid to select from (quick: one point)
        assert n >= 2 or name in ("flat_linear", "rocket_linear"), name
        assert len(kernel_grid_points(quick.grids[name])) == 1, name
    # MiniRocket is opt-in in the published presets, whose default zoo is unchanged
    for preset in ("quick", "paper"):
        assert not {"rocket_linear", "rocket_rbf"} & set(
            resolve_kernels(None, PRESETS[preset].grids)[0]
        )
    assert own.datasets == () and (own.folds, own.repeats) == (3, 1)
    # the paper's grids, but for the trimmed costly ones and the MiniRocket kernels
    trimmed = {"reservoir", "trunc_sig_rbf_order1", "rand_sig_tanh", "rocket_linear", "rocket_rbf"}
    paper = PRESETS["paper"].grids
    assert {n for n in own.grids if own.grids[n] != paper[n]} == trimmed
    assert own.grids["trunc_sig_rbf_order1"].axes["sigma"] == paper["flat_rbf"].axes["sigma"]


def test_own_preset_needs_a_dataset(tmp_path, capsys):
    rc, _, err = _cli(["run", "--preset", "own", "--store", str(tmp_path / "s.sqlite"),
                       "--kernels", "flat_linear"], capsys)  # fmt: skip
    assert rc == 2 and "has no data set of its own: give --dataset" in err


def test_own_preset_widens_the_rank_axis_to_the_largest_class(tmp_path, capsys):
    """A selection of every component (a CV plateau up to the last rank) must keep every
    component at the refit on the whole class: the own preset's rank axis reaches N, the
    largest normal training class, when that is above the default 50."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((70, 6, 1))
    y = np.array(["a"] * 60 + ["b"] * 10)
    split = np.array((["train"] * 55 + ["test"] * 5) + (["train"] * 7 + ["test"] * 3))
    _write_csv(tmp_path / "big.csv", X, y, split)
    argv = ["run", "--dataset", str(tmp_path / "big.csv"), "--kernels", "flat_linear",
            "--scorers", "conformance", "--folds", "2", "--time-channel", "no",
            "--normal-class", "a", "--store", str(tmp_path / "s.sqlite"),
            "--no-progress"]  # fmt: skip
    rc, out, err = _cli(argv, capsys)
    assert rc == 0, err
    assert "max rank 55: the class a of big has 55 training series" in err
    assert _setting_json(tmp_path / "s.sqlite")["max_rank"] == 55
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        ((n_rank,),) = con.execute("SELECT DISTINCT n_rank FROM cv").fetchall()
    assert n_rank == 55


# ------------------------------------------------------------------------- MiniRocket
def test_rocket_builders():
    lin = build_kernel("rocket_linear", {"n_kernels": 840}, 3, 20)
    assert isinstance(lin, tk.RandomConvolutionKernel) and lin.static is None
    assert lin.power_transform and lin.n_kernels == 840 and lin.other_lengths == "native"
    rbf = build_kernel("rocket_rbf", {"n_kernels": 840, "sigma": 2.0}, 3, 20)
    assert rbf.static.sigma == pytest.approx(2.0 * math.sqrt(840))
    # F is n_kernels rounded down to a multiple of 84 (at least 84): sigma scales with sqrt(F)
    assert build_kernel("rocket_rbf", {"n_kernels": 100, "sigma": 1.0}, 3, 20).static.sigma == (
        pytest.approx(math.sqrt(84))
    )
    assert build_kernel("rocket_rbf", {"n_kernels": 10, "sigma": 1.0}, 3, 20).static.sigma == (
        pytest.approx(math.sqrt(84))
    )


def _tagged(n_train_per_class=6, n_test_per_class=3):
    """Series whose channel 0 is one spike at step 2 + (series number): the series a fit
    receives are told apart by that spike after any pre-processing (z-score per step, clip,
    basepoint keep its position); channel 1 separates the classes."""
    labels, split = [], []
    for part, m in (("train", n_train_per_class), ("test", n_test_per_class)):
        for c in ("a", "b"):
            labels += [c] * m
            split += [part] * m
    n = len(labels)
    T = n + 4
    rng = np.random.default_rng(1)
    X = np.zeros((n, T, 2))
    X[np.arange(n), 2 + np.arange(n), 0] = 1.0
    t = np.linspace(0, 2 * np.pi, T)
    for i, c in enumerate(labels):
        X[i, :, 1] = np.sin(t + (c == "b")) + 0.1 * rng.standard_normal(T)
    return X, np.asarray(labels), np.asarray(split)


def test_rocket_linear_end_to_end_fits_on_training_rows_only(tmp_path, capsys, monkeypatch):
    X, y, split = _tagged()
    _write_csv(tmp_path / "tagged.csv", X, y, split)
    fitted: list[frozenset] = []
    fit = tk.RandomConvolutionKernel.fit

    def spy(self, Xf, *args, **kw):
        A = np.asarray(Xf)
        if A.shape[1] != X.shape[1] + 1:  # not this data (basepoint: one step more)
            return fit(self, Xf, *args, **kw)
        # the spike's step, less the basepoint and the 2 leading steps: the series number
        fitted.append(frozenset(int(i) for i in A[:, :, 0].argmax(1) - 3))
        return fit(self, Xf, *args, **kw)

    monkeypatch.setattr(tk.RandomConvolutionKernel, "fit", spy)
    rc, out, err = _run(tmp_path / "tagged.csv", tmp_path / "s.sqlite", capsys,
                        "--kernels", "rocket_linear", "--scorers", "conformance",
                        "--grid", "rocket_linear.n_kernels=84")  # fmt: skip
    assert rc == 0, err
    assert "rocket_linear" in out and "preset own" in out
    rows = _test_rows(tmp_path / "s.sqlite")
    assert [r[:3] for r in rows] == [("a", "rocket_linear", "conformance"),
                                     ("b", "rocket_linear", "conformance")]  # fmt: skip
    assert all(r[5] is None and 0.0 <= r[4] <= 1.0 for r in rows)
    # the fits expected: each fold's normal training series (CV), each class's training
    # series (the test cell's refit); never a validation or a test series
    train = np.flatnonzero(split == "train")
    y_train = y[train]
    expected = []
    for c in ("a", "b"):
        for tr, _va in cv_splits(y_train, 2, 1, 0):
            expected.append(frozenset(int(i) for i in train[tr[y_train[tr] == c]]))
        expected.append(frozenset(int(i) for i in train[y_train == c]))
    assert sorted(map(sorted, fitted)) == sorted(map(sorted, expected))
    test_ids = set(np.flatnonzero(split == "test").tolist())
    assert not any(f & test_ids for f in fitted)


def test_share_class_refuses_fitted_kernels(tmp_path, capsys):
    X, y = _sines()
    _write_csv(tmp_path / "mine.csv", X, y)
    rc, _, err = _run(tmp_path / "mine.csv", tmp_path / "s.sqlite", capsys,
                      "--kernels", "rocket_linear", "--share", "class")  # fmt: skip
    assert rc == 2 and "--share class would fit rocket_linear" in err
    assert not (tmp_path / "s.sqlite").exists()


# ------------------------------------------------------------------------- edge of grid
def test_grid_edges_rule():
    sig = {"sigma": [E**-2, E**-1, 1.0, E, E**2]}
    assert grid_edges({"sigma": E**-2}, sig) == [("sigma", E**-2, "smallest")]
    assert grid_edges({"sigma": E**2}, sig) == [("sigma", E**2, "largest")]
    assert grid_edges({"sigma": 1.0}, sig) == []
    assert grid_edges({"sigma": 1.0}, {"sigma": [1.0]}) == []  # one value: no edge
    # the grid's order does not matter, only the values'
    assert grid_edges({"c": 4.0}, {"c": [4.0, 0.25, 1.0]}) == [("c", 4.0, "largest")]
    # a seed has no order; level 1 cannot widen below
    assert grid_edges({"seed": 0}, {"seed": [0, 1, 2]}) == []
    assert grid_edges({"level": 1}, {"level": [1, 2, 3]}) == []
    assert grid_edges({"level": 3}, {"level": [1, 2, 3]}) == [("level", 3, "largest")]
    assert [_value_text(v) for v in (E**-2, E, 1.0, 0.25, 3)] == ["e^-2", "e", "1", "0.25", "3"]


def test_an_edge_that_only_won_a_tie_is_no_preference():
    def row(roc, pr, error=None):
        return {"roc": np.array([[roc, roc]]), "pr": np.array([[pr, pr]]), "error": error}

    cv = {('{"sigma": 1}', False): row(0.9, 0.8), ('{"sigma": 2}', True): row(0.9, 0.8),
          ('{"sigma": 4}', False): row(0.7, 0.6)}  # fmt: skip
    assert not edge_is_preferred(cv, "sigma", 1)  # tied with sigma=2: a flat objective
    cv['{"sigma": 1}', True] = row(0.95, 0.8)
    assert edge_is_preferred(cv, "sigma", 1)
    assert not edge_is_preferred(cv, "sigma", 4)
    # a failed candidate does not count
    cv['{"sigma": 4}', True] = {"roc": None, "pr": None, "error": "ValueError: x"}
    assert edge_is_preferred(cv, "sigma", 1)


def test_edge_of_grid_reported_when_forced_and_not_otherwise(tmp_path, capsys):
    X, y = _sines()
    _write_csv(tmp_path / "mine.csv", X, y)
    common = ("--kernels", "flat_rbf", "--scorers", "conformance")
    # bandwidths 1e-4 and 1e-3 (x sqrt(dT)) give a Gram of exact zeros off the diagonal:
    # constant scores; the CV must take the largest value, 1
    rc, out, err = _run(tmp_path / "mine.csv", tmp_path / "a.sqlite", capsys, *common,
                        "--grid", "flat_rbf.sigma=0.0001,0.001,1",
                        "--report", str(tmp_path / "rep"))  # fmt: skip
    assert rc == 0, err
    assert all(json.loads(r[3])["sigma"] == 1.0 for r in _test_rows(tmp_path / "a.sqlite"))
    msg = "flat_rbf: sigma=1 is the largest grid value (0.0001..1), selected by conformance"
    assert msg in out and "for 2 of 2 normal classes: widen the grid" in out
    assert "--grid flat_rbf.sigma=0.0001,0.001,1,1e+03" in out
    assert msg in (tmp_path / "rep" / "report.md").read_text()
    # the same value inside the grid: 1e12 (x sqrt(dT)) gives a Gram of exact ones, no
    # information either; the CV takes 1 again, and no note is written
    rc, out, err = _run(tmp_path / "mine.csv", tmp_path / "b.sqlite", capsys, *common,
                        "--grid", "flat_rbf.sigma=0.0001,1,1e12")  # fmt: skip
    assert rc == 0, err
    assert all(json.loads(r[3])["sigma"] == 1.0 for r in _test_rows(tmp_path / "b.sqlite"))
    assert "grid value" not in out and "note:" not in out


# ------------------------------------------------------------------------- below chance
def test_below_chance_warning(tmp_path, capsys):
    """Normal series spread wide, anomalies a tight cluster at their centre: every kernel
    score puts the anomalies closer to the corpus than the normal series are to each other."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.standard_normal((16, 12, 2)), 0.02 * rng.standard_normal((16, 12, 2))])
    y = np.repeat(["wide", "tight"], 16)
    _write_csv(tmp_path / "inside.csv", X, y)
    rc, out, err = _run(tmp_path / "inside.csv", tmp_path / "s.sqlite", capsys,
                        "--kernels", "flat_rbf", "--scorers", "mahalanobis",
                        "--normal-class", "wide", "--grid", "flat_rbf.sigma=1",
                        "--report", str(tmp_path / "rep"))  # fmt: skip
    assert rc == 0, err
    ((_, _, _, _, roc, _),) = _test_rows(tmp_path / "s.sqlite")
    assert roc < 0.5
    assert f"flat_rbf: mean test ROC-AUC below chance (0.5) with mahalanobis {roc:.3f}" in out
    assert "likely a scale or orientation problem" in out
    assert "below chance" in (tmp_path / "rep" / "report.md").read_text()
    # the rule alone: below 0.5 only, a failed (NaN) entry is not below chance
    res = {("d", "k", "s"): {"roc_auc": 0.5}, ("d", "k", "t"): {"roc_auc": float("nan")},
           ("d", "j", "s"): {"roc_auc": 0.49}}  # fmt: skip
    notes = below_chance_notes(res)
    assert list(notes) == ["d"] and len(notes["d"]) == 1 and notes["d"][0].startswith("j: ")
