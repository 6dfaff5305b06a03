"""SpectralSupport: closed forms of the filters and input checks."""

import numpy as np
import pytest
import torch

from novelty import SpectralSupport
from novelty.scorers._spectral_support import spectral_filter


def _laplacian(A, B, gamma=2.0):
    d = np.sqrt(((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))
    return np.exp(-d / gamma)


@pytest.fixture(scope="module")
def grams():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(40, 3)), rng.normal(size=(15, 3)) * 1.5
    return _laplacian(X, X), _laplacian(Y, X), np.ones(len(Y))


def test_tikhonov_closed_form(grams):
    K, Kt, dt = grams
    n, lam = len(K), 1e-2
    F = SpectralSupport("tikhonov", lam).fit(K).support_function(Kt, dt).numpy()
    ref = np.einsum("ij,ij->i", Kt, np.linalg.solve(K + n * lam * np.eye(n), Kt.T).T)
    np.testing.assert_allclose(F, ref, rtol=1e-10, atol=1e-12)


def test_landweber_iteration_equals_filter(grams):
    K, Kt, dt = grams
    n, t = len(K), 25
    # operator iteration G <- G + eta (I - (K/n) G), G_0 = 0, eta = 1: G_t = g_t(K/n)
    G = np.zeros_like(K)
    for _ in range(t):
        G = G + (np.eye(n) - K / n @ G)
    ref = np.einsum("ij,ij->i", Kt, Kt @ G) / n
    F = SpectralSupport("landweber", 0.1, iterations=t).fit(K).support_function(Kt, dt).numpy()
    np.testing.assert_allclose(F, ref, rtol=1e-9, atol=1e-12)


def test_nu_method_iteration_equals_filter(grams):
    K, Kt, dt = grams
    n, t, nu = len(K), 12, 1.0
    # coefficient-space nu-method (Lo Gerfo et al. 2008), applied to every right-hand side
    Sig = K / n
    I = np.eye(n)
    C_prev, C = np.zeros_like(K), (4 * nu + 2) / (4 * nu + 1) * I
    for i in range(2, t + 1):
        u = (
            (i - 1)
            * (2 * i - 3)
            * (2 * i + 2 * nu - 1)
            / ((i + 2 * nu - 1) * (2 * i + 4 * nu - 1) * (2 * i + 2 * nu - 3))
        )
        w = 4 * (2 * i + 2 * nu - 1) * (i + nu - 1) / ((i + 2 * nu - 1) * (2 * i + 4 * nu - 1))
        C, C_prev = C + u * (C - C_prev) + w * (I - Sig @ C), C
    ref = np.einsum("ij,ij->i", Kt, Kt @ C) / n
    F = SpectralSupport("nu", 0.1, iterations=t).fit(K).support_function(Kt, dt).numpy()
    np.testing.assert_allclose(F, ref, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("nu", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("t", [1, 2, 5, 13])
def test_nu_method_residual_is_the_jacobi_polynomial(nu, t):
    # independent closed form (Engl, Hanke, Neubauer, Regularization of Inverse Problems, 6.3):
    # the residual 1 - s g_t(s) of t nu-method steps is P_t^(a, b)(1 - 2 s) / P_t^(a, b)(1)
    # with a = 2 nu - 1/2, b = -1/2 (Jacobi polynomials, scipy)
    from scipy.special import eval_jacobi

    s = torch.linspace(1e-3, 1.0, 60, dtype=torch.float64)
    residual = 1 - s * spectral_filter(s, "nu", 0.1, t, nu)
    a, b = 2 * nu - 0.5, -0.5
    ref = eval_jacobi(t, a, b, 1 - 2 * s.numpy()) / eval_jacobi(t, a, b, 1.0)
    np.testing.assert_allclose(residual.numpy(), ref, rtol=0, atol=1e-13)


def test_nu_and_landweber_converge_to_pseudo_inverse():
    s = torch.tensor([0.05, 0.3, 1.0], dtype=torch.float64)
    np.testing.assert_allclose(spectral_filter(s, "landweber", 1.0, 2000), 1 / s, rtol=1e-12)
    # the nu-method residual decays polynomially in t (oscillating), not geometrically
    np.testing.assert_allclose(spectral_filter(s, "nu", 1.0, 3000), 1 / s, rtol=1e-5)


def test_truncation_above_every_eigenvalue_gives_zero(grams):
    K, Kt, dt = grams
    top = np.linalg.eigvalsh(K / len(K)).max()
    F = SpectralSupport("tsvd", 1.01 * top).fit(K).support_function(Kt, dt)
    assert float(F.abs().max()) == 0.0
    # the spectral cut-off then is the constant filter 1/lam: F = |k_x|^2 / (n lam)
    lam = 1.01 * top
    F = SpectralSupport("cutoff", lam).fit(K).support_function(Kt, dt).numpy()
    np.testing.assert_allclose(F, (Kt**2).sum(1) / (len(K) * lam), rtol=1e-10)


def test_filters_agree_with_eigen_formula(grams):
    K, Kt, dt = grams
    n, lam = len(K), 0.02
    s, U = np.linalg.eigh(K / n)
    proj = (Kt @ U) ** 2
    g = {"tsvd": np.where(s >= lam, 1 / s, 0.0), "cutoff": 1 / np.maximum(s, lam)}
    for name, gv in g.items():
        F = SpectralSupport(name, lam).fit(K).support_function(Kt, dt).numpy()
        np.testing.assert_allclose(F, (proj * gv).sum(1) / n, rtol=1e-10, atol=1e-13)


def test_corpus_inside_test_outside(grams):
    K, Kt, dt = grams
    sse = SpectralSupport("tikhonov", 1e-4).fit(K)
    inside = sse.score(K, np.ones(len(K)))
    far = sse.score(_laplacian(np.full((3, 3), 20.0), np.zeros((40, 3))), np.ones(3))
    assert float(inside.max()) < 0.05 and float(far.min()) > 0.99


def test_bad_inputs(grams):
    K, Kt, dt = grams
    with pytest.raises(ValueError, match="normalised"):
        SpectralSupport().fit(2 * K)
    sse = SpectralSupport().fit(K)
    with pytest.raises(ValueError, match="normalised"):
        sse.score(Kt, 2 * dt)
    with pytest.raises(ValueError, match="filter"):
        SpectralSupport("gauss").fit(K)
    with pytest.raises(ValueError, match="lam"):
        SpectralSupport(lam=-1.0).fit(K)
    with pytest.raises(ValueError, match="iterations"):
        SpectralSupport("tikhonov", iterations=3).fit(K)
    with pytest.raises(ValueError, match="positive semi-definite"):
        SpectralSupport().fit(np.array([[1.0, 0.0, 0.9], [0.0, 1.0, 0.9], [0.9, 0.9, 1.0]]))
    with pytest.raises(ValueError, match="columns"):
        sse.score(Kt[:, 1:], dt)
    with pytest.raises(ValueError, match="single"):
        SpectralSupport().fit(np.ones((1, 1)))


def test_landweber_top_eigenvalue_at_one_within_rounding():
    # K/n of a constant normalised Gram has eigenvalue 1 up to rounding (1 + 2e-16 here):
    # the filter must stay finite, (1 - 0^t)/1 = 1, and corpus points get F = 1.
    K = np.ones((7, 7))
    sse = SpectralSupport("landweber", 0.1).fit(K)
    scores = torch.as_tensor(sse.score(K[:3], np.ones(3)))
    assert torch.isfinite(scores).all()
    torch.testing.assert_close(scores, torch.zeros(3, dtype=torch.float64), atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="eigenvalues of K/n"):
        spectral_filter(torch.tensor([1.5], dtype=torch.float64), "landweber", 0.1, 10)
