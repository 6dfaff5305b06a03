"""Truncated signature kernel: explicit signatures (pysiglib), recursion, levels, invariances."""

import math
from functools import partial

import numpy as np
import pytest
import torch
from path_helpers import max_rel_error as _rel
from path_helpers import random_paths

from tskernels import (
    RBF,
    Linear,
    SignaturePDEKernel,
    TruncatedSignatureKernel,
    kernel_registry,
)
from tskernels._signature_truncated import signature_levels

_paths = partial(random_paths, step=0.4)


pysiglib = pytest.importorskip("pysiglib")


def _level_products(X, Y, N):
    """<S^k(x), S^k(y)> for k = 1..N from pysiglib's explicit signatures, (N, n, m)."""
    d = X.shape[-1]
    SX, SY = pysiglib.sig(X, N), pysiglib.sig(Y, N)
    out, o = [], 0
    for k in range(1, N + 1):
        w = d**k
        out.append(SX[:, o : o + w] @ SY[:, o : o + w].T)
        o += w
    return np.stack(out)


@pytest.mark.parametrize("algorithm", ["features", "recursion"])
@pytest.mark.parametrize("N", range(1, 7))
def test_linear_lift_equals_explicit_signatures(algorithm, N):
    X, Y = _paths(0, 5, 9, 3), _paths(1, 4, 12, 3)
    P = _level_products(X, Y, N)
    for levels, ref in [("cumulative", 1 + P.sum(0)), ("single", 1 + P[-1])]:
        k = TruncatedSignatureKernel(Linear(), N, 1.0, levels, algorithm=algorithm)
        assert _rel(k.gram(X, Y), ref) < 1e-10
        PX = _level_products(X, X, N)
        refx = 1 + (PX.sum(0) if levels == "cumulative" else PX[-1])
        K = k.gram(X)
        assert _rel(K, refx) < 1e-10 and torch.equal(K, K.T)
        assert _rel(k.diag(X), np.diag(refx)) < 1e-10


def test_single_segment_closed_form():
    v = np.array([0.3, -1.2, 0.5])
    w = np.array([1.1, 0.4, -0.7])
    X, Y = np.stack([0 * v, v])[None], np.stack([0 * w, w])[None]
    N = 5
    ref = sum(float(v @ w) ** m / math.factorial(m) ** 2 for m in range(N + 1))
    for algorithm in ("features", "recursion"):
        k = TruncatedSignatureKernel(Linear(), N, algorithm=algorithm)
        assert abs(float(k.gram(X, Y)[0, 0]) - ref) < 1e-13 * abs(ref)


def test_gram_levels_one_pass():
    X, Y = _paths(2, 6, 10, 2), _paths(3, 3, 7, 2)
    for static, alg in [(Linear(), "features"), (Linear(), "recursion"), (RBF(1.0), "auto")]:
        for levels in ("cumulative", "single"):
            k = TruncatedSignatureKernel(static, 5, 0.7, levels, algorithm=alg, block_size=4)
            L = k.gram_levels(X, Y)
            Ls = k.gram_levels(X)
            assert L.shape == (5, 6, 3) and Ls.shape == (5, 6, 6)
            Ln = k.gram_levels(X, normalize=True)
            for n in range(1, 6):
                kn = TruncatedSignatureKernel(static, n, 0.7, levels, algorithm=alg)
                assert torch.allclose(L[n - 1], kn.gram(X, Y), rtol=1e-12, atol=0)
                assert torch.allclose(Ls[n - 1], kn.gram(X), rtol=1e-12, atol=0)
                assert torch.allclose(Ln[n - 1], kn.gram(X, normalize=True), rtol=1e-12, atol=0)


def test_recursion_equals_features_with_static_scale():
    X = _paths(4, 5, 8, 3)
    a = TruncatedSignatureKernel(Linear(scale=2.0), 4, 0.5, algorithm="recursion").gram(X)
    b = TruncatedSignatureKernel(Linear(), 4, 0.5 * math.sqrt(2.0), algorithm="features").gram(X)
    assert _rel(a, b) < 1e-12


def test_torch_signatures_equal_compiled():
    dX = torch.diff(torch.as_tensor(_paths(5, 4, 8, 3)), dim=1)
    a = signature_levels(dX, 5, compiled=True)
    b = signature_levels(dX, 5, compiled=False)
    for u, v in zip(a, b):
        assert torch.allclose(u, v, rtol=1e-12, atol=1e-14)


def test_rbf_lift_psd_symmetric_and_close_to_pde():
    X = _paths(6, 8, 7, 2, step=0.3)
    pde = SignaturePDEKernel(RBF(1.0), scale=0.5, dyadic_order=6).gram(X)
    errs = []
    for N in (1, 2, 4, 6):
        K = TruncatedSignatureKernel(RBF(1.0), N, 0.5).gram(X)
        assert torch.equal(K, K.T)
        assert float(torch.linalg.eigvalsh(K).min()) > -1e-10
        errs.append(float((K - pde).abs().max()))
    assert all(b < a for a, b in zip(errs, errs[1:])), errs
    assert errs[-1] < 1e-5, errs


def test_unequal_lengths_padding_and_repeated_points():
    rng = np.random.default_rng(7)
    Xs = [np.cumsum(rng.normal(size=(T, 2)) * 0.4, 0) for T in (4, 9, 6, 2)]
    for static in (Linear(), RBF(1.0)):
        k = TruncatedSignatureKernel(static, 4, 1.0)
        K = k.gram(Xs)
        for i, j in [(0, 1), (3, 2), (1, 1)]:
            assert torch.allclose(K[i, j], k.gram(Xs[i][None], Xs[j][None])[0, 0], rtol=1e-12)
        rep = [np.repeat(x, 3, axis=0) for x in Xs]
        assert torch.allclose(k.gram(rep), K, rtol=1e-12, atol=0)


def test_bad_parameters():
    X = _paths(0, 2, 4, 2)
    for kwargs in ({"level": 0}, {"scale": -1.0}, {"levels": "both"}, {"algorithm": "fast"}):
        with pytest.raises(ValueError, match=list(kwargs)[0]):
            TruncatedSignatureKernel(**kwargs).gram(X)
    with pytest.raises(ValueError, match="features"):
        TruncatedSignatureKernel(RBF(1.0), algorithm="features").gram(X)


def test_registry_entries():
    reg = kernel_registry()
    X = list(_paths(8, 4, 10, 3, step=0.5))
    X[2] = X[2][:5]
    for name in ("trunc_sig_linear", "trunc_sig_rbf"):
        spec = reg[name]
        assert spec.cls is TruncatedSignatureKernel and spec.unequal_length
        K = spec.example().gram(X, normalize=True)
        assert torch.allclose(torch.diagonal(K), torch.ones(4, dtype=K.dtype))
        assert float(torch.linalg.eigvalsh(K).min()) > -1e-10


def test_amplitude_default_closed_forms_and_sigma_axis():
    X, Y = _paths(9, 4, 8, 2), _paths(10, 3, 6, 2)
    for static in (Linear(), RBF(1.0)):
        for alg in ("auto", "recursion"):
            base = TruncatedSignatureKernel(static, 3, 0.7, algorithm=alg)
            assert torch.equal(base.gram(X, Y), base.set_params(amplitude=1.0).gram(X, Y))
            # amplitude a multiplies k: the level-m term scales by a^m
            k = TruncatedSignatureKernel(static, 3, 0.7, "single", algorithm=alg, amplitude=2.0)
            ref = TruncatedSignatureKernel(static, 3, 0.7, "single", algorithm=alg)
            assert _rel(k.gram(X, Y) - 1, 8.0 * (ref.gram(X, Y) - 1)) < 1e-12
    # linear lift: amplitude a equals Linear(scale * a) (the reference's Linear(s / d))
    for alg in ("features", "recursion"):
        a = TruncatedSignatureKernel(Linear(0.5), 4, algorithm=alg, amplitude=3.0)
        b = TruncatedSignatureKernel(Linear(1.5), 4, algorithm=alg)
        assert _rel(a.gram(X, Y), b.gram(X, Y)) < 1e-12
        assert _rel(a.diag(X), b.diag(X)) < 1e-12
    # the RBF lift's sigma and the amplitude as grid axes (set_params)
    k = kernel_registry()["trunc_sig_rbf"].example().set_params(static__sigma=2.0, amplitude=4.0)
    assert torch.equal(k.gram(X), TruncatedSignatureKernel(RBF(2.0), 3, 0.5, amplitude=4.0).gram(X))
    with pytest.raises(ValueError, match="amplitude"):
        TruncatedSignatureKernel(amplitude=-1.0).gram(X)
