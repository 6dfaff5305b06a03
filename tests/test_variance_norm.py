"""VarianceNorm against closed forms: classical Mahalanobis, explicit feature maps, brute force."""

import numpy as np
import pytest
import torch

from novelty import VarianceNorm

ALPHAS = [1e-8, 1e-5, 1e-2]


def _rbf(A, B, gamma=0.1):
    d = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-gamma * d)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(60, 4)), rng.normal(size=(25, 4))


def test_linear_kernel_equals_classical_mahalanobis(data):
    X, Y = data
    vn = VarianceNorm(max_rank=None).fit(X @ X.T)
    assert vn.n_components_ == 4
    got = vn.mahalanobis(Y @ X.T, 1e-14).numpy()
    mu = X.mean(0)
    C = (X - mu).T @ (X - mu) / len(X)  # the scorer's covariance is the population one
    D = Y - mu
    ref = np.sqrt(np.einsum("ij,jk,ik->i", D, np.linalg.pinv(C), D))
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-8)


def test_rank_deficient_linear_is_pseudo_inverse():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3)) @ rng.normal(size=(3, 6))  # rank 3 in R^6
    Y = rng.normal(size=(10, 6))
    vn = VarianceNorm(max_rank=None).fit(X @ X.T)
    assert vn.n_components_ == 3
    mu = X.mean(0)
    C = (X - mu).T @ (X - mu) / len(X)
    D = Y - mu
    ref = np.sqrt(np.einsum("ij,jk,ik->i", D, np.linalg.pinv(C, rcond=1e-10), D))
    np.testing.assert_allclose(vn.mahalanobis(Y @ X.T, 1e-14).numpy(), ref, rtol=1e-8)


def test_invariant_under_invertible_linear_map(data):
    X, Y = data
    G = np.random.default_rng(2).normal(size=(4, 4)) + 3 * np.eye(4)
    XG, YG = X @ G, Y @ G
    a = VarianceNorm().fit(X @ X.T)
    b = VarianceNorm().fit(XG @ XG.T)
    for score in ("mahalanobis", "conformance"):
        sa = getattr(a, score)(Y @ X.T, 1e-12).numpy()
        sb = getattr(b, score)(YG @ XG.T, 1e-12).numpy()
        np.testing.assert_allclose(sa, sb, rtol=1e-6)


def test_tikhonov_weights_match_explicit_feature_map(data):
    # degree-2 polynomial kernel (1 + <x, y>)^2 has an explicit 15-dim feature map on R^4
    X, Y = data

    def phi(Z):
        iu = np.triu_indices(4, 1)
        cross = np.sqrt(2) * (Z[:, :, None] * Z[:, None, :])[:, iu[0], iu[1]]
        return np.hstack([np.ones((len(Z), 1)), np.sqrt(2) * Z, Z**2, cross])

    FX, FY = phi(X), phi(Y)
    np.testing.assert_allclose(FX @ FX.T, (1 + X @ X.T) ** 2, rtol=1e-12, atol=1e-12)
    vn = VarianceNorm(max_rank=None).fit((1 + X @ X.T) ** 2)
    mu = FX.mean(0)
    C = (FX - mu).T @ (FX - mu) / len(X)
    lam, V = np.linalg.eigh(C)
    for alpha in (1e-3, 0.1, 1.0):
        w = np.where(lam > 1e-10, lam / (lam + alpha) ** 2, 0.0)
        D = (FY - mu) @ V
        ref = np.sqrt((D**2 * w).sum(1))
        got = vn.mahalanobis((1 + Y @ X.T) ** 2, alpha).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-9)
        # conformance: nearest corpus point in the same metric
        DC = (FY[:, None, :] - FX[None, :, :]) @ V
        ref_c = np.sqrt((DC**2 * w).sum(-1).min(1))
        got_c = vn.conformance((1 + Y @ X.T) ** 2, alpha).numpy()
        np.testing.assert_allclose(got_c, ref_c, rtol=1e-9)


def test_corpus_points_have_conformance_zero(data):
    X, _ = data
    K = _rbf(X, X)
    vn = VarianceNorm().fit(K)
    c = vn.conformance(K, ALPHAS, "all")
    assert c.shape == (3, vn.n_components_, len(X))
    assert float(c.abs().max()) == 0.0


def test_vectorised_equals_one_at_a_time(data):
    X, Y = data
    vn = VarianceNorm(max_rank=20).fit(_rbf(X, X))
    Kt = torch.from_numpy(_rbf(Y, X))
    M = vn.n_components_
    assert M == 20
    for score in ("mahalanobis", "conformance"):
        allv = getattr(vn, score)(Kt, ALPHAS, "all")
        assert allv.shape == (3, M, len(Y)) and allv.dtype == torch.float64
        for ia, alpha in enumerate(ALPHAS):
            for r in range(1, M + 1):
                one = getattr(vn, score)(Kt, alpha, r)
                assert one.shape == (len(Y),)
                assert torch.equal(one, allv[ia, r - 1]), (score, alpha, r)
            assert torch.equal(getattr(vn, score)(Kt, alpha), allv[ia, -1])
        assert getattr(vn, score)(Kt, ALPHAS).shape == (3, len(Y))
        assert getattr(vn, score)(Kt, 1e-3, "all").shape == (M, len(Y))


def test_conformance_brute_force_all_ranks(data):
    X, Y = data
    vn = VarianceNorm(max_rank=15).fit(_rbf(X, X))
    Kt = _rbf(Y, X)
    got = vn.conformance(Kt, ALPHAS, "all").numpy()
    P = vn.transform(Kt).numpy()
    E = vn.corpus_projections_.numpy()
    s = vn.eigenvalues_.numpy()
    for ia, alpha in enumerate(ALPHAS):
        w = s / (s + alpha) ** 2
        for t in range(len(Y)):
            for r in range(1, 16):
                ref = min(float(np.sum(w[:r] * (P[t, :r] - E[n, :r]) ** 2)) for n in range(len(X)))
                assert abs(got[ia, r - 1, t] - np.sqrt(ref)) <= 1e-12 * max(1, np.sqrt(ref))


def test_projection_formula(data):
    X, Y = data
    K, Kt = _rbf(X, X), _rbf(Y, X)
    N = len(X)
    vn = VarianceNorm(max_rank=None).fit(K)
    H = np.eye(N) - 1.0 / N
    lam, U = np.linalg.eigh(H @ K @ H / N)
    lam, U = lam[::-1][: vn.n_components_], U[:, ::-1][:, : vn.n_components_]
    np.testing.assert_allclose(vn.eigenvalues_.numpy(), lam, rtol=1e-9, atol=1e-14)
    P = (Kt - Kt.mean(1, keepdims=True)) @ U / np.sqrt(N * lam)
    got = vn.transform(Kt).numpy()
    np.testing.assert_allclose(np.abs(got[:, :10]), np.abs(P[:, :10]), rtol=1e-6, atol=1e-9)


def test_numpy_and_torch_inputs_agree(data):
    X, Y = data
    K, Kt = _rbf(X, X), _rbf(Y, X)
    a = VarianceNorm().fit(K).mahalanobis(Kt, 1e-5)
    b = VarianceNorm().fit(torch.from_numpy(K)).mahalanobis(torch.from_numpy(Kt), 1e-5)
    assert isinstance(a, torch.Tensor) and torch.equal(a, b)


def test_threshold_and_max_rank(data):
    X, _ = data
    K = X @ X.T
    assert VarianceNorm(max_rank=2).fit(K).n_components_ == 2
    assert VarianceNorm(max_rank=None).fit(K).n_components_ == 4
    s = VarianceNorm().fit(K).spectrum_
    assert VarianceNorm(threshold=float(s[1])).fit(K).n_components_ == 1


@pytest.mark.parametrize(
    "K, match",
    [
        (np.zeros((0, 0)), "empty"),
        (np.ones((1, 1)), "single"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), "NaN"),
        (np.array([[1.0, 0.5], [0.2, 1.0]]), "not symmetric"),
        (np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), "positive semi-definite"),
        (np.ones((3, 4)), "square"),
        (np.ones((3, 3)), "coincide"),
    ],
)
def test_bad_corpus_gram(K, match):
    with pytest.raises(ValueError, match=match):
        VarianceNorm().fit(K)


def test_bad_scoring_inputs(data):
    X, Y = data
    vn = VarianceNorm().fit(X @ X.T)
    with pytest.raises(ValueError, match="columns"):
        vn.mahalanobis(Y @ X[:-1].T, 1e-3)
    with pytest.raises(ValueError, match="2-D"):
        vn.conformance((Y @ X.T)[0], 1e-3)
    with pytest.raises(ValueError, match="alpha"):
        vn.mahalanobis(Y @ X.T, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        vn.mahalanobis(Y @ X.T, [])
    with pytest.raises(ValueError, match="exceeds"):
        vn.mahalanobis(Y @ X.T, 1e-3, rank=5)
    with pytest.raises(ValueError, match="rank"):
        vn.mahalanobis(Y @ X.T, 1e-3, rank="every")
    with pytest.raises(ValueError, match="NaN"):
        vn.conformance(np.full((2, len(X)), np.nan), 1e-3)
    with pytest.raises(RuntimeError, match="not fitted"):
        VarianceNorm().mahalanobis(Y @ X.T, 1e-3)
    with pytest.raises(ValueError, match="max_rank"):
        VarianceNorm(max_rank=0).fit(X @ X.T)
