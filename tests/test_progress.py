"""Progress and time control (issue 22, item 3): ``verbose`` shows a tqdm bar whose planned
steps are the steps done; ``scorer="auto"``'s ``max_time`` bounds selection + final fit
(checked with a simulated clock, so the test does not depend on the machine's load)."""

from __future__ import annotations

import numpy as np
import pytest

import novelty.detector._auto as auto
from novelty import KernelNoveltyDetector
from novelty.detector._progress import plan, progress, step
from tskernels import RBF, FlattenedKernel


def _sines(n, T=20, d=2, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, T)
    return np.stack([np.sin(t + k) for k in range(d)], 1)[None] + 0.1 * rng.normal(size=(n, T, d))


def test_bar_counts_the_planned_steps(monkeypatch):
    seen = {}
    import tqdm.auto

    real = tqdm.auto.tqdm

    class Spy(real):
        def close(self):
            seen["n"], seen["total"], seen["desc"] = self.n, self.total, self.desc
            super().close()

    monkeypatch.setattr(tqdm.auto, "tqdm", Spy)
    X = _sines(30)
    det = KernelNoveltyDetector(FlattenedKernel(RBF(3.0)), scorer="mahalanobis", verbose=True)
    det.fit(X)
    # one Gram step and 30 leave-one-out refits (30 <= LOO_MAX series)
    assert seen == {"n": 31, "total": 31, "desc": "fit"}
    det.score_samples(X[:3])
    assert seen == {"n": 1, "total": 1, "desc": "score"}
    det.set_params(scorer="knn").fit(X)  # exact leave-one-out: the Gram alone
    assert seen["n"] == seen["total"] == 1


def test_no_bar_without_verbose(capsys):
    KernelNoveltyDetector(FlattenedKernel(RBF(3.0))).fit(_sines(10)).score_samples(_sines(2))
    assert capsys.readouterr().err == ""
    with progress(False, "x"):
        plan(3)
        step("a")  # no-ops without a bar
    with pytest.raises(ValueError, match="The 'verbose' parameter of KernelNoveltyDetector"):
        KernelNoveltyDetector(verbose=-1).fit(_sines(5))
    assert capsys.readouterr().err == ""  # the error comes before any progress bar


class _Clock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


def _costly(clock, seconds_per_gram, name):
    def gram(self, X, Y=None, **kw):
        clock.now += seconds_per_gram
        return FlattenedKernel.gram(self, X, Y, **kw)

    return type(name, (FlattenedKernel,), {"gram": gram})(RBF(3.0))


def test_max_time_bounds_selection_plus_reserve(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(auto, "time", clock)
    X = _sines(25)
    # a: the baseline (always runs): 5 folds x 2 Grams x 5 s = 50 s, reserve 0.25 x 50
    # b: as costly, would end at 50 + 50 + 25 > 100: stopped after its first fold
    # c: cheap (10 s in all): fits in what is left
    kernels = [_costly(clock, 5.0, "A"), _costly(clock, 5.0, "B"), _costly(clock, 1.0, "C")]
    specs, table = auto.select_members(X, kernels=kernels, max_time=100.0)
    status = table[~table.kernel.isin(["baseline", "top"])].groupby("kernel")["status"].agg(set)
    assert status.to_dict() == {"A": {"ok"}, "B": {"skipped (time)"}, "C": {"ok"}}
    assert clock.now == pytest.approx(50 + 10 + 10)  # A, B's first fold, C
    # the projected end, reserve for the final fit included, stays within max_time
    assert clock.now + 0.25 * 50 + 0.25 * 10 <= 100.0


def test_no_selection_when_even_the_baseline_would_overrun(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(auto, "time", clock)
    kernels = [_costly(clock, 50.0, "A"), _costly(clock, 1.0, "B")]
    specs, table = auto.select_members(_sines(12), kernels=kernels, max_time=10.0)
    # after A's first fold (2 Grams, 100 s) its projected end is far past 10 s: A + 1-NN kept
    assert clock.now == 100.0
    assert [s.label() for s in specs] == ["A+knn"]
    assert len(table) == 1 and bool(table["chosen"].iloc[0])
    assert "kept the baseline without selection" in table["status"].iloc[0]
    # the detector: its kernel with the 1-NN scorer, and the repr says so
    kernel = FlattenedKernel(RBF(3.0))
    det = KernelNoveltyDetector(kernel, scorer="auto", contamination=0.1, max_time=1e-9)
    det.fit(_sines(12))
    assert [m.spec.name for m in det.members_] == ["FlattenedKernel+knn"]
    assert "kept the baseline without selection" in det.selection_["status"].iloc[0]
    assert "auto chose baseline" in repr(det)
