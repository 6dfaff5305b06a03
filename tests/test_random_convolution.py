"""Random-convolution kernel: features against sktime's transformer + the power transform
applied directly (oracle; sklearn's PowerTransformer where its lambda is inside the search
interval), the Gram against the static kernel on those features, short and unequal series,
errors."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import PowerTransformer, StandardScaler
from sktime.transformations.rocket import (
    MiniRocketMultivariate,
    MiniRocketMultivariateVariable,
    MultiRocketMultivariate,
)

import tskernels
from tskernels import RBF, Linear, RandomConvolutionKernel
from tskernels._yeo_johnson import YeoJohnson

N_KERNELS = 84  # the smallest transform: 84 MiniRocket features, Yeo-Johnson fits fast


def _series(n, T=30, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1)  # random walks: varied features


def _oracle(transformer, scaler, corpus, others):
    """sktime's transformer and the scaler fitted on the corpus, applied to others."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Yeo-Johnson overflow on near-constant columns
        transformer.fit(corpus)
        scaler.fit(_c_order(transformer.transform(corpus)))
    return scaler.transform(_c_order(transformer.transform(others)))


def _c_order(features):
    """float64, C order (as the kernel holds them: the scaler's column sums then agree to the
    last bit; the lambda search amplifies a last-bit difference to about 1e-8)."""
    return np.ascontiguousarray(np.asarray(features, dtype=np.float64))


@pytest.fixture(scope="module")
def corpus():
    return _series(12, seed=1)


@pytest.fixture(scope="module")
def others():
    return _series(5, seed=2)


@pytest.fixture(scope="module")
def fitted(corpus):
    return RandomConvolutionKernel(n_kernels=N_KERNELS, seed=3).fit(corpus)


def _sk(X):
    return np.ascontiguousarray(X.transpose(0, 2, 1))  # ours (n, T, d) -> numpy3D (n, d, T)


def test_features_equal_sktime_then_power_transform(fitted, corpus, others):
    ref = _oracle(
        MiniRocketMultivariate(num_kernels=N_KERNELS, random_state=3),
        YeoJohnson(),
        _sk(corpus),
        _sk(others),
    )
    got = fitted.features(others)
    assert got.shape == (5, 84) and got.dtype == np.float64 and fitted.n_features_ == 84
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    assert np.abs(fitted.features(corpus).mean(0)).max() < 1e-8  # standardised on the corpus
    # sklearn's PowerTransformer (unbounded lambda) agrees where its lambda is inside [-4, 4]
    sk = _oracle(
        MiniRocketMultivariate(num_kernels=N_KERNELS, random_state=3),
        PowerTransformer(method="yeo-johnson", standardize=True),
        _sk(corpus),
        _sk(others),
    )
    pt = PowerTransformer().fit(fitted.transformer_.transform(_sk(corpus)))
    inside = (np.abs(pt.lambdas_) < 3.9) & ~fitted.scaler_.constant_
    assert inside.sum() > 40
    np.testing.assert_allclose(got[:, inside], sk[:, inside], rtol=1e-4, atol=1e-4)


def test_multirocket_and_standard_scaler_oracle(corpus, others):
    k = RandomConvolutionKernel("multirocket", N_KERNELS, power_transform=False, seed=4)
    ref = _oracle(
        MultiRocketMultivariate(num_kernels=N_KERNELS, random_state=4),
        StandardScaler(),
        _sk(corpus),
        _sk(others),
    )
    np.testing.assert_allclose(k.fit(corpus).features(others), ref, rtol=1e-12, atol=1e-12)
    assert k.n_features_ == 8 * 84


def test_unequal_lengths_use_the_variable_transform():
    rng = np.random.default_rng(5)
    corpus = [rng.normal(size=(T, 3)).cumsum(0) for T in (12, 20, 15, 30, 9, 25)]
    others = [rng.normal(size=(T, 3)).cumsum(0) for T in (10, 40)]
    ref = _oracle(
        MiniRocketMultivariateVariable(num_kernels=N_KERNELS, random_state=0),
        YeoJohnson(),
        [pd.DataFrame(x) for x in corpus],
        [pd.DataFrame(x) for x in others],
    )
    k = RandomConvolutionKernel(n_kernels=N_KERNELS).fit(corpus)
    assert k.series_length_ is None
    np.testing.assert_allclose(k.features(others), ref, rtol=1e-12, atol=1e-12)
    K = k.gram(others, corpus)
    assert K.shape == (2, 6) and torch.isfinite(K).all()


def test_linear_gram_is_features_inner_product_over_F(fitted, corpus, others):
    Fc, Fo = fitted.features(corpus), fitted.features(others)
    F = Fc.shape[1]
    K = fitted.gram(corpus)
    assert K.dtype == torch.float64 and torch.equal(K, K.T)
    np.testing.assert_allclose(K.numpy(), Fc @ Fc.T / F, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fitted.gram(others, corpus).numpy(), Fo @ Fc.T / F, rtol=1e-12)
    np.testing.assert_allclose(fitted.diag(others).numpy(), (Fo * Fo).sum(1) / F, rtol=1e-12)
    assert abs(float(torch.diagonal(K).mean()) - 1.0) < 1e-8  # standardised: mean k(x,x) = 1
    assert torch.linalg.eigvalsh(K).min() >= -1e-10


def test_rbf_on_features(corpus, others):
    k = RandomConvolutionKernel(n_kernels=N_KERNELS, static=RBF(8.0), seed=3).fit(corpus)
    Fc, Fo = k.features(corpus), k.features(others)
    torch.testing.assert_close(k.gram(corpus), RBF(8.0).gram(Fc), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(k.gram(others, corpus), RBF(8.0).gram(Fo, Fc))
    K = k.gram(corpus)
    assert torch.equal(K, K.T) and torch.linalg.eigvalsh(K).min() >= -1e-10
    torch.testing.assert_close(k.diag(others), torch.ones(5, dtype=torch.float64))


def test_blockwise_equals_unblocked(fitted, corpus, others):
    full, cross = fitted.gram(corpus), fitted.gram(others, corpus)
    phi = fitted.features(corpus)
    for b in (1, 2, 5):
        kb = RandomConvolutionKernel(n_kernels=N_KERNELS, seed=3, block_size=b).fit(corpus)
        np.testing.assert_array_equal(kb.features(corpus), phi)  # chunked transform
        torch.testing.assert_close(kb.gram(corpus), full, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(kb.gram(others, corpus), cross, rtol=1e-12, atol=1e-12)
    tiny = RandomConvolutionKernel(n_kernels=N_KERNELS, seed=3, max_memory=1).fit(corpus)
    torch.testing.assert_close(tiny.gram(others, corpus), cross, rtol=1e-12, atol=1e-12)


def _edge_pad(x, T):
    return np.concatenate([x, np.repeat(x[-1:], T - len(x), axis=0)])


def test_short_equal_series_are_padded_with_their_last_value():
    X = _series(8, T=5, d=2, seed=6)
    padded = np.stack([_edge_pad(x, 9) for x in X])
    k = RandomConvolutionKernel(n_kernels=N_KERNELS).fit(X)
    ref = RandomConvolutionKernel(n_kernels=N_KERNELS).fit(padded)
    assert k.series_length_ == 5 and ref.series_length_ == 9
    np.testing.assert_array_equal(k.features(X), ref.features(padded))
    np.testing.assert_array_equal(k.gram(X).numpy(), ref.gram(padded).numpy())
    with pytest.raises(ValueError, match="fitted on series of length 5"):
        k.gram(padded)


def test_short_unequal_series_like_japanese_vowels():
    rng = np.random.default_rng(7)
    lengths = (7, 29, 12, 8, 20, 15)  # JapaneseVowels: T = 7..29
    X = [rng.normal(size=(T, 4)).cumsum(0) for T in lengths]
    padded = [_edge_pad(x, 9) if len(x) < 9 else x for x in X]
    k = RandomConvolutionKernel(n_kernels=N_KERNELS).fit(X)
    ref = RandomConvolutionKernel(n_kernels=N_KERNELS).fit(padded)
    np.testing.assert_array_equal(k.features(X), ref.features(padded))
    K = k.gram(X)
    assert torch.equal(K, K.T) and torch.isfinite(K).all()
    assert k.gram([rng.normal(size=(3, 4))], X).shape == (1, 6)  # shorter than any corpus series


def test_short_series_multirocket():
    X = _series(6, T=6, d=3, seed=8)
    padded = np.stack([_edge_pad(x, 10) for x in X])
    k = RandomConvolutionKernel("multirocket", N_KERNELS, power_transform=False).fit(X)
    ref = RandomConvolutionKernel("multirocket", N_KERNELS, power_transform=False).fit(padded)
    np.testing.assert_array_equal(k.features(X), ref.features(padded))


def test_constant_corpus_features_are_finite():
    X = np.ones((6, 12, 2))  # every feature is constant on the corpus
    Y = _series(3, T=12, seed=9)
    for pt in (True, False):
        k = RandomConvolutionKernel(n_kernels=N_KERNELS, power_transform=pt).fit(X)
        np.testing.assert_allclose(k.features(X), 0.0, atol=1e-15)  # centred, unscaled: 0
        assert np.isfinite(k.features(Y)).all() and torch.isfinite(k.gram(Y, X)).all()


def test_not_fitted_raises():
    k = RandomConvolutionKernel(n_kernels=N_KERNELS)
    msg = r"RandomConvolutionKernel is not fitted: call fit\(X\) on the corpus first"
    for call in (k.gram, k.diag, k.features):
        with pytest.raises(NotFittedError, match=msg):
            call(_series(2))
    assert k.needs_fit and not tskernels.GAK.needs_fit


def test_deterministic_and_gram_writes_no_state(corpus, others):
    a = RandomConvolutionKernel(n_kernels=N_KERNELS, seed=11).fit(corpus)
    b = RandomConvolutionKernel(n_kernels=N_KERNELS, seed=11).fit(corpus)
    np.testing.assert_array_equal(a.features(others), b.features(others))
    c = RandomConvolutionKernel(n_kernels=N_KERNELS, seed=12).fit(corpus)
    assert not np.array_equal(a.features(others), c.features(others))
    before = {k: v for k, v in vars(a).items()}
    lambdas = a.scaler_.lambdas_.copy()
    a.gram(others, corpus, normalize=True)
    a.diag(others)
    assert vars(a).keys() == before.keys()
    assert all(vars(a)[k] is v for k, v in before.items())
    np.testing.assert_array_equal(a.scaler_.lambdas_, lambdas)


def test_multirocket_keeps_numpy_global_random_state(corpus):
    # sktime's MultiRocket calls np.random.seed: the legacy global state must survive fit
    np.random.seed(123)  # noqa: NPY002
    expected = np.random.random_sample(3)  # noqa: NPY002
    np.random.seed(123)  # noqa: NPY002
    RandomConvolutionKernel("multirocket", N_KERNELS, power_transform=False).fit(corpus[:4])
    np.testing.assert_array_equal(np.random.random_sample(3), expected)  # noqa: NPY002


def test_float32_and_default_static(fitted, corpus, others):
    assert isinstance(fitted.static_, Linear) and fitted.static_.scale == 1.0 / 84
    k32 = RandomConvolutionKernel(n_kernels=N_KERNELS, seed=3, dtype=torch.float32).fit(corpus)
    K32 = k32.gram(others, corpus)
    assert K32.dtype == torch.float32
    torch.testing.assert_close(K32.double(), fitted.gram(others, corpus), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"transform": "rocket"}, "'transform' parameter of RandomConvolutionKernel must be a str"),
        ({"n_kernels": 0}, r"'n_kernels' .* must be an int in the range \[1, inf\)\. Got 0"),
        ({"seed": -1}, r"'seed' .* must be an int in the range \[0, 2147483647\]\. Got -1"),
        ({"seed": 2**31}, r"'seed' .* must be an int in the range \[0, 2147483647\]"),
        ({"n_jobs": 0}, r"'n_jobs' .* must be None, -1 \(all cores\) or an int in the"),
        ({"power_transform": "yes"}, "'power_transform' .* must be an instance of 'bool' or"),
    ],
)
def test_bad_parameters_raise_at_fit(params, match):
    k = RandomConvolutionKernel(**params)  # __init__ only stores
    with pytest.raises(ValueError, match=match):
        k.fit(_series(3))


def test_bad_static_and_inputs(fitted, corpus):
    with pytest.raises(TypeError, match="'static' .* must be None or an instance of 'tskernels"):
        RandomConvolutionKernel(static="rbf").fit(corpus)
    with pytest.raises(ValueError, match="multirocket.*equal-length corpus"):
        RandomConvolutionKernel("multirocket").fit([np.zeros((10, 2)), np.zeros((12, 2))])
    with pytest.raises(ValueError, match="channel mismatch.*d=2 channels, got d=3"):
        fitted.gram(_series(2, d=3))
    with pytest.raises(ValueError, match="fitted on series of length 30"):
        fitted.gram(_series(2, T=31))
    with pytest.raises(ValueError, match="NaN"):
        fitted.gram(np.full((2, 30, 2), np.nan))


def test_registry_entries(corpus):
    reg = tskernels.kernel_registry()
    for name in ("rocket_linear", "rocket_rbf"):
        spec = reg[name]
        assert spec.cls is RandomConvolutionKernel and spec.needs_fit and spec.unequal_length
        with pytest.raises(NotFittedError):
            spec.example().gram(corpus)
        K = spec.fitted_example(corpus).gram(corpus, normalize=True)
        torch.testing.assert_close(torch.diagonal(K), torch.ones(12, dtype=torch.float64))
    assert not reg["gak"].needs_fit


def test_values_beyond_float32_are_an_overflow_error_at_fit_and_transform():
    """sktime's MiniRocket casts to float32: values beyond 3.4e38 became inf biases and a
    model that could not be loaded; both fit and features now refuse them by name."""
    import tskernels as tk

    X = np.random.default_rng(0).normal(size=(6, 30, 2))
    with pytest.raises(ValueError, match=r"overflow: `X` holds values up to 1e\+40"):
        tk.RandomConvolutionKernel(seed=0).fit(X * 1e40 / np.abs(X).max())
    k = tk.RandomConvolutionKernel(seed=0).fit(X)
    with pytest.raises(ValueError, match="overflow"):
        k.features(X * 1e39)
