import numpy as np
import pytest
import torch

import tskernels as tk
from tskernels._validation import all_finite, as_series_batch


def test_all_finite_single_reduction_and_overflowing_sum():
    big = torch.tensor([1e308, 1e308], dtype=torch.float64)  # sum overflows, entries finite
    assert all_finite(big)
    assert not all_finite(torch.tensor([1.0, float("nan")], dtype=torch.float64))
    assert not all_finite(torch.tensor([float("inf"), -float("inf")], dtype=torch.float64))


def test_large_finite_inputs_are_accepted():
    X = np.full((2, 3, 1), 1e307)
    batch = as_series_batch(X)
    assert batch.values.shape == (2, 3, 1)


def test_forward_fill_padding_and_lengths():
    batch = as_series_batch([np.array([[1.0], [2.0]]), np.array([[5.0], [6.0], [7.0]])])
    assert batch.lengths.tolist() == [2, 3] and not batch.equal_length
    np.testing.assert_array_equal(batch.values[0, :, 0].numpy(), [1.0, 2.0, 2.0])
    assert [x.shape[0] for x in batch.to_list()] == [2, 3]


def test_bad_parameters_and_settings():
    with pytest.raises(ValueError, match="dtype"):
        tk.FlattenedKernel(tk.Linear(), dtype="int32").gram(np.zeros((2, 3, 1)))
    with pytest.raises(ValueError, match="block_size"):
        tk.FlattenedKernel(tk.Linear(), block_size=0).gram(np.ones((2, 3, 1)))
    with pytest.raises(TypeError, match="StaticKernel"):
        tk.FlattenedKernel("rbf").gram(np.ones((2, 3, 1)))
    with pytest.raises(TypeError, match="numbers"):
        tk.FlattenedKernel(tk.Linear()).gram(np.array([[["a"]]]))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            tk.FlattenedKernel(tk.Linear(), device="cuda").gram(np.ones((2, 3, 1)))
