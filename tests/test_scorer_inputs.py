"""Scorer inputs: KNN aggregation, empty test sets, one-point and indefinite corpora, and
parameter checks at use (issue 14, item 13)."""

from __future__ import annotations

import numpy as np
import pytest

from novelty import KNNScorer


@pytest.fixture(scope="module")
def vectors():
    rng = np.random.default_rng(5)
    return rng.normal(size=(25, 4)), rng.normal(size=(9, 4)) * 1.5


def _brute_force_knn(X, Y, k, aggregate):
    """Oracle: explicit Euclidean distances in R^d (the linear kernel's feature space)."""
    out = []
    for y in Y:
        d = sorted(float(np.sqrt(((y - x) ** 2).sum())) for x in X)
        out.append(d[k - 1] if aggregate == "kth" else sum(d[:k]) / k)
    return np.array(out)


@pytest.mark.parametrize("aggregate", ["kth", "mean"])
@pytest.mark.parametrize("k", [1, 2, 5, 25])
def test_knn_aggregate_matches_brute_force(vectors, k, aggregate):
    X, Y = vectors
    got = KNNScorer(k, aggregate=aggregate).fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    np.testing.assert_allclose(got.numpy(), _brute_force_knn(X, Y, k, aggregate), rtol=1e-10)


def test_knn_default_is_kth(vectors):
    X, Y = vectors
    a = KNNScorer(3).fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    b = KNNScorer(3, aggregate="kth").fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    assert KNNScorer().aggregate == "kth"
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_knn_mean_of_one_neighbour_equals_kth(vectors):
    X, Y = vectors
    a = KNNScorer(1, aggregate="mean").fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    b = KNNScorer(1).fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-14)


@pytest.mark.parametrize("bad", ["median", "", None, 1])
def test_knn_rejects_unknown_aggregate(vectors, bad):
    X, Y = vectors
    with pytest.raises(ValueError, match="aggregate"):
        KNNScorer(2, aggregate=bad).fit(X @ X.T)
    fitted = KNNScorer(2).fit(X @ X.T)
    fitted.aggregate = bad
    with pytest.raises(ValueError, match="aggregate"):
        fitted.score(Y @ X.T, (Y**2).sum(1))
