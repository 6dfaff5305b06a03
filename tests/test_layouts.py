"""Input layouts: every container gives back exactly the series that went in.

Oracles: sktime's own ``convert_to`` builds each Panel mtype from a known array, tslearn's
``to_time_series_dataset`` builds the NaN padding.
"""

import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from novelty import as_series_collection, single_series_hint

PANDAS_MTYPES = ["df-list", "nested_univ", "pd-multiindex"]


def _no_warning(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def _assert_same_series(got, expected):
    if isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == np.float64
        np.testing.assert_array_equal(got, expected)
    else:
        assert isinstance(got, list) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.dtype == np.float64
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("mtype", PANDAS_MTYPES)
@pytest.mark.parametrize("shape", [(4, 7, 3), (1, 5, 1), (3, 2, 6)])
def test_sktime_panel_mtypes_round_trip(mtype, shape):
    from sktime.datatypes import convert_to

    X = np.random.default_rng(sum(shape)).normal(size=shape)  # ours: (n, T, d)
    obj = convert_to(np.swapaxes(X, 1, 2), to_type=mtype)  # sktime numpy3D is (n, d, T)
    _assert_same_series(_no_warning(as_series_collection, obj), X)


def test_sktime_pd_wide_round_trip():
    from sktime.datatypes import convert, convert_to

    X = np.random.default_rng(5).normal(size=(4, 9, 1))  # pd-wide is univariate
    nested = convert_to(np.swapaxes(X, 1, 2), to_type="nested_univ")
    wide = convert(nested, from_type="nested_univ", to_type="pd-wide", as_scitype="Panel")
    assert isinstance(wide, pd.DataFrame) and wide.shape == (4, 9)
    _assert_same_series(as_series_collection(wide), X)
    _assert_same_series(as_series_collection(wide.to_numpy()), X)  # same as 2-D numpy (n, T)


def test_sktime_numpy3d_needs_the_swap():
    from sktime.datatypes import convert_to

    X = np.random.default_rng(6).normal(size=(3, 10, 2))
    X3 = convert_to(convert_to(np.swapaxes(X, 1, 2), "pd-multiindex"), "numpy3D")
    _assert_same_series(as_series_collection(np.swapaxes(X3, 1, 2)), X)


@pytest.mark.parametrize("mtype", PANDAS_MTYPES)
def test_sktime_unequal_lengths_give_the_list(mtype):
    from sktime.datatypes import convert_to

    rng = np.random.default_rng(7)
    series = [rng.normal(size=(T, 3)) for T in (5, 9, 6, 5)]
    obj = convert_to([pd.DataFrame(s) for s in series], to_type=mtype)
    _assert_same_series(as_series_collection(obj), series)


def test_sktime_japanese_vowels_unequal():
    from sktime.datasets import load_japanese_vowels

    X, _ = load_japanese_vowels(split="train")  # nested_univ, lengths 7..26, d = 12
    got = as_series_collection(X)
    assert isinstance(got, list) and len(got) == len(X)
    assert {g.shape[1] for g in got} == {12}
    np.testing.assert_array_equal(got[3][:, 2], X.iloc[3, 2].to_numpy())


def test_basic_motions_dataframe_equals_numpy3d():
    from sktime.datasets import load_basic_motions

    nested, _ = load_basic_motions(split="test")
    X3, _ = load_basic_motions(split="test", return_type="numpy3D")
    _assert_same_series(as_series_collection(nested), np.swapaxes(X3, 1, 2))


@pytest.mark.parametrize("lengths", [(4, 8, 5), (6, 6, 6), (1, 3)])
@pytest.mark.parametrize("d", [1, 3])
def test_tslearn_nan_padding_round_trip(lengths, d):
    from tslearn.utils import to_time_series_dataset

    rng = np.random.default_rng(len(lengths) + d)
    series = [rng.normal(size=(T, d)) for T in lengths]
    padded = to_time_series_dataset(series)  # (n, max T, d), trailing all-NaN rows
    assert padded.shape == (len(lengths), max(lengths), d)
    expected = np.stack(series) if len(set(lengths)) == 1 else series
    _assert_same_series(as_series_collection(padded), expected)
    if d == 1:  # the 2-D (n, T) reading of univariate data, padded the same way
        _assert_same_series(as_series_collection(padded[..., 0]), expected)


def test_equal_length_list_equals_array():
    X = np.random.default_rng(8).normal(size=(5, 6, 2))
    for container in ([x for x in X], tuple(X), [torch.from_numpy(x) for x in X]):
        _assert_same_series(as_series_collection(container), X)
    _assert_same_series(as_series_collection(torch.from_numpy(X).float()), X.astype(np.float32))
    _assert_same_series(as_series_collection(X.tolist()), X)
    out = as_series_collection(X)
    assert out is not X  # a copy: later changes to X do not reach a fitted corpus


def test_two_d_and_one_d_are_univariate():
    X = np.arange(12.0).reshape(3, 4)
    _assert_same_series(as_series_collection(X), X[:, :, None])
    _assert_same_series(as_series_collection(list(X)), X[:, :, None])
    ragged = [np.arange(3.0), np.arange(5.0)]
    _assert_same_series(as_series_collection(ragged), [r[:, None] for r in ragged])


def test_more_channels_than_steps_warns_and_is_not_transposed():
    X = np.random.default_rng(9).normal(size=(4, 6, 100))  # BasicMotions-like numpy3D
    with pytest.warns(UserWarning, match=r"\(n=4, T=6, d=100\).*numpy3D is \(n, d, T\)"):
        out = as_series_collection(X)
    np.testing.assert_array_equal(out, X)
    with pytest.warns(UserWarning, match="np.swapaxes"):
        as_series_collection(torch.from_numpy(X))
    _no_warning(as_series_collection, np.swapaxes(X, 1, 2))
    _no_warning(as_series_collection, [x for x in X])  # a list of (T_i, d) is unambiguous


@pytest.mark.parametrize(
    "X, match",
    [
        ([], "empty"),
        (np.zeros((0, 5, 2)), "empty"),
        (np.zeros((3, 0, 2)), "empty"),
        (np.zeros((3, 5, 0)), "empty"),
        ([np.zeros((0, 2))], r"X\[0\]` is empty"),
        (None, "None"),
        (np.zeros(5), "3-D"),
        (np.zeros((2, 3, 4, 5)), "3-D"),
        ([np.zeros((2, 3, 4))], r"X\[0\]` must be a 2-D"),
        (np.zeros((2, 3, 2), dtype=complex), "complex"),
        (torch.zeros((2, 3, 2), dtype=torch.complex64), "complex"),
        (np.array([[["a", "b"]]]), "non-numeric"),
        ([np.zeros((4, 2)), np.zeros((4, 2)), np.zeros((4, 3))], r"d=2.*X\[2\]` has d=3"),
        ([np.zeros((4, 2)), np.zeros((7, 1))], r"X\[0\]` has d=2.*X\[1\]` has d=1"),
    ],
)
def test_bad_input_raises(X, match):
    with pytest.raises(ValueError, match=match):
        as_series_collection(X)


def test_nan_and_inf_raise_naming_the_series():
    X = np.random.default_rng(10).normal(size=(3, 6, 2))
    interior = X.copy()
    interior[1, 2, :] = np.nan  # a whole row, but before observed rows: not padding
    with pytest.raises(ValueError, match=r"series 1 has NaN at time step 2.*not allowed"):
        as_series_collection(interior)
    partial = X.copy()
    partial[2, 5, 0] = np.nan  # a trailing row, but only one channel
    with pytest.raises(ValueError, match=r"series 2 has NaN in only some channels"):
        as_series_collection(partial)
    allnan = X.copy()
    allnan[0] = np.nan
    with pytest.raises(ValueError, match="series 0 is all NaN"):
        as_series_collection(allnan)
    inf = X.copy()
    inf[1, 3, 1] = np.inf
    with pytest.raises(ValueError, match=r"series 1 contains an infinite value.*Inf"):
        as_series_collection(inf)
    with pytest.raises(ValueError, match=r"X\[1\]` contains NaN at time step 6"):
        as_series_collection([X[0], np.concatenate([X[1], np.full((1, 2), np.nan)])])
    with pytest.raises(ValueError, match=r"X\[2\]` contains an infinite value"):
        as_series_collection(list(inf[[0, 0, 1]]))


def test_pandas_errors():
    from sktime.datatypes import convert_to

    X = np.random.default_rng(11).normal(size=(3, 2, 5))
    mi = convert_to(X, "pd-multiindex")
    mi.iloc[4, 0] = np.nan
    with pytest.raises(ValueError, match=r"pd-multiindex\) contains NaN"):
        as_series_collection(mi)
    with pytest.raises(ValueError, match="not an sktime Panel container"):
        as_series_collection(pd.DataFrame({"a": ["x", "y"]}))
    with pytest.raises(ValueError, match="not an sktime Panel container"):
        as_series_collection(pd.Series([1.0, 2.0]))


def test_single_series_hint():
    x = np.zeros((50, 3))
    assert single_series_hint(x, 3) == (
        "X is 2-D with shape (T, d)=(50, 3): a single series? pass X[None] or [X]"
    )
    assert single_series_hint(torch.zeros(50, 3), 3) is not None
    assert single_series_hint(x, 1) is None  # univariate: (n, T) is the reading
    assert single_series_hint(x, 4) is None
    assert single_series_hint(np.zeros((2, 50, 3)), 3) is None
    assert single_series_hint([x], 3) is None


def test_import_novelty_does_not_import_sktime():
    code = (
        "import sys, numpy as np, novelty; "
        "novelty.as_series_collection(np.zeros((2, 3, 1))); "
        "print(sorted(m for m in sys.modules if m.startswith('sktime')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_layout_single_reads_a_dataframe_as_its_numpy_array():
    """Issue 31, finding 7: a (T, d) DataFrame with layout="single" is one recording, as its
    numpy array is; never T univariate series."""
    import tskernels as tk
    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(31)
    rec = rng.normal(size=(40, 3))
    df = pd.DataFrame(rec, columns=["a", "b", "c"], index=pd.RangeIndex(100, 140))
    _assert_same_series(as_series_collection(df, layout="single"), rec[None])
    _assert_same_series(as_series_collection(torch.tensor(rec), layout="single"), rec[None])
    # the default reading of a flat DataFrame stays sktime's pd-wide (rows = series)
    assert as_series_collection(df).shape == (40, 3, 1)
    with pytest.raises(ValueError, match="layout"):
        as_series_collection(df, layout="rows")
    with pytest.raises(ValueError, match="non-numeric column"):
        as_series_collection(df.assign(tag="x"), layout="single")
    det = KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.RBF(3.0)), layout="single")
    det.fit(rng.normal(size=(12, 40, 3)))
    from_numpy = det.score_samples(rec)
    assert from_numpy.shape == (1,)
    np.testing.assert_array_equal(det.score_samples(df), from_numpy)
