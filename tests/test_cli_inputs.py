"""``python -m experiments run`` on the user's own data (issue 16, item 1): .ts files in both
layouts, .npz (X/y or train/test arrays), long-format CSV, sktime loaders by name;
``--normal-class``; per-class ROC-AUC and PR-AUC in the report and its CSV; one-line errors
for anything else. Each run is tiny (one kernel, one scorer, 2 folds)."""

from __future__ import annotations

import csv
import sqlite3

import numpy as np
import pytest
from experiment_helpers import run_cli

from experiments.data import load_data


def _cli(argv, capsys) -> tuple[int, str, str]:
    return run_cli(argv, capsys)


def _toy(n_per_class=8, T=12, d=2, classes=("a", "b", "c"), seed=0):
    """Classes that differ by a shifted sine: every class is learnable."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, T)
    X, y = [], []
    for k, c in enumerate(classes):
        for _ in range(n_per_class):
            base = np.sin(t + k)[:, None] * np.arange(1, d + 1)
            X.append(base + 0.1 * rng.standard_normal((T, d)))
            y.append(c)
    return np.asarray(X), np.asarray(y)


def _run(data, store, capsys, *extra, report=None):
    argv = ["run", "--dataset", *([data] if isinstance(data, str) else data),
            "--kernels", "flat_linear", "--scorers", "mahalanobis", "--folds", "2",
            "--max-rank", "3", "--time-channel", "no", "--store", str(store), "--no-progress",
            *extra]  # fmt: skip
    if report is not None:
        argv += ["--report", str(report)]
    return _cli(argv, capsys)


def _per_class(report) -> list[dict]:
    with open(report / "results_per_class.csv", newline="") as f:
        return list(csv.DictReader(f))


def _settings(store) -> list[str]:
    with sqlite3.connect(store) as con:
        return [r[0] for r in con.execute("SELECT DISTINCT setting FROM test")]


def test_npz_xy_end_to_end_with_per_class_report(tmp_path, capsys):
    X, y = _toy()
    np.savez(tmp_path / "mine.npz", X=X, y=y)
    rc, out, err = _run(str(tmp_path / "mine.npz"), tmp_path / "s.sqlite", capsys,
                        report=tmp_path / "rep")  # fmt: skip
    assert rc == 0, err
    rows = _per_class(tmp_path / "rep")
    assert sorted(r["class"] for r in rows) == ["a", "b", "c"]
    assert {(r["dataset"], r["kernel"], r["scorer"]) for r in rows} == {
        ("mine", "flat_linear", "mahalanobis")
    }
    for r in rows:
        assert 0.0 <= float(r["roc_auc"]) <= 1.0 and 0.0 <= float(r["pr_auc"]) <= 1.0
        assert r["error"] == ""
    # the mean over the classes in results.csv is the mean of the per-class figures
    with open(tmp_path / "rep" / "results.csv", newline="") as f:
        (summary,) = list(csv.DictReader(f))
    assert float(summary["roc_auc"]) == pytest.approx(np.mean([float(r["roc_auc"]) for r in rows]))
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Per class" in md and "| kernel | scorer | a | b | c |" in md
    roc_a = next(float(r["roc_auc"]) for r in rows if r["class"] == "a")
    assert f"{roc_a:.3f} / " in md


def test_npz_train_test_arrays_are_used_as_given(tmp_path):
    X, y = _toy()
    Xt, yt = _toy(n_per_class=3, seed=1)
    np.savez(tmp_path / "tt.npz", X_train=X, y_train=y, X_test=Xt, y_test=yt)
    u = load_data(str(tmp_path / "tt.npz"))
    assert u.name == "tt" and u.X_train.shape == (24, 12, 2) and u.X_test.shape == (9, 12, 2)
    np.testing.assert_array_equal(u.X_test, Xt)
    # X and y alone: a stratified 70/30 split, the same for the same seed
    np.savez(tmp_path / "xy.npz", X=X, y=y)
    a, b = load_data(str(tmp_path / "xy.npz"), seed=3), load_data(str(tmp_path / "xy.npz"), seed=3)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert len(a.y_train) + len(a.y_test) == 24 and sorted(set(a.y_test)) == ["a", "b", "c"]


def _write_long_csv(path, X, y, split=None):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "t", "x1", "x2", "label"] + (["split"] if split is not None else []))
        for i, (x, lab) in enumerate(zip(X, y)):
            for t in reversed(range(len(x))):  # rows in any order: sorted by time on reading
                w.writerow([f"s{i}", t, *x[t], lab] + ([split[i]] if split is not None else []))


def test_long_csv_end_to_end(tmp_path, capsys):
    X, y = _toy()
    split = ["test" if i % 4 == 0 else "train" for i in range(len(y))]
    _write_long_csv(tmp_path / "long.csv", X, y, split)
    u = load_data(str(tmp_path / "long.csv"))
    tr = np.asarray(split) == "train"
    np.testing.assert_allclose(u.X_train, X[tr])
    np.testing.assert_array_equal(u.y_test, y[~tr])
    rc, out, err = _run(str(tmp_path / "long.csv"), tmp_path / "s.sqlite", capsys,
                        report=tmp_path / "rep")  # fmt: skip
    assert rc == 0, err
    assert {r["dataset"] for r in _per_class(tmp_path / "rep")} == {"long"}
    _write_long_csv(tmp_path / "nosplit.csv", X, y)  # no split column: split 70/30
    assert len(load_data(str(tmp_path / "nosplit.csv")).y_test) == 7


def _write_ts(root, problem_name, X, y, fold):
    from sktime.datasets import write_ndarray_to_tsfile

    write_ndarray_to_tsfile(
        np.ascontiguousarray(X.transpose(0, 2, 1)), str(root), problem_name=problem_name,
        class_label=sorted(set(y)), class_value_list=np.asarray(y), equal_length=True,
        series_length=X.shape[1], fold=fold,
    )  # fmt: skip


@pytest.mark.parametrize("layout", ["name_folder", "split_folders"])
def test_ts_files_in_either_layout(tmp_path, capsys, layout):
    X, y = _toy()
    Xt, yt = _toy(n_per_class=3, seed=1)
    root = tmp_path / "ts"
    if layout == "name_folder":  # <root>/Toy/Toy_TRAIN.ts
        _write_ts(root, "Toy", X, y, "_TRAIN")
        _write_ts(root, "Toy", Xt, yt, "_TEST")
        assert (root / "Toy" / "Toy_TRAIN.ts").is_file()
    else:  # <root>/Toy_TRAIN/Toy_TRAIN.ts
        _write_ts(root, "Toy_TRAIN", X, y, "")
        _write_ts(root, "Toy_TEST", Xt, yt, "")
        assert (root / "Toy_TRAIN" / "Toy_TRAIN.ts").is_file()
    u = load_data("Toy", data_dir=root)  # by name in --data-dir
    np.testing.assert_allclose(u.X_train, X)
    np.testing.assert_array_equal(u.y_test, yt)
    folder = root / "Toy" if layout == "name_folder" else root
    assert load_data(str(folder)).name == "Toy"  # by folder
    rc, out, err = _run("Toy", tmp_path / "s.sqlite", capsys, "--data-dir", str(root))
    assert rc == 0, err
    rc, out, err = _run(str(folder), tmp_path / "s2.sqlite", capsys)
    assert rc == 0, err


def test_sktime_loader_by_name(tmp_path, capsys):
    u = load_data("sktime:basic_motions")
    assert u.name == "basic_motions" and u.X_train.shape == (40, 100, 6) and u.fingerprint
    rc, out, err = _run("sktime:basic_motions", tmp_path / "s.sqlite", capsys,
                        "--normal-class", "walking", report=tmp_path / "rep")  # fmt: skip
    assert rc == 0, err
    assert [r["class"] for r in _per_class(tmp_path / "rep")] == ["walking"]


def test_normal_class_restricts_runs_and_has_its_own_setting(tmp_path, capsys):
    X, y = _toy()
    np.savez(tmp_path / "mine.npz", X=X, y=y)
    store = tmp_path / "s.sqlite"
    rc, out, err = _run(str(tmp_path / "mine.npz"), store, capsys, "--normal-class", "c", "a",
                        report=tmp_path / "rep")  # fmt: skip
    assert rc == 0, err
    assert sorted(r["class"] for r in _per_class(tmp_path / "rep")) == ["a", "c"]
    assert '"normal_classes": ["a", "c"]' in (tmp_path / "rep" / "report.md").read_text()
    rc, out, err = _run(str(tmp_path / "mine.npz"), store, capsys, report=tmp_path / "all")
    assert rc == 0, err
    assert len(_settings(store)) == 2  # every class: another setting, nothing reused
    assert sorted(r["class"] for r in _per_class(tmp_path / "all")) == ["a", "b", "c"]
    # the same normal classes in another order: the same setting, nothing to compute
    rc, out, err = _run(str(tmp_path / "mine.npz"), store, capsys, "--normal-class", "a", "c")
    assert rc == 0 and out.startswith("0 of 0 cells computed"), (out, err)


def test_changed_data_under_the_same_name_gets_a_new_setting(tmp_path, capsys):
    X, y = _toy()
    store = tmp_path / "s.sqlite"
    np.savez(tmp_path / "mine.npz", X=X, y=y)
    assert _run(str(tmp_path / "mine.npz"), store, capsys)[0] == 0
    assert _run(str(tmp_path / "mine.npz"), store, capsys)[1].startswith("0 of 0 cells")
    np.savez(tmp_path / "mine.npz", X=X + 1.0, y=y)
    rc, out, err = _run(str(tmp_path / "mine.npz"), store, capsys)
    assert rc == 0 and not out.startswith("0 of 0"), out
    assert len(_settings(store)) == 2


def _bad_inputs(tmp_path):
    X, y = _toy()
    np.savez(tmp_path / "nokeys.npz", A=X)
    np.savez(tmp_path / "twod.npz", X=X[..., 0], y=y)
    np.savez(tmp_path / "half.npz", X_train=X, y_train=y)
    np.savez(tmp_path / "short.npz", X=X, y=y[:-1])
    np.savez(tmp_path / "nan.npz", X=np.where(X > 0.9, np.nan, X), y=y)
    np.savez(tmp_path / "oneclass.npz", X=X, y=np.full(len(y), "a"))
    (tmp_path / "junk.npz").write_text("not a zip")
    (tmp_path / "data.txt").write_text("1,2,3")
    (tmp_path / "empty").mkdir()
    with open(tmp_path / "twolabels.csv", "w") as f:
        f.write("id,t,x,label\ns1,0,1.0,a\ns1,1,2.0,b\n")
    with open(tmp_path / "text.csv", "w") as f:
        f.write("id,t,x,label\ns1,0,oops,a\n")
    with open(tmp_path / "narrow.csv", "w") as f:
        f.write("id,t,label\ns1,0,a\n")
    with open(tmp_path / "notime.csv", "w") as f:  # columns by name: never by position
        f.write("id,x1,x2,label\ns1,0.5,1.0,a\n")
    (tmp_path / "sub").mkdir()
    np.savez(tmp_path / "sub" / "mine.npz", X=X, y=y)
    np.savez(tmp_path / "mine.npz", X=X, y=y)


BAD = [
    # (--dataset values, further options, words of the one-line message)
    (["nokeys.npz"], [], "needs arrays X and y, or X_train, y_train, X_test and y_test"),
    (["twod.npz"], [], "X must have shape (n, T, d), got shape (24, 12) (one channel"),
    (["half.npz"], [], "has X_train, y_train but not X_test, y_test"),
    (["short.npz"], [], "X has 24 series but y has 23 labels"),
    (["nan.npz"], [], "X contains NaN or infinite values"),
    (["oneclass.npz"], [], "one-versus-rest needs at least 2 classes"),
    (["junk.npz"], [], "not a readable .npz file"),
    (["data.txt"], [], "unknown kind of data file (.txt)"),
    (["missing.npz"], [], "missing.npz: no such file or folder"),
    (["empty"], [], "no <Name>_TRAIN.ts and <Name>_TEST.ts here"),
    (["twolabels.csv"], [], "series 's1' has two labels"),
    (["text.csv"], [], "line 2: column 'x' holds 'oops', not a number"),
    (["narrow.csv"], [], "no channel column (columns found: id, t, label)"),
    (["notime.csv"], [], "no time column (looked for time, t, timestamp, step; columns"),
    (["sktime:nope"], [], "sktime:nope: no sktime loader sktime.datasets.load_nope"),
    (["mine.npz", "sub/mine.npz"], [], "are both called 'mine'; rename one"),
    (["mine.npz"], ["--normal-class", "z"], "--normal-class z is not a class of mine"),
    (["mine.npz"], ["--normal-class", "a", "a"], "--normal-class names a twice"),
    (["mine.npz"], ["--normal-class", "a", "--folds", "9"], "more than the series of the normal"),
]


@pytest.mark.parametrize("data, extra, message", BAD, ids=[" ".join(d + e) for d, e, _ in BAD])
def test_bad_input_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, data, extra,
                                               message):  # fmt: skip
    _bad_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "out" / "s.sqlite"
    rc, out, err = _run(data, store, capsys, *extra)
    assert rc == 2, (out, err)
    assert message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()
