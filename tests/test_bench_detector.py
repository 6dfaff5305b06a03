"""Tests of the detector benchmark (experiments.detector_bench and its command line
benchmarks/bench_detector.py) on tiny synthetic data."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.detector_bench import CLIError
from experiments.detector_bench import evaluate as be
from experiments.detector_bench import inputs as bi
from experiments.detector_bench import methods as bm
from experiments.detector_bench import problems as bp
from experiments.detector_bench import report as br
from experiments.detector_bench import store as bs
from novelty._missing import resample_linear

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_detector.py"
_spec = importlib.util.spec_from_file_location("bench_detector", _PATH)
cli = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cli)


# -- helpers ---------------------------------------------------------------------------------
def toy_split(seed: int, per_class: dict, T: int = 12, d: int = 2, shift: float = 3.0):
    """(X, y): class k is Gaussian noise shifted by ``shift`` k."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for k, (label, n) in enumerate(per_class.items()):
        X.append(rng.normal(size=(n, T, d)) + shift * k)
        y += [label] * n
    return np.concatenate(X), np.array(y)


def write_ts(root: Path, name: str, X: np.ndarray, y: np.ndarray, fold: str) -> None:
    from sktime.datasets import write_ndarray_to_tsfile

    write_ndarray_to_tsfile(
        X.transpose(0, 2, 1),
        str(root),
        problem_name=name,
        class_label=sorted(set(y.tolist())),
        class_value_list=y,
        equal_length=True,
        series_length=X.shape[1],
        fold=fold,
    )


@pytest.fixture
def toy_dir(tmp_path):
    """Two tiny data sets on disk, in <root>/<Name>/<Name>_{TRAIN,TEST}.ts."""
    root = tmp_path / "uea"
    for i, name in enumerate(["ToyA", "ToyB"]):
        Xtr, ytr = toy_split(10 * i, {"a": 8, "b": 7})
        Xte, yte = toy_split(10 * i + 1, {"a": 6, "b": 5})
        write_ts(root, name, Xtr, ytr, "_TRAIN")
        write_ts(root, name, Xte, yte, "_TEST")
    return root


class MeanDistance:
    """A stub detector on raw series: distance to the corpus mean; threshold at a quantile."""

    calls = 0

    def __init__(self, quantile=0.9, fail=False):
        self.quantile, self.fail = quantile, fail

    def fit(self, X):
        MeanDistance.calls += 1
        if self.fail:
            raise RuntimeError("boom\nsecond line")
        X = np.asarray(X)
        self.mean_ = X.mean(0)
        self.offset_ = np.quantile(self.score_samples(X), 1 - self.quantile)
        return self

    def score_samples(self, X):
        return -np.sqrt(((np.asarray(X) - self.mean_) ** 2).sum(axis=(1, 2)))

    def predict(self, X):
        return np.where(self.score_samples(X) >= self.offset_, 1, -1)


def stub(name: str, **kw) -> bm.Method:
    return bm.Method(name, "ours", lambda seed, n: MeanDistance(**kw), expr=f"stub {name}")


def rows(store) -> list[dict]:
    con = sqlite3.connect(store)
    con.row_factory = sqlite3.Row
    out = [dict(r) for r in con.execute("SELECT * FROM results ORDER BY dataset, class, method")]
    con.close()
    return out


# -- problems --------------------------------------------------------------------------------
def test_problems_labels_and_subsample_sizes():
    Xtr, ytr = toy_split(0, {"1": 30, "2": 12, "3": 5})
    Xte, yte = toy_split(1, {"1": 60, "2": 30, "3": 10})
    probs = bp.build_problems(Xtr, ytr, Xte, yte, "Toy", seed=3, max_corpus=10, max_test=50)
    assert [p.cls for p in probs] == ["1", "2", "3"]
    for p in probs:
        assert p.n_classes == 3
        # corpus: training series of the class only, at most 10, without replacement
        assert len(p.corpus) == min(10, int((ytr == p.cls).sum()))
        member = [any(np.array_equal(c, x) for x in Xtr[ytr == p.cls]) for c in p.corpus]
        assert all(member)
        assert len({c.tobytes() for c in p.corpus}) == len(p.corpus)
        # test: 50 series, label 1 = another class
        assert len(p.test) == 50
        np.testing.assert_array_equal(p.y, (p.test_classes != p.cls).astype(int))
    # stratified: class shares of the test split kept (60:30:10 -> 30:15:5)
    _, counts = np.unique(probs[0].test_classes, return_counts=True)
    np.testing.assert_array_equal(counts, [30, 15, 5])
    # same test set for every class; the subsample follows the seed
    assert all(np.array_equal(p.test, probs[0].test) for p in probs)
    again = bp.build_problems(Xtr, ytr, Xte, yte, "Toy", seed=3, max_corpus=10, max_test=50)
    other = bp.build_problems(Xtr, ytr, Xte, yte, "Toy", seed=4, max_corpus=10, max_test=50)
    assert np.array_equal(again[0].corpus, probs[0].corpus)
    assert not np.array_equal(other[0].corpus, probs[0].corpus)
    assert not np.array_equal(other[0].test, probs[0].test)


def test_problems_unequal_lengths_and_class_selection():
    rng = np.random.default_rng(0)
    Xtr = [rng.normal(size=(T, 3)) for T in rng.integers(5, 15, size=9)]
    ytr = np.array(list("aaabbbccc"))
    Xte = [rng.normal(size=(T, 3)) for T in rng.integers(5, 15, size=6)]
    yte = np.array(list("abcabc"))
    probs = bp.build_problems(Xtr, ytr, Xte, yte, "U", classes=["c"], max_corpus=2)
    assert len(probs) == 1 and probs[0].cls == "c" and probs[0].n_classes == 3
    assert isinstance(probs[0].corpus, list) and len(probs[0].corpus) == 2
    assert all(any(c is x for x in Xtr[6:]) for c in probs[0].corpus)
    np.testing.assert_array_equal(probs[0].y, [1, 1, 0, 1, 1, 0])
    with pytest.raises(CLIError, match="unknown class"):
        bp.build_problems(Xtr, ytr, Xte, yte, "U", classes=["z"])


def test_load_problems_reads_ts_files(toy_dir):
    probs = bp.load_problems("ToyA", toy_dir, seed=0)
    Xte, yte = toy_split(1, {"a": 6, "b": 5})
    assert [p.cls for p in probs] == ["a", "b"]
    np.testing.assert_allclose(probs[0].test, Xte)
    np.testing.assert_array_equal(probs[1].y, (yte != "b").astype(int))
    assert bp.list_datasets(toy_dir) == ["ToyA", "ToyB"]


# -- the peers' input ------------------------------------------------------------------------
def brute_flatten(corpus, test):
    """Loops: resample to the corpus max length, pool, z-score per (t, channel), clip, flatten."""

    def resample(x, L):
        T = len(x)
        out = np.empty((L, x.shape[1]))
        for i in range(L):
            pos = i * (T - 1) / (L - 1)
            lo = min(int(np.floor(pos)), T - 2)
            w = pos - lo
            out[i] = (1 - w) * x[lo] + w * x[lo + 1]
        return out

    L = max(len(x) for x in corpus)
    win = 1 + (L - 1) // 100

    def prep(x):
        x = resample(x, L) if len(x) != L else np.asarray(x, float)
        k = L // win
        return np.array([x[j * win : (j + 1) * win].mean(0) for j in range(k)])

    C = [prep(x) for x in corpus]
    k, d = C[0].shape
    mu, sd = np.zeros((k, d)), np.zeros((k, d))
    for t in range(k):
        for c in range(d):
            v = np.array([x[t, c] for x in C])
            mu[t, c] = v.sum() / len(v)
            sd[t, c] = np.sqrt(((v - mu[t, c]) ** 2).sum() / len(v))

    def z(x):
        out = np.empty_like(x)
        for t in range(k):
            for c in range(d):
                out[t, c] = min(5.0, max(-5.0, (x[t, c] - mu[t, c]) / (sd[t, c] + 1e-4)))
        return out.reshape(-1)

    return np.array([z(x) for x in C]), np.array([z(prep(x)) for x in test])


@pytest.mark.parametrize("T", [30, 100, 101, 250])
def test_flatten_matches_brute_force(T):
    rng = np.random.default_rng(T)
    corpus = rng.normal(size=(7, T, 3)) * rng.uniform(0.1, 3, size=(1, T, 3))
    test = rng.normal(size=(5, T, 3)) * 4  # far values: the clip is exercised
    Fc, Ft = bi.flatten_pair(corpus, test)
    Bc, Bt = brute_flatten(corpus, test)
    assert Fc.shape == (7, (T // (1 + (T - 1) // 100)) * 3)
    np.testing.assert_allclose(Fc, Bc, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Ft, Bt, rtol=1e-12, atol=1e-12)
    assert np.abs(Ft).max() == 5.0


def test_flatten_unequal_lengths_matches_brute_force():
    rng = np.random.default_rng(1)
    corpus = [rng.normal(size=(T, 2)) for T in (9, 14, 11, 14, 7)]
    test = [rng.normal(size=(T, 2)) for T in (5, 14, 20, 1)]
    Fc, Ft = bi.flatten_pair(corpus, test)
    assert Fc.shape == (5, 28) and Ft.shape == (4, 28)
    Bc, Bt = brute_flatten(corpus, test[:3])
    np.testing.assert_allclose(Fc, Bc, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Ft[:3], Bt, rtol=1e-12, atol=1e-12)
    # a one-step series becomes constant at its value
    one = resample_linear(test[3], 14)
    assert np.all(one == test[3][0])


# -- methods ---------------------------------------------------------------------------------
def obvious_problem(N=12, T=20, seed=0):
    rng = np.random.default_rng(seed)
    corpus = rng.normal(size=(N, T, 2))
    test = np.concatenate([rng.normal(size=(6, T, 2)), rng.normal(size=(6, T, 2)) + 8.0])
    y = np.r_[np.zeros(6, int), np.ones(6, int)]
    return bp.Problem("Obv", "n", corpus, test, y, n_classes=2, seed=seed)


@pytest.mark.parametrize("name", [m for m in bm.METHODS if m.startswith("pyod_")])
@pytest.mark.parametrize("N", [4, 12])
def test_pyod_methods_on_an_obvious_problem(name, N):
    out = be.evaluate(bm.METHODS[name], obvious_problem(N=N))
    assert out["auc"] == 1.0 and out["ap"] == 1.0
    assert out["far_nominal"] == 0.1 and 0.0 <= out["far"] <= 1.0
    assert out["fit_s"] >= 0 and out["score_s"] >= 0


def test_rockad_scores_outliers_higher():
    """aeon's ROCKAD.predict is an anomaly score (higher = more anomalous); corpus of 4 < 5
    neighbours works (n_neighbors = min(5, N))."""
    out = be.evaluate(bm.METHODS["rockad"], obvious_problem(N=12))
    assert out["auc"] == 1.0 and out["far"] is None and out["far_nominal"] is None
    small = be.evaluate(bm.METHODS["rockad"], obvious_problem(N=4))
    assert json.loads(small["params"])["n_neighbors"] == "4"


def test_ours_family_contract():
    out = be.evaluate(stub("s", quantile=0.8), obvious_problem())
    assert out["auc"] == 1.0 and out["far_nominal"] == pytest.approx(0.2)
    det = MeanDistance(quantile=0.8).fit(obvious_problem().corpus)
    pred = det.predict(obvious_problem().test[:6])
    assert out["far"] == pytest.approx(np.mean(pred == -1))


def test_extra_expression_namespace_and_errors():
    m = bm.parse_extra("lin = KernelNoveltyDetector(kernel=FlattenedKernel(Linear()))")
    assert m.name == "lin" and m.family == "ours" and m.expr.startswith("KernelNoveltyDetector(")
    det = m.build(0, 10)
    assert type(det).__name__ == "KernelNoveltyDetector"
    assert m.build(0, 10) is not det  # a fresh detector per problem
    for bad, msg in [
        ("noequals", "NAME=EXPR"),
        ("rockad=np.zeros(1)", "built-in"),
        ("x=Nope()", "NameError"),
        ("1x=np.zeros(1)", "identifier"),
    ]:
        with pytest.raises(CLIError, match=msg):
            bm.parse_extra(bad)
    names = [m.name for m in bm.resolve_methods(["peers", "pyod_knn"], [])]
    assert names == [
        "rockad",
        "rockad_mean5",
        "rockad_recipe",
        "pyod_knn",
        "pyod_iforest",
        "pyod_lof",
        "pyod_ocsvm",
        "pyod_ecod",
    ]


# -- store: resume, failures, identities -----------------------------------------------------
def fake_loader(seed_offset=0):
    def load(ds, data_dir, seed, classes, max_corpus, max_test, max_classes):
        Xtr, ytr = toy_split(seed + seed_offset, {"a": 6, "b": 5, "c": 5})
        Xte, yte = toy_split(seed + 1, {"a": 4, "b": 4, "c": 4})
        return bp.build_problems(
            Xtr, ytr, Xte, yte, ds, seed, classes, max_corpus, max_test, max_classes
        )

    return load


def test_failing_method_recorded_and_run_goes_on(tmp_path):
    store = tmp_path / "s.sqlite"
    methods = [stub("bad", fail=True), stub("good")]
    log = []
    n = bs.run_benchmark(["D"], methods, store, None, loader=fake_loader(), log=log.append)
    assert n == 6 and len(log) == 6
    got = rows(store)
    bad = [r for r in got if r["method"] == "bad"]
    good = [r for r in got if r["method"] == "good"]
    assert len(bad) == 3 and all(r["error"] == "RuntimeError: boom" for r in bad)
    assert all(r["auc"] is None for r in bad)
    assert len(good) == 3 and all(r["error"] is None and r["auc"] == 1.0 for r in good)
    assert {r["n_corpus"] for r in good} == {5, 6} and {r["n_test"] for r in good} == {12}


def test_resume_recomputes_nothing_done(tmp_path):
    store = tmp_path / "s.sqlite"
    kw = dict(loader=fake_loader(), log=lambda s: None)
    methods = [stub("m1"), stub("m2")]

    class Interrupt(BaseException):
        pass

    calls = {"n": 0}

    def stop_third(line):
        calls["n"] += 1
        if calls["n"] == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        bs.run_benchmark(["D"], methods, store, None, loader=fake_loader(), log=stop_third)
    assert len(rows(store)) == 3  # committed before the interruption
    run = sqlite3.connect(store).execute("SELECT cells_computed, finished FROM runs").fetchall()
    assert len(run) == 1 and run[0][0] == 3 and run[0][1] is not None  # the run row closed
    before = {(r["class"], r["method"]): r["finished"] for r in rows(store)}
    MeanDistance.calls = 0
    assert bs.run_benchmark(["D"], methods, store, None, **kw) == 3
    assert MeanDistance.calls == 3
    after = {(r["class"], r["method"]): r["finished"] for r in rows(store)}
    assert all(after[k] == v for k, v in before.items()) and len(after) == 6
    MeanDistance.calls = 0
    assert bs.run_benchmark(["D"], methods, store, None, **kw) == 0
    assert MeanDistance.calls == 0
    # --rerun recomputes that method only
    assert bs.run_benchmark(["D"], methods, store, None, rerun=["m2"], **kw) == 3
    assert MeanDistance.calls == 3
    # --retry-errors: only failed rows
    bs.run_benchmark(["D"], [stub("m3", fail=True)], store, None, **kw)
    MeanDistance.calls = 0
    assert bs.run_benchmark(["D"], methods + [stub("m3")], store, None, **kw) == 0
    n = bs.run_benchmark(["D"], methods + [stub("m3")], store, None, retry_errors=True, **kw)
    assert n == 3 and MeanDistance.calls == 3


def test_changed_subsample_limits_refused(tmp_path):
    store = tmp_path / "s.sqlite"
    kw = dict(loader=fake_loader(), log=lambda s: None)
    bs.run_benchmark(["D"], [stub("m")], store, None, **kw)
    with pytest.raises(CLIError, match="max-corpus 100, not 3"):
        bs.run_benchmark(["D"], [stub("m")], store, None, max_corpus=3, **kw)


def test_changed_extra_expression_does_not_mix(toy_dir, tmp_path, capsys):
    store = str(tmp_path / "s.sqlite")
    base = ["run", "--data-dir", str(toy_dir), "--store", store, "--methods", "e"]
    e1 = "e=KernelNoveltyDetector(kernel=FlattenedKernel(Linear()), scorer='mean_embedding')"
    e2 = "e=KernelNoveltyDetector(kernel=FlattenedKernel(Linear()), scorer='knn')"
    assert cli.main(base + ["--extra", e1]) == 0
    first = rows(store)
    assert len(first) == 4 and {r["expr"] for r in first} == {e1[2:]}
    capsys.readouterr()
    # same name, changed expression: refused in one line, nothing written
    assert cli.main(base + ["--extra", e2, "--datasets", "ToyB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--rerun e" in err and "Traceback" not in err
    assert rows(store) == first
    # --rerun replaces: the old rows go, also on data sets not rerun now
    assert cli.main(base + ["--extra", e2, "--datasets", "ToyB", "--rerun", "e"]) == 0
    now = rows(store)
    assert len(now) == 2 and {r["dataset"] for r in now} == {"ToyB"}
    assert {r["expr"] for r in now} == {e2[2:]}
    # the same expression again: resumes, nothing recomputed
    assert cli.main(base + ["--extra", e2]) == 0
    assert "2 row(s) written" in capsys.readouterr().out


def test_cli_errors_are_one_line(toy_dir, tmp_path, capsys):
    store = str(tmp_path / "s.sqlite")
    cases = [
        ["run", "--data-dir", str(toy_dir), "--datasets", "Nope", "--store", store],
        ["run", "--data-dir", str(toy_dir), "--methods", "nope", "--store", store],
        ["run", "--data-dir", str(tmp_path / "missing"), "--store", store],
        ["run", "--data-dir", str(toy_dir), "--methods", "rockad", "--rerun", "pyod_knn"],
        ["report", "--store", str(tmp_path / "none.sqlite")],
    ]
    for argv in cases:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, (argv, err)


# -- report ----------------------------------------------------------------------------------
def row(ds, cls, m, auc, n_classes=2, far=None, nominal=None, n_corpus=30, fit=1.0, seed=0):
    return {
        "dataset": ds,
        "class": cls,
        "method": m,
        "seed": seed,
        "n_classes": n_classes,
        "auc": auc,
        "far": far,
        "far_nominal": nominal,
        "n_corpus": n_corpus,
        "fit_s": fit,
    }


def hand_rows():
    return [
        # D1: A = (0.9 + 0.7)/2 = 0.8, B = (0.6 + 0.8)/2 = 0.7
        row("D1", "x", "A", 0.9, far=0.2, nominal=0.05, fit=1.0),
        row("D1", "y", "A", 0.7, far=0.1, nominal=0.05, n_corpus=10, fit=3.0),
        row("D1", "x", "B", 0.6, far=0.1, nominal=0.1, fit=10.0),
        row("D1", "y", "B", 0.8, far=0.3, nominal=0.1, fit=20.0),
        # D2: tie, A = B = 0.5
        row("D2", "x", "A", 0.5, n_classes=1, far=0.05, nominal=0.05, fit=2.0),
        row("D2", "x", "B", 0.5, n_classes=1, far=0.0, nominal=0.1, fit=30.0),
        # D3: B has one of two classes, and the other failed (auc None): left out
        row("D3", "x", "A", 0.1),
        row("D3", "y", "A", 0.1),
        row("D3", "x", "B", 0.99),
        row("D3", "y", "B", None),
    ]


def test_report_mean_rank_and_left_out():
    s = br.summarize(hand_rows(), ["A", "B"])
    assert s["complete"] == ["D1", "D2"]
    assert s["mean"]["A"] == pytest.approx((0.8 + 0.5) / 2)
    assert s["mean"]["B"] == pytest.approx((0.7 + 0.5) / 2)
    assert s["mean_rank"] == {"A": pytest.approx(1.25), "B": pytest.approx(1.75)}
    # |FAR - nominal| over corpus >= 20 in complete data sets: A: 0.15, 0.0; B: 0.0, 0.2, 0.1
    assert s["far_gap"]["A"] == (pytest.approx(0.075), 2)
    assert s["far_gap"]["B"] == (pytest.approx(0.1), 3)
    assert s["fit_median"] == {"A": 2.0, "B": 20.0}
    assert s["progress"][("D3", "B")] == (1, 2)
    text = br.report_markdown(hand_rows(), ["B", "A"])
    lines = text.splitlines()
    assert "| data set | B | A |" in lines
    assert "| D1 | 0.700 | **0.800** |" in lines
    assert "| D3 | 1/2 | 0.100 |" in lines  # no bold outside complete rows
    assert "| **mean** | 0.600 | 0.650 |" in lines
    assert "| **mean rank** | 1.75 | 1.25 |" in lines
    assert any("left out" in ln and "D3" in ln for ln in lines)
    assert "| A | 0.075 | 2 | 2.00 | - | 0 |" in lines
    assert "| B | 0.100 | 3 | 20.00 | - | 1 |" in lines


def test_report_failed_as_chance_and_wins_against_reference():
    s = br.summarize(hand_rows(), ["A", "B"], failed="chance", reference="A")
    # D3 enters: B's failed class counts 0.5 -> B = (0.99 + 0.5) / 2
    assert s["complete"] == ["D1", "D2", "D3"]
    assert s["cell"][("D3", "B")] == pytest.approx(0.745)
    assert s["mean"]["B"] == pytest.approx((0.7 + 0.5 + 0.745) / 3)
    # B against A: D1 loses (0.7 < 0.8), D2 ties, D3 wins (0.745 > 0.1)
    assert s["wtl"]["B"] == (1, 1, 1) and s["wtl"]["A"] == (0, 3, 0)
    text = br.report_markdown(hand_rows(), ["A", "B"], failed="chance", reference="A")
    assert "| **W/T/L vs A** | 0/3/0 | 1/1/1 |" in text.splitlines()
    with pytest.raises(CLIError, match="--failed"):
        br.summarize(hand_rows(), ["A"], failed="zero")


def test_halves_depend_on_names_only_and_mix_collections():
    names = {"uea": [f"U{i}" for i in range(11)], "ucr": [f"R{i}" for i in range(47)]}
    split = bp.halves(names)
    assert sorted(split) == sorted(names["uea"] + names["ucr"])
    for coll, n_tuning in (("uea", 6), ("ucr", 24)):
        got = [split[n] for n in names[coll]]
        assert got.count("tuning") == n_tuning and got.count("confirmation") == len(got) - n_tuning
    # input order does not matter; another seed gives another split
    shuffled = {k: list(reversed(v)) for k, v in names.items()}
    assert bp.halves(shuffled) == split
    assert bp.halves(names, seed=bp.SPLIT_SEED + 1) != split


def test_class_cap_is_a_fixed_choice():
    labels = [str(i) for i in range(1, 27)]
    a = bp.choose_classes(labels, 5)
    assert len(a) == 5 and a == bp.choose_classes(labels, 5) and set(a) <= set(labels)
    assert a == sorted(a, key=labels.index)  # label order kept
    assert bp.choose_classes(labels[:4], 5) == labels[:4]
    Xtr, ytr = toy_split(0, {str(k): 4 for k in range(8)})
    Xte, yte = toy_split(1, {str(k): 3 for k in range(8)})
    probs = bp.build_problems(Xtr, ytr, Xte, yte, "Toy", max_classes=3)
    assert [p.cls for p in probs] == bp.choose_classes([str(k) for k in range(8)], 3)
    assert all(p.n_classes == 3 for p in probs)  # the data set's problem count
    # every other class is an anomaly, chosen or not
    assert all(p.y.sum() == len(yte) - 3 for p in probs)


def test_peers_get_missing_values_filled_and_rockad_recipe_scores_outliers():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 30, 2))
    X[1, 3:7, 0] = np.nan
    filled = bi.fill_missing(X)
    assert np.isfinite(filled).all()
    np.testing.assert_allclose(
        filled[1, 3:7, 0], np.interp(np.arange(3, 7), [2, 7], X[1, [2, 7], 0])
    )
    assert bi.fill_missing(filled) is filled  # nothing to fill: the same container
    as_list = bi.fill_missing([x for x in X])
    np.testing.assert_array_equal(np.stack(as_list), filled)
    out = be.evaluate(bm.METHODS["rockad_recipe"], obvious_problem(N=12))
    assert out["auc"] == 1.0 and out["far"] is None


def test_report_cli_writes_docs(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    bs.run_benchmark(["D"], [stub("m1"), stub("m2")], store, None, loader=fake_loader(), log=str)
    out = tmp_path / "results.md"
    assert cli.main(["report", "--store", str(store), "--write-docs", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Detector benchmark")
    assert "report --store" in text and "cores" in text and "Data sets: D." in text
    assert "| D | **1.000** | **1.000** |" in text
    assert cli.main(["report", "--store", str(store), "--methods", "zz"]) == 2


def test_test_subsample_with_a_singleton_class():
    # scikit-learn's stratified split refuses a class of one series: shares kept by quota
    y = np.array(["a"] * 50 + ["b"] * 30 + ["c"] * 19 + ["d"])
    idx = bp.subsample_test(y, 40, seed=0)
    assert len(idx) == 40 and len(set(idx)) == 40
    _, counts = np.unique(y[idx], return_counts=True)
    assert counts.sum() == 40 and counts[0] == 20 and counts[1] == 12 and 7 <= counts[2] <= 8
    np.testing.assert_array_equal(idx, bp.subsample_test(y, 40, seed=0))


def test_seed_mean_leaves_out_seeds_with_non_finite_scores():
    class Seeds:
        def fit(self, X):
            return self

        def predict(self, X):
            good = np.r_[np.zeros(6), np.ones(6)]  # the obvious problem's labels: AUC 1
            bad = good.copy()
            bad[0] = np.nan
            return [good, bad, 1.0 - good]  # AUCs 1, (left out), 0

    m = bm.Method("seeds", "rockad", lambda seed, n: Seeds())
    out = be.evaluate(m, obvious_problem())
    assert out["auc"] == 0.5
    params = json.loads(out["params"])
    assert params["auc_per_seed"] == "[1.0, 0.0]" and params["seeds_with_non_finite_scores"] == "1"

    class AllBad(Seeds):
        def predict(self, X):
            return [np.full(12, np.nan)] * 2

    with pytest.raises(FloatingPointError, match="non-finite"):
        be.evaluate(bm.Method("bad", "rockad", lambda seed, n: AllBad()), obvious_problem())


# -- the experiments store: the figures read back, resume, the former layout, one writer ------
# The report of a tiny benchmark (3 toy sets, 2 seeds, PyOD and two stubs, one of them failing
# at seed 1), produced by the former bench_detector store (its own SQL, before issue 24 item
# 4) with the clock below; the store of the experiments package must give the same text.
PINNED_ALL = """\
Mean ROC-AUC over the classes of each data set (anomaly = any other class); `k/n`: classes done so far.

| data set | pyod_knn | pyod_iforest | pyod_lof | pyod_ecod | flaky | mean |
|---|---|---|---|---|---|---|
| ToyA | 0.569 | 0.535 | 0.493 | **0.604** | 0.542 | 0.576 |
| ToyB | 0.562 | 0.590 | 0.538 | 0.604 | 0.569 | **0.625** |
| ToyC | 0.703 | 0.688 | 0.609 | **0.711** | 0.594 | 0.695 |
| **mean** | 0.612 | 0.604 | 0.547 | 0.640 | 0.568 | 0.632 |
| **mean rank** | 3.33 | 4.00 | 5.67 | 1.33 | 4.67 | 2.00 |

Mean and rank over 3 data set(s); a failed problem (n/a) counts as ROC-AUC 0.5.

| method | mean abs(false alarm - nominal), corpus >= 20 | problems | median fit s | median score s | failed problems |
|---|---|---|---|---|---|
| pyod_knn | 0.183 | 12 | 1.99 | 2.01 | 0 |
| pyod_iforest | 0.122 | 12 | 2.17 | 2.19 | 0 |
| pyod_lof | 0.133 | 12 | 2.05 | 2.07 | 0 |
| pyod_ecod | 0.107 | 12 | 2.11 | 2.13 | 0 |
| flaky | 0.114 | 6 | 1.21 | 1.23 | 6 |
| mean | 0.132 | 12 | 2.23 | 2.25 | 0 |
"""  # noqa: E501
PINNED_LEAVE_OUT = """\
Mean ROC-AUC over the classes of each data set (anomaly = any other class); `k/n`: classes done so far.

| data set | mean | pyod_knn | flaky | pyod_lof |
|---|---|---|---|---|
| ToyA | 0.576 | 0.569 | 2/4 | 0.493 |
| ToyB | 0.625 | 0.562 | 2/4 | 0.538 |
| ToyC | 0.695 | 0.703 | 2/4 | 0.609 |
| **mean** | - | - | - | - |
| **mean rank** | - | - | - | - |
| **W/T/L vs mean** | 0/0/0 | 0/0/0 | 0/0/0 | 0/0/0 |

Mean and rank over 0 data set(s); left out (not complete for every method): ToyA, ToyB, ToyC. W/T/L: data-set means more than 0.005 above / within 0.005 / below.

| method | mean abs(false alarm - nominal), corpus >= 20 | problems | median fit s | median score s | failed problems |
|---|---|---|---|---|---|
| mean | - | 0 | - | - | 0 |
| pyod_knn | - | 0 | - | - | 0 |
| flaky | - | 0 | - | - | 6 |
| pyod_lof | - | 0 | - | - | 0 |
"""  # noqa: E501
PINNED_TUNING_SEED1 = """\
Mean ROC-AUC over the classes of each data set (anomaly = any other class); `k/n`: classes done so far.

| data set | pyod_knn | pyod_iforest | pyod_lof | pyod_ecod | flaky | mean |
|---|---|---|---|---|---|---|
| ToyA | 0.583 | 0.528 | 0.507 | **0.597** | 0.500 | 0.569 |
| ToyB | 0.528 | **0.639** | 0.521 | 0.597 | 0.500 | 0.611 |
| **mean** | 0.556 | 0.583 | 0.514 | 0.597 | 0.500 | 0.590 |
| **mean rank** | 3.00 | 2.50 | 5.00 | 2.00 | 6.00 | 2.50 |
| **W/T/L vs pyod_ecod** | 0/0/2 | 1/0/1 | 0/0/2 | 0/2/0 | 0/0/2 | 1/0/1 |

Mean and rank over 2 data set(s); a failed problem (n/a) counts as ROC-AUC 0.5. W/T/L: data-set means more than 0.005 above / within 0.005 / below.

| method | mean abs(false alarm - nominal), corpus >= 20 | problems | median fit s | median score s | failed problems |
|---|---|---|---|---|---|
| pyod_knn | 0.150 | 4 | 2.65 | 2.67 | 0 |
| pyod_iforest | 0.125 | 4 | 2.83 | 2.85 | 0 |
| pyod_lof | 0.158 | 4 | 2.71 | 2.73 | 0 |
| pyod_ecod | 0.092 | 4 | 2.77 | 2.79 | 0 |
| flaky | - | 0 | - | - | 4 |
| mean | 0.150 | 4 | 2.89 | 2.91 | 0 |
"""  # noqa: E501


def write_pin_sets(root: Path) -> None:
    """Three toy sets (classes 0.4 apart, so AUCs are not all 1), ToyC with three classes."""
    sets = [("ToyA", {"a": 24, "b": 22}), ("ToyB", {"a": 21, "b": 25}),
            ("ToyC", {"a": 22, "b": 6, "c": 23})]  # fmt: skip
    for i, (name, classes) in enumerate(sets):
        Xtr, ytr = toy_split(10 * i, classes, shift=0.4)
        Xte, yte = toy_split(10 * i + 1, {k: 7 for k in classes}, shift=0.4)
        write_ts(root, name, Xtr, ytr, "_TRAIN")
        write_ts(root, name, Xte, yte, "_TEST")


class Flaky(MeanDistance):
    def __init__(self, seed):
        super().__init__(quantile=0.8, fail=seed == 1)


def pin_methods() -> list:
    return [bm.METHODS[m] for m in ("pyod_knn", "pyod_lof", "pyod_ecod", "pyod_iforest")] + [
        bm.Method("mean", "ours", lambda seed, n: MeanDistance(), expr="stub mean"),
        bm.Method("flaky", "ours", lambda seed, n: Flaky(seed), expr="stub flaky"),
    ]


def pin_run(store, root, **kw) -> int:
    return bs.run_benchmark(["ToyA", "ToyB", "ToyC"], pin_methods(), store, [root], seeds=[0, 1],
                            max_corpus=20, max_test=12, max_classes=2, log=lambda s: None,
                            **kw)  # fmt: skip


def pin_reports(store, root, capsys) -> list[str]:
    out = []
    for extra in (
        ["--seeds", "0", "1"],
        ["--seeds", "0", "1", "--failed", "leave-out", "--reference", "mean",
         "--methods", "mean", "pyod_knn", "flaky", "pyod_lof"],
        ["--seeds", "1", "--data-dir", str(root), "--half", "tuning", "--reference", "pyod_ecod"],
    ):  # fmt: skip
        capsys.readouterr()
        assert cli.main(["report", "--store", str(store), *extra]) == 0
        out.append(capsys.readouterr().out.rstrip("\n"))
    return out


PINNED = [p.rstrip("\n") for p in (PINNED_ALL, PINNED_LEAVE_OUT, PINNED_TUNING_SEED1)]


@pytest.fixture(scope="module")
def pinned(tmp_path_factory):
    """(store, data folder): the tiny benchmark run once, with evaluate()'s clock replaced:
    its k-th reading is 0.01 k^2, so fit and score seconds differ from row to row but not
    from run to run."""
    import itertools
    import time
    import types

    tmp = tmp_path_factory.mktemp("pinned")
    write_pin_sets(tmp / "uea")
    tick = itertools.count()
    fake = types.SimpleNamespace(perf_counter=lambda: 0.01 * next(tick) ** 2, time=time.time)
    real, be.time = be.time, fake
    try:
        assert pin_run(tmp / "s.sqlite", tmp / "uea") == 72  # 6 problems, 6 methods, 2 seeds
    finally:
        be.time = real
    return tmp / "s.sqlite", tmp / "uea"


def former_store(path, rows_: list[dict], meta: dict) -> None:
    """A store of the former layout (tables meta, methods, results; no setting, no runs),
    written with the former statements."""
    cols = [c for c in bd_store().BENCH_COLUMNS if c not in ("setting", "device")]
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE methods (method TEXT PRIMARY KEY, expr TEXT NOT NULL)")
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    con.execute(
        "CREATE TABLE results (dataset TEXT NOT NULL, class TEXT NOT NULL, method TEXT NOT "
        "NULL, seed INTEGER NOT NULL, n_classes INTEGER, auc REAL, ap REAL, far REAL, "
        "far_nominal REAL, fit_s REAL, score_s REAL, n_corpus INTEGER, n_test INTEGER, error "
        "TEXT, params TEXT, expr TEXT, git_rev TEXT, finished REAL, PRIMARY KEY (dataset, "
        "class, method, seed))"
    )
    con.executemany("INSERT INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()])
    con.executemany("INSERT OR IGNORE INTO methods VALUES (?, ?)",
                    [(r["method"], r["expr"]) for r in rows_])  # fmt: skip
    con.executemany(
        f"INSERT INTO results ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        [[r[c] for c in cols] for r in rows_],
    )
    con.commit()
    con.close()


def bd_store():
    import experiments._store as store

    return store


def test_store_reads_back_the_former_reports_and_resumes(pinned, tmp_path, capsys):
    import shutil

    store, pin_dir = tmp_path / "s.sqlite", pinned[1]
    shutil.copy(pinned[0], store)
    assert pin_reports(store, pin_dir, capsys) == PINNED
    # the rows: in the experiments store, stamped with the one setting and the run
    db = bd_store().DetectorBenchStore(store, mode="read")
    ((sid, setting),) = db.settings().items()
    assert setting == {"max_corpus": 20, "max_test": 12, "max_classes": 2}
    got = db.rows()
    assert len(got) == 72 and {r["setting"] for r in got} == {sid}
    assert sum(r["error"] is not None for r in got) == 6  # flaky at seed 1
    (run,) = db.query("SELECT cells_computed, finished FROM runs")
    assert run["cells_computed"] == 72 and run["finished"] is not None
    db.close()
    # resume: nothing computed, nothing rewritten, the same figures
    MeanDistance.calls = 0
    assert pin_run(store, pin_dir) == 0 and MeanDistance.calls == 0
    again = bd_store().DetectorBenchStore(store, mode="read")
    assert again.rows() == got
    assert [r["cells_computed"] for r in again.query("SELECT * FROM runs")] == [72, 0]
    again.close()
    assert pin_reports(store, pin_dir, capsys) == PINNED
    # --retry-errors: the six failed rows only
    assert pin_run(store, pin_dir, retry_errors=True) == 6


def test_former_layout_is_read_as_it_was_and_converted_when_written(pinned, tmp_path, capsys):
    pin_dir = pinned[1]
    db = bd_store().DetectorBenchStore(pinned[0], mode="read")
    kept = db.rows()
    db.close()
    old = tmp_path / "old.sqlite"
    former_store(old, kept, {"max_corpus": 20, "max_test": 12, "max_classes": 2})
    before = old.read_bytes()
    # reading converts a copy in memory: the same reports, the file untouched
    assert pin_reports(old, pin_dir, capsys) == PINNED
    assert old.read_bytes() == before
    # writing converts in place (every value kept) and resumes: nothing computed
    assert pin_run(old, pin_dir) == 0
    db = bd_store().DetectorBenchStore(old, mode="read")
    drop = ("device",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in db.rows()] == [
        {k: v for k, v in r.items() if k not in drop} for r in kept
    ]
    assert {r["device"] for r in db.rows()} == {None}
    assert db.methods() == {m.name: m.expr for m in pin_methods()}
    db.close()
    assert pin_reports(old, pin_dir, capsys) == PINNED
    # other limits than the former meta's are refused, as before
    with pytest.raises(CLIError, match="max-test 12, not 13"):
        bs.run_benchmark(["ToyA"], pin_methods()[:1], old, [pin_dir], max_corpus=20,
                         max_test=13, max_classes=2, log=str)  # fmt: skip


def test_store_files_that_are_not_this_store_are_one_line_errors(toy_dir, tmp_path, capsys):
    bad_meta = tmp_path / "meta.sqlite"
    former_store(bad_meta, [], {"max_corpus": 20})
    other = tmp_path / "uea.sqlite"
    bd_store().ResultStore(other).close()
    text = tmp_path / "text.sqlite"
    text.write_text("not a database\n" * 100)
    before = bad_meta.read_bytes()
    for path, why in ((bad_meta, "former layout"), (other, "tables missing: methods, results"),
                      (text, "not a SQLite database")):  # fmt: skip
        for argv in (["report", "--store", str(path)],
                     ["run", "--store", str(path), "--data-dir", str(toy_dir)]):  # fmt: skip
            capsys.readouterr()
            assert cli.main(argv) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and why in err, (argv, err)
    assert bad_meta.read_bytes() == before  # not converted, not written


def test_two_settings_never_mix_in_one_store(tmp_path):
    db = bd_store().DetectorBenchStore(tmp_path / "s.sqlite")
    sid = db.add_setting({"max_corpus": 5, "max_test": 8, "max_classes": 2})
    assert db.add_setting({"max_corpus": 5, "max_test": 8, "max_classes": 2}) == sid
    with pytest.raises(bd_store().StoreError, match="max_test=8, not 9"):
        db.add_setting({"max_corpus": 5, "max_test": 9, "max_classes": 2})
    db.close()


def test_a_second_writer_is_refused(tmp_path):
    import subprocess

    store = tmp_path / "s.sqlite"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from experiments._store import DetectorBenchStore as S; "
         "s = S(sys.argv[1]); print('held', flush=True); time.sleep(60)", str(store)],
        cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        MeanDistance.calls = 0
        with pytest.raises(CLIError, match="being written by another process"):
            bs.run_benchmark(["D"], [stub("m")], store, None, loader=fake_loader(), log=str)
        assert MeanDistance.calls == 0
        assert bs.fetch_rows(store) == []  # reading takes no lock
    finally:
        holder.kill()
        holder.wait()
