"""Signature PDE kernel: pysiglib oracle, backends, convergence, invariances, divergence."""

from functools import partial

import numpy as np
import pytest
import torch
from path_helpers import max_rel_error as _rel
from path_helpers import random_paths
from sklearn.base import clone

from tskernels import (
    RBF,
    Linear,
    NonFiniteKernelError,
    Polynomial,
    SignaturePDEKernel,
    TruncatedSignatureKernel,
    kernel_registry,
)

_paths = partial(random_paths, step=0.3)


pysiglib = pytest.importorskip("pysiglib")


STATICS = [
    (Linear(), lambda: None),
    (RBF(0.7), lambda: pysiglib.RBFKernel(2 * 0.7**2)),  # pysiglib: exp(-|x-y|^2 / sigma)
    (Polynomial(2, 1.0, 1.0), lambda: pysiglib.PolynomialKernel(2, 1.0, 1.0)),
]


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("lam", [0, 2, (1, 2)])
@pytest.mark.parametrize("which", range(len(STATICS)))
def test_matches_pysiglib(backend, lam, which):
    static, peer = STATICS[which]
    X, Y = _paths(0, 7, 11, 3), _paths(1, 5, 14, 3)
    k = SignaturePDEKernel(static, 1.0, lam, backend=backend)
    ref = pysiglib.sig_kernel_gram(X, Y, dyadic_order=lam, static_kernel=peer())
    assert _rel(k.gram(X, Y), ref) < 1e-10
    ref_s = pysiglib.sig_kernel_gram(X, X, dyadic_order=lam, static_kernel=peer())
    K = k.gram(X).numpy()
    assert _rel(np.triu(K), np.triu(ref_s)) < 1e-10
    assert np.array_equal(K, K.T)
    assert _rel(k.diag(X), np.diag(ref_s)) < 1e-10


def test_scale_multiplies_paths():
    X = _paths(2, 4, 9, 2)
    a = SignaturePDEKernel(RBF(1.0), scale=0.5, dyadic_order=1).gram(X)
    b = SignaturePDEKernel(RBF(1.0), scale=1.0, dyadic_order=1).gram(0.5 * X)
    assert torch.allclose(a, b, rtol=1e-13, atol=0)
    peer = pysiglib.RBFKernel(2.0)
    ref = pysiglib.sig_kernel_gram(0.5 * X, 0.5 * X, dyadic_order=1, static_kernel=peer)
    assert _rel(a, ref) < 1e-10


def test_linear_static_scale():
    X = _paths(3, 4, 9, 2)
    a = SignaturePDEKernel(Linear(scale=4.0), dyadic_order=1).gram(X)
    b = SignaturePDEKernel(Linear(), scale=2.0, dyadic_order=1).gram(X)
    assert torch.allclose(a, b, rtol=1e-12, atol=0)


def test_backends_agree_unequal_lengths_and_blocks():
    rng = np.random.default_rng(4)
    Xs = [np.cumsum(rng.normal(size=(T, 2)) * 0.3, 0) for T in (5, 9, 7, 12, 3, 8, 6)]
    for static in (Linear(), RBF(1.0), Polynomial(2, 1.0, 0.5)):
        Kn = SignaturePDEKernel(static, 1.0, 1, backend="numba").gram(Xs)
        Kt = SignaturePDEKernel(static, 1.0, 1, backend="torch").gram(Xs)
        Kb = SignaturePDEKernel(static, 1.0, 1, block_size=3).gram(Xs)
        assert torch.allclose(Kn, Kt, rtol=1e-12, atol=0)
        assert torch.allclose(Kn, Kb, rtol=1e-14, atol=0)
        # unequal lengths equal the kernel of each pair on its own
        k = SignaturePDEKernel(static, 1.0, 1)
        for i, j in [(0, 3), (4, 1), (2, 2)]:
            single = k.gram(Xs[i][None], Xs[j][None])[0, 0]
            assert torch.allclose(Kn[i, j], single, rtol=1e-12, atol=0)


def test_padding_and_repeated_points_invariance():
    X = _paths(5, 3, 8, 2)
    k = SignaturePDEKernel(RBF(1.0), 1.0, 2)
    K = k.gram(X)
    padded = np.concatenate([X, np.repeat(X[:, -1:], 4, axis=1)], axis=1)
    repeated = np.repeat(X, 2, axis=1)  # every point twice: a time reparametrisation
    assert torch.allclose(k.gram(padded), K, rtol=1e-12, atol=0)
    assert torch.allclose(k.gram(repeated), K, rtol=1e-12, atol=0)


def test_converges_to_truncated_signature_kernel():
    X, Y = _paths(6, 3, 6, 2, step=0.25), _paths(7, 3, 5, 2, step=0.25)
    exact = TruncatedSignatureKernel(Linear(), level=12).gram(X, Y)
    errs = [
        float((SignaturePDEKernel(Linear(), 1.0, lam).gram(X, Y) - exact).abs().max())
        for lam in (0, 2, 4, 6)
    ]
    assert all(b < a / 8 for a, b in zip(errs, errs[1:])), errs  # second order: ~1/16 per 2
    assert errs[-1] < 1e-6, errs


def test_rough_inputs_raise_divergence_error():
    X = _paths(8, 4, 60, 3, step=1.0)
    for k in (
        SignaturePDEKernel(Linear(), scale=10.0, dyadic_order=0),
        SignaturePDEKernel(Linear(), scale=3.0, dyadic_order=2),
    ):
        for args in ((X,), (X[:2], X[2:])):
            with pytest.raises(NonFiniteKernelError, match="reduce `scale`.*dyadic_order"):
                k.gram(*args)
        with pytest.raises(NonFiniteKernelError, match="reduce `scale`.*dyadic_order"):
            k.diag(X)


def test_n_jobs_and_clone():
    X = _paths(9, 70, 6, 2)  # more pairs than one SIMD chunk
    k = SignaturePDEKernel(RBF(1.0), 0.5, 1, n_jobs=1)
    K1 = k.gram(X)
    K2 = clone(k).set_params(n_jobs=None).gram(X)
    assert torch.equal(K1, K2)
    assert k.get_params()["dyadic_order"] == 1


class _ScaledPeer(pysiglib.StaticKernel):
    """pysiglib's lift times an amplitude (its increment Gram multiplied by ``a``)."""

    def __init__(self, inner, a):
        self.inner, self.a = inner, a

    def __call__(self, ctx, x, y):
        return self.inner(ctx, x, y) * self.a

    def grad_x(self, ctx, derivs):  # abstract in pysiglib; these tests take no gradients
        raise NotImplementedError("the scaled peer lift is used for kernel values only")

    def grad_y(self, ctx, derivs):
        raise NotImplementedError("the scaled peer lift is used for kernel values only")


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("which", range(len(STATICS)))
def test_amplitude_matches_pysiglib(backend, which):
    static, peer = STATICS[which]
    X, Y = _paths(11, 5, 9, 3), _paths(12, 4, 7, 3)
    k = SignaturePDEKernel(static, 0.8, 1, backend=backend, amplitude=2.5)
    lift = _ScaledPeer(peer() or pysiglib.LinearKernel(), 2.5)
    ref = pysiglib.sig_kernel_gram(0.8 * X, 0.8 * Y, dyadic_order=1, static_kernel=lift)
    assert _rel(k.gram(X, Y), ref) < 1e-10
    ref_s = pysiglib.sig_kernel_gram(0.8 * X, 0.8 * X, dyadic_order=1, static_kernel=lift)
    assert _rel(np.triu(k.gram(X).numpy()), np.triu(ref_s)) < 1e-10
    assert _rel(k.diag(X), np.diag(ref_s)) < 1e-10


def test_amplitude_default_and_closed_forms():
    X = _paths(13, 4, 9, 2)
    for static in (Linear(), RBF(1.0)):
        a = SignaturePDEKernel(static, 0.5, 1).gram(X)
        b = SignaturePDEKernel(static, 0.5, 1, amplitude=1.0).gram(X)
        assert torch.equal(a, b)
    # linear lift: amplitude a equals Linear(scale * a), the reference's Linear(s / d)
    a = SignaturePDEKernel(Linear(0.5), dyadic_order=1, amplitude=3.0).gram(X)
    b = SignaturePDEKernel(Linear(1.5), dyadic_order=1).gram(X)
    assert torch.allclose(a, b, rtol=1e-13, atol=0)
    # the RBF bandwidth and the amplitude as grid axes
    k = kernel_registry()["pde_sig_rbf"].example().set_params(static__sigma=2.0, amplitude=0.25)
    ref = SignaturePDEKernel(RBF(2.0), scale=0.25, dyadic_order=2, amplitude=0.25)
    assert torch.equal(k.gram(X), ref.gram(X))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"amplitude": 0.0}, "amplitude"),
        ({"amplitude": -2.0}, "amplitude"),
        ({"dyadic_order": -1}, "dyadic_order"),
        ({"dyadic_order": (1, 2, 3)}, "dyadic_order"),
        ({"scale": 0.0}, "scale"),
        ({"backend": "cuda"}, "backend"),
        ({"static": "rbf"}, "static"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        SignaturePDEKernel(**kwargs).gram(_paths(0, 2, 4, 2))


def test_registry_entries():
    reg = kernel_registry()
    X = [np.asarray(x) for x in _paths(10, 4, 12, 3, step=0.5)]
    X[1] = X[1][:7]
    for name in ("pde_sig_rbf", "pde_sig_linear"):
        spec = reg[name]
        assert spec.cls is SignaturePDEKernel and spec.unequal_length
        K = spec.example().gram(X, normalize=True)
        assert torch.allclose(torch.diagonal(K), torch.ones(4, dtype=K.dtype))
        assert float(torch.linalg.eigvalsh(K).min()) > -1e-8
