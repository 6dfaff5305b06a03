"""SOSREPScorer: fixed point, log-space scores, warnings and errors."""

import warnings

import numpy as np
import pytest
import torch

from density import sosrep_solve
from novelty import SOSREPScorer


def _rbf(A, B, gamma=0.5):
    return np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(50, 2)), rng.normal(size=(10, 2))


def test_fixed_point(data):
    X, _ = data
    K = _rbf(X, X)
    s = SOSREPScorer(lr=0.2, tol=1e-8).fit(K)
    a = s.alpha_.numpy()
    assert s.converged_ and (a > 0).all()
    np.testing.assert_allclose(a * (K @ a), 1.0 / len(X), atol=1e-6 / len(X), rtol=0)
    # ||f||_H^2 = alpha^T K alpha = sum_i alpha_i (K alpha)_i = 1
    assert abs(float(a @ K @ a) - 1.0) < 1e-6


def test_uses_the_package_solver(data):
    X, _ = data
    K = torch.from_numpy(_rbf(X, X))
    s = SOSREPScorer(lr=0.2, tol=1e-8, seed=3).fit(K)
    ref = sosrep_solve(K, lr=0.2, tol=1e-8, seed=3)
    assert torch.equal(s.alpha_, ref.alpha)


def test_log_space_score(data):
    X, Y = data
    K, Kt = _rbf(X, X), _rbf(Y, X)
    s = SOSREPScorer(tol=1e-8).fit(K)
    f = Kt @ s.alpha_.numpy()
    np.testing.assert_allclose(s.log_density(Kt).numpy(), np.log(f**2), rtol=1e-12)
    np.testing.assert_allclose(s.score(Kt), -np.log(f**2), rtol=1e-12)
    # far from the data: lower density, higher novelty
    far = s.score(_rbf(np.full((1, 2), 8.0), X))
    assert float(far[0]) > float(s.score(Kt).max())


def test_warns_on_negative_entries():
    K = np.array([[1.0, -0.1], [-0.1, 1.0]])
    with pytest.warns(UserWarning, match="negative entries"):
        SOSREPScorer(tol=1e-8).fit(K)


def test_no_warning_on_nonnegative(data):
    X, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SOSREPScorer().fit(_rbf(X, X))


def test_bad_inputs(data):
    X, Y = data
    K = _rbf(X, X)
    with pytest.raises(ValueError, match="lr"):
        SOSREPScorer(lr=0.5).fit(K)
    with pytest.raises(ValueError, match="NaN"):
        SOSREPScorer().fit(np.full((2, 2), np.nan))
    with pytest.raises(ValueError, match="empty"):
        SOSREPScorer().fit(np.zeros((0, 0)))
    with pytest.raises(ValueError, match="symmetric"):
        SOSREPScorer().fit(np.array([[1.0, 0.2], [0.5, 1.0]]))
    s = SOSREPScorer().fit(K)
    with pytest.raises(ValueError, match="columns"):
        s.score(_rbf(Y, X[:-1]))
    with pytest.raises(RuntimeError, match="not fitted"):
        SOSREPScorer().score(_rbf(Y, X))


def test_baselines_reject_inconsistent_test_diagonal():
    from novelty import KNNScorer, MeanEmbeddingScorer

    K = np.eye(4)
    for scorer in (KNNScorer(), MeanEmbeddingScorer()):
        scorer.fit(K)
        with pytest.raises(ValueError, match="negative squared feature-space distance"):
            scorer.score(np.full((1, 4), 0.9), np.array([0.1]))  # k(y, y) far too small


def _linear_gram(X):
    G = X @ X.T
    s = np.sqrt(np.diag(G))
    return G / s[:, None] / s[None, :]


def test_negative_entries_fit_with_free_signs():
    # a normalised linear Gram (cosines) has negative entries; the positive-orthant iteration
    # left it ("f(x_i) = (K alpha)_i became non-positive"), the sign-free one converges to
    # the same fixed point alpha_i f(x_i) = 1/N
    X = np.random.default_rng(2).normal(size=(12, 30))
    K = _linear_gram(X)
    with pytest.raises(FloatingPointError, match="non-positive"):
        sosrep_solve(torch.from_numpy(K), tol=1e-8)
    with pytest.warns(UserWarning, match="negative entries.*change sign"):
        s = SOSREPScorer(tol=1e-8).fit(K)
    a = s.alpha_.numpy()
    assert s.converged_ and (a < 0).any()
    np.testing.assert_allclose(a * (K @ a), 1.0 / len(X), atol=1e-8 / len(X), rtol=0)
    Y = np.random.default_rng(3).normal(size=(5, 30))
    Kt = (Y @ X.T) / np.linalg.norm(Y, axis=1)[:, None] / np.linalg.norm(X, axis=1)[None, :]
    assert np.isfinite(s.score(Kt)).all()


def test_quick_study_linear_cell_runs():
    # issue 34, item 3: the quick study's sosrep cell on BasicMotions (flat_linear, normal
    # class "standing", CV fold 0, no time channel) raised; it now converges
    from experiments._grids import build_kernel
    from experiments._protocol import _shape, cv_splits, fold_grams, load_dataset, take
    from experiments._runner import DEFAULT_PREPROCESSING
    from tskernels.transforms import Preprocessor

    data = load_dataset("BasicMotions")
    y = data.y_train
    tr, va = cv_splits(y, 3, 1, 0)[0]
    corpus = tr[y[tr] == "standing"]
    pre = Preprocessor(time_channel=False, **DEFAULT_PREPROCESSING).fit(take(data.X_train, corpus))
    C, V = pre.transform(take(data.X_train, corpus)), pre.transform(take(data.X_train, va))
    d, T = _shape(C)
    Kcc, Kvc, _ = fold_grams(build_kernel("flat_linear", {}, d, T, None, "cpu"), C, V)
    assert float(Kcc.min()) < 0
    with pytest.raises(FloatingPointError, match="non-positive"):
        sosrep_solve(Kcc[0])  # what the cell did before
    with pytest.warns(UserWarning, match="negative entries"):
        s = SOSREPScorer(seed=0).fit(Kcc[0])
    assert s.converged_ and s.residual_ < 1e-6
    assert np.isfinite(s.log_density(Kvc[0]).numpy()).all()


def test_sosrep_member_ranks_far_series_below_the_tails():
    # issue 31, item 5: the detector's sosrep member never ranks series far outside the corpus
    # as more normal than the corpus's own tail (its held-out scores)
    from novelty import KernelNoveltyDetector
    from tskernels import RBF, FlattenedKernel

    rng = np.random.default_rng(5)
    X = np.cumsum(rng.normal(size=(40, 16, 2)), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        det = KernelNoveltyDetector(FlattenedKernel(RBF(8.0)), scorer="sosrep").fit(X)
    tail = -det.calibration_scores_.max()  # the least normal held-out corpus series
    base = np.cumsum(rng.normal(size=(3, 16, 2)), axis=1)
    for offset in (10.0, 100.0, 1e6):
        assert (det.score_samples(base + offset) < tail).all(), offset
