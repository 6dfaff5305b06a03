"""A list of plain series is checked and padded in one pass (``_plain_list_batch``): the same
batch, bit for bit, as the per-series path, and every bad input still gets the per-series
path's message (the one-pass check only decides when to hand over)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tskernels import validation
from tskernels.validation import SeriesBatch, as_series_batch


def _per_series(X, monkeypatch, **kw):
    with monkeypatch.context() as m:
        m.setattr(validation, "_plain_list_batch", lambda *a: None)
        return as_series_batch(X, **kw)


def _same(a: SeriesBatch, b: SeriesBatch) -> None:
    assert a.values.dtype == b.values.dtype
    assert torch.equal(a.values, b.values)
    assert torch.equal(a.lengths, b.lengths)
    assert a.values.is_contiguous()


DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=9),
    d=st.integers(1, 4),
    dtype=st.sampled_from(DTYPES),
    out=st.sampled_from([torch.float64, torch.float32]),
    seed=st.integers(0, 2**16),
)
def test_one_pass_equals_the_per_series_path(lengths, d, dtype, out, seed):
    rng = np.random.default_rng(seed)
    X = [(rng.normal(size=(T, d)) * 50).astype(dtype) for T in lengths]
    fast = validation._plain_list_batch(X, out, torch.device("cpu"))
    assert fast is not None  # plain input takes the one pass
    with pytest.MonkeyPatch.context() as m:
        m.setattr(validation, "_plain_list_batch", lambda *a: None)
        slow = as_series_batch(X, dtype=out)
    _same(fast, slow)
    _same(as_series_batch(X, dtype=out), slow)
    # forward-fill padding, against the definition
    for i, x in enumerate(X):
        v = fast.values[i].numpy()
        ref = torch.from_numpy(np.asarray(x)).to(out).numpy()
        np.testing.assert_array_equal(v[: len(x)], ref)
        np.testing.assert_array_equal(v[len(x) :], np.repeat(ref[-1:], v.shape[0] - len(x), 0))


def test_non_contiguous_views_and_tuples(monkeypatch):
    rng = np.random.default_rng(1)
    base = rng.normal(size=(30, 6))
    X = (base[::2, :3], base[1:9, 3:], base[:5].T[:, :3].T[:, :3])
    _same(as_series_batch(list(X)), _per_series(list(X), monkeypatch))
    _same(as_series_batch(X), _per_series(X, monkeypatch))


@pytest.mark.parametrize(
    "X",
    [
        [np.ones((3, 2)), np.ones((4, 2), dtype=np.float32)],  # two dtypes
        [np.ones((3, 2)), torch.ones(4, 2, dtype=torch.float64)],  # a tensor
        [np.ones((3, 2)), [[1.0, 2.0]]],  # a nested list
    ],
    ids=["two-dtypes", "tensor-item", "list-item"],
)
def test_mixed_items_take_the_per_series_path_with_the_same_result(X, monkeypatch):
    assert validation._plain_list_batch(X, torch.float64, torch.device("cpu")) is None
    _same(as_series_batch(X), _per_series(X, monkeypatch))


def _bad_nan():
    X = [np.zeros((4, 2)) for _ in range(5)]
    X[3][2, 1] = np.nan
    return X


@pytest.mark.parametrize(
    ("X", "kw", "error", "message"),
    [
        (_bad_nan(), {}, ValueError, r"`X\[3\]` contains NaN or infinite values"),
        (
            [np.ones((2, 2)), np.full((3, 2), 1e300)],
            {"dtype": torch.float32},
            ValueError,
            r"`X\[1\]` holds values beyond the torch.float32 range",
        ),
        ([np.ones((2, 2)), np.ones((3, 3))], {}, ValueError, "different channel counts"),
        ([np.ones((2, 2)), np.ones((0, 2))], {}, ValueError, r"`X\[1\]` has length 0"),
        ([np.ones((2, 2)), np.ones(3)], {}, ValueError, r"`X\[1\]` must be a 2-D array"),
        ([np.ones((2, 0)), np.ones((3, 0))], {}, ValueError, "d = 0 channels"),
        ([np.ones((2, 2), dtype=complex)], {}, TypeError, "real-valued"),
        ([np.array([["a", "b"]])], {}, TypeError, "must hold numbers"),
    ],
    ids=["nan", "overflow", "channels", "empty-series", "1-d", "no-channel", "complex", "str"],
)
def test_bad_lists_keep_the_per_series_message(X, kw, error, message):
    with pytest.raises(error, match=message):
        as_series_batch(X, **kw)


def test_a_kernel_gram_of_a_list_is_unchanged(monkeypatch):
    """The kernels check their inputs with as_series_batch: a GAK Gram of unequal-length
    series is bit for bit the one of the per-series path."""
    from tskernels import GAK

    rng = np.random.default_rng(3)
    X = [rng.normal(size=(int(T), 3)) for T in rng.integers(4, 15, size=12)]
    fast = GAK(sigma=1.0).gram(X)
    with monkeypatch.context() as m:
        m.setattr(validation, "_plain_list_batch", lambda *a: None)
        slow = GAK(sigma=1.0).gram(X)
    assert torch.equal(torch.as_tensor(fast), torch.as_tensor(slow))
