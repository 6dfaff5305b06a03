import re

import numpy as np
import pytest
import torch

import tskernels as tk
from tskernels.validation import all_finite, as_series_batch


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


# ------------------------------------------------------------- the public module
def test_series_batch_is_the_checked_fast_path():
    X = np.random.default_rng(0).normal(size=(3, 4, 2))
    batch = as_series_batch(X)
    assert as_series_batch(batch) is batch  # same device and dtype: no copy, no second scan
    b32 = as_series_batch(batch, dtype=torch.float32)
    assert b32.values.dtype == torch.float32 and torch.equal(b32.lengths, batch.lengths)
    k = tk.FlattenedKernel(tk.Linear())
    torch.testing.assert_close(k.gram(batch), k.gram(X), rtol=0, atol=0)


def test_series_arrays_numpy_side():
    from tskernels.validation import as_series_arrays

    arr, equal = as_series_arrays([np.zeros((3, 2)), np.ones((3, 2))])
    assert equal and arr.shape == (2, 3, 2) and arr.dtype == np.float64
    lst, equal = as_series_arrays([np.zeros((3, 2)), np.ones((5, 2))])
    assert not equal and [x.shape for x in lst] == [(3, 2), (5, 2)]
    with pytest.raises(ValueError, match="NaN or infinite.*index"):
        as_series_arrays(np.full((1, 2, 1), np.nan))
    with pytest.raises(ValueError, match="channel counts"):
        as_series_arrays([np.zeros((3, 2)), np.zeros((3, 1))])


def test_points_converter():
    from tskernels.validation import as_points

    P = as_points(np.ones((4, 2), dtype=np.float32))
    assert P.dtype == torch.float64 and P.shape == (4, 2)
    with pytest.raises(ValueError, match="2-D"):
        as_points(np.ones((4, 2, 1)))
    with pytest.raises(ValueError, match="NaN or infinite.*row 1, column 0"):
        as_points(np.array([[0.0], [np.nan]]))
    with pytest.raises(ValueError, match="1 sample.*at least 2"):
        as_points(np.ones((1, 2)), min_samples=2)
    with pytest.raises(ValueError, match="fitted on 3"):
        as_points(np.ones((2, 2)), n_features=3)
    with pytest.raises(TypeError, match="numeric"):
        as_points(np.array([["a"]]))
    bad = np.array([[np.inf]])
    assert torch.isinf(as_points(bad, assume_checked=True)).all()  # conversion only


def test_gram_converter():
    from tskernels.validation import as_gram

    K = as_gram(np.eye(3, dtype=np.float32))
    assert K.dtype == torch.float64
    with pytest.raises(ValueError, match="NaN or infinite entries"):
        as_gram(np.array([[1.0, np.nan]]), name="K_corpus")
    with pytest.raises(TypeError, match="real-valued"):
        as_gram(torch.ones(2, dtype=torch.complex64))


@pytest.mark.parametrize("value", [0, -2, 1.5, True, "all"])
def test_n_jobs_rule(value):
    """The one n_jobs rule, declared by Kernel: None, -1 or a positive int."""
    k = tk.FlattenedKernel(tk.Linear(), n_jobs=value)
    with pytest.raises(
        ValueError,
        match=r"The 'n_jobs' parameter of FlattenedKernel must be None, -1 \(all cores\) or an "
        rf"int in the range \[1, inf\)\. Got {re.escape(repr(value))} instead",
    ):
        k.gram(np.ones((2, 3, 1)))


SPEC_NAMES = sorted(tk.kernel_registry())


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_every_kernel_reads_n_jobs_the_same_way(name):
    """n_jobs=-1 (all cores) and a positive int work for every kernel, 0 raises naming it;
    the thread count is restored afterwards."""
    import numba

    X = 0.3 * np.random.default_rng(1).normal(size=(3, 10, 2))
    spec = tk.kernel_registry()[name]
    ref = spec.fitted_example(X).gram(X)
    before = (torch.get_num_threads(), numba.get_num_threads())
    for n_jobs in (-1, 1):
        k = spec.fitted_example(X).set_params(n_jobs=n_jobs)
        torch.testing.assert_close(k.gram(X), ref, rtol=1e-12, atol=1e-14)
    assert (torch.get_num_threads(), numba.get_num_threads()) == before
    with pytest.raises(ValueError, match="The 'n_jobs' parameter of"):
        spec.fitted_example(X).set_params(n_jobs=0).gram(X)


def test_other_packages_use_the_public_validation_module():
    """No module outside tskernels imports the private tskernels._validation."""
    import pathlib

    root = pathlib.Path(tk.__file__).resolve().parent.parent
    offenders = []
    for pkg in ("novelty", "density", "experiments", "benchmarks"):
        for path in (root / pkg).rglob("*.py"):
            text = path.read_text()
            if "tskernels._validation" in text or "tskernels import _validation" in text:
                offenders.append(str(path.relative_to(root)))
    assert offenders == []
