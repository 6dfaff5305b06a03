"""Density-relative members of the detector pool (experiments.detector_pool.pool, group
``rcsd``): LOF, the kNN distance ratio and cosine kNN read off a Gram matrix, checked against
scikit-learn and brute force on explicit features, and their cross-fitting."""

import contextlib

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from experiments.detector_pool import pool


def _features(seed, n, m, p=6, scale=10.0):
    """Corpus and query features of two sub-modes of different spread (no tied distances)."""
    rng = np.random.default_rng(seed)
    F = np.r_[rng.normal(size=(n // 2, p)), 8.0 + 4.0 * rng.normal(size=(n - n // 2, p))]
    G = rng.normal(size=(m, p)) * 6.0 + 2.0
    return scale * F, scale * G


def _grams(F, G):
    return F @ F.T, G @ F.T, (G * G).sum(axis=1)


@pytest.mark.parametrize(("n", "k"), [(30, 10), (40, 20), (12, 20)])
def test_lof_equals_sklearn_novelty(n, k):
    """LOF from the Gram equals -score_samples of sklearn's LocalOutlierFactor(novelty=True)
    on the features (its k is min(k, n - 1) too); sklearn adds 1e-10 to the mean
    reachability, below 1e-11 relative at these distances (~10-100)."""
    from sklearn.neighbors import LocalOutlierFactor

    F, G = _features(n, n, 25)
    name = {10: "rcsd_lof10", 20: "rcsd_lof20"}[k]
    got = pool.density_scores(*_grams(F, G), [name])[name]
    with pytest.warns(UserWarning) if k >= n else contextlib.nullcontext():
        lof = LocalOutlierFactor(n_neighbors=k, novelty=True).fit(F)
    want = -lof.score_samples(G)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=0)


def test_ratio_and_cosine_brute_force():
    """ratio5: mean 5-NN distance of the query over the mean, across those 5 neighbours, of
    their own mean 5-NN distance to the other corpus points; cos5: mean of the 5 smallest
    cosine distances. Loops over the points, straight from the definitions."""
    F, G = _features(1, 20, 15)
    got = pool.density_scores(*_grams(F, G), ["rcsd_ratio5", "rcsd_cos5"])
    Dc, Dq = cdist(F, F), cdist(G, F)
    own = np.array([np.sort(np.delete(Dc[i], i))[:5].mean() for i in range(len(F))])
    ratio = []
    for q in range(len(G)):
        nb = np.argsort(Dq[q])[:5]
        ratio.append(Dq[q, nb].mean() / own[nb].mean())
    np.testing.assert_allclose(got["rcsd_ratio5"], ratio, rtol=1e-10)
    cos = cdist(G, F, metric="cosine")
    np.testing.assert_allclose(got["rcsd_cos5"], np.sort(cos, axis=1)[:, :5].mean(1), rtol=1e-9)


def test_density_relative_scores_are_scale_free():
    """LOF, the ratio and the cosine distance do not change when every feature is multiplied
    by one constant (the Gram by its square), unlike a plain kNN distance."""
    F, G = _features(2, 25, 10)
    names = list(pool.DENSITY)
    a = pool.density_scores(*_grams(F, G), names)
    b = pool.density_scores(*_grams(7.0 * F, 7.0 * G), names)
    for name in names:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-9)


def test_density_relative_scores_favour_the_dense_mode():
    """A query 6 sd out of a dense sub-mode is more novel by LOF and by the ratio than a query
    1 sd out of a sparse sub-mode, which plain mean 10-NN distance ranks the other way."""
    rng = np.random.default_rng(3)
    dense = rng.normal(size=(30, 2)) * 0.2
    sparse = rng.normal(size=(30, 2)) * 3.0 + [30.0, 0.0]
    F = np.r_[dense, sparse]
    G = np.array([[0.0, 1.2], [30.0, 3.0]])
    got = pool.density_scores(*_grams(F, G), ["rcsd_lof10", "rcsd_ratio5"])
    assert got["rcsd_lof10"][0] > 2.0 * got["rcsd_lof10"][1]
    assert got["rcsd_ratio5"][0] > 2.0 * got["rcsd_ratio5"][1]
    knn10 = np.sort(cdist(G, F), axis=1)[:, :10].mean(axis=1)
    assert knn10[0] < knn10[1]


def test_bad_input_raises():
    F, G = _features(4, 6, 3)
    K, Kt, dt = _grams(F, G)
    with pytest.raises(ValueError, match="at least 2 corpus series"):
        pool.density_scores(K[:1, :1], Kt[:, :1], dt, ["rcsd_lof10"])
    with pytest.raises(ValueError, match="shapes"):
        pool.density_scores(K, Kt[:, :3], dt, ["rcsd_lof10"])
    F2 = np.r_[F[:1], F[:1]]  # two copies, k = 1: the neighbour at distance 0
    with pytest.raises(ArithmeticError, match="infinite local density"):
        pool.density_scores(*_grams(F2, G), ["rcsd_lof10"])
    with pytest.raises(ArithmeticError, match="distance 0"):
        pool.density_scores(*_grams(F2, G), ["rcsd_ratio5"])
    Z = np.r_[F, np.zeros((1, F.shape[1]))]
    with pytest.raises(ArithmeticError, match="zero norm"):
        pool.density_scores(*_grams(Z, G), ["rcsd_cos5"])


def _series(seed, n, T=30, d=1):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1)


def _kernel():
    from tskernels import RandomConvolutionKernel

    return RandomConvolutionKernel(transform="minirocket", n_kernels=840, seed=0)


def test_density_group_cross_fits_like_kernel_group():
    """Test scores are the density scores of the kernel fitted on the whole corpus; a held-out
    score (leave-one-out: 9 distinct series <= 20) is the query's score against a kernel
    refitted without it, its copy held out with it and left out of every density."""
    from tskernels import SeriesBatch

    Xc, Xt = _series(5, 10), _series(6, 4)
    Xc[7] = Xc[2]  # an exact copy
    names = list(pool.DENSITY)
    res = pool.density_group(_kernel(), names, Xc, Xt)
    distinct = np.array([0, 1, 2, 3, 4, 5, 6, 8, 9])
    Zc, Zt = SeriesBatch.from_checked(Xc), SeriesBatch.from_checked(Xt)

    def direct(train_rows, fit_rows, Zq):
        k = _kernel().fit(Zc[fit_rows])
        Ztr = Zc[train_rows]
        K = k.gram(Ztr, normalize=False).numpy()
        return pool.density_scores(
            K, k.gram(Zq, Ztr, normalize=False).numpy(), k.diag(Zq).numpy(), names
        )

    test = direct(distinct, np.arange(10), Zt)
    rest = np.array([0, 1, 3, 4, 5, 6, 8, 9])  # series 2 and its copy 7 held out
    held = direct(rest, rest, Zc[np.array([2])])
    for name in names:
        cal, s, secs = res[name]
        assert cal.shape == (9,) and s.shape == (4,) and secs > 0
        assert np.isfinite(cal).all() and np.isfinite(s).all()
        np.testing.assert_allclose(s, test[name], rtol=1e-9)
        np.testing.assert_allclose(cal[2], held[name][0], rtol=1e-9)
    assert pool.compute_group("rcsd", Xc[:2], Xt)["rcsd_lof10"][0].shape == (2,)
