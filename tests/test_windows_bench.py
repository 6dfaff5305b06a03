"""The window benchmark's protocol (experiments/window_bench): split, streams, reverse
windowing, resumable cells."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.window_bench import _data, _methods, _run


def test_split_is_a_fixed_rule():
    assert _data.half_of("uea/BasicMotions") == _data.half_of("uea/BasicMotions")
    halves = {_data.half_of(f"s{i}") for i in range(40)}
    assert halves == {"tuning", "confirmation"}


def test_steps_from_windows_is_the_mean_over_covering_windows():
    rng = np.random.default_rng(0)
    T, w = 50, 7
    ws = rng.normal(size=T - w + 1)
    want = [np.mean([ws[i] for i in range(len(ws)) if i <= t < i + w]) for t in range(T)]
    np.testing.assert_allclose(_methods.steps_from_windows(ws, w, T), want)


@pytest.mark.skipif(not (_data.UEA / "BasicMotions").exists(), reason="UEA data not present")
def test_class_stream_labels_and_sizes():
    s = _data.load_stream("uea/BasicMotions")
    assert s.normal.shape[1] == s.test.shape[1] == 6
    assert len(s.labels) == len(s.test) and 0 < s.labels.mean() <= 0.1
    # anomalies are whole inserted series, never at the start, never two in a row
    edges = np.flatnonzero(np.diff(s.labels.astype(int)) != 0) + 1
    assert s.labels[0] == 0 and np.all(np.diff(edges)[::2] == 100)
    again = _data.load_stream("uea/BasicMotions")
    np.testing.assert_array_equal(again.test, s.test)  # seeded


def test_cells_are_resumable(tmp_path, monkeypatch):
    calls = []

    def fake(s):
        calls.append(s.name)
        return np.arange(len(s.test), dtype=float)

    monkeypatch.setattr(_run, "methods", lambda: {"fake": fake})
    monkeypatch.setattr(_run, "stream_names", lambda: ["x/a"])
    monkeypatch.setattr(_run, "half_of", lambda n: "tuning")
    y = np.r_[np.zeros(90), np.ones(10)].astype(np.int8)
    stream = _data.Stream("x/a", np.zeros((50, 1)), np.zeros((100, 1)), y, 10)
    monkeypatch.setattr(_run, "load_stream", lambda n: stream)
    _run.run("tuning", ["fake"], tmp_path, log=lambda s: None)
    _run.run("tuning", ["fake"], tmp_path, log=lambda s: None)
    assert calls == ["x/a"]  # the second run found the cell
    res = _run.cells("tuning", ["fake"], tmp_path)
    assert res[("x/a", "fake")]["ap"] == pytest.approx(1.0) and res[("x/a", "fake")]["roc"] == 1.0
