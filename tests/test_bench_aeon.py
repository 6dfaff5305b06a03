"""The aeon-API route of the detector benchmark (experiments.detector_bench.aeon, the library of
benchmarks/bench_aeon.py) on a tiny synthetic set: it runs both methods through aeon's
fit/predict, resumes from its store, builds the benchmark's problems, adapts inputs by aeon's
tags, and measures the same detector as our own API."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.detector_bench import aeon as ba
from experiments.detector_bench import aeon_report
from experiments.detector_bench import problems as bp

pytest.importorskip("aeon")


def toy(seed: int, per_class: dict, d: int = 2, T: int = 16, unequal: bool = False):
    """aeon-layout (X, y): class k is noise shifted by 3 k; with ``unequal`` a list of
    (d, T_i) arrays, T_i in [T - 3, T]."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for k, (label, n) in enumerate(per_class.items()):
        for _ in range(n):
            t = int(rng.integers(T - 3, T + 1)) if unequal else T
            X.append(rng.normal(size=(d, t)) + 3.0 * k)
            y.append(label)
    return (X if unequal else np.stack(X)), np.array(y)


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory):
    from aeon.datasets import save_to_ts_file

    root = tmp_path_factory.mktemp("uea")
    X, y = toy(0, {"a": 12, "b": 12})
    Xt, yt = toy(1, {"a": 6, "b": 6})
    for split, (A, b) in {"_TRAIN": (X, y), "_TEST": (Xt, yt)}.items():
        save_to_ts_file(
            A, b, label_type="classification", path=str(root / "Toy"), problem_name="Toy",
            file_suffix=split,
        )  # fmt: skip
    return root


def test_run_both_methods_through_aeon_and_resume(toy_dir, tmp_path):
    store = tmp_path / "s.jsonl"
    new = ba.run(["Toy"], store=store, data_dir=toy_dir, log=lambda s: 0)
    # 2 classes x (ours, ROCKAD) at random state 0
    assert len(new) == 4 and all(r["error"] is None for r in new)
    assert {(r["class"], r["method"], r["random_state"]) for r in new} == {
        (c, m, 0) for c in "ab" for m in ("ours", "rockad")
    }
    for r in new:
        assert r["n_corpus"] == 12 and r["n_test"] == 12 and r["n_anomalies"] == 6
        assert r["auc"] > 0.9  # classes 3 apart are easy for both
    text = aeon_report.report_markdown(ba.read_store(store))
    assert "| Toy | 2 | 12 | 12 |" in text and "| **W/T/L of ours vs it** | | | | - |" in text
    assert ba.run(["Toy"], store=store, data_dir=toy_dir) == []  # resumed: nothing to do
    # other subsampling limits are another experiment: nothing is reused
    again = ba.run(["Toy"], methods=("rockad",), store=store, data_dir=toy_dir, max_test=8,
                   log=lambda s: 0)  # fmt: skip
    assert len(again) == 2 and all(r["n_test"] == 8 and r["n_anomalies"] == 4 for r in again)
    assert len(ba.read_store(store)) == 6 and len(ba.read_store(store, new[0]["settings"])) == 4


def test_report_means_and_mean5():
    def row(method, cls, rs, auc):
        r = dict(dataset="D", method=method, random_state=rs, n_classes=2, auc=auc, fit_s=1.0)
        r.update(score_s=0.5, n_corpus=5, n_test=10, notes=[])
        r["class"] = cls
        return r

    rows = [row("ours", "x", 0, 0.9), row("ours", "y", 0, 0.7)]
    rows += [row("rockad", c, s, 0.5 + 0.1 * s) for c in "xy" for s in range(5)]
    b = aeon_report.as_bench_rows(rows)
    mean5 = [r for r in b if r["method"] == ba.MEAN5]
    assert len(mean5) == 2 and all(r["auc"] == pytest.approx(0.7) for r in mean5)
    assert all(r["fit_s"] == pytest.approx(5.0) for r in mean5)
    text = aeon_report.report_markdown(rows)
    # ours 0.8, rockad (state 0) 0.5, rockad_mean5 0.7: ours wins both
    assert "| D | 2 | 5 | 10 | **0.800** | 0.500 | 0.700 |" in text
    assert "| **W/T/L of ours vs it** | | | | - | 1/0/0 | 1/0/0 |" in text


def test_problems_are_bench_detectors():
    X, y = toy(2, {"1": 7, "2": 150, "10": 4, "3": 5, "4": 6, "5": 9}, T=8)
    Xt, yt = toy(3, {"1": 70, "2": 250, "10": 40, "3": 20, "4": 9, "5": 30}, T=8)
    ours = ba.build_problems(X, y, Xt, yt, "D", seed=0)
    ref = bp.build_problems(
        X.transpose(0, 2, 1), y, Xt.transpose(0, 2, 1), yt, "D", seed=0, max_classes=5
    )
    assert [p.cls for p in ours] == [p.cls for p in ref] and len(ours) == 5
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a.corpus, b.corpus.transpose(0, 2, 1))
        np.testing.assert_array_equal(a.test, b.test.transpose(0, 2, 1))
        np.testing.assert_array_equal(a.y, b.y)
    assert len(ours[0].test) == 300 and max(len(p.corpus) for p in ours) == 100


def test_adapt_follows_the_tags():
    from aeon.anomaly_detection.collection import ROCKAD

    from novelty import AeonKernelNoveltyDetector

    X, _ = toy(4, {"a": 5}, unequal=True)
    T = [x.shape[1] for x in X]
    c, t, notes = ba.adapt(AeonKernelNoveltyDetector(), X[:3], X[3:])
    assert c is not None and notes == [] and [x.shape[1] for x in c + t] == T  # untouched
    c, t, notes = ba.adapt(ROCKAD(), X[:3], X[3:])
    L = max(T[:3])
    assert c.shape == (3, 2, L) and t.shape == (2, 2, L) and len(notes) == 1
    j = int(np.argmax([x.shape[1] for x in X[:3]]))
    np.testing.assert_array_equal(c[j], X[j])  # a series at the corpus's length is kept
    k = 3 + int(np.argmin(T[3:]))  # the ends of a resampled series are kept
    np.testing.assert_array_equal(t[k - 3][:, [0, -1]], X[k][:, [0, -1]])
    Xn = np.stack([x[:, :12] for x in X])
    Xn[0, 1, 4] = np.nan
    c, _, notes = ba.adapt(ROCKAD(), Xn[:3], Xn[3:])
    assert not np.isnan(c).any() and c[0, 1, 4] == pytest.approx(Xn[0, 1, [3, 5]].mean())


def test_aeon_route_measures_our_detector():
    """The harness's scores for ``ours`` equal -KernelNoveltyDetector().score_samples on the
    same series in our layout (default recipe, default random state), unequal lengths too."""
    from novelty import KernelNoveltyDetector

    for unequal in (False, True):
        X, _ = toy(5, {"a": 10}, d=2, T=12, unequal=unequal)
        Y, _ = toy(6, {"a": 3, "b": 3}, d=2, T=12, unequal=unequal)
        est = ba.make_estimator("ours", 0, len(X))
        got = est.fit(X).predict(Y)
        ref = KernelNoveltyDetector().fit([x.T for x in X] if unequal else X.transpose(0, 2, 1))
        want = -ref.score_samples([y.T for y in Y] if unequal else Y.transpose(0, 2, 1))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        assert got[3:].min() > got[:3].max()


def test_store_skips_a_torn_line_and_other_settings(tmp_path):
    store = tmp_path / "s.jsonl"
    a = {"dataset": "D", "settings": {"max_test": 300}}
    b = {"dataset": "E", "settings": {"max_test": 9}}
    store.write_text(json.dumps(a) + "\n" + json.dumps(b) + "\n" + '{"dataset": "F", "sett')
    assert ba.read_store(store) == [a, b]
    assert ba.read_store(store, {"max_test": 9}) == [b]
    assert ba.read_store(tmp_path / "none.jsonl") == []
