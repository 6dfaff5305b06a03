"""Gram tiles on Dask (issue 15, item 2): ``gram_tiles`` / ``compute_gram`` equal
``kernel.gram`` tile for tile, for every registered kernel, symmetric and cross, raw and
normalised; fitted kernels are fitted once on the driver; a real LocalCluster (worker
processes) gives the same matrix and is closed afterwards; bad inputs fail with clear errors.

Most tests use dask's synchronous scheduler (no threads, no cluster): fast and deterministic.
Equality is to 1e-12 relative to the largest entry: kernels computed with matrix products
(flattened, integral, signature features) round differently on blocks of different sizes
(BLAS), by a few ulps; the recursions (GAK, PDE, reservoir) agree exactly.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
import torch
from sklearn.base import clone

import tskernels
from tskernels import (
    GAK,
    RBF,
    FlattenedKernel,
    IntegralKernel,
    RandomConvolutionKernel,
    compute_gram,
    gram_tiles,
)

RTOL = 1e-12
RNG = np.random.default_rng(0)
X = 0.5 * RNG.normal(size=(23, 10, 2))
Y = 0.5 * RNG.normal(size=(17, 10, 2))
REGISTRY = tskernels.kernel_registry()


def assert_same(A, B) -> None:
    A = np.asarray(A)
    B = B.numpy() if isinstance(B, torch.Tensor) else np.asarray(B)
    assert A.shape == B.shape
    scale = max(1.0, float(np.abs(B).max()))
    err = float(np.abs(A - B).max())
    assert err <= RTOL * scale, f"max |difference| {err:.3g} (scale {scale:.3g})"


def sync(array):
    return array.compute(scheduler="synchronous")


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_tiles_equal_the_local_gram_for_every_kernel(name, normalize):
    kernel = REGISTRY[name].fitted_example(X)
    K = kernel.gram(X, normalize=normalize)
    K_xy = kernel.gram(X, Y, normalize=normalize)

    A = sync(gram_tiles(kernel, X, tile=5, normalize=normalize))
    assert_same(A, K)
    assert np.array_equal(A, A.T)  # mirrored, as kernel.gram(X) is
    assert_same(sync(gram_tiles(kernel, X, Y, tile=6, normalize=normalize)), K_xy)
    with dask.config.set(scheduler="synchronous"):
        assert_same(compute_gram(kernel, X, tile=7, normalize=normalize), K)
        assert_same(compute_gram(kernel, X, Y, tile=4, normalize=normalize), K_xy)
    if normalize and REGISTRY[name].cls is not GAK:  # GAK is normalised by construction
        assert np.array_equal(np.diagonal(A), np.ones(len(X)))


def test_chunks_are_the_tiles_and_the_dtype_is_the_kernel_s():
    k = FlattenedKernel(RBF(3.0))
    A = gram_tiles(k, X, Y, tile=10)
    assert A.chunks == ((10, 10, 3), (10, 7))
    assert A.dtype == np.float64
    k32 = FlattenedKernel(RBF(3.0), dtype=torch.float32)
    A32 = gram_tiles(k32, X, Y, tile=10)
    assert A32.dtype == np.float32
    assert sync(A32).dtype == np.float32
    # a single tile larger than the data is the whole matrix
    assert gram_tiles(k, X, tile=1000).chunks == ((23,), (23,))


def test_tiles_equal_the_local_gram_with_unequal_lengths():
    lists = [0.5 * RNG.normal(size=(L, 2)) for L in (6, 9, 9, 12, 7, 6, 10, 11, 8)]
    others = [0.5 * RNG.normal(size=(L, 2)) for L in (5, 9, 12, 6)]
    for kernel in (GAK(), IntegralKernel(RBF(1.0)), IntegralKernel(RBF(1.0), n_grid=15)):
        ref = clone(kernel)  # a fresh copy: GAK fixes sigma on its first use
        assert_same(sync(gram_tiles(kernel, lists, tile=4)), ref.gram(lists))
        ref = clone(kernel)
        assert_same(
            sync(gram_tiles(kernel, lists, others, tile=3, normalize=True)),
            ref.gram(lists, others, normalize=True),
        )


def test_median_heuristic_is_fixed_once_on_the_driver_on_X():
    """Unfitted GAK (sigma=None) fixes sigma on the whole X, as kernel.gram(X, Y) does; the
    caller's kernel is not modified. A tile computed by a kernel that fixed its own sigma on
    its rows alone would differ (so this test can fail)."""
    Xs = np.concatenate([X, 3.0 * X])  # the two halves have different spreads
    kernel = GAK()
    A = sync(gram_tiles(kernel, Xs, Y, tile=8))
    assert not hasattr(kernel, "sigma_median_")  # untouched
    assert_same(A, GAK().gram(Xs, Y))
    per_tile = GAK().gram(Xs[40:], Y).numpy()  # sigma from those rows only
    assert np.abs(A[40:] - per_tile).max() > 1e-6
    # a kernel already fitted keeps its sigma (fitted on Y here, not on X)
    fitted = GAK().fit(Y)
    assert_same(sync(gram_tiles(fitted, Xs, tile=8)), GAK().fit(Y).gram(Xs))


def test_kernel_that_needs_fit_must_be_fitted_first():
    with pytest.raises(ValueError, match=r"must be fitted on a corpus.*kernel\.fit"):
        gram_tiles(RandomConvolutionKernel(n_kernels=84), X)
    kernel = RandomConvolutionKernel(n_kernels=84).fit(X)
    assert_same(sync(gram_tiles(kernel, Y, X, tile=5)), kernel.gram(Y, X))


def test_compute_gram_writes_into_out():
    k = FlattenedKernel(RBF(3.0))
    out = np.full((len(X), len(Y)), np.nan)
    with dask.config.set(scheduler="synchronous"):
        got = compute_gram(k, X, Y, tile=5, out=out, max_in_flight=1)
        assert got is out
        assert_same(out, k.gram(X, Y))
        t = torch.full((len(X), len(X)), np.nan, dtype=torch.float64)
        assert compute_gram(k, torch.as_tensor(X), tile=6, out=t) is t
        assert_same(t.numpy(), k.gram(X))
        res = compute_gram(k, X, tile=6)
        assert isinstance(res, torch.Tensor) and res.dtype == torch.float64
        with pytest.raises(ValueError, match=r"`out` must have shape \(23, 17\)"):
            compute_gram(k, X, Y, out=np.empty((23, 16)))
        with pytest.raises(ValueError, match="dtype float64"):
            compute_gram(k, X, Y, out=np.empty((23, 17), dtype=np.float32))
        with pytest.raises(TypeError, match="`out` must be None, a numpy array"):
            compute_gram(k, X, Y, out=[[0.0]])
        with pytest.raises(
            ValueError,
            match=r"The 'max_in_flight' parameter of compute_gram must be None or an int in",
        ):
            compute_gram(k, X, Y, max_in_flight=0)


@pytest.mark.parametrize("tile", [0, -3, 2.5, True, "4", None])
def test_bad_tile_size_is_a_clear_error(tile):
    with pytest.raises(ValueError, match=r"The 'tile' parameter of gram_tiles must be an int in"):
        gram_tiles(FlattenedKernel(RBF(3.0)), X, tile=tile)
    with pytest.raises(ValueError, match=r"The 'tile' parameter of compute_gram must be an int"):
        compute_gram(FlattenedKernel(RBF(3.0)), X, tile=tile)


def test_bad_inputs_are_clear_errors():
    k = FlattenedKernel(RBF(3.0))
    with pytest.raises(
        TypeError,
        match="The 'kernel' parameter of gram_tiles must be an object implementing 'gram' and",
    ):
        gram_tiles("rbf", X)
    with pytest.raises(
        TypeError,
        match="The 'client' parameter of gram_tiles must be None or a dask.distributed.Client",
    ):
        gram_tiles(k, X, client="tcp://127.0.0.1:8786")
    with pytest.raises(TypeError, match="`X` must be an \\(n, T, d\\) numpy array"):
        gram_tiles(k, {"a": 1})
    with pytest.raises(ValueError, match="`Y` is empty"):
        gram_tiles(k, X, np.empty((0, 10, 2)))
    with pytest.raises(ValueError, match="channel"):  # the kernel's own check, on the driver
        gram_tiles(k, X, RNG.normal(size=(4, 10, 3)))
    with pytest.raises(ValueError, match="equal-length"):
        gram_tiles(k, [np.zeros((3, 2)), np.zeros((4, 2))])


def test_normalize_with_a_zero_diagonal_is_a_clear_error():
    from tskernels import Linear, NonFiniteKernelError

    Z = X.copy()
    Z[3] = 0.0  # K(x, x) = 0 for the linear kernel
    k = FlattenedKernel(Linear())
    with pytest.raises(NonFiniteKernelError, match=r"K\(x, x\) > 0.*`X`\[3\]"):
        sync(gram_tiles(k, Z, tile=2, normalize=True))
    with (
        dask.config.set(scheduler="synchronous"),
        pytest.raises(NonFiniteKernelError, match=r"`Y`\[3\]"),
    ):
        compute_gram(k, X, Z, tile=2, normalize=True)


def test_local_cluster_equals_the_local_gram_and_is_closed():
    """Two worker processes: scattered kernel and data, tiles computed there, equal to the
    local Gram; the cluster and the client are closed on exit."""
    from distributed import Client, LocalCluster

    Xl = 0.5 * RNG.normal(size=(40, 10, 2))
    gak = GAK()  # unfitted: sigma fixed on the driver, shipped with the kernel
    flat = FlattenedKernel(RBF(3.0))
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        A = gram_tiles(gak, Xl, tile=9, client=client)
        assert_same(client.compute(A).result(), GAK().gram(Xl))
        B = compute_gram(flat, Xl, Y, tile=7, normalize=True, client=client, max_in_flight=2)
        assert_same(B, flat.gram(Xl, Y, normalize=True))
        C = compute_gram(gak, Xl, tile=11, client=client)
        assert_same(C, GAK().gram(Xl))
        assert len(client.nthreads()) == 2
    assert cluster.status.name == "closed"
    assert client.status == "closed"
