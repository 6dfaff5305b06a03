"""WindowNoveltyDetector's "ladder" default at its edges: the reference cap with a member
shorter than the window, degenerate (constant) calibration, a stride equal to the shortest
member window, small windows, files saved before the member scale was a choice, and a stride
changed after fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from novelty import WindowNoveltyDetector


def _sine(T, period=25, d=1, noise=0.2, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(T)[:, None]
    return np.sin(2 * np.pi * t / period + np.arange(d)) + noise * rng.normal(size=(T, d))


@pytest.mark.parametrize("max_reference", [1, 5, 50])
def test_max_reference_bounds_every_member_including_the_half_window(max_reference):
    """``max_reference`` is the most normal windows kept: the w/2 member has more windows
    than the base member, and it too keeps at most ``max_reference``, at fit and after
    update."""
    det = WindowNoveltyDetector(window=100, max_reference=max_reference).fit(_sine(1000))
    assert det.member_windows_[0] == 50
    assert max(len(r) for r in det.references_) <= max_reference
    assert max(len(r) for r in det.references_) >= max_reference // 2  # not thinned for nothing
    det.update(_sine(900, seed=1))
    assert max(len(r) for r in det.references_) <= max_reference


def test_max_reference_bounds_the_reference_of_several_recordings():
    """Each recording adds a window beyond what the stride alone allows: six recordings and
    ``max_reference=4`` keep at most 4 windows per member (every other one, stride doubled)."""
    recs = [_sine(300, seed=i) for i in range(6)]
    det = WindowNoveltyDetector(window=20, max_reference=4).fit(recs)
    assert 2 <= max(len(r) for r in det.references_) <= 4
    assert np.isfinite(det.score_samples(_sine(200, seed=9))).all()


def test_constant_normal_data_gives_finite_scores_and_flags_any_change():
    """A constant normal recording: every member's held-out novelties are 0, so its tail
    scale (q99 - median) is 0 and falls back to the standard deviation (0), then 1; scores
    stay finite, the same constant is never flagged and any change is."""
    det = WindowNoveltyDetector(window=20).fit(np.full((600, 2), 3.7))
    assert det.member_scales_ == [(0.0, 1.0)] * 5
    same, moved = np.full((200, 2), 3.7), np.full((200, 2), 3.7)
    moved[80:90, 1] += 0.01
    for x in (same, moved):
        assert np.isfinite(det.score_samples(x)).all()
        assert np.isfinite(det.p_values(x)).all()
    assert (det.predict(same) == 1).all()
    assert (det.predict(moved)[80:90] == -1).all()


def test_a_member_with_an_empty_upper_tail_uses_its_standard_deviation():
    """Normal data that is flat but for one spike: a member whose held-out novelties are 0
    at and above the 99th percentile gets the standard deviation as its scale (finite z)."""
    x = np.zeros(600)
    x[300] = 5.0
    det = WindowNoveltyDetector(window=20).fit(x)
    assert all(np.isfinite(m) and q > 0 for m, q in det.member_scales_)
    assert np.isfinite(det.score_samples(np.zeros(200))).all()


@pytest.mark.parametrize("window", [2, 4, 8])
def test_small_windows_keep_the_half_member_at_the_window(window):
    """w/2 below min(w, 16) is raised to it: for w <= 16 the half member is at w itself."""
    det = WindowNoveltyDetector(window=window).fit(_sine(600))
    assert det.member_windows_ == [window, window, 2 * window, 4 * window, window]
    assert np.isfinite(det.score_samples(_sine(100, seed=1))).all()


def test_a_stride_equal_to_the_shortest_member_window_is_accepted_and_streams_alike():
    normal, x = _sine(800, d=2, seed=3), _sine(333, d=2, seed=4)
    det = WindowNoveltyDetector(window=40, stride=20).fit(normal)
    assert min(det.member_windows_) == 20
    whole = det.score_samples(x)
    st = det.stream()
    got = np.concatenate([st.push(x[i : i + 7]) for i in range(0, len(x), 7)] + [st.finish()])
    np.testing.assert_allclose(got, whole, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="shortest member window"):
        WindowNoveltyDetector(window=40, stride=21).fit(normal)


def test_a_stride_set_after_fit_longer_than_a_member_window_is_a_clear_error():
    det = WindowNoveltyDetector(window=40).fit(_sine(1000))
    det.set_params(stride=40)
    with pytest.raises(ValueError, match=r"stride=40 is larger than the shortest member window"):
        det.score_samples(_sine(300, seed=1))


def test_a_file_saved_before_member_scale_loads_with_the_iqr(tmp_path):
    """A model saved before ``member_scale`` existed (no ``member_scale_`` and no
    ``member_scale`` parameter; the former default detector=None meant "multiscale") loads
    with ``member_scale_ == "iqr"`` and scores, streams and updates as it was saved."""
    normal, x = _sine(1500, d=2, seed=5), _sine(400, d=2, seed=6)
    det = WindowNoveltyDetector(window=24, detector="multiscale", member_scale="iqr").fit(normal)
    new = tmp_path / "new.model"
    det.save(new)
    with np.load(new) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["window_meta"]))
    del meta["member_scale_"], meta["params"]["member_scale"]
    meta["params"]["detector"] = None
    arrays["window_meta"] = np.array(json.dumps(meta))
    old = tmp_path / "old.model"
    with open(old, "wb") as f:
        np.savez(f, **arrays)
    back = WindowNoveltyDetector.load(old)
    assert back.member_scale_ == "iqr" and back.detector_ == "multiscale"
    assert back.member_windows_ == [24, 48, 24]
    np.testing.assert_array_equal(back.score_samples(x), det.score_samples(x))
    st = back.stream()
    got = np.concatenate([st.push(x[:150]), st.push(x[150:]), st.finish()])
    np.testing.assert_allclose(got, det.score_samples(x), rtol=1e-10, atol=1e-12)
    n = back.calibration_scores_.size
    back.update(_sine(500, d=2, seed=7))
    assert back.calibration_scores_.size == n + 500


def test_explain_with_five_members_takes_the_shares_of_the_member_of_largest_z():
    """The ladder's channel shares at a step are those of its member whose z is largest
    there (each member's shares and z from the one-member detector of the same window and
    segments, on the ladder's held-out member scales); novelty, p-values and flags agree with
    score_samples, p_values and predict."""
    normal, x = _sine(2000, d=3, seed=11), _sine(600, d=3, seed=12)
    x[300:330, 2] += 2.5
    det = WindowNoveltyDetector(window=40, n_segments=8).fit(normal)
    ex = det.explain(x)
    specs = [("knn", 20, 4), ("knn", 40, 8), ("knn", 80, 16), ("knn", 160, 32),
             ("znorm-knn", 40, 8)]  # fmt: skip
    z, shares = [], []
    for (name, w, p), (med, q) in zip(specs, det.member_scales_):
        one = WindowNoveltyDetector(window=w, n_segments=p, detector=name).fit(normal).explain(x)
        z.append((one.novelty - med) / q)
        shares.append(one.channel_shares)
    best = np.argmax(z, axis=0)
    want = np.stack(shares)[best, np.arange(len(x))]
    np.testing.assert_allclose(ex.channel_shares, want, rtol=1e-9, atol=1e-12)
    assert len(set(best.tolist())) > 1  # the deciding member changes along the recording
    np.testing.assert_allclose(ex.novelty, -det.score_samples(x), rtol=1e-12)
    np.testing.assert_array_equal(ex.p_values, det.p_values(x))
    np.testing.assert_array_equal(ex.flagged, det.predict(x) == -1)
    assert (ex.channel[300:330] == "channel_2").all()


def _square(T, period=288, high=108, offset=180):
    """A noise-free square wave (NAB's art_daily_perfect_square_wave: 80 for 108 of each 288
    steps, 20 otherwise)."""
    t = (np.arange(T) + offset) % period
    return np.where(t < high, 80.0, 20.0)


@pytest.mark.parametrize("detector", ["ladder", "multiscale", "knn"])
def test_an_exact_repeat_of_the_normal_data_is_not_flagged(detector):
    """Noise-free periodic normal data: a later period is an exact repeat, its windows are at
    distance 0 from normal ones, and it is not flagged. Rounding in the distance (about 1e-8
    of a standard deviation) is not novelty: a member whose held-out novelties are only
    rounding would otherwise get a scale of 1e-8 and its rounding would decide the flags
    (60 % of the steps flagged, measured)."""
    x = _square(4032)
    det = WindowNoveltyDetector(contamination=0.01, detector=detector).fit(x[:2016])
    new = x[2016:]
    assert (det.predict(new) == 1).all()
    assert (det.score_samples(new) >= -det.threshold_).all()
    assert all(q >= 1e-6 for _, q in det.member_scales_ or [])


def test_update_with_the_ladder_puts_new_normal_data_at_distance_zero():
    """After update(b), b's windows are in every member's reference: each member's novelty
    on b is 0, so b's score is minus the weighted mean of the members' -median / scale
    (the ladder's weights 1/6 x 4 and 1/3); the calibration grows by len(b), scored against
    the reference before b joined (held out)."""
    a, b = _sine(1500, d=2, seed=15), 2.0 * _sine(1500, d=2, seed=16)
    det = WindowNoveltyDetector(window=25).fit(a)
    n_cal = det.calibration_scores_.size
    before = det.score_samples(b)
    det.update(b)
    assert det.calibration_scores_.size == n_cal + len(b)
    np.testing.assert_array_equal(det.calibration_scores_[n_cal:], -before)
    want = -np.average([-m / q for m, q in det.member_scales_], weights=[1, 1, 1, 1, 2])
    np.testing.assert_allclose(det.score_samples(b), want, rtol=1e-12)
    assert (det.predict(b) == 1).all()


def test_a_stream_shorter_than_the_longest_member_window_names_it_as_score_samples_does():
    det = WindowNoveltyDetector(window=50).fit(_sine(3000))
    st = det.stream()
    assert len(st.push(_sine(150))) == 0
    words = r"fewer than the window \(200: the longest member's; window_ is 50\)"
    with pytest.raises(ValueError, match="the recording has 150 steps, " + words):
        st.finish()
    with pytest.raises(ValueError, match="the recording has 150 steps, " + words):
        det.score_samples(_sine(150))


def test_at_distance_zero_no_channel_stands_out():
    """A step whose deciding windows repeat normal ones exactly has channel shares 1/d (the
    rounding of a zero distance does not name a channel)."""
    x = np.c_[_square(4032), _square(4032, offset=40)]
    det = WindowNoveltyDetector(window=96, detector="knn").fit(x[:2016])
    ex = det.explain(x[2016:])
    assert (ex.novelty == 0).all()
    np.testing.assert_array_equal(ex.channel_shares, 0.5)


@pytest.mark.parametrize("k", [2, 3])
def test_n_neighbors_is_the_mean_distance_to_the_k_nearest_normal_windows(k):
    """Brute force: every window of the standardised recording against every normal window,
    the mean of the k smallest root-mean-square distances, a step the mean over the windows
    covering it."""
    normal, x = _sine(240, d=2, seed=1), _sine(90, d=2, seed=2)
    x[40:50, 1] += 2.0
    w = 12
    kw = dict(window=w, stride=1, n_segments=w, aggregate="mean", detector="knn")
    got = -WindowNoveltyDetector(n_neighbors=k, **kw).fit(normal).score_samples(x)
    mu, sd = normal.mean(0), normal.std(0)
    nz, xz = (normal - mu) / sd, (x - mu) / sd
    R = np.array([nz[i : i + w].ravel() for i in range(len(nz) - w + 1)])
    Q = np.array([xz[i : i + w].ravel() for i in range(len(xz) - w + 1)])
    dist = np.sqrt(((Q[:, None, :] - R[None]) ** 2).sum(-1) / (w * 2))
    win = np.sort(dist, axis=1)[:, :k].mean(axis=1)
    want = [win[max(0, t - w + 1) : min(t, len(x) - w) + 1].mean() for t in range(len(x))]
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-9)
