"""Missing values (NaN gaps) inside series: ``novelty._missing.interpolate_missing``,
``as_series_collection(..., missing=...)`` and ``KernelNoveltyDetector(missing=...)``.

Oracles: a pure-Python brute force of the rule (for each NaN, the nearest observed step on
each side, linear between them, the edge value held beyond them), a hand example with known
values, and sktime's own converters for the pandas containers.
"""

import warnings

import numpy as np
import pytest
import torch

import tskernels
from novelty import KernelNoveltyDetector, as_series_collection, interpolate_missing


def _brute(x) -> np.ndarray:
    """The rule written out step by step (no np.interp)."""
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    T, d = x.shape
    for c in range(d):
        seen = [t for t in range(T) if not np.isnan(x[t, c])]
        for t in range(T):
            if not np.isnan(x[t, c]):
                continue
            before = [s for s in seen if s < t]
            after = [s for s in seen if s > t]
            if not before:
                out[t, c] = x[after[0], c]
            elif not after:
                out[t, c] = x[before[-1], c]
            else:
                t0, t1 = before[-1], after[0]
                out[t, c] = x[t0, c] + (x[t1, c] - x[t0, c]) * (t - t0) / (t1 - t0)
    return out


def _gappy(n=6, T=15, d=2, seed=0) -> np.ndarray:
    """Random walks with interior gaps, leading gaps (channel 0 of even series) and trailing
    gaps (channel 1 of odd series); the last row always keeps channel 0, so no row at the end
    is all NaN (which an array would read as padding)."""
    rng = np.random.default_rng(seed)
    X = np.cumsum(rng.normal(size=(n, T, d)), axis=1)
    mask = rng.random((n, T, d)) < 0.25
    mask[0::2, :3, 0] = True  # leading gap
    mask[1::2, -3:, d - 1] = True  # trailing gap
    mask[:, -1, 0] = False
    mask[:, T // 2, :] = False  # every channel keeps an observed step
    X[mask] = np.nan
    assert np.isnan(X).any(axis=2).any() and not np.isnan(X).all(axis=2)[:, -1].any()
    return X


def _by_hand(X) -> np.ndarray:
    return np.stack([_brute(x) for x in X])


# --------------------------------------------------------------------------- the rule
def test_hand_example_with_leading_and_trailing_gaps():
    nan = np.nan
    x = np.array(
        [
            [nan, 0.0],
            [1.0, nan],
            [nan, 10.0],
            [nan, nan],
            [4.0, nan],
            [nan, nan],
        ]
    )
    expected = np.array(
        [
            [1.0, 0.0],  # leading gap: the first observed value held
            [1.0, 5.0],
            [2.0, 10.0],
            [3.0, 10.0],
            [4.0, 10.0],  # trailing gap of channel 1: the last observed value held
            [4.0, 10.0],
        ]
    )
    original = x.copy()
    got = interpolate_missing(x)
    assert got.dtype == np.float64 and got.shape == (6, 2)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(x, original)  # the input is not modified
    # univariate (T,) in, (T,) out
    got1 = interpolate_missing(np.array([nan, 2.0, nan, nan, 8.0, nan]))
    np.testing.assert_array_equal(got1, [2.0, 2.0, 4.0, 6.0, 8.0, 8.0])


def test_equals_the_brute_force_and_np_interp_per_channel():
    rng = np.random.default_rng(1)
    for _ in range(20):
        T, d = int(rng.integers(2, 30)), int(rng.integers(1, 4))
        x = rng.normal(size=(T, d))
        x[rng.random((T, d)) < 0.4] = np.nan
        x[rng.integers(T), :] = rng.normal(size=d)  # every channel keeps an observed step
        got = interpolate_missing(x)
        np.testing.assert_allclose(got, _brute(x), rtol=0, atol=1e-12)
        steps = np.arange(T)
        for c in range(d):
            seen = ~np.isnan(x[:, c])
            np.testing.assert_array_equal(got[:, c], np.interp(steps, steps[seen], x[seen, c]))
        np.testing.assert_array_equal(got[~np.isnan(x)], x[~np.isnan(x)])  # observed kept


def test_finite_series_is_returned_as_a_float64_copy():
    x = np.arange(6, dtype=np.int64).reshape(3, 2)
    got = interpolate_missing(x)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x)


def test_all_nan_channel_or_series_and_inf_are_errors():
    x = np.random.default_rng(2).normal(size=(5, 2))
    ch = x.copy()
    ch[:, 1] = np.nan
    with pytest.raises(ValueError, match=r"`X\[3\]` channel 1 is all NaN: nothing to interp"):
        interpolate_missing(ch, name="X[3]")
    with pytest.raises(ValueError, match=r"`s` is all NaN"):
        interpolate_missing(np.full((4, 2), np.nan), name="s")
    inf = x.copy()
    inf[2, 0] = np.nan
    inf[3, 1] = -np.inf
    with pytest.raises(ValueError, match=r"`X` contains an infinite value at time step 3, chan"):
        interpolate_missing(inf)
    with pytest.raises(ValueError, match="one series"):
        interpolate_missing(np.zeros((2, 3, 4)))

    # the same errors through the collection, naming the series
    X = np.random.default_rng(3).normal(size=(4, 6, 2))
    bad = X.copy()
    bad[2, :, 0] = np.nan
    with pytest.raises(ValueError, match=r"`X\[2\]` channel 0 is all NaN"):
        as_series_collection(bad, missing="interpolate")
    with pytest.raises(ValueError, match=r"`X\[2\]` channel 0 is all NaN"):
        as_series_collection(list(bad), missing="interpolate")
    empty = X.copy()
    empty[1] = np.nan
    with pytest.raises(ValueError, match="series 1 is all NaN"):
        as_series_collection(empty, missing="interpolate")
    with pytest.raises(ValueError, match=r"`X\[1\]` is all NaN"):
        as_series_collection(list(empty), missing="interpolate")
    inf = X.copy()
    inf[0, 1, 0] = np.nan
    inf[3, 2, 1] = np.inf
    with pytest.raises(ValueError, match=r"series 3 contains an infinite value"):
        as_series_collection(inf, missing="interpolate")
    with pytest.raises(ValueError, match=r"`X\[3\]` contains an infinite value"):
        as_series_collection(list(inf), missing="interpolate")


def test_invalid_missing_raises_listing_the_options():
    X = np.zeros((3, 4, 1))
    for bad in ("drop", None, "Interpolate", True):
        with pytest.raises(ValueError, match=r"`missing` must be one of 'error', 'interpolate'"):
            as_series_collection(X, missing=bad)
    with pytest.raises(ValueError, match=r"The 'missing' parameter of KernelNoveltyDetector"):
        KernelNoveltyDetector(missing="zero").fit(np.random.default_rng(0).normal(size=(5, 4)))


# --------------------------------------------------------------------------- containers
def test_same_series_give_the_same_result_in_every_container():
    from sktime.datatypes import convert_to

    X = _gappy()
    expected = _by_hand(X)
    sk = np.swapaxes(X, 1, 2)  # sktime numpy3D (n, d, T)
    containers = {
        "3-D array": X,
        "torch": torch.from_numpy(X),
        "list": list(X),
        "tuple of tensors": tuple(torch.from_numpy(x) for x in X),
        "pd-multiindex": convert_to(sk, "pd-multiindex"),
        "nested_univ": convert_to(sk, "nested_univ"),
        "df-list": convert_to(sk, "df-list"),
    }
    for label, C in containers.items():
        got = as_series_collection(C, missing="interpolate")
        assert isinstance(got, np.ndarray) and got.dtype == np.float64, label
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12, err_msg=label)

    U = _gappy(d=1, seed=4)[:, :, 0]  # univariate (n, T)
    expected_u = _by_hand(U[:, :, None])
    wide = convert_to(convert_to(U[:, None, :], "nested_univ"), "pd-wide")
    for label, C in {
        "2-D array": U,
        "(n, T, 1)": U[:, :, None],
        "list of 1-D": list(U),
        "pd-wide": wide,
    }.items():
        got = as_series_collection(C, missing="interpolate")
        np.testing.assert_allclose(got, expected_u, rtol=0, atol=1e-12, err_msg=label)


def test_partial_rows_inside_a_3d_array_are_interpolated():
    X = np.random.default_rng(5).normal(size=(3, 7, 3))
    X[1, 2, 0] = np.nan  # only one channel of a row
    X[1, 3, :] = np.nan  # a whole row, before observed rows: a gap, not padding
    X[2, 6, 1:] = np.nan  # the last row, but channel 0 is observed: not padding
    got = as_series_collection(X, missing="interpolate")
    assert isinstance(got, np.ndarray) and got.shape == (3, 7, 3)
    np.testing.assert_allclose(got, _by_hand(X), rtol=0, atol=1e-12)


def test_trailing_padding_still_gives_unequal_lengths():
    rng = np.random.default_rng(6)
    lengths = [5, 9, 7]
    series = [np.cumsum(rng.normal(size=(L, 2)), axis=0) for L in lengths]
    series[0][1, 0] = np.nan  # gaps inside the series
    series[1][:2, 1] = np.nan
    series[2][3:5, :] = np.nan
    padded = np.full((3, 9, 2), np.nan)
    for i, s in enumerate(series):
        padded[i, : len(s)] = s
    for C in (padded, series):
        got = as_series_collection(C, missing="interpolate")
        assert isinstance(got, list) and [len(g) for g in got] == lengths
        for g, s in zip(got, series):
            np.testing.assert_allclose(g, _brute(s), rtol=0, atol=1e-12)
    # a 2-D (n, T) array: trailing NaN columns are padding too
    U = np.array([[1.0, np.nan, 3.0, np.nan, np.nan], [1.0, 2.0, np.nan, np.nan, 8.0]])
    got = as_series_collection(U, missing="interpolate")
    assert isinstance(got, list)
    np.testing.assert_array_equal(got[0][:, 0], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(got[1][:, 0], [1.0, 2.0, 4.0, 6.0, 8.0])


def test_missing_error_keeps_the_old_errors():
    from sktime.datatypes import convert_to

    X = _gappy(seed=7)
    assert as_series_collection.__kwdefaults__["missing"] == "error"
    for kwargs in ({}, {"missing": "error"}):
        with pytest.raises(ValueError, match=r"has NaN .*not allowed"):
            as_series_collection(X, **kwargs)
        with pytest.raises(ValueError, match=r"`X\[0\]` contains NaN at time step 0, channel 0"):
            as_series_collection(list(X), **kwargs)
        with pytest.raises(ValueError, match=r"pd-multiindex\) contains NaN: missing values"):
            as_series_collection(convert_to(np.swapaxes(X, 1, 2), "pd-multiindex"), **kwargs)
    partial = np.random.default_rng(8).normal(size=(2, 5, 2))
    partial[1, 4, 0] = np.nan
    with pytest.raises(ValueError, match=r"series 1 has NaN in only some channels at time st"):
        as_series_collection(partial, missing="error")


# --------------------------------------------------------------------------- the detector
def _fast(**kwargs):
    return KernelNoveltyDetector(
        tskernels.FlattenedKernel(tskernels.RBF(1.0)), scorer="knn", contamination=0.2, **kwargs
    )


def test_detector_scores_series_with_gaps_as_if_interpolated_by_hand():
    X, Y = _gappy(n=10, seed=9), _gappy(n=4, seed=10) + 0.5
    det = _fast().fit(X)
    ref = _fast().fit(_by_hand(X))
    np.testing.assert_allclose(det.calibration_scores_, ref.calibration_scores_, rtol=1e-10)
    scores = det.score_samples(Y)
    assert np.isfinite(scores).all()
    np.testing.assert_allclose(scores, ref.score_samples(_by_hand(Y)), rtol=1e-10)
    np.testing.assert_allclose(det.score_samples(list(Y)), scores, rtol=1e-10)

    from sktime.datatypes import convert_to

    mi = convert_to(np.swapaxes(Y, 1, 2), "pd-multiindex")
    np.testing.assert_allclose(det.score_samples(mi), scores, rtol=1e-10)


def test_detector_on_two_d_univariate_series_with_gaps():
    U, V = _gappy(n=10, d=1, seed=11)[:, :, 0], _gappy(n=3, d=1, seed=12)[:, :, 0]
    det = _fast(layout="univariate").fit(U)
    assert det.n_features_in_ == U.shape[1]
    ref = _fast(layout="univariate").fit(_by_hand(U[:, :, None])[:, :, 0])
    np.testing.assert_allclose(
        det.score_samples(V), ref.score_samples(_by_hand(V[:, :, None])[:, :, 0]), rtol=1e-10
    )
    with pytest.raises(ValueError, match="NaN"):  # scikit-learn's own check
        _fast(missing="error", layout="univariate").fit(U)
    V_inf = V.copy()
    V_inf[0, 1] = np.inf
    with pytest.raises(ValueError, match="infinity|infinite"):
        det.score_samples(V_inf)


def test_detector_missing_error_and_tags():
    X = _gappy(n=8, seed=13)
    with pytest.raises(ValueError, match="has NaN"):
        _fast(missing="error").fit(X)
    finite = _by_hand(X)
    det = _fast(missing="error").fit(finite)
    with pytest.raises(ValueError, match=r"`X\[0\]` contains NaN"):
        det.score_samples(list(X))
    assert KernelNoveltyDetector().missing == "interpolate"
    assert KernelNoveltyDetector().__sklearn_tags__().input_tags.allow_nan is True
    assert KernelNoveltyDetector(missing="error").__sklearn_tags__().input_tags.allow_nan is False
    inf = X.copy()
    inf[2, 0, 0] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        _fast().fit(inf)


def test_default_detector_fits_and_scores_series_with_gaps():
    X, Y = _gappy(n=12, T=16, seed=14), _gappy(n=3, T=16, seed=15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 12 series cannot flag at 5 %
        det = KernelNoveltyDetector().fit(X)
    assert np.isfinite(det.calibration_scores_).all()
    scores = det.score_samples(Y)
    assert np.isfinite(scores).all()
    np.testing.assert_allclose(scores, det.score_samples(_by_hand(Y)), rtol=1e-10)


def test_resample_linear_keeps_both_ends_and_is_exact_on_lines():
    """The one linear resampling of the package: step i of the result at i / (length - 1);
    a channel linear in time is reproduced exactly; a one-step series is repeated."""
    from novelty._missing import resample_linear

    t = np.linspace(0.0, 1.0, 7)
    x = np.stack([3 * t + 1, -2 * t], axis=1)
    y = resample_linear(x, 13)
    s = np.linspace(0.0, 1.0, 13)
    np.testing.assert_allclose(y, np.stack([3 * s + 1, -2 * s], axis=1), rtol=0, atol=1e-14)
    assert y[0].tolist() == x[0].tolist() and y[-1].tolist() == x[-1].tolist()
    same = resample_linear(x, 7)
    assert same is not x and np.array_equal(same, x)
    np.testing.assert_array_equal(resample_linear(x[:1], 4), np.repeat(x[:1], 4, axis=0))


def test_resample_collection_stacks_the_one_resampling():
    """resample_collection: each series through resample_linear, stacked (lists of unequal
    lengths, arrays of another length); an array already of that length keeps its values
    (float64, not copied when already float64)."""
    from novelty._missing import resample_collection, resample_linear

    rng = np.random.default_rng(0)
    L = [rng.normal(size=(T, 2)) for T in (1, 5, 9, 12)]
    got = resample_collection(L, 9)
    assert got.shape == (4, 9, 2) and got.dtype == np.float64
    for g, x in zip(got, L, strict=True):
        np.testing.assert_array_equal(g, resample_linear(x, 9))
    A = rng.normal(size=(3, 6, 2))
    np.testing.assert_array_equal(resample_collection(A, 4), [resample_linear(a, 4) for a in A])
    assert resample_collection(A, 6) is A
    B = resample_collection(A.astype(np.float32), 6)
    assert B.dtype == np.float64 and np.array_equal(B, A.astype(np.float32))
