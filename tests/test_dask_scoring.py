"""Batch scoring on Dask (issue 15, item 2): ``score_in_partitions`` equals the detector's
own methods on the whole test set, with dask's synchronous scheduler and on a real
LocalCluster (worker processes, detector scattered once), in any partition size; bad input
fails with a clear error."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import torch

from novelty import KernelNoveltyDetector, score_in_partitions
from tskernels import RBF, IntegralKernel

RNG = np.random.default_rng(3)
X_TRAIN = RNG.normal(size=(40, 12, 2))
X_TEST = np.concatenate([RNG.normal(size=(23, 12, 2)), RNG.normal(size=(7, 12, 2)) + 2.0])


@pytest.fixture(scope="module")
def detector():
    return KernelNoveltyDetector(IntegralKernel(RBF(2.0)), contamination=0.1).fit(X_TRAIN)


def assert_close(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batch", [1, 4, 7, 30, 1000])
def test_partitions_equal_the_whole_set(detector, batch):
    ref = detector.score_samples(X_TEST)
    with dask.config.set(scheduler="synchronous"):
        got = score_in_partitions(detector, X_TEST, batch=batch)
    assert isinstance(got, np.ndarray)
    assert_close(got, ref)


def test_every_method_and_layout(detector):
    with dask.config.set(scheduler="synchronous"):
        for method in ("decision_function", "predict", "p_values"):
            got = score_in_partitions(detector, X_TEST, batch=6, method=method)
            assert_close(got, getattr(detector, method)(X_TEST))
        as_list = list(X_TEST)
        assert_close(
            score_in_partitions(detector, as_list, batch=5), detector.score_samples(as_list)
        )
        as_tensor = torch.as_tensor(X_TEST)
        assert_close(
            score_in_partitions(detector, as_tensor, batch=5), detector.score_samples(X_TEST)
        )
    # the outliers (last 7, shifted) score lower: the partitions keep the order
    got = score_in_partitions(detector, X_TEST, batch=4)
    assert got[23:].mean() < got[:23].mean()


def test_bad_input_is_a_clear_error(detector):
    with pytest.raises(
        ValueError, match="The 'batch' parameter of score_in_partitions must be an int in"
    ):
        score_in_partitions(detector, X_TEST, batch=0)
    with pytest.raises(
        ValueError, match="The 'batch' parameter of score_in_partitions must be an int in"
    ):
        score_in_partitions(detector, X_TEST, batch=2.0)
    with pytest.raises(
        ValueError, match="The 'method' parameter of score_in_partitions must be a str among"
    ):
        score_in_partitions(detector, X_TEST, method="fit")
    with pytest.raises(ValueError, match="`X` is empty"):
        score_in_partitions(detector, np.empty((0, 12, 2)))
    with pytest.raises(
        TypeError, match="The 'client' parameter of .* must be None or a dask.distributed.Client"
    ):
        score_in_partitions(detector, X_TEST, client="localhost:8786")
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        score_in_partitions(KernelNoveltyDetector(), X_TEST)


def test_local_cluster_scores_equal_the_local_ones_and_is_closed(detector):
    from distributed import Client, LocalCluster

    ref = detector.score_samples(X_TEST)
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        got = score_in_partitions(detector, X_TEST, client=client, batch=8)
        assert_close(got, ref)
        assert len(client.nthreads()) == 2
    assert cluster.status.name == "closed"
    assert client.status == "closed"
