"""The faster default fit computes the same numbers (issue 21).

1. The Yeo-Johnson lambda search evaluates its profile log-likelihood with a compiled core
   (``tskernels._yeo_johnson_numba``): its values and the fitted lambdas equal those of the
   numpy implementation it replaced (copied below as the oracle).
2. The cross-fitted calibration scores of a random-convolution member compute each part's
   features once per fold (``RandomConvolutionKernel._reusing_features``): they equal those
   of the former procedure (a fresh fit, then ``gram``, ``gram`` and ``diag`` each computing
   the features again), written out below as the reference.
"""

import pickle

import numpy as np
import pytest
import torch

from tskernels._yeo_johnson import (
    YeoJohnson,
    _fit_lambdas,
    _fused_log_likelihood,
    _maximise,
    yeo_johnson_log_likelihood,
)

pytest.importorskip("sktime")

import tskernels as tk  # noqa: E402
from novelty.detector._members import (  # noqa: E402
    CROSS_FIT_LOO_MAX,
    MemberSpec,
    cross_fitted_scores,
    make_scorer,
    prepare_kernel,
)
from novelty.scorers._folds import calibration_folds  # noqa: E402

# ------------------------------------------------------------------ the numpy oracle
# The likelihood as it was before the compiled core (numpy, (n, F) temporaries).


def _old_psi(L, pos, lam):
    c = np.where(pos, lam, 2.0 - lam)
    zero = np.abs(c) < 1e-12
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.expm1(c * L) / np.where(zero, 1.0, c)
    out = np.where(zero, L, out)
    return np.where(pos, out, -out)


def _old_log_likelihood(L, pos, S, lam):
    n = L.shape[0]
    psi = _old_psi(L, pos, lam)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        var = psi.var(axis=0)
        ll = -0.5 * n * np.log(var) + (lam - 1.0) * S
    return np.where(np.isfinite(ll), ll, -np.inf)


def _old_fit_lambdas(X, tol=1e-7, max_iter=60):
    """The former numpy likelihood through the module's (unchanged) search: what differs
    between the two is the likelihood, the part compiled."""
    L, pos = np.log1p(np.abs(X)), X >= 0
    S = np.where(pos, L, -L).sum(axis=0)
    return _maximise(lambda lam: _old_log_likelihood(L, pos, S, lam), X.shape[1], tol, max_iter)


def _features(seed, n=60):
    """Skewed, signed, tied, constant and large-valued columns, and PPV-like proportions."""
    rng = np.random.default_rng(seed)
    ppv = rng.beta(0.5, 2.0, size=(n, 60))
    ppv[rng.random(ppv.shape) < 0.3] = 0.0
    const = np.full((n, 2), 3.0)
    return np.concatenate(
        [
            rng.exponential(size=(n, 30)) * 10,
            rng.normal(size=(n, 30)),
            -rng.lognormal(size=(n, 30)),
            np.abs(rng.normal(size=(n, 20))) ** 3,
            rng.integers(0, 3, size=(n, 10)).astype(float),
            rng.normal(size=(n, 5)) * 1e3,  # psi overflows at the grid's ends
            ppv,
            const,
        ],
        axis=1,
    )


@pytest.mark.parametrize("seed,n", [(0, 60), (1, 91), (2, 7)])
def test_fused_log_likelihood_equals_numpy(seed, n):
    X = _features(seed, n)
    F = X.shape[1]
    ll = _fused_log_likelihood(X)
    rng = np.random.default_rng(seed + 100)
    L, pos = np.log1p(np.abs(X)), X >= 0
    S = np.where(pos, L, -L).sum(axis=0)
    # lambda 0 and 2 take the log branches, +-4 the overflowing ends
    for lam in [np.full(F, g) for g in (-4.0, -1.3, 0.0, 0.5, 2.0, 4.0)] + [
        rng.uniform(-4, 4, F),
        np.where(rng.random(F) < 0.5, 0.0, 2.0),
    ]:
        got = ll(lam)
        want = _old_log_likelihood(L, pos, S, lam)
        assert np.array_equal(np.isneginf(got), np.isneginf(want))
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
        # the public numpy evaluation is the same function
        np.testing.assert_allclose(got, yeo_johnson_log_likelihood(X, lam), rtol=1e-13, atol=0)


@pytest.mark.parametrize("seed,n", [(0, 60), (1, 91), (3, 12)])
def test_fitted_lambdas_equal_the_numpy_search(seed, n):
    X = _features(seed, n)
    with np.errstate(all="ignore"):
        want = _old_fit_lambdas(X)
    got = _fit_lambdas(X)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    # and the fitted transform is the same (standardised psi of the corpus)
    np.testing.assert_allclose(
        YeoJohnson().fit(X).lambdas_, want, rtol=0, atol=1e-9
    )  # through the public class


# ------------------------------------------------------------------ cross-fitted scores
def _reference_cross_fitted_scores(spec, Z):
    """The former per-fold procedure: a freshly fitted kernel, each call computing the
    features of its arguments again."""
    n = len(Z)
    out = np.empty(n)
    for train, test in calibration_folds(n, CROSS_FIT_LOO_MAX):
        if isinstance(Z, np.ndarray):
            Ztr, Zte = Z[train], Z[test]
        else:
            Ztr, Zte = [Z[i] for i in train], [Z[i] for i in test]
        kernel = prepare_kernel(spec, Ztr)
        K = kernel.gram(Ztr, normalize=spec.normalize)
        Kt = kernel.gram(Zte, Ztr, normalize=spec.normalize)
        if spec.normalize:
            diag = torch.ones(Kt.shape[0], dtype=Kt.dtype, device=Kt.device)
        else:
            diag = kernel.diag(Zte)
        scorer = make_scorer(spec, K.shape[0] if spec.name else None).fit(K)
        out[test] = scorer.score(Kt, diag)
    return out


def _walks(n, T=30, d=2, seed=0):
    return np.cumsum(np.random.default_rng(seed).normal(size=(n, T, d)), axis=1)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("layout", ["array", "unequal"])
def test_cross_fitted_scores_equal_the_former_procedure(normalize, layout):
    """cross_fitted_scores on the SeriesBatch == the per-fold procedure on numpy rows."""
    n = CROSS_FIT_LOO_MAX + 7  # 10 folds
    X = _walks(n)
    if layout == "array":
        Z = X
    else:
        Z = [x[: 20 + i % 9] for i, x in enumerate(X)]
    spec = MemberSpec(
        kernel=tk.RandomConvolutionKernel(n_kernels=168, seed=3),
        scorer="knn",
        preprocess=False,
        normalize=normalize,
        name="minirocket+knn",
    )
    got = cross_fitted_scores(spec, tk.SeriesBatch.from_checked(Z))
    want = _reference_cross_fitted_scores(spec, Z)
    assert np.array_equal(got, want)  # bit for bit


def test_cross_fitting_transforms_each_part_once(monkeypatch):
    """Per fold: the training part once (fit), the held-out part once (its Gram row and its
    diagonal share it); formerly 4 training and 2 held-out transforms."""
    calls = []
    raw = tk.RandomConvolutionKernel._raw_features

    def counting(self, transformer, X, length):
        calls.append(X.n)
        return raw(self, transformer, X, length)

    monkeypatch.setattr(tk.RandomConvolutionKernel, "_raw_features", counting)
    n = CROSS_FIT_LOO_MAX + 7
    spec = MemberSpec(
        kernel=tk.RandomConvolutionKernel(n_kernels=84), preprocess=False, normalize=False
    )
    cross_fitted_scores(spec, tk.SeriesBatch.from_checked(_walks(n)))
    folds = list(calibration_folds(n, CROSS_FIT_LOO_MAX))
    assert len(calls) == 2 * len(folds)
    assert sum(calls) == n * len(folds)  # every series once per fold


def test_feature_memo_is_scoped_and_sees_changes():
    X = _walks(12, seed=1)
    B = tk.SeriesBatch.from_checked(X.copy())  # modified in place below
    k = tk.RandomConvolutionKernel(n_kernels=84)
    fresh = tk.RandomConvolutionKernel(n_kernels=84).fit(X)
    with k._reusing_features():
        k.fit(B)
        assert torch.equal(k.gram(B), fresh.gram(X))
        assert torch.equal(k.diag(B[:5]), fresh.diag(X[:5]))
        # an in-place change through torch is seen (the features are computed again)
        B.values.mul_(2.0)
        assert torch.equal(k.gram(B), fresh.gram(2.0 * X))
        # a refit forgets the features of the former fit
        k.fit(B[:8])
        refit = tk.RandomConvolutionKernel(n_kernels=84).fit(2.0 * X[:8])
        assert torch.equal(k.gram(B), refit.gram(2.0 * X))
    assert "_feature_memo" not in k.__dict__  # nothing kept after the block
    pickle.loads(pickle.dumps(k))
    assert torch.equal(k.gram(B), refit.gram(2.0 * X))


def test_feature_memo_under_inference_mode():
    """Inference-mode tensors keep no version counter: their features are not reused, and
    the results are those computed afresh."""
    X = _walks(10, seed=2)
    want = tk.RandomConvolutionKernel(n_kernels=84).fit(X).gram(X)
    with torch.inference_mode():
        B = tk.SeriesBatch.from_checked(X)
        k = tk.RandomConvolutionKernel(n_kernels=84)
        with k._reusing_features():
            k.fit(B)
            assert torch.equal(k.gram(B), want)


def test_parallel_passes_equal_the_serial_ones(monkeypatch):
    """The parallel kernels (large arrays) give the same bits as the serial ones."""
    from tskernels import _yeo_johnson_numba

    X = _features(4, 50)
    lam = np.random.default_rng(4).uniform(-4, 4, X.shape[1])
    serial = _fused_log_likelihood(X)(lam)
    lambdas = _fit_lambdas(X)
    monkeypatch.setattr(_yeo_johnson_numba, "PARALLEL_MIN", 0)
    assert np.array_equal(_fused_log_likelihood(X)(lam), serial)
    assert np.array_equal(_fit_lambdas(X), lambdas)
