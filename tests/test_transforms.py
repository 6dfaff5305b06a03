import numpy as np
import pytest

from tskernels.transforms import (
    Preprocessor,
    ZScore,
    add_basepoint,
    add_time_channel,
    average_pool,
    clip,
    pooling_window,
)


def test_pooling_window():
    assert pooling_window(100) == 1
    assert pooling_window(101) == 2
    assert pooling_window(206) == 3
    assert pooling_window(2500) == 25


def test_average_pool_hand_computed():
    X = np.arange(14, dtype=float).reshape(1, 7, 2)  # x_t = (2t, 2t+1)
    out = average_pool(X, 3)  # windows {0,1,2}, {3,4,5}; step 6 dropped
    np.testing.assert_allclose(out[0], [[2.0, 3.0], [8.0, 9.0]])


def test_epilepsy_pools_206_to_68(uea_dir):
    from experiments.data import load_uea

    X, _ = load_uea("Epilepsy", data_dir=uea_dir)
    out = Preprocessor(basepoint=False).fit_transform(X)
    assert out.shape == (137, 68, 3)
    np.testing.assert_allclose(
        Preprocessor(basepoint=False, clip=None).fit(X).zscore_.mean_.shape, (68, 3)
    )


def test_zscore_per_step_and_channel():
    X = np.array([[[1.0, 10.0], [2.0, 0.0]], [[3.0, 20.0], [6.0, 0.0]]])  # (2, 2, 2)
    z = ZScore(eps=1e-4).fit(X)
    np.testing.assert_allclose(z.mean_, [[2.0, 15.0], [4.0, 0.0]])
    np.testing.assert_allclose(z.std_, [[1.0, 5.0], [2.0, 0.0]])
    out = z.transform(X)
    np.testing.assert_allclose(out[0, 0], [-1 / 1.0001, -5 / 5.0001])
    np.testing.assert_allclose(out[:, 1, 1], [0.0, 0.0])  # constant: no division by zero


def test_zscore_per_channel_for_unequal_lengths():
    X = [np.array([[0.0], [2.0]]), np.array([[4.0], [6.0], [8.0]])]
    z = ZScore(eps=0.0).fit(X)
    np.testing.assert_allclose(z.mean_, [4.0])
    np.testing.assert_allclose(z.std_, [np.sqrt(8.0)])
    out = z.transform(X)
    np.testing.assert_allclose(out[0][:, 0], [-4 / np.sqrt(8), -2 / np.sqrt(8)])


def test_clip_basepoint_time_channel():
    X = np.array([[[-7.0], [3.0], [9.0]]])
    np.testing.assert_allclose(clip(X, 5.0)[0, :, 0], [-5.0, 3.0, 5.0])
    b = add_basepoint(X)
    assert b.shape == (1, 4, 1) and b[0, 0, 0] == 0.0 and b[0, 1, 0] == -7.0
    t = add_time_channel(X)
    np.testing.assert_allclose(t[0, :, 1], [0.0, 0.5, 1.0])
    lst = add_time_channel([np.zeros((2, 1)), np.zeros((5, 1))])
    np.testing.assert_allclose(lst[1][:, 1], np.linspace(0, 1, 5))


def test_preprocessor_fits_on_corpus_only():
    rng = np.random.default_rng(0)
    corpus = rng.normal(3.0, 2.0, size=(50, 10, 2))
    other = rng.normal(0.0, 1.0, size=(5, 10, 2))
    pre = Preprocessor(time_channel=True).fit(corpus)
    out = pre.transform(other)
    assert out.shape == (5, 11, 3)
    expected = np.clip((other - corpus.mean(0)) / (corpus.std(0) + 1e-4), -5, 5)
    np.testing.assert_allclose(out[:, 1:, :2], expected)
    np.testing.assert_allclose(out[:, 0, :2], 0.0)
    np.testing.assert_allclose(out[0, :, 2], np.linspace(0, 1, 11))


def test_preprocessor_unequal_lengths():
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(L, 3)) for L in (7, 12, 29)]
    out = Preprocessor().fit_transform(X)
    assert [o.shape for o in out] == [(8, 3), (13, 3), (30, 3)]


def test_preprocessor_errors():
    pre = Preprocessor().fit(np.zeros((3, 5, 2)))
    with pytest.raises(ValueError, match="channel mismatch"):
        pre.transform(np.zeros((3, 5, 3)))
    with pytest.raises(ValueError, match="same length"):
        pre.transform(np.zeros((3, 6, 2)))
    with pytest.raises(ValueError, match="NaN"):
        Preprocessor().fit(np.full((3, 5, 2), np.nan))
    with pytest.raises(ValueError, match="3-D"):
        Preprocessor().fit(np.zeros((3, 5)))


def test_equal_length_list_is_treated_as_the_stacked_array():
    """Pre-processing depends on the lengths, not on the container: a list of equal-length
    series is z-scored per (time step, channel), exactly like the array, and returns it."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6, 9, 2)) * np.arange(1, 10)[None, :, None]  # per-step scales differ
    as_list = [x for x in X]
    ref = Preprocessor().fit(X)
    pre = Preprocessor().fit(as_list)
    assert pre.zscore_.per_step_ and pre.zscore_.mean_.shape == (9, 2)
    for data in (X, as_list, tuple(as_list)):
        out = pre.transform(data)
        assert isinstance(out, np.ndarray) and out.shape == (6, 10, 2)
        np.testing.assert_array_equal(out, ref.transform(X))
    # independent oracle: per (time step, channel) statistics, clip, zero basepoint
    z = np.clip((X - X.mean(axis=0)) / (X.std(axis=0) + 1e-4), -5, 5)
    np.testing.assert_allclose(pre.transform(as_list)[:, 1:], z, rtol=1e-12)
    for fn in (lambda a: average_pool(a, 2), clip, add_basepoint, add_time_channel):
        np.testing.assert_array_equal(fn(as_list), fn(X))


def _reference_preprocess(series, window, mean, scale, bound, time_channel):
    """The protocol's steps on one numpy series at a time (an independent, loop-per-series
    oracle): pool (a series shorter than the window becomes its mean), z-score, clip,
    basepoint, time channel."""
    out = []
    for x in series:
        k = len(x) // window
        if window > 1:
            x = (
                x.mean(axis=0, keepdims=True)
                if k == 0
                else x[: k * window].reshape(k, window, -1).mean(axis=1)
            )
        x = np.clip((x - mean) / scale, -bound, bound)
        x = np.concatenate([np.zeros((1, x.shape[1])), x])
        if time_channel:
            x = np.concatenate([x, np.linspace(0, 1, len(x))[:, None]], axis=1)
        out.append(x)
    return out


@pytest.mark.parametrize("container", ["list", "batch"])
def test_batch_and_arrays_give_the_same_bits_as_the_per_series_steps(container):
    """One implementation on SeriesBatch: a batch in gives a batch out; every container gives
    the values of the per-series numpy steps (unequal lengths, pooling with a series shorter
    than the window, per-channel z-score, time channel)."""
    from tskernels import SeriesBatch

    rng = np.random.default_rng(8)
    series = [rng.normal(size=(L, 2)) * 3 for L in (31, 7, 64, 12, 50)]
    pre = Preprocessor(max_length=10, zscore="channel", time_channel=True).fit(series)
    assert pre.window_ == 7
    X = SeriesBatch.from_checked(series) if container == "batch" else series
    out = pre.transform(X)
    if container == "batch":
        assert isinstance(out, SeriesBatch)
        out = list(out)
    pooled = [
        x.mean(axis=0, keepdims=True)
        if len(x) < 7
        else x[: len(x) // 7 * 7].reshape(-1, 7, 2).mean(axis=1)
        for x in series
    ]
    stacked = np.concatenate(pooled)
    np.testing.assert_array_equal(pre.zscore_.mean_, stacked.mean(axis=0))
    want = _reference_preprocess(series, 7, stacked.mean(0), stacked.std(0) + 1e-4, 5.0, True)
    assert [o.shape for o in out] == [w.shape for w in want]
    for o, w in zip(out, want):
        np.testing.assert_array_equal(o, w)


def test_an_overflowing_step_raises_instead_of_passing_inf_on():
    """Finite series near the float64 limit: the pooling's window sum and the z-score overflow;
    each raises the NaN/Inf error instead of handing infinite values to a kernel."""
    from tskernels import SeriesBatch

    huge = np.full((3, 300, 1), 1.5e308)  # pooled by windows of 3: the sum overflows
    huge[1] *= -1.0
    pre = Preprocessor(zscore="channel").fit(np.zeros((3, 300, 1)))
    with np.errstate(all="ignore"):
        for X in (huge, SeriesBatch.from_checked(huge)):
            with pytest.raises(ValueError, match="NaN or infinite values"):
                pre.transform(X)
        fitted = Preprocessor(zscore="channel", eps=1e-300).fit(np.full((3, 5, 1), 1e-300))
        with pytest.raises(ValueError, match="NaN or infinite values"):
            fitted.transform(np.full((2, 5, 1), 1e308))  # (x - mean) / tiny scale: inf
