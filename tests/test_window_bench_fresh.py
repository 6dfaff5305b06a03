"""The fresh stream set of the window benchmark (session 16, experiments/window_bench/_data):
the 58 streams keep their halves, the fresh set is the fixed 24 streams, disjoint from them,
and ``run``/``report``/``bench_windows.py`` accept ``--half fresh`` without printing accuracy
after a run."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from experiments.window_bench import _data, _run

HAVE_ALL = _data.NAB.exists() and _data.UEA.exists() and _data.UCR.exists()
needs_data = pytest.mark.skipif(not HAVE_ALL, reason="NAB, UEA or unpacked UCR data absent")

FRESH = {
    "nab/realTraffic/TravelTime_387",
    *(
        f"nab/realTweets/Twitter_volume_{t}"
        for t in ("AAPL", "AMZN", "CRM", "CVS", "FB", "GOOG", "IBM", "KO", "PFE", "UPS")
    ),
    "uea/Libras",
    "uea/StandWalkJump",
    *(
        f"ucr/{s}"
        for s in (
            "ACSF1",
            "Adiac",
            "Beef",
            "BeetleFly",
            "Chinatown",
            "DiatomSizeReduction",
            "FiftyWords",
            "Fungi",
            "MiddlePhalanxOutlineCorrect",
            "SonyAIBORobotSurface2",
            "Worms",
        )  # fmt: skip
    ),
}


def _hash_half(name: str) -> str:
    """The split rule as it was before the fresh set (written out again: an independent oracle)."""
    first = hashlib.sha256(("window-bench-2026:" + name).encode()).digest()[0]
    return "confirmation" if first & 1 else "tuning"


@needs_data
def test_the_58_streams_keep_their_halves():
    names = _data.stream_names()
    assert len(names) == len(set(names)) == 58
    halves = [_data.half_of(n) for n in names]
    assert halves == [_hash_half(n) for n in names]
    assert halves.count("tuning") == 35 and halves.count("confirmation") == 23
    assert _run._names("tuning") == [n for n, h in zip(names, halves) if h == "tuning"]
    assert _run._names("confirmation") == [n for n, h in zip(names, halves) if h == "confirmation"]


@needs_data
def test_the_fresh_set_is_the_fixed_24_streams_disjoint_from_the_58():
    fresh = _data.fresh_stream_names()
    assert len(fresh) == 24 and set(fresh) == FRESH
    assert not set(fresh) & set(_data.stream_names())
    assert all(_data.half_of(n) == "fresh" for n in fresh)
    assert _run._names("fresh") == fresh
    # the NAB part follows the size rule: labelled files with more than MAX_NAB grid steps
    for n in fresh:
        if n.startswith("nab/"):
            assert _data._nab_steps(n[4:] + ".csv") > _data.MAX_NAB
    # a name outside every set keeps the hash rule; a NAB file under the cap is not fresh
    assert _data.half_of("ucr/NotASet") == _hash_half("ucr/NotASet")
    small = next(n for n in _data.stream_names() if n.startswith("nab/"))
    assert _data.half_of(small) != "fresh"


def test_fresh_names_are_not_in_the_old_sets():
    assert not set(_data.FRESH_UEA_SETS) & set(_data.UEA_SETS)
    assert not set(_data.FRESH_UCR_SETS) & set(_data.UCR_SETS)
    assert _data.half_of("uea/Libras") == _data.half_of("ucr/Chinatown") == "fresh"
    with pytest.raises(ValueError, match="half must be"):
        _run._names("confirm")


@pytest.mark.skipif(not (_data.UCR / "Chinatown").exists(), reason="UCR data not unpacked")
def test_a_small_fresh_class_stream_builds():
    s = _data.load_stream("ucr/Chinatown")
    assert s.name == "ucr/Chinatown" and s.d == 1
    assert s.normal.ndim == s.test.ndim == 2 and len(s.labels) == len(s.test)
    assert np.all(np.isfinite(s.normal)) and np.all(np.isfinite(s.test))
    assert set(np.unique(s.labels)) == {0, 1}
    assert 0.05 <= s.labels.mean() <= 0.20
    # anomalies are whole inserted series of length 24, never first, never two in a row
    edges = np.flatnonzero(np.diff(s.labels.astype(int)) != 0) + 1
    assert s.labels[0] == 0 and np.all(np.diff(edges)[::2] == 24)
    np.testing.assert_array_equal(_data.load_stream("ucr/Chinatown").test, s.test)  # seeded


def _bench():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_windows.py"
    spec = importlib.util.spec_from_file_location("bench_windows_fresh_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fresh_run_prints_cells_not_accuracy(tmp_path, monkeypatch, capsys):
    y = np.r_[np.zeros(90), np.ones(10)].astype(np.int8)
    stream = _data.Stream("x/a", np.zeros((50, 1)), np.zeros((100, 1)), y, 10)

    def fails(s):
        raise RuntimeError("boom")

    table = {"good": lambda s: np.arange(100.0), "flat": lambda s: np.zeros(100), "bad": fails}
    monkeypatch.setattr(_run, "methods", lambda: table)
    monkeypatch.setattr(_run, "fresh_stream_names", lambda: ["x/a"])
    monkeypatch.setattr(_run, "load_stream", lambda n: stream)
    assert _bench().main(["run", "--half", "fresh", "--methods", "good,flat,bad",
                          "--out", str(tmp_path)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "| good | 1 | 0 | 0 | 0 | 0 | 0 |" in out
    assert "| flat | 1 | 0 | 0 | 0 | 0 | 1 |" in out  # a constant score is flagged
    assert "| bad | 0 | 0 | 1 | 0 |" in out and "x/a bad: RuntimeError: boom" in out
    assert "AP" not in out and "ROC" not in out and "rank" not in out
    # the report on the fresh half is there when asked for
    assert _bench().main(["report", "--half", "fresh", "--methods", "good",
                          "--out", str(tmp_path)]) == 0  # fmt: skip
    rep = capsys.readouterr().out
    assert "## fresh half: 1 streams" in rep and "| good | 1 | 1.000 |" in rep
