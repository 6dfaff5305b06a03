"""Nyström / random-feature approximation (novelty.detector._approximation,
novelty.scorers._feature_scorers,
novelty.detector._approx_member): exact at M = N against the exact Gram scorers, against
scikit-learn's
Nystroem and NearestNeighbors, the N x N Gram never formed, bad input."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

import tskernels as tk
from novelty import (
    FeatureKNN,
    FeatureMeanEmbedding,
    FeatureSpectralSupport,
    FeatureVarianceNorm,
    KNNScorer,
    MeanEmbeddingScorer,
    NystroemFeatures,
    RandomFeatures,
    SpectralSupport,
    VarianceNorm,
)
from novelty.detector._approximation import select_landmarks
from novelty.scorers._feature_scorers import nearest_squared_distances

ATOL = 1e-6


def _close(a, b, atol=ATOL):
    """Equal within atol; tensors or arrays (the exact scorers may return either)."""
    np.testing.assert_allclose(
        np.asarray(torch.as_tensor(a)), np.asarray(torch.as_tensor(b)), rtol=0, atol=atol
    )


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 12, 3))
    Y = np.concatenate([rng.normal(size=(10, 12, 3)), rng.normal(size=(5, 12, 3)) * 2.0])
    return X, Y


def _exact_and_features(X, Y, normalize):
    # unnormalised: a full-rank polynomial kernel on the flattened series
    k = (
        tk.IntegralKernel(tk.RBF(3.0))
        if normalize
        else tk.FlattenedKernel(tk.Polynomial(3, scale=0.03))
    )
    K = k.gram(X, normalize=normalize)
    Kt = k.gram(Y, X, normalize=normalize)
    dt = torch.ones(len(Y), dtype=torch.float64) if normalize else k.diag(Y)
    nys = NystroemFeatures(k, n_components=len(X), normalize=normalize).fit(X)
    assert nys.n_features_ == len(X)  # every landmark kept: the exact span
    P, dc = nys.transform(X)
    Pt, dtf = nys.transform(Y)
    _close(dtf, dt, atol=1e-12)
    return K, Kt, dt, P, dc, Pt, dtf


@pytest.mark.parametrize("normalize", [True, False])
def test_variance_norm_equals_exact_at_full_rank(data, normalize):
    K, Kt, _, P, _, Pt, _ = _exact_and_features(*data, normalize)
    for max_rank in (50, 7):
        vn, fv = VarianceNorm(max_rank=max_rank).fit(K), FeatureVarianceNorm(max_rank=max_rank)
        fv.fit(P)
        assert fv.n_components_ == vn.n_components_
        _close(fv.eigenvalues_, vn.eigenvalues_, atol=1e-12)
        for alpha in (1e-8, 1e-2, 1.0):
            for rank in (None, 3):
                _close(
                    fv.conformance(Pt, alpha, rank), vn.conformance(Kt, alpha, rank),
                )  # fmt: skip
                _close(
                    fv.mahalanobis(Pt, alpha, rank), vn.mahalanobis(Kt, alpha, rank),
                )  # fmt: skip
    # a corpus point has conformance 0
    assert float(FeatureVarianceNorm().fit(P).conformance(P[:5], 1e-2).max()) < 1e-6


@pytest.mark.parametrize("filt", ["tikhonov", "tsvd", "cutoff", "landweber", "nu"])
def test_spectral_support_equals_exact_at_full_rank(data, filt):
    K, Kt, dt, P, _, Pt, dtf = _exact_and_features(*data, True)
    exact = SpectralSupport(filt, 1e-2).fit(K).score(Kt, dt)
    approx = FeatureSpectralSupport(filt, 1e-2).fit(P).score(Pt, dtf)
    _close(approx, exact)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize(("k", "aggregate"), [(1, "kth"), (3, "kth"), (4, "mean")])
def test_knn_kernel_distance_equals_exact_feature_distance_does_not(data, normalize, k, aggregate):
    K, Kt, dt, P, dc, Pt, dtf = _exact_and_features(*data, normalize)
    exact = torch.as_tensor(KNNScorer(k, aggregate=aggregate).fit(K).score(Kt, dt))
    approx = FeatureKNN(k, aggregate=aggregate).fit(P, dc).score(Pt, dtf)
    _close(approx, exact)
    # the residual k(y, y) - ||Phi(y)||^2 of a test series is not 0 even at M = N
    feature = FeatureKNN(k, aggregate=aggregate, distance="feature").fit(P, dc).score(Pt, dtf)
    assert float((feature - exact).abs().max()) > 1e-3
    assert bool((feature <= exact + 1e-9).all())  # residuals only add


def test_knn_leave_one_out_equals_brute_force(data):
    K, _, _, P, dc, _, _ = _exact_and_features(*data, True)
    rows = torch.tensor([0, 5, 17, 39])
    loo = FeatureKNN(2).fit(P, dc).leave_one_out(rows)
    d = torch.sqrt((2.0 - 2.0 * K).clamp_min(0))
    for i, r in enumerate(rows.tolist()):
        others = torch.cat([d[r, :r], d[r, r + 1 :]])
        assert abs(float(torch.sort(others).values[1]) - float(loo[i])) < ATOL


def test_mean_embedding_equals_exact(data):
    K, Kt, dt, P, _, Pt, dtf = _exact_and_features(*data, True)
    exact = MeanEmbeddingScorer().fit(K).score(Kt, dt)
    _close(FeatureMeanEmbedding().fit(P).score(Pt, dtf), exact)


def test_nystroem_matches_sklearn_on_the_same_landmarks():
    from sklearn.kernel_approximation import Nystroem

    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 8, 2))
    Y = rng.normal(size=(30, 8, 2))
    sigma = 3.0
    sk = Nystroem(kernel="rbf", gamma=1 / (2 * sigma**2), n_components=25, random_state=0)
    sk.fit(X.reshape(120, -1))
    k = tk.FlattenedKernel(tk.RBF(sigma))
    nys = NystroemFeatures(k, 25, normalize=False).fit(X, candidates=sk.component_indices_)
    assert sorted(nys.landmark_indices_.tolist()) == sorted(sk.component_indices_.tolist())
    Pt, _ = nys.transform(Y)
    Ps = torch.from_numpy(sk.transform(Y.reshape(30, -1)))
    _close(Pt @ Pt.T, Ps @ Ps.T, atol=1e-8)
    # and a landmark's features reproduce its exact kernel row
    L = X[nys.landmark_indices_[:3]]
    PL, _ = nys.transform(L)
    _close(PL @ Pt.T, k.gram(L, Y), atol=1e-8)


def test_nearest_neighbours_match_sklearn():
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(2)
    E = torch.from_numpy(rng.normal(size=(500, 7)))
    Q = torch.from_numpy(rng.normal(size=(60, 7)))
    d2, idx = nearest_squared_distances(Q, E, 4)
    nn = NearestNeighbors(n_neighbors=4).fit(E.numpy())
    dist, ind = nn.kneighbors(Q.numpy())
    np.testing.assert_allclose(np.sqrt(d2.numpy()), dist, atol=1e-10)
    assert (idx.numpy() == ind).all()
    # leave-one-out: query corpus rows, their own row excluded
    rows = torch.arange(0, 500, 50)
    d2, idx = nearest_squared_distances(E[rows], E, 1, exclude=rows)
    dist, ind = nn.kneighbors(E[rows].numpy(), n_neighbors=2)
    np.testing.assert_allclose(np.sqrt(d2[:, 0].numpy()), dist[:, 1], atol=1e-10)
    # float32 candidates, float64 distances: the same neighbours here
    for kw in ({}, {"exclude": rows}):
        Qs = E[rows] if kw else Q
        a = nearest_squared_distances(Qs, E, 3, fast=False, **kw)
        b = nearest_squared_distances(Qs, E, 3, fast=True, **kw)
        assert torch.equal(a[1], b[1])
        _close(a[0], b[0], atol=1e-12)


def test_landmark_rules_seeded_and_kmeanspp_leverage_find_the_outlier():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 10, 2)) * 0.05
    X[137] += 4.0  # one isolated series
    k = tk.IntegralKernel(tk.RBF(1.0))
    for rule in ("uniform", "kmeans++", "leverage"):
        a = select_landmarks(k, X, 6, rule, seed=5)
        assert (a == select_landmarks(k, X, 6, rule, seed=5)).all()
        assert len(set(a.tolist())) == 6
        cand = np.arange(100, 200)
        assert set(select_landmarks(k, X, 6, rule, candidates=cand).tolist()) <= set(cand)
    # the isolated series: in 10 % of uniform draws of 20 of 200, far more often by the others
    # (seeds 0-9: uniform 0, kmeans++ 10, leverage 7)
    hits = {
        rule: sum(137 in select_landmarks(k, X, 20, rule, seed=s) for s in range(10))
        for rule in ("uniform", "kmeans++", "leverage")
    }
    assert hits["uniform"] <= 3 and hits["kmeans++"] >= 9 and hits["leverage"] >= 5, hits
    assert (select_landmarks(k, X, 500, "kmeans++") == np.arange(200)).all()


def test_explicit_features():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(20, 30, 2))
    rocket = tk.RandomConvolutionKernel(n_kernels=168).fit(X)
    for kernel in (rocket, tk.RandomizedSignatureKernel(n_features=16, scale=0.1)):
        rf = RandomFeatures(kernel, normalize=False).fit()
        P, d = rf.transform(X[:6])
        _close(P @ P.T, kernel.gram(X[:6]), atol=1e-10)
        _close(d, kernel.diag(X[:6]), atol=1e-10)
        Pn, dn = RandomFeatures(kernel, normalize=True).fit().transform(X[:6])
        _close(Pn @ Pn.T, kernel.gram(X[:6], normalize=True), atol=1e-10)
        assert bool((dn == 1).all())
    # random Fourier features: unbiased, error ~ 1/sqrt(D)
    for kernel in (tk.FlattenedKernel(tk.RBF(8.0)), tk.IntegralKernel(tk.RBF(1.5))):
        for normalize in (False, True):
            rf = RandomFeatures(kernel, 40_000, seed=1, normalize=normalize).fit()
            P, d = rf.transform(X[:8])
            err = float((P @ P.T - kernel.gram(X[:8])).abs().max())
            assert err < 0.03, err
            _close(d, (P * P).sum(1), atol=1e-12)  # the features' own diagonal
            P2, _ = (
                RandomFeatures(kernel, 40_000, seed=1, normalize=normalize).fit().transform(X[:8])
            )
            assert torch.equal(P, P2)  # seeded


class _GuardedKernel(tk.IntegralKernel):
    """Raises when asked for a Gram with both sides above LIMIT series."""

    LIMIT = 60
    calls: list = []

    def gram(self, X, Y=None, *, normalize=False):
        nx = len(X)
        ny = nx if Y is None else len(Y)
        type(self).calls.append((nx, ny))
        if min(nx, ny) > self.LIMIT:
            raise AssertionError(f"a {nx} x {ny} Gram was requested")
        return super().gram(X, Y, normalize=normalize)


def _normal_and_anomalies(rng, n, T=20, d=2, freq=1.0):
    """Sines of random phase (frequency ``freq``) plus noise: normal at freq 1."""
    t = np.linspace(0, 1, T)
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1))
    return np.sin(2 * np.pi * freq * t[None, :, None] + phase) + 0.1 * rng.normal(size=(n, T, d))


@pytest.mark.parametrize(
    ("scorer", "landmarks"),
    [(s, "uniform") for s in ("knn", "conformance", "mahalanobis", "sse", "mean_embedding")]
    + [("knn", "kmeans++"), ("knn", "leverage")],
)
def test_detector_never_forms_the_corpus_gram(scorer, landmarks):
    from sklearn.metrics import roc_auc_score

    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(5)
    X = _normal_and_anomalies(rng, 300)
    Y = np.concatenate([_normal_and_anomalies(rng, 80), _normal_and_anomalies(rng, 20, freq=2.5)])
    y = np.r_[np.ones(80), np.zeros(20)]
    _GuardedKernel.calls.clear()
    det = KernelNoveltyDetector(
        kernel=_GuardedKernel(tk.RBF(1.0)),
        scorer=scorer,
        approximation="nystroem",
        n_components=40,
        landmarks=landmarks,
    ).fit(X)
    s = det.score_samples(Y)
    assert _GuardedKernel.calls and max(min(c) for c in _GuardedKernel.calls) <= 40
    assert det.calibration_scores_.shape == (150,)
    assert abs(roc_auc_score(y, s) - _exact_auc(scorer)) < 0.05


@functools.cache
def _exact_auc(scorer: str) -> float:
    """ROC-AUC of the exact detector on the data of the test above (the same for every
    landmark rule: fitted once per scorer)."""
    from sklearn.metrics import roc_auc_score

    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(5)
    X = _normal_and_anomalies(rng, 300)
    Y = np.concatenate([_normal_and_anomalies(rng, 80), _normal_and_anomalies(rng, 20, freq=2.5)])
    y = np.r_[np.ones(80), np.zeros(20)]
    exact = KernelNoveltyDetector(kernel=tk.IntegralKernel(tk.RBF(1.0)), scorer=scorer).fit(X)
    return float(roc_auc_score(y, exact.score_samples(Y)))


def test_detector_close_to_exact_and_exact_at_full_rank():
    from sklearn.metrics import roc_auc_score

    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(6)
    X = _normal_and_anomalies(rng, 400)
    Y = np.concatenate([_normal_and_anomalies(rng, 100), rng.normal(size=(30, 20, 2))])
    y = np.r_[np.ones(100), np.zeros(30)]
    kernel = tk.IntegralKernel(tk.RBF(1.0))
    exact = KernelNoveltyDetector(kernel=kernel).fit(X)
    approx = KernelNoveltyDetector(kernel=kernel, approximation="nystroem", n_components=100)
    approx.fit(X)
    se, sa = exact.score_samples(Y), approx.score_samples(Y)
    assert abs(roc_auc_score(y, se) - roc_auc_score(y, sa)) < 0.02
    assert np.corrcoef(se, sa)[0, 1] > 0.95
    # n_components >= N: the exact member, identical scores
    full = KernelNoveltyDetector(kernel=kernel, approximation="nystroem", n_components=400).fit(X)
    np.testing.assert_allclose(full.score_samples(Y), se, atol=1e-12)
    # conformal false alarms on new normal series stay near the contamination
    Z = _normal_and_anomalies(rng, 2000)
    rate = float((approx.predict(Z) == -1).mean())
    assert rate < 0.05 + 3 * np.sqrt(0.05 * 0.95 / 200) + 0.02, rate


def test_detector_random_fourier_features():
    from sklearn.metrics import roc_auc_score

    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(9)
    X = _normal_and_anomalies(rng, 300)
    Y = np.concatenate([_normal_and_anomalies(rng, 80), _normal_and_anomalies(rng, 20, freq=2.5)])
    y = np.r_[np.ones(80), np.zeros(20)]
    kernel = tk.FlattenedKernel(tk.RBF(6.0))
    det = KernelNoveltyDetector(kernel=kernel, approximation="features", n_components=200).fit(X)
    assert det.members_[0].approximation_ == "features"
    exact = KernelNoveltyDetector(kernel=kernel).fit(X)
    auc = roc_auc_score(y, det.score_samples(Y))
    assert abs(auc - roc_auc_score(y, exact.score_samples(Y))) < 0.05


def test_default_recipe_with_approximation():
    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(7)
    X = _normal_and_anomalies(rng, 90)
    det = KernelNoveltyDetector(approximation="nystroem", n_components=30).fit(X)
    kinds = [getattr(m, "approximation_", None) for m in det.members_]
    # the recipe and MiniRocket 1-NN: exact features; GAK (multivariate series) by Nyström
    assert kinds == ["features", "features", "nystroem"]
    s = det.score_samples(np.concatenate([X[:5], X[:5] + 3.0]))
    assert (s[:5] > s[5:]).all()


def test_bad_input():
    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(8)
    X = rng.normal(size=(50, 10, 2))
    k = tk.IntegralKernel(tk.RBF(1.0))
    for params, match in [
        ({"approximation": "svd"}, "approximation"),
        ({"approximation": "nystroem", "n_components": 0}, "n_components"),
        ({"approximation": "nystroem", "n_components": 10, "landmarks": "grid"}, "landmarks"),
        ({"approximation": "nystroem", "n_components": 10, "scorer": "ocsvm"}, "feature-space"),
    ]:
        with pytest.raises(ValueError, match=match):
            KernelNoveltyDetector(kernel=k, **params).fit(X)
    with pytest.raises(ValueError, match="explicit features"):
        RandomFeatures(tk.GAK()).fit()
    with pytest.raises(ValueError, match="equal-length"):
        RandomFeatures(tk.IntegralKernel(tk.RBF(1.0)), 10).fit().transform([X[0], X[1][:5]])
    with pytest.raises(RuntimeError, match="not fitted"):
        NystroemFeatures(k).transform(X)
    P, d = NystroemFeatures(k, 10).fit(X).transform(X)
    with pytest.raises(ValueError, match="features"):
        FeatureKNN().fit(P, d).score(P[:, :5], d)
    with pytest.raises(ValueError, match="not from one kernel"):
        FeatureKNN().fit(P, d * 0.1)
    with pytest.raises(ValueError, match="normalised"):
        FeatureSpectralSupport().fit(P).score(P, d * 2)
    with pytest.raises(ValueError, match="exceeds"):
        FeatureVarianceNorm(max_rank=3).fit(P).conformance(P, 1e-2, rank=4)
