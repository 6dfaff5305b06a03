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
    ref = spec.fitted_example(Y).gram(X, Y)  # a kernel that needs fitting: on X2
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
    ref = REGISTRY[name].fitted_example(series).gram(series)
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


# ------------------------------------------------------------------ distance adapter, layouts
def _brute_distance(kernel, xs, ys, normalize=False):
    """d(x, y) = sqrt(k(x,x) + k(y,y) - 2 k(x,y)), one kernel call per pair."""

    def k(a, b):
        v = float(kernel.gram([a], [b])[0, 0])
        if normalize:
            v /= np.sqrt(float(kernel.gram([a])[0, 0]) * float(kernel.gram([b])[0, 0]))
        return v

    return np.array([[np.sqrt(max(k(x, x) + k(y, y) - 2 * k(x, y), 0.0)) for y in ys] for x in xs])


@pytest.mark.parametrize("normalize", [False, True])
def test_distance_adapter_equals_brute_force(normalize):
    from novelty import SktimeDistanceAdapter

    rng = np.random.default_rng(4)
    xs = [rng.normal(size=(T, 2)) for T in (5, 8, 6, 7)]
    ys = [rng.normal(size=(T, 2)) for T in (9, 4, 6)]
    kernel = tskernels.GAK(sigma=1.5)  # fixed bandwidth: no median heuristic per call
    adapter = SktimeDistanceAdapter(kernel, normalize=normalize)
    dfs_x, dfs_y = [pd.DataFrame(x) for x in xs], [pd.DataFrame(y) for y in ys]
    np.testing.assert_allclose(
        adapter.transform(dfs_x, dfs_y), _brute_distance(kernel, xs, ys, normalize), rtol=1e-10
    )
    D = adapter.transform(dfs_x)
    np.testing.assert_allclose(D, _brute_distance(kernel, xs, xs, normalize), atol=1e-7)
    np.testing.assert_array_equal(np.diag(D), 0.0)
    np.testing.assert_array_equal(D, D.T)
    assert adapter.get_tag("pwtrafo_type") == "distance"


def test_distance_adapter_linear_is_euclidean():
    from novelty import SktimeDistanceAdapter

    X = np.random.default_rng(5).normal(size=(6, 3, 8))  # sktime numpy3D (n, d, T)
    D = SktimeDistanceAdapter(tskernels.FlattenedKernel(tskernels.Linear())).transform(X)
    flat = X.reshape(6, -1)
    ref = np.sqrt(((flat[:, None] - flat[None]) ** 2).sum(-1))
    np.testing.assert_allclose(D, ref, rtol=1e-10, atol=1e-10)


def test_distance_adapter_call_dependent_diagonals():
    """The diagonals are those of the same call (d(x, x) = 0 when x is in both X and X2).
    IntegralKernel values no longer depend on the call (issue 14, item 12), so the
    own-sample diagonal now equals the in-call value too."""
    from novelty import SktimeDistanceAdapter

    rng = np.random.default_rng(6)
    xs = [rng.normal(size=(T, 2)) for T in (5, 9)]
    kernel = tskernels.IntegralKernel(tskernels.Linear())  # k(x, x) depends on the grid
    D = SktimeDistanceAdapter(kernel).transform(
        [pd.DataFrame(x) for x in xs], [pd.DataFrame(xs[0])]
    )
    assert abs(D[0, 0]) < 1e-6 and D[1, 0] > 0.1
    # k(x, x) is the same alone and in a call with a longer series
    assert abs(float(kernel.diag([xs[0]])[0]) - float(kernel.gram(xs, [xs[0]])[0, 0])) < 1e-12


class _NotPSD(tskernels.Kernel):
    """k(x, y) = 1 + |x - y|^2 (flattened): not positive semi-definite."""

    def _gram_block(self, X, Y, symmetric):
        return 1 + torch.cdist(X.values.flatten(1), Y.values.flatten(1)) ** 2

    def _diag(self, X):
        return torch.ones(X.n, dtype=X.values.dtype)


def test_distance_adapter_rejects_non_psd_kernel():
    from novelty import SktimeDistanceAdapter

    X = np.random.default_rng(7).normal(size=(4, 2, 5))
    with pytest.raises(ValueError, match="not positive semi-definite"):
        SktimeDistanceAdapter(_NotPSD()).transform(X)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        SktimeDistanceAdapter(_NotPSD()).transform(X, X[:2])


@pytest.mark.parametrize("name", ["gak", "flat_rbf", "integral_rbf"])
def test_distance_adapter_check_estimator(name):
    from sktime.utils.estimator_checks import check_estimator

    from novelty import SktimeDistanceAdapter

    adapter = SktimeDistanceAdapter(REGISTRY[name].example())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(adapter, verbose=False)
    failed = {k: v for k, v in results.items() if v != "PASSED"}
    assert results and not failed, failed


def test_inner_mtype_converts_every_container_to_df_list_first():
    """sktime converts an input whose mtype is not listed to the FIRST inner mtype:
    df-list survives unequal lengths, numpy3D would not."""
    from novelty import SktimeDistanceAdapter

    for cls in (SktimeKernelAdapter, SktimeDistanceAdapter):
        for name, spec in REGISTRY.items():
            adapter = cls(spec.example())
            assert adapter.get_tag("X_inner_mtype") == ["df-list", "numpy3D"]
            assert adapter.get_tag("capability:unequal_length") == spec.unequal_length, name


@pytest.mark.parametrize("mtype", ["nested_univ", "pd-multiindex", "df-list"])
def test_kernel_adapter_on_unequal_pandas_containers(mtype):
    from sktime.datatypes import convert_to

    rng = np.random.default_rng(8)
    series = [rng.normal(size=(T, 3)) for T in (6, 9, 7)]
    obj = convert_to([pd.DataFrame(s) for s in series], to_type=mtype)
    kernel = tskernels.GAK(sigma=2.0)
    got = SktimeKernelAdapter(kernel).transform(obj)
    np.testing.assert_allclose(got, kernel.gram(series).numpy(), rtol=1e-12)


def test_equal_length_only_kernel_names_the_problem():
    rng = np.random.default_rng(9)
    dfs = [pd.DataFrame(rng.normal(size=(T, 2))) for T in (5, 8)]
    adapter = SktimeKernelAdapter(REGISTRY["flat_linear"].example())
    with pytest.raises(ValueError, match="needs equal-length series"):
        adapter.transform(dfs)


def test_svc_on_japanese_vowels_unequal_lengths():
    """sktime's own unequal-length container (nested_univ, lengths 7..29) in TimeSeriesSVC."""
    from sktime.classification.kernel_based import TimeSeriesSVC
    from sktime.datasets import load_japanese_vowels

    X_train, y_train = load_japanese_vowels(split="train")
    X_test, y_test = load_japanese_vowels(split="test")
    svc = TimeSeriesSVC(kernel=SktimeKernelAdapter(tskernels.GAK())).fit(X_train, y_train)
    assert (svc.predict(X_test) == y_test).mean() >= 0.9  # measured 0.965 (270 / 370 series)


def test_knn_distance_and_svc_on_basic_motions():
    from sktime.classification.distance_based import KNeighborsTimeSeriesClassifier
    from sktime.classification.kernel_based import TimeSeriesSVC
    from sktime.datasets import load_basic_motions

    from novelty import SktimeDistanceAdapter

    X_train, y_train = load_basic_motions(split="train")  # nested_univ, equal lengths
    X_test, y_test = load_basic_motions(split="test")
    knn = KNeighborsTimeSeriesClassifier(distance=SktimeDistanceAdapter(tskernels.GAK()))
    assert (knn.fit(X_train, y_train).predict(X_test) == y_test).mean() >= 0.8  # measured 0.875
    svc = TimeSeriesSVC(kernel=SktimeKernelAdapter(tskernels.GAK())).fit(X_train, y_train)
    assert (svc.predict(X_test) == y_test).mean() >= 0.9  # measured 0.975
