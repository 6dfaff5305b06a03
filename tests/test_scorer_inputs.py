"""Scorer inputs: KNN aggregation, empty test sets, one-point and indefinite corpora, and
parameter checks at use (issue 14, item 13)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

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
    np.testing.assert_allclose(got, _brute_force_knn(X, Y, k, aggregate), rtol=1e-10)


def test_knn_default_is_kth(vectors):
    X, Y = vectors
    a = KNNScorer(3).fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    b = KNNScorer(3, aggregate="kth").fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    assert KNNScorer().aggregate == "kth"
    np.testing.assert_array_equal(a, b)


def test_knn_mean_of_one_neighbour_equals_kth(vectors):
    X, Y = vectors
    a = KNNScorer(1, aggregate="mean").fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    b = KNNScorer(1).fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    np.testing.assert_allclose(a, b, rtol=1e-14)


@pytest.mark.parametrize("bad", ["median", "", None, 1])
def test_knn_rejects_unknown_aggregate(vectors, bad):
    X, Y = vectors
    with pytest.raises(ValueError, match="aggregate"):
        KNNScorer(2, aggregate=bad).fit(X @ X.T)
    fitted = KNNScorer(2).fit(X @ X.T)
    fitted.aggregate = bad
    with pytest.raises(ValueError, match="aggregate"):
        fitted.score(Y @ X.T, (Y**2).sum(1))


# ------------------------------------------------------------------ item 13: input gaps
def _linear_problem(N=10, seed=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    return X, X @ X.T


def _all_scorers():
    from novelty import (
        MeanEmbeddingScorer,
        OCSVMScorer,
        SOSREPScorer,
        SpectralSupport,
        VarianceNorm,
    )

    return {
        "knn": KNNScorer(2),
        "knn_mean": KNNScorer(2, aggregate="mean"),
        "mean_embedding": MeanEmbeddingScorer(),
        "ocsvm": OCSVMScorer(),
        "sosrep": SOSREPScorer(),
        "spectral_support": SpectralSupport(),
        "mahalanobis": VarianceNorm(),
        "conformance": VarianceNorm(),
    }


def _score(name, scorer, Kt, dt):
    if name == "mahalanobis":
        return scorer.mahalanobis(Kt, 1e-3)
    if name == "conformance":
        return scorer.conformance(Kt, 1e-3)
    return torch.as_tensor(scorer.score(Kt, dt))  # GramScorer.score returns numpy


def _rbf(A, B):
    return np.exp(-0.5 * ((A[:, None] - B[None]) ** 2).sum(-1))


@pytest.mark.parametrize("name", list(_all_scorers()))
def test_empty_test_gram_gives_empty_scores(name):
    X, _ = _linear_problem()
    K = _rbf(X, X)  # normalised and entrywise positive: every scorer accepts it
    scorer = _all_scorers()[name].fit(K)
    for Kt in (np.zeros((0, 10)), torch.zeros((0, 10), dtype=torch.float64)):
        out = _score(name, scorer, Kt, np.zeros(0))
        assert isinstance(out, torch.Tensor) and out.shape == (0,) and out.dtype == torch.float64


@pytest.mark.parametrize("name", list(_all_scorers()))
def test_one_point_corpus_rule(name):
    # one rule for every scorer, declared by the class: at least `min_corpus` points (2, and 1
    # for nearest-neighbour distances, which a single corpus point defines)
    scorer = _all_scorers()[name]
    if scorer.min_corpus == 1:
        scorer.set_params(n_neighbors=1)
        s = scorer.fit(np.array([[1.0]])).score(np.array([[1.0], [0.5]]), np.ones(2))
        np.testing.assert_allclose(s, [0.0, 1.0])  # sqrt(1 + 1 - 2 k)
        assert name.startswith("knn")
    else:
        assert scorer.min_corpus == 2
        with pytest.raises(ValueError, match="at least 2 corpus points"):
            scorer.fit(np.array([[1.0]]))


@pytest.mark.parametrize("name", ["mean_embedding", "ocsvm"])
def test_indefinite_corpus_gram_rejected(name):
    X, _ = _linear_problem()
    K = _rbf(X, X)
    rng = np.random.default_rng(1)
    E = rng.normal(size=(10, 10))
    bad = K - 3.0 * (E @ E.T) / 10  # clearly indefinite, still symmetric and finite
    assert np.linalg.eigvalsh(bad).min() < -1.0
    with pytest.raises(ValueError, match="positive semi-definite"):
        _all_scorers()[name].fit(bad)
    _all_scorers()[name].fit(K)  # a PSD Gram is accepted


@pytest.mark.parametrize("seed", [-1, 1.5, "0", None, True])
def test_sosrep_scorer_rejects_bad_seed(seed):
    from novelty import SOSREPScorer

    _, K = _linear_problem()
    with pytest.raises(ValueError, match="seed"):
        SOSREPScorer(seed=seed).fit(np.abs(K))
