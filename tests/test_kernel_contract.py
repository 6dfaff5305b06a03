"""Properties every registered kernel must satisfy (runs over the whole registry).

A kernel whose ``fit`` is not empty (tag ``fit_is_empty``: learned features, or GAK's
median-heuristic bandwidth) is fitted on the test's first batch (``spec.fitted_example``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tskernels
from tskernels import NonFiniteKernelError

SPECS = sorted(tskernels.kernel_registry().items())
NAMES = [name for name, _ in SPECS]


def _data(n=7, T=9, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return 0.5 * rng.normal(size=(n, T, d))


@pytest.fixture(params=NAMES)
def spec(request):
    return tskernels.kernel_registry()[request.param]


def test_symmetric_psd_float64(spec):
    X = _data()
    K = spec.fitted_example(X).gram(X)
    assert K.dtype == torch.float64 and K.shape == (7, 7)
    assert torch.equal(K, K.T)
    eig = torch.linalg.eigvalsh(K)
    assert eig.min() >= -1e-8 * K.trace()


def test_cross_is_transpose(spec):
    X, Y = _data(5, seed=1), _data(4, seed=2)
    k = spec.fitted_example(X)
    torch.testing.assert_close(k.gram(X, Y), k.gram(Y, X).T, rtol=1e-12, atol=1e-12)


def test_blockwise_equals_unblocked(spec):
    X, Y = _data(7), _data(5, seed=3)
    k = spec.fitted_example(X)
    full_sym, full_xy = k.gram(X), k.gram(X, Y)
    for b in (1, 2, 3, 4, 6):
        kb = spec.fitted_example(X).set_params(block_size=b)
        torch.testing.assert_close(kb.gram(X), full_sym, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(kb.gram(X, Y), full_xy, rtol=1e-12, atol=1e-12)
    tiny = spec.fitted_example(X).set_params(max_memory=1)  # one pair per block
    torch.testing.assert_close(tiny.gram(X, Y), full_xy, rtol=1e-12, atol=1e-12)


def test_gram_equals_loop_over_pairs_and_diag(spec):
    X, Y = _data(4, seed=4), _data(3, seed=5)
    k = spec.fitted_example(X)
    K = k.gram(X, Y)
    for i in range(4):
        for j in range(3):
            torch.testing.assert_close(K[i, j], k.gram(X[i : i + 1], Y[j : j + 1])[0, 0])
    torch.testing.assert_close(k.diag(X), torch.diagonal(k.gram(X)), rtol=1e-10, atol=1e-12)


def test_normalized_unit_diagonal(spec):
    X, Y = _data(6), _data(3, seed=6)
    k = spec.fitted_example(X)
    Kn = k.gram(X, normalize=True)
    torch.testing.assert_close(torch.diagonal(Kn), torch.ones(6, dtype=torch.float64))
    Kxy = k.gram(X, Y, normalize=True)
    expected = k.gram(X, Y) / torch.sqrt(k.diag(X)[:, None] * k.diag(Y)[None, :])
    torch.testing.assert_close(Kxy, expected, rtol=1e-10, atol=1e-12)


def test_numpy_torch_float32_inputs(spec):
    X = _data(5)
    k = spec.fitted_example(X)
    ref = k.gram(X)
    torch.testing.assert_close(k.gram(torch.from_numpy(X)), ref)
    X32 = X.astype(np.float32)
    torch.testing.assert_close(k.gram(X32), k.gram(X32.astype(np.float64)), rtol=0, atol=0)
    k32 = spec.fitted_example(X).set_params(dtype=torch.float32)
    K32 = k32.gram(X)
    assert K32.dtype == torch.float32
    torch.testing.assert_close(K32.double(), ref, rtol=1e-3, atol=1e-4)


def test_unequal_lengths(spec):
    rng = np.random.default_rng(7)
    X = [0.5 * rng.normal(size=(L, 3)) for L in (5, 9, 7)]
    if not spec.unequal_length:
        with pytest.raises(ValueError, match="equal-length"):
            spec.example().gram(X)
        return
    k = spec.fitted_example(X)
    K = k.gram(X)
    assert K.shape == (3, 3) and torch.equal(K, K.T)
    assert torch.isfinite(K).all()
    torch.testing.assert_close(k.diag(X), torch.diagonal(K), rtol=1e-10, atol=1e-12)
    Kn = k.gram(X, X, normalize=True)
    torch.testing.assert_close(torch.diagonal(Kn), torch.ones(3, dtype=torch.float64))
    # a value does not depend on the other series of the call
    torch.testing.assert_close(k.gram(X[:1], X[2:]), K[:1, 2:], rtol=1e-10, atol=1e-12)
    same = [x for x in _data(3, T=6)]  # a list of equal lengths equals the array form
    torch.testing.assert_close(k.gram(same), k.gram(np.stack(same)))


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.zeros((3, 4)), "3-D"),
        (np.zeros((0, 4, 3)), "empty"),
        (np.full((2, 4, 3), np.nan), "NaN"),
        (np.full((2, 4, 3), np.inf), "infinite"),
        ([], "empty"),
        ([np.zeros((3, 3)), np.zeros((3, 2))], "channel"),
    ],
)
def test_bad_inputs_raise(spec, bad, match):
    with pytest.raises(ValueError, match=match):
        spec.fitted_example(_data()).gram(bad)


def test_channel_mismatch_raises(spec):
    with pytest.raises(ValueError, match="channel mismatch"):
        spec.fitted_example(_data(3, d=3)).gram(_data(3, d=3), _data(3, d=2))


def test_registry_make_kernel():
    k = tskernels.make_kernel("flat_rbf", static=tskernels.RBF(3.0))
    assert k.static.sigma == 3.0
    with pytest.raises(ValueError, match="unknown kernel"):
        tskernels.make_kernel("nope")


def test_non_finite_result_raises_with_parameters():
    k = tskernels.FlattenedKernel(tskernels.Polynomial(degree=400, c=1.0, scale=1e3))
    with pytest.raises(NonFiniteKernelError, match="Polynomial"):
        k.gram(np.ones((2, 3, 2)))


def test_normalize_rejects_non_positive_diagonal():
    k = tskernels.FlattenedKernel(tskernels.Linear())
    with pytest.raises(NonFiniteKernelError, match=r"K\(x, x\) > 0"):
        k.gram(np.zeros((2, 3, 2)), normalize=True)


def test_public_calls_write_no_attribute(spec):
    """gram, diag and normalised Grams leave the kernel as it was (fitted or not)."""
    X, Y = _data(4, seed=8), _data(3, seed=9)
    kernels = [spec.fitted_example(X)] + ([] if spec.needs_fit else [spec.example()])
    for k in kernels:
        before = dict(vars(k))
        k.gram(X)
        k.gram(X, Y, normalize=True)
        k.diag(Y)
        assert set(vars(k)) == set(before)
        assert all(vars(k)[key] is v for key, v in before.items())


def test_tags_match_behaviour(spec):
    """The tags say what the kernel does: fit_is_empty kernels are fitted from the start,
    the others only after fit (needs_fit ones refuse gram before it)."""
    k = spec.example()
    X = _data(4)
    assert k.__sklearn_is_fitted__() is (
        bool(k.get_tag("fit_is_empty")) or not k.get_tag("needs_fit") and k._is_fitted()
    )
    if k.get_tag("needs_fit"):
        with pytest.raises(ValueError, match="fit"):
            k.gram(X)
    assert spec.fitted_example(X).__sklearn_is_fitted__()
