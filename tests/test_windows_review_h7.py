"""Review H7 of the short-data calibration of WindowNoveltyDetector (issue 32, commit 54859d4):
the held-out references checked window by window against the rule (no shared step with the
held-out block, the gap, a superset of the former rule's reference), the warning's remedies
followed as worded (the default automatic window too), save/load and update."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from novelty import WindowNoveltyDetector
from novelty.windows import _detector, _engine


def _sine(T, period=100, seed=0, noise=0.2):
    rng = np.random.default_rng(seed)
    t = np.arange(T)
    return np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi)) + noise * rng.normal(size=T)


def _fit(X, **kw):
    """The fitted detector and the messages of its UserWarnings."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        det = WindowNoveltyDetector(**kw).fit(X)
    return det, [str(r.message) for r in rec if issubclass(r.category, UserWarning)]


# ------------------------------------------------------------------ the warning's remedies
@pytest.mark.parametrize(
    "period, T, detector",
    [(400, 1000, None), (150, 1000, None), (400, 1200, "knn"), (250, 600, "multiscale")],
)
def test_the_more_data_remedy_as_worded_silences_the_warning_with_the_auto_window(
    period, T, detector
):
    """With ``window="auto"`` (the default) more normal data may give another window (the
    automatic window is clipped to a quarter of the recording, and the period estimate moves a
    step or two): the remedy "at least N steps" must name the window it holds for, and
    following it as worded must silence the warning."""
    det, msgs = _fit(_sine(T, period), detector=detector)
    assert len(msgs) == 1, msgs
    m = re.search(r"at least (\d+) steps(?: with window=(\d+))?", msgs[0])
    assert m is not None, msgs[0]
    need = int(m.group(1))
    kw = {"detector": detector}
    if m.group(2) is not None:
        assert int(m.group(2)) == det.window_
        kw["window"] = int(m.group(2))
    det2, msgs2 = _fit(_sine(need, period, seed=1), **kw)
    assert msgs2 == [], msgs2
    assert need // det2.max_window_ >= _detector.MIN_CALIBRATION_BLOCKS


@pytest.mark.parametrize("detector", ["ladder", "knn", "multiscale", "knn+znorm", "znorm-knn"])
@pytest.mark.parametrize(
    "window, lengths",
    [(100, [1200]), (60, [700]), (200, [1500]), (16, [200]), (30, [130]), (100, [400, 400, 500])],
)
def test_both_remedies_silence_the_warning(detector, window, lengths):
    """A fixed window, one recording or several: ``need`` steps (the recordings scaled up) at
    the same window, or the suggested window on the same data, fit without the warning; the
    suggested window is the largest that does so for one recording."""
    X = [_sine(n, seed=i) for i, n in enumerate(lengths)]
    det, msgs = _fit(X, window=window, detector=detector)
    if not msgs:
        assert sum(lengths) // det.max_window_ >= _detector.MIN_CALIBRATION_BLOCKS
        return
    need = int(re.search(r"at least (\d+) steps", msgs[0]).group(1))
    smaller = int(re.search(r"window= \(at most (\d+)", msgs[0]).group(1))
    assert smaller < window
    more = [_sine(int(np.ceil(n * need / sum(lengths))), seed=i) for i, n in enumerate(lengths)]
    assert _fit(more, window=window, detector=detector)[1] == []
    assert _fit(X, window=smaller, detector=detector)[1] == []
    if len(lengths) == 1 and smaller > 2:
        assert _fit(X, window=smaller + 1, detector=detector)[1] != []


def test_no_warning_for_the_readme_window_example():
    rng = np.random.default_rng(0)
    t = np.arange(8000)
    rec = np.c_[np.sin(2 * np.pi * t / 50), np.cos(2 * np.pi * t / 50)]
    rec = rec + 0.1 * rng.normal(size=(8000, 2))
    det, msgs = _fit(rec[:6000], window="auto", contamination=0.01)
    assert msgs == [] and det.member_windows_ == [25, 50, 100, 200, 50]


# ------------------------------------------------------------------ the held-out references
@pytest.mark.parametrize(
    "detector, window, lengths, max_reference",
    [
        ("ladder", 100, [1600], 20000),
        ("ladder", 40, [700, 500, 900], 20000),
        ("ladder", 40, [700, 500, 900], 150),  # a thinned reference (a stride > 1)
        ("multiscale", 50, [450, 800], 20000),
        ("knn+znorm", 30, [1000], 20000),
    ],
)
def test_held_out_references_window_by_window(
    monkeypatch, detector, window, lengths, max_reference
):
    """Every call scoring a held-out piece: each reference window of a member (start ``s``,
    ``member`` steps) keeps ``min(member, window_)`` steps away from the whole block (so it
    shares no step with the scored piece), and it holds every normal window of the member's
    reference that the former rule (a gap of the member's own window) kept."""
    X = [_sine(n, seed=i) for i, n in enumerate(lengths)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        det = WindowNoveltyDetector(
            window=window, detector=detector, max_reference=max_reference
        ).fit(X)
    assert (det.reference_stride_ == 1) == (max_reference > 10000)
    z = [(np.asarray(x, float)[:, None] - det.mean_) / det.scale_ for x in X]
    offsets = np.cumsum([0] + [len(r) for r in z])
    total = int(offsets[-1])
    k = int(min(det.n_folds, total // (2 * det.window_), total // det.max_window_))
    bounds = [round(i * total / k) for i in range(k + 1)]
    calls = []
    real = _engine.score_recording

    def spy(x, f, sub, *args, **kw):
        # where the scored piece lies in the concatenated normal data
        for r, off in zip(z, offsets[:-1]):
            if np.shares_memory(x, r):
                start = (x.__array_interface__["data"][0] - r.__array_interface__["data"][0]) // (
                    r.strides[0]
                )
                calls.append((int(off + start), len(x), f.window, sub.gstart.copy()))
        return real(x, f, sub, *args, **kw)

    monkeypatch.setattr(_engine, "score_recording", spy)
    det._calibrate(z, offsets)
    assert len(calls) >= len(det.member_windows_)
    windows = {
        f.window: ref.gstart for f, ref in zip(det._featurizers, det.references_)
    }  # members of equal windows share starts
    for a, n, wm, starts in calls:
        g0, g1 = next((b0, b1) for b0, b1 in zip(bounds[:-1], bounds[1:]) if b0 <= a < b1)
        assert g0 <= a and a + n <= g1
        gap = min(wm, det.window_)
        assert len(starts) > 0
        # no shared step, and the gap on both sides of the block
        assert ((starts + wm + gap <= g0) | (starts >= g1 + gap)).all(), (wm, g0, g1)
        assert not ((starts < a + n) & (starts + wm > a)).any()
        # a superset of the former rule's reference, and exactly the new rule's
        allst = windows[wm]
        old = allst[(allst + 2 * wm <= g0) | (allst >= g1 + wm)]
        new = allst[(allst + wm + gap <= g0) | (allst >= g1 + gap)]
        assert set(old.tolist()) <= set(starts.tolist())
        np.testing.assert_array_equal(np.sort(starts), np.sort(new))


# ------------------------------------------------------------------ save / load and update
@pytest.mark.parametrize("detector", ["ladder", "multiscale", "knn"])
def test_a_short_data_model_saved_and_loaded_scores_the_same(tmp_path, detector):
    det, msgs = _fit(_sine(1200, seed=4), detector=detector, window=100, contamination=0.05)
    new = _sine(900, seed=5)
    path = det.save(tmp_path / "m.npz") or tmp_path / "m.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # loading does not fit again: no warning
        back = WindowNoveltyDetector.load(path)
    np.testing.assert_array_equal(back.calibration_scores_, det.calibration_scores_)
    np.testing.assert_array_equal(back.score_samples(new), det.score_samples(new))
    np.testing.assert_array_equal(back.p_values(new), det.p_values(new))
    np.testing.assert_array_equal(back.predict(new), det.predict(new))


def test_update_scores_new_data_against_the_whole_reference_and_keeps_the_fit_calibration():
    """update() (no refit) adds the new recording's novelties against the full reference (new
    data shares no step with it) after the fit's calibration, which stays as fitted with the
    gap rule; the member scales stay frozen."""
    det, _ = _fit(_sine(1600, seed=6), window=100, contamination=0.05)
    cal, scales = det.calibration_scores_.copy(), list(det.member_scales_)
    new = _sine(900, seed=7)
    expected = -det.score_samples(new)
    det.update(new)
    np.testing.assert_array_equal(det.calibration_scores_[: len(cal)], cal)
    np.testing.assert_allclose(det.calibration_scores_[len(cal) :], expected, rtol=0, atol=1e-12)
    assert det.member_scales_ == scales


@pytest.mark.parametrize(
    "detector, window, T",
    [("ladder", 4, 40), ("ladder", 5, 60), ("multiscale", 3, 24), ("knn", 3, 12)],
)
def test_tiny_normal_data_names_no_window_that_still_warns(detector, window, T):
    """With fewer than ``2 * ceil(8 * top)`` normal steps (``top`` the detector's largest
    member multiple: 64 for "ladder") no window >= 2 holds 8 longest member windows: the
    warning then suggests no window (it named window=2, which warned again)."""
    x = np.random.default_rng(0).normal(size=T)
    msgs = _fit(x, window=window, detector=detector)[1]
    assert len(msgs) == 1
    m = re.search(r"window= \(at most (\d+)", msgs[0])
    if m is not None:
        assert _fit(x, window=int(m.group(1)), detector=detector)[1] == [], msgs[0]
    else:
        assert "more normal data" in msgs[0]


def test_no_scorable_block_names_the_longest_member_and_the_window():
    """Short recordings where no held-out block fits the longest member window (150 for the
    ladder at window 40): the error names that member window and the window itself."""
    rng = np.random.default_rng(0)
    recordings = [rng.normal(size=(n, 1)) for n in [100] * 5 + [300]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the short-data warning comes first
        with pytest.raises(ValueError, match=r"longest member window \(150 steps; window_ is 40\)"):
            WindowNoveltyDetector(window=40).fit(recordings)
