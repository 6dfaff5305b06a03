"""SeriesBatch, the one internal series type: rows by index, iteration, joining, the trusted
constructor and the checked cast, each against the numpy series it stands for."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tskernels as tk
from tskernels import SeriesBatch, as_series_batch


def _unequal(seed=0, lengths=(5, 9, 3, 7), d=2):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(L, d)) for L in lengths]


def _assert_is(batch: SeriesBatch, series: list[np.ndarray]):
    """``batch`` holds exactly ``series``, padded by holding each last step."""
    assert len(batch) == len(series)
    assert batch.lengths.tolist() == [len(x) for x in series]
    assert batch.length == max(len(x) for x in series)  # trimmed to the longest
    for i, x in enumerate(series):
        np.testing.assert_array_equal(batch[i], x)
        pad = batch.values[i, len(x) :].numpy()
        np.testing.assert_array_equal(pad, np.broadcast_to(x[-1], pad.shape))


@pytest.mark.parametrize(
    "index",
    [[2, 0], np.array([3, 1, 1]), np.array([True, False, False, True]), slice(1, 3),
     torch.tensor([0, 2]), range(1, 4), np.array([], dtype=int)],
)  # fmt: skip
def test_rows_are_the_indexed_series(index):
    series = _unequal()
    batch = as_series_batch(series)
    rows = np.arange(len(series))[index if not isinstance(index, torch.Tensor) else index.numpy()]
    got = batch[index]
    if len(rows) == 0:
        assert got.n == 0
        return
    _assert_is(got, [series[i] for i in rows])
    assert got.values.is_contiguous()


def test_integer_index_and_iteration_give_numpy_series():
    series = _unequal(1)
    batch = as_series_batch(series)
    assert [x.shape for x in batch] == [x.shape for x in series]
    np.testing.assert_array_equal(batch[-1], series[-1])
    with pytest.raises(IndexError):
        batch[len(series)]
    assert batch.to_arrays()[1].shape == series[1].shape  # unequal: a list
    X = np.random.default_rng(2).normal(size=(3, 4, 2))
    assert isinstance(as_series_batch(X).to_arrays(), np.ndarray)


def test_concat_joins_rows_in_order():
    a, b = _unequal(3, (4, 6)), _unequal(4, (9, 2, 5))
    joined = SeriesBatch.concat([as_series_batch(a), as_series_batch(b)])
    _assert_is(joined, a + b)
    _assert_is(joined, list(as_series_batch(a + b)))


def test_from_checked_shares_an_array_and_pads_a_list_like_the_checked_reader():
    X = np.random.default_rng(5).normal(size=(4, 6, 3))
    batch = SeriesBatch.from_checked(X)
    assert np.shares_memory(batch.numpy(), X)  # no copy, no scan
    series = _unequal(6)
    torch.testing.assert_close(
        SeriesBatch.from_checked(series).values, as_series_batch(series).values, rtol=0, atol=0
    )
    assert SeriesBatch.from_checked(batch) is batch


def test_a_narrowing_cast_checks_its_range():
    batch = as_series_batch(np.full((2, 3, 1), 1e300))
    with pytest.raises(ValueError, match="beyond the torch.float32 range"):
        batch.to(dtype=torch.float32)
    small = as_series_batch(np.ones((2, 3, 1)))
    assert small.to(dtype=torch.float32).values.dtype == torch.float32
    assert small.to(dtype=torch.float64) is small  # nothing to do: itself


def test_a_kernel_takes_rows_of_a_batch_as_the_arrays_they_stand_for():
    series = _unequal(7, (8, 5, 11, 6, 9))
    batch = as_series_batch(series)
    kernel = tk.GAK(sigma=1.0)
    rows = [4, 1, 2]
    torch.testing.assert_close(
        kernel.gram(batch[rows], batch[[0, 3]]),
        kernel.gram([series[i] for i in rows], [series[0], series[3]]),
        rtol=0,
        atol=0,
    )


def test_batches_compare_by_identity():
    """== of two tensors has no single truth value: a batch is equal only to itself (and
    hashable), so ``batch in [batch]`` and dict keys work."""
    a = as_series_batch(np.zeros((2, 3, 1)))
    b = as_series_batch(np.zeros((2, 3, 1)))
    assert a == a and a != b and a in [b, a] and {a: 1}[a] == 1
