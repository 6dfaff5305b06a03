"""sktime adapters: check_estimator and Gram equality for every registered kernel."""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import tskernels
from novelty import SktimeKernelAdapter, sktime_kernels

REGISTRY = tskernels.kernel_registry()


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_sktime_check_estimator(name):
    from sktime.utils.estimator_checks import check_estimator

    adapter = SktimeKernelAdapter(REGISTRY[name].example())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(adapter, verbose=False)
    failed = {k: v for k, v in results.items() if v != "PASSED"}
    assert results and not failed, failed


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_adapter_equals_kernel_gram(name):
    spec = REGISTRY[name]
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(4, 7, 2)), rng.normal(size=(3, 7, 2))  # ours: (n, T, d)
    adapter = sktime_kernels()[name]
    got = adapter.transform(X.transpose(0, 2, 1), Y.transpose(0, 2, 1))  # sktime: (n, d, T)
    ref = spec.example().gram(X, Y)
    assert isinstance(got, np.ndarray) and got.shape == (4, 3)
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-12, atol=1e-14)
    assert adapter.get_tag("capability:unequal_length") == spec.unequal_length
    assert adapter.get_tag("pwtrafo_type") == "kernel"


@pytest.mark.parametrize("name", sorted(n for n, s in REGISTRY.items() if s.unequal_length))
def test_unequal_length_df_list(name):
    rng = np.random.default_rng(1)
    series = [rng.normal(size=(T, 2)) for T in (5, 8, 6)]
    dfs = [pd.DataFrame(s) for s in series]
    got = sktime_kernels()[name].transform(dfs)
    ref = REGISTRY[name].example().gram(series)
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-12)


def test_normalized_adapter_unit_diagonal():
    X = np.random.default_rng(2).normal(size=(5, 2, 9))
    K = SktimeKernelAdapter(normalize=True).transform(X)
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=1e-12)
    assert torch.is_tensor(torch.from_numpy(K))


def test_plugs_into_sktime_estimators():
    from sktime.classification.distance_based import KNeighborsTimeSeriesClassifier
    from sktime.classification.kernel_based import TimeSeriesSVC
    from sktime.dists_kernels.dist_to_kern import DistFromKernel

    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(size=(10, 2, 12)), rng.normal(size=(10, 2, 12)) + 2])
    y = np.array([0] * 10 + [1] * 10)
    kernel = SktimeKernelAdapter(normalize=True)
    svc = TimeSeriesSVC(kernel=kernel).fit(X, y)
    assert (svc.predict(X) == y).mean() >= 0.9
    knn = KNeighborsTimeSeriesClassifier(distance=DistFromKernel(kernel), n_neighbors=1)
    assert (knn.fit(X, y).predict(X) == y).all()
