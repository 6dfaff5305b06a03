"""The window-statistics members of WindowNoveltyDetector (opt-in: "stats-knn", "stats2-knn",
"ladder+stats"): features against a brute-force per-window computation, streaming equals
one-shot scoring, shapes, a flat channel, and an amplitude change that a shape member cannot
see."""

from __future__ import annotations

import numpy as np
import pytest
from window_helpers import streamed

from novelty import WindowNoveltyDetector
from novelty.windows._engine import ZNORM_FLOOR, StatsFeaturizer


def _sine(T, period=25, d=1, noise=0.2, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(T)[:, None]
    phase = rng.uniform(0, 2 * np.pi, size=d)
    return np.sin(2 * np.pi * t / period + phase) + noise * rng.normal(size=(T, d))


def _brute_raw(x, w, parts, starts):
    """Per window, channel and part: mean, std (divisor n), mean |first difference|."""
    p = max(1, min(parts, w // 2))
    b = (np.arange(p + 1) * w) // p
    rows = []
    for s in starts:
        win = x[s : s + w]
        row = []
        for c in range(x.shape[1]):
            for j in range(p):
                part = win[b[j] : b[j + 1], c]
                row += [part.mean(), part.std(), np.abs(np.diff(part)).mean()]
        rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize("w,parts,d", [(2, 1, 1), (3, 2, 2), (17, 1, 3), (17, 2, 3), (40, 2, 1)])
def test_features_equal_a_brute_force_per_window_computation(w, parts, d):
    rng = np.random.default_rng(w + d)
    x = rng.normal(size=(300, d)) * np.array([1.0, 3.0, 0.2][:d]) + np.arange(d)
    starts = np.sort(rng.choice(300 - w + 1, size=60, replace=False))
    f = StatsFeaturizer(window=w, d=d, parts=parts)
    raw = f.raw(x, starts)
    want = _brute_raw(x, w, parts, starts)
    assert raw.shape == (60, f.dim) == want.shape
    assert f.dim == d * f.p * 3 and f.p == max(1, min(parts, w // 2))
    np.testing.assert_allclose(raw, want, rtol=0, atol=1e-10)
    # standardised by the normal windows' statistics (every start: stride 1)
    normal = [rng.normal(size=(200, d)), rng.normal(size=(90, d)), rng.normal(size=(1, d))]
    f.fit(normal)
    all_raw = np.concatenate(
        [_brute_raw(r, w, parts, range(len(r) - w + 1)) for r in normal if len(r) >= w]
    )
    np.testing.assert_allclose(f.loc, all_raw.mean(0), atol=1e-10)
    np.testing.assert_allclose(f.scale, np.maximum(all_raw.std(0), ZNORM_FLOOR), atol=1e-10)
    np.testing.assert_allclose(f.features(x, starts), (want - f.loc) / f.scale, atol=1e-9)


def test_featurizer_errors():
    with pytest.raises(ValueError, match="at least 2"):
        StatsFeaturizer(window=1, d=1)
    f = StatsFeaturizer(window=10, d=1)
    with pytest.raises(RuntimeError, match="before fit"):
        f.features(np.zeros((20, 1)), np.array([0]))
    with pytest.raises(ValueError, match="no normal recording"):
        f.fit([np.zeros((5, 1))])


@pytest.mark.parametrize(
    "detector,stride,how",
    [("stats-knn", "auto", "mean"), ("stats2-knn", 3, "max"), ("ladder+stats", "auto", "mean")],
)
def test_chunked_scoring_equals_one_shot(detector, stride, how):
    normal, x = _sine(900, d=2, seed=1), _sine(413, d=2, seed=2)
    det = WindowNoveltyDetector(window=24, stride=stride, aggregate=how, detector=detector)
    det.fit(normal)
    whole = det.score_samples(x)
    assert whole.shape == (413,) and np.isfinite(whole).all()
    for sizes in ([413], [1, 39, 1, 200, 172], [7] * 59):
        got, st = streamed(det, x, sizes)
        np.testing.assert_allclose(got, whole, rtol=1e-10, atol=1e-12)
        assert all(len(m.buf) <= m.w for m in st._s.streams)


def test_detector_shapes_and_members():
    normal = _sine(1200, d=3, seed=3)
    det = WindowNoveltyDetector(window=30, detector="ladder+stats").fit(normal)
    assert det.member_windows_ == [16, 30, 60, 120, 30, 16, 30, 60, 120]  # at least 16
    kinds = [type(f).__name__ for f in det._featurizers]
    assert kinds == ["Featurizer"] * 5 + ["StatsFeaturizer"] * 4
    assert [f.dim for f in det._featurizers[5:]] == [9, 9, 9, 9]
    assert [r.F.shape[1] for r in det.references_[5:]] == [9, 9, 9, 9]
    assert np.isclose(det._member_weights().sum(), 1.0)
    e = det.explain(_sine(300, d=3, seed=4))
    assert e.channel_shares.shape == (300, 3)
    np.testing.assert_allclose(e.channel_shares.sum(1), 1.0)
    two = WindowNoveltyDetector(window=30, detector="stats2-knn").fit(normal)
    assert two._featurizers[0].dim == 3 * 2 * 3


def test_a_flat_channel_does_not_blow_up():
    rng = np.random.default_rng(5)
    normal = np.column_stack([_sine(1000, seed=5)[:, 0], np.full(1000, 3.0)])
    det = WindowNoveltyDetector(window=25, detector="stats-knn").fit(normal)
    f = det._featurizers[0]
    # the flat channel's three statistics: spread 0 in the normal data, scale floored
    np.testing.assert_array_equal(f.scale[3:], ZNORM_FLOOR)
    x = np.column_stack([_sine(400, seed=6)[:, 0], np.full(400, 3.0)])
    jitter = x.copy()
    jitter[:, 1] += 1e-7 * rng.normal(size=400)  # far below the floor: no effect worth a flag
    a, b = det.score_samples(x), det.score_samples(jitter)
    assert np.isfinite(a).all() and np.isfinite(b).all()
    assert np.abs(a - b).max() < 1e-4 * np.abs(a).max()
    assert (det.predict(jitter) == -1).mean() < 0.1


def test_an_amplitude_change_that_a_shape_member_cannot_see():
    """A stretch of the same sine at 2.5 x the amplitude: z-normalised windows inside it equal
    normal ones, so the shape member does not flag its middle; the statistics member does."""
    rng = np.random.default_rng(7)
    t = np.arange(4000)
    normal = np.sin(2 * np.pi * t / 50) + 0.05 * rng.normal(size=4000)
    x = np.sin(2 * np.pi * t[:1200] / 50) + 0.05 * rng.normal(size=1200)
    x[400:800] *= 2.5
    middle = slice(520, 680)  # more than two longest windows from either edge
    stats = WindowNoveltyDetector(window=50, detector="stats-knn").fit(normal)
    shape = WindowNoveltyDetector(window=50, detector="znorm-knn").fit(normal)
    assert (stats.predict(x)[middle] == -1).all()
    assert (shape.predict(x)[middle] == -1).mean() < 0.2  # 0.05 measured
    assert (stats.predict(x)[:300] == -1).mean() < 0.1  # normal steps stay mostly unflagged


@pytest.mark.parametrize("detector", ["stats-knn", "stats2-knn", "ladder+stats"])
def test_a_detector_with_statistics_members_saves_and_loads_the_same_scores(tmp_path, detector):
    normal = _sine(900, seed=8)
    x = _sine(400, seed=10)
    x[150:250] *= 2.0
    det = WindowNoveltyDetector(window=20, detector=detector).fit(normal)
    path = det.save(tmp_path / "m.npz")
    back = WindowNoveltyDetector.load(path)
    np.testing.assert_array_equal(back.score_samples(x), det.score_samples(x))
    np.testing.assert_array_equal(back.predict(x), det.predict(x))
    for f, g in zip(det._featurizers, back._featurizers, strict=True):
        if hasattr(f, "loc"):
            np.testing.assert_array_equal(f.loc, g.loc)
            np.testing.assert_array_equal(f.scale, g.scale)


def test_update_keeps_the_statistics_standardisation():
    normal = _sine(800, seed=9)
    det = WindowNoveltyDetector(window=20, detector="stats-knn").fit(normal)
    f = det._featurizers[0]
    loc, scale = f.loc.copy(), f.scale.copy()
    n_ref = len(det.references_[0])
    det.update(3.0 * _sine(400, seed=10))
    np.testing.assert_array_equal(f.loc, loc)
    np.testing.assert_array_equal(f.scale, scale)
    assert len(det.references_[0]) > n_ref


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("stats_loc_0"), "damaged"),
        (lambda d: d.update(stats_loc_0=np.zeros(1)), "statistics standardisation"),
        (lambda d: d.update(stats_scale_0=-d["stats_scale_0"]), "statistics standardisation"),
        (lambda d: d.update(stats_scale_0=d["stats_scale_0"] * np.nan), "standardisation"),
    ],
    ids=["missing", "wrong-shape", "negative-scale", "nan-scale"],
)
def test_a_model_file_with_a_bad_statistics_standardisation_is_refused(tmp_path, change, message):
    det = WindowNoveltyDetector(window=20, detector="stats-knn").fit(_sine(900, seed=8))
    path = det.save(tmp_path / "m.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    change(arrays)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=message):
        WindowNoveltyDetector.load(tmp_path / "bad.npz")
