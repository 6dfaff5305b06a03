"""WindowNoveltyDetector on short normal data (issue 32): the calibration gap of long members,
the warning when the normal data holds few longest member windows, and the flag share of
pure-normal recordings in that regime (docs/windows.md, "Short normal data")."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from novelty import WindowNoveltyDetector
from novelty.windows import _detector
from novelty.windows._detector import MIN_CALIBRATION_BLOCKS, _calibration_gap


def _sine(T, period=100, seed=0, noise=0.2):
    rng = np.random.default_rng(seed)
    t = np.arange(T)
    return np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi)) + noise * rng.normal(size=T)


# ------------------------------------------------------------------ the warning
def test_short_normal_data_warns_with_the_numbers_and_the_remedy():
    det = WindowNoveltyDetector(contamination=0.05)
    with pytest.warns(UserWarning) as rec:
        det.fit(_sine(1200))
    msg = str(rec[0].message)
    w = det.window_
    assert det.member_windows_ == [round(w / 2), w, 2 * w, 300, w]  # 4w capped at 1200 // 4
    assert "1200 steps" in msg and "(300 steps" in msg and "only 4 windows" in msg
    assert f"fewer than {MIN_CALIBRATION_BLOCKS}" in msg
    # the remedy: the unclipped 4w member needs 8 of its windows; or a window of 1200 // 32
    assert f"at least {8 * 4 * w} steps" in msg and "window= (at most 37" in msg
    assert rec[0].filename == __file__  # points at the caller's fit


def test_single_member_warning_names_its_window():
    with pytest.warns(UserWarning, match=r"only 6 windows .* \(200 steps.*at most 150 for det"):
        WindowNoveltyDetector(window=200, detector="knn").fit(_sine(1200))


@pytest.mark.parametrize(
    "kw, T",
    [({}, 3200), ({"window": 37}, 1200), ({"window": 150, "detector": "knn"}, 1200)],
)
def test_no_warning_when_the_data_holds_enough_longest_windows(kw, T):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        det = WindowNoveltyDetector(**kw).fit(_sine(T, seed=1))
    assert T // det.max_window_ >= MIN_CALIBRATION_BLOCKS


def test_the_remedies_the_warning_names_silence_it():
    with pytest.warns(UserWarning) as rec:
        det = WindowNoveltyDetector().fit(_sine(1200, seed=2))
    msg = str(rec[0].message)
    need = int(msg.split("at least ")[1].split(" steps")[0])
    smaller = int(msg.split("window= (at most ")[1].split(" ")[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WindowNoveltyDetector(window=det.window_).fit(_sine(need, seed=2))
        WindowNoveltyDetector(window=smaller).fit(_sine(1200, seed=2))


# ------------------------------------------------------------------ the calibration gap
def test_calibration_gap_is_the_member_window_at_most_the_window():
    assert _calibration_gap(50, 100) == 50
    assert _calibration_gap(100, 100) == 100
    assert _calibration_gap(400, 100) == 100


def test_long_members_held_out_reference_is_a_superset(monkeypatch):
    """With the gap of the window (not of the member's own window), a member longer than the
    window keeps a superset of its held-out reference windows, so each of its held-out step
    novelties (mean over covering windows of the nearest-window distance) can only fall;
    members no longer than the window are unchanged."""
    x = _sine(1600, seed=3)
    with pytest.warns(UserWarning, match="only 4 windows"):
        det = WindowNoveltyDetector(window=100).fit(x)
    z = [(x[:, None] - det.mean_) / det.scale_]
    offsets = np.array([0, len(x)])
    new = det._calibrate(z, offsets)
    monkeypatch.setattr(_detector, "CALIBRATION_GAP", "member")
    old = det._calibrate(z, offsets)
    for wm, a, b in zip(det.member_windows_, new, old):
        assert a.shape == b.shape
        if wm <= det.window_:
            np.testing.assert_array_equal(a, b)
        else:
            assert (a <= b + 1e-12).all() and (a < b - 1e-9).mean() > 0.25, wm


# ------------------------------------------------------------------ flag share
def _shares(T_fit, n_rec=40, T_new=1200, eps=0.05):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for r in range(n_rec):
            det = WindowNoveltyDetector(contamination=eps).fit(_sine(T_fit, seed=1000 + 2 * r))
            out.append(float((det.predict(_sine(T_new, seed=1001 + 2 * r)) == -1).mean()))
    return np.array(out), det.max_window_


@pytest.mark.parametrize("T_fit", [1200, 2400])
def test_short_data_flag_share_within_block_binomial_bounds(T_fit):
    """40 pure-normal recordings (period-100 sine, automatic window, ladder members up to
    300 or 400 steps, 4 or 6 longest windows in the normal data). The flags come in runs of
    about a longest member window, so a recording of 1,200 steps holds ``1200 // longest``
    independent trials, not 1,200: the mean flag share must be within 3.3 standard errors of
    ``eps`` above, the larger of the recordings' spread and the binomial one over those
    blocks, and at least ``eps / 3`` (not vacuous; before the fix of the gap, 1,200 normal
    steps gave 0.010)."""
    eps = 0.05
    s, longest = _shares(T_fit)
    n_blocks = len(s) * (1200 // longest)
    se = max(s.std(ddof=1) / np.sqrt(len(s)), np.sqrt(eps * (1 - eps) / n_blocks))
    assert eps / 3 <= s.mean() <= eps + 3.3 * se, (s.mean(), se)
