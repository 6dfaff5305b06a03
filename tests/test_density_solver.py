"""Natural-gradient SOSREP solver: positivity, fixed point, feature form = dense form."""

import numpy as np
import pytest
import torch

from density import SOSREP, FeatureGram, GaussianKernel, SDOKernel, sosrep_solve

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _gauss_gram(n=60, d=2, sigma=0.7, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d))
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    return X, torch.tensor(np.exp(-d2 / (2 * sigma**2)))


@pytest.mark.parametrize("device", DEVICES)
def test_alpha_positive_and_fixed_point(device):
    _, K = _gauss_gram()
    K = K.to(device)
    sol = sosrep_solve(K, lr=0.1, tol=1e-8, max_iter=20_000)
    N = K.shape[0]
    assert sol.converged
    assert bool((sol.alpha > 0).all())
    fixed = N * sol.alpha * (K @ sol.alpha)  # independent recomputation of the fixed point
    np.testing.assert_allclose(fixed.cpu().numpy(), 1.0, atol=1e-8)
    # ||f||_H^2 = alpha^T K alpha = 1 at the fixed point
    assert float(sol.alpha @ K @ sol.alpha) == pytest.approx(1.0, abs=1e-8)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_alpha_positive_every_step_with_large_step():
    _, K = _gauss_gram(seed=1)
    # lr just below 1/2: the update is a convex combination of alpha and 1/(N K alpha) > 0
    for it in (1, 2, 5, 50):
        sol = sosrep_solve(K, lr=0.49, max_iter=it, tol=1e-30)
        assert bool((sol.alpha > 0).all())


def test_objective_decreases_to_stationary_point():
    X, K = _gauss_gram(n=40, seed=2)
    sol = sosrep_solve(K, tol=1e-10, max_iter=50_000)
    a = sol.alpha.clone().requires_grad_(True)
    N = K.shape[0]
    loss = -torch.log((K @ a) ** 2).mean() + a @ K @ a
    (g,) = torch.autograd.grad(loss, a)
    # Euclidean gradient K (2 alpha - (2/N) / (K alpha)) vanishes at the fixed point
    assert float(g.abs().max()) < 1e-7 * N


def test_feature_form_equals_dense():
    rng = np.random.default_rng(3)
    Phi = torch.tensor(rng.random((50, 30)))  # non-negative features: K >= 0
    dense = sosrep_solve(Phi @ Phi.T, tol=1e-10, max_iter=50_000)
    op = sosrep_solve(FeatureGram(Phi), tol=1e-10, max_iter=50_000)
    np.testing.assert_allclose(op.alpha.numpy(), dense.alpha.numpy(), rtol=1e-7)
    assert op.n_iter == dense.n_iter


def test_sign_change_allowed_only_when_asked():
    K = torch.tensor([[1.0, -0.9], [-0.9, 1.0]])
    with pytest.raises(FloatingPointError, match="non-positive"):
        sosrep_solve(K, max_iter=500, seed=4, lr=0.45)
    sol = sosrep_solve(K, max_iter=5000, seed=4, lr=0.45, require_positive=False)
    assert sol.converged
    np.testing.assert_allclose((2 * sol.alpha * (K @ sol.alpha)).numpy(), 1.0, atol=1e-6)


def test_bad_solver_inputs():
    _, K = _gauss_gram(n=5)
    with pytest.raises(ValueError, match="lr"):
        sosrep_solve(K, lr=0.5)
    bad = K.clone()
    bad[0, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        sosrep_solve(bad)
    with pytest.raises(ValueError, match="square"):
        sosrep_solve(K[:3])
    with pytest.warns(Warning, match="did not converge"):
        sosrep_solve(K, max_iter=2)


@pytest.mark.parametrize("device", DEVICES)
def test_sosrep_estimator_matches_solver(device):
    X, K = _gauss_gram(sigma=0.7)
    est = SOSREP(GaussianKernel(0.7), tol=1e-9, device=device).fit(X)
    ref = sosrep_solve(K, tol=1e-9)
    np.testing.assert_allclose(est.alpha_.cpu().numpy(), ref.alpha.numpy(), rtol=1e-6)
    # score = log f^2 with f = K_test alpha, computed here by brute force
    Y = np.random.default_rng(9).standard_normal((7, 2)) * 3
    k = np.exp(-((Y[:, None] - X[None]) ** 2).sum(-1) / (2 * 0.49))
    f = k @ ref.alpha.numpy()
    np.testing.assert_allclose(est.score_samples(Y), np.log(f**2), rtol=1e-9)


def test_score_is_finite_far_away_for_exact_kernel():
    X, _ = _gauss_gram()
    est = SOSREP(GaussianKernel(0.5)).fit(X)
    s = est.score_samples(np.array([[60.0, 0.0]]))  # f underflows to 0 in float64
    assert np.isfinite(s).all() and s[0] < -1e4


def test_sdo_sosrep_converges_and_scores_log_f2():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((200, 2))
    est = SOSREP(SDOKernel(a=0.5, n_features=2000, seed=1)).fit(X)
    assert est.converged_
    Y = rng.standard_normal((5, 2))
    f = est.kernel_.gram(Y, X).numpy() @ est.alpha_.numpy()  # f from the kernel as defined
    np.testing.assert_allclose(est.score_samples(Y), np.log(f**2), rtol=1e-8)
    # fixed point in terms of the kernel as defined
    fx = est.kernel_.gram(X).numpy() @ est.alpha_.numpy()
    np.testing.assert_allclose(200 * est.alpha_.numpy() * fx, 1.0, atol=1e-5)


def test_lr_one_third_reaches_the_same_fixed_point_in_fewer_steps():
    # linearised contraction per step: max(|1 - 2s|, |1 - s(1 + l)|), s = 2 lr, l in [0, 1];
    # lr = 1/3 gives 1/3, lr = 0.1 gives 0.8: expect several times fewer steps
    _, K = _gauss_gram(n=80, sigma=0.5)
    slow = sosrep_solve(K, lr=0.1, tol=1e-9, max_iter=20_000)
    fast = sosrep_solve(K, lr=1 / 3, tol=1e-9, max_iter=20_000)
    assert slow.converged and fast.converged
    assert fast.n_iter * 2 < slow.n_iter, (fast.n_iter, slow.n_iter)
    np.testing.assert_allclose(fast.alpha.numpy(), slow.alpha.numpy(), rtol=1e-7)
    assert bool((fast.alpha > 0).all())
