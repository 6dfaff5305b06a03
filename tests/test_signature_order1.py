"""Order-1 discretised signature kernel (issue 12): brute force over index tuples, features vs
recursion, levels, PSD, invariances, registry."""

import itertools
from functools import partial

import numpy as np
import pytest
import torch
from path_helpers import max_rel_error as _rel
from path_helpers import random_paths

from tskernels import RBF, Linear, Polynomial, TruncatedSignatureKernel, kernel_registry
from tskernels._signature_truncated import order1_kernel_levels, order1_levels

_paths = partial(random_paths, step=0.5)


def _brute_levels(x, y, static, N, scale=1.0, amplitude=1.0):
    """P_n = sum over s_1 < ... < s_n, t_1 < ... < t_n of prod_k D[s_k, t_k], n = 1..N, with
    D the double-differenced static Gram of the scaled points, by enumeration."""
    K = static.cross(torch.as_tensor(x * scale), torch.as_tensor(y * scale)).numpy() * amplitude
    return _brute_d(K[1:, 1:] - K[1:, :-1] - K[:-1, 1:] + K[:-1, :-1], N)


def _brute_d(D, N):
    out = []
    for n in range(1, N + 1):
        total = 0.0
        for s in itertools.combinations(range(D.shape[0]), n):
            for t in itertools.combinations(range(D.shape[1]), n):
                total += np.prod([D[a, b] for a, b in zip(s, t)])
        out.append(total)
    return np.array(out)


def _series(seed, lengths, d=2):
    rng = np.random.default_rng(seed)
    return [np.cumsum(rng.normal(size=(T, d)) * 0.5, 0) for T in lengths]


STATICS = [
    (Linear(), "features"),
    (Linear(scale=0.5), "recursion"),
    (RBF(0.8), "auto"),
    (Polynomial(2, 1.0, 0.5), "auto"),
]


@pytest.mark.parametrize("which", range(len(STATICS)))
@pytest.mark.parametrize("N", [1, 2, 3, 4])
def test_equals_brute_force_sum_over_index_tuples(which, N):
    static, algorithm = STATICS[which]
    X, Y = _series(0, (5, 7, 4)), _series(1, (6, 3))
    common = dict(algorithm=algorithm, discretization="order1", amplitude=1.3)
    single = TruncatedSignatureKernel(static, N, 0.7, "single", **common)
    cumul = TruncatedSignatureKernel(static, N, 0.7, "cumulative", **common)
    for A, B, sym in [(X, X, True), (X, Y, False)]:
        P = np.array([[_brute_levels(a, b, static, N, 0.7, 1.3) for b in B] for a in A])
        Ks = single.gram(A) if sym else single.gram(A, B)
        Kc = cumul.gram(A) if sym else cumul.gram(A, B)
        assert _rel(Ks, 1 + P[..., -1]) < 1e-11
        assert _rel(Kc, 1 + P.sum(-1)) < 1e-11
        if sym:
            assert torch.equal(Ks, Ks.T)
            assert _rel(single.diag(A), 1 + np.diagonal(P[..., -1])) < 1e-11
            assert _rel(cumul.diag(A), 1 + np.diagonal(P.sum(-1))) < 1e-11


def test_recursion_equals_explicit_order1_sums():
    X, Y = _paths(0, 6, 9, 3), _paths(1, 4, 12, 3)
    for levels in ("single", "cumulative"):
        f = TruncatedSignatureKernel(
            Linear(), 5, 0.8, levels, algorithm="features", discretization="order1"
        )
        r = TruncatedSignatureKernel(
            Linear(), 5, 0.8, levels, algorithm="recursion", discretization="order1"
        )
        assert _rel(f.gram(X, Y), r.gram(X, Y)) < 1e-11
        assert _rel(f.gram(X), r.gram(X)) < 1e-11
        assert _rel(f.diag(X), r.diag(X)) < 1e-11


def test_torch_order1_sums_equal_compiled_and_closed_forms():
    dX = torch.diff(torch.as_tensor(_paths(5, 4, 8, 3)), dim=1)
    a = order1_levels(dX, 4, compiled=True)
    b = order1_levels(dX, 4, compiled=False)
    for u, v in zip(a, b):
        assert torch.allclose(u, v, rtol=1e-12, atol=1e-14)
    # level 1 is the total increment; level 2 word (i, j) (i first) is sum_{s<t} v_s^i v_t^j
    v = dX[0].numpy()
    assert np.allclose(a[0][0].numpy(), v.sum(0))
    lvl2 = sum(np.outer(v[t], v[s]) for s in range(len(v)) for t in range(s + 1, len(v)))
    assert np.allclose(a[1][0].numpy(), lvl2.reshape(-1))  # index i + j d: row j, column i


@pytest.mark.parametrize("compiled", [True, False])
def test_recursion_function_small_cases(compiled):
    rec = partial(order1_kernel_levels, compiled=compiled)
    assert torch.equal(rec(torch.tensor([[2.0]]), 3), torch.tensor([2.0, 0.0, 0.0]))
    D = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    # level 2: the only strictly increasing pair of pairs is (0, 0), (1, 1): 1 * 4
    assert torch.equal(rec(D, 3), torch.tensor([10.0, 4.0, 0.0]))
    empty = rec(torch.zeros(2, 0, 3), 2)
    assert empty.shape == (2, 2) and not empty.any()
    G = torch.as_tensor(np.random.default_rng(0).normal(size=(2, 3, 6, 5)))
    got = rec(G, 4)
    assert got.shape == (4, 2, 3)
    for i in range(2):
        for j in range(3):
            ref = _brute_d(G[i, j].numpy(), 4)
            assert np.allclose(got[:, i, j].numpy(), ref, rtol=1e-12, atol=1e-12)


def test_level_one_equals_exact_kernel_and_single_segment():
    X = _paths(2, 5, 8, 2)
    for static in (Linear(), RBF(1.0)):
        a = TruncatedSignatureKernel(static, 1, 0.6, discretization="order1").gram(X)
        b = TruncatedSignatureKernel(static, 1, 0.6).gram(X)
        assert _rel(a, b) < 1e-12
    v, w = np.array([0.3, -1.2]), np.array([1.1, 0.4])
    x, y = np.stack([0 * v, v])[None], np.stack([0 * w, w])[None]
    k = TruncatedSignatureKernel(Linear(), 4, discretization="order1")
    assert abs(float(k.gram(x, y)[0, 0]) - (1 + v @ w)) < 1e-15  # higher levels vanish


def test_gram_levels_one_pass():
    X, Y = _paths(2, 6, 10, 2), _paths(3, 3, 7, 2)
    for static, alg in [(Linear(), "features"), (Linear(), "recursion"), (RBF(1.0), "auto")]:
        for levels in ("cumulative", "single"):
            k = TruncatedSignatureKernel(
                static, 5, 0.7, levels, algorithm=alg, block_size=4, discretization="order1"
            )
            L, Ls, Ln = k.gram_levels(X, Y), k.gram_levels(X), k.gram_levels(X, normalize=True)
            assert L.shape == (5, 6, 3) and Ls.shape == (5, 6, 6)
            for n in range(1, 6):
                kn = TruncatedSignatureKernel(
                    static, n, 0.7, levels, algorithm=alg, discretization="order1"
                )
                assert torch.allclose(L[n - 1], kn.gram(X, Y), rtol=1e-12, atol=0)
                assert torch.allclose(Ls[n - 1], kn.gram(X), rtol=1e-12, atol=0)
                assert torch.allclose(Ln[n - 1], kn.gram(X, normalize=True), rtol=1e-12, atol=0)
    # cumulative = 1 + the sum of the single levels' terms
    ks = TruncatedSignatureKernel(RBF(1.0), 4, 0.7, "single", discretization="order1")
    kc = TruncatedSignatureKernel(RBF(1.0), 4, 0.7, "cumulative", discretization="order1")
    P = ks.gram_levels(X, Y) - 1
    assert torch.allclose(kc.gram_levels(X, Y), 1 + torch.cumsum(P, 0), rtol=1e-12)


@pytest.mark.parametrize("static", [Linear(), RBF(0.5), RBF(2.0)], ids=repr)
@pytest.mark.parametrize("levels", ["single", "cumulative"])
def test_psd(static, levels):
    # an inner product of the features prod_s (1 + v_s): PSD at every level
    X = _paths(4, 25, 12, 3, step=0.8)
    for N in (2, 3, 5):
        k = TruncatedSignatureKernel(
            static, N, 1.0, levels, algorithm="recursion", discretization="order1"
        )
        K = k.gram(X)
        assert torch.equal(K, K.T)
        assert float(torch.linalg.eigvalsh(K).min()) >= -1e-10 * float(K.diagonal().max())
        Kn = k.gram(X, normalize=True)
        assert float(torch.linalg.eigvalsh(Kn).min()) >= -1e-10


def test_amplitude_scales_level_n_by_a_power_n():
    X, Y = _paths(6, 4, 9, 2), _paths(7, 3, 6, 2)
    for static in (Linear(), RBF(1.0)):
        base = TruncatedSignatureKernel(static, 3, 0.8, "single", discretization="order1")
        amp = TruncatedSignatureKernel(
            static, 3, 0.8, "single", discretization="order1", amplitude=2.5
        )
        assert _rel(amp.gram(X, Y) - 1, 2.5**3 * (base.gram(X, Y) - 1)) < 1e-12
    # linear lift: amplitude a is Linear(scale * a) (the reference's Linear(s / d))
    a = TruncatedSignatureKernel(Linear(0.25), 4, discretization="order1", amplitude=4.0)
    b = TruncatedSignatureKernel(Linear(1.0), 4, discretization="order1")
    assert _rel(a.gram(X, Y), b.gram(X, Y)) < 1e-12


def test_unequal_lengths_padding_and_repeated_points():
    Xs = _series(7, (4, 9, 6, 2))
    for static in (Linear(), RBF(1.0)):
        k = TruncatedSignatureKernel(static, 3, 1.0, discretization="order1")
        K = k.gram(Xs)
        for i, j in [(0, 1), (3, 2), (1, 1)]:
            assert torch.allclose(K[i, j], k.gram(Xs[i][None], Xs[j][None])[0, 0], rtol=1e-12)
        rep = [np.repeat(x, 3, axis=0) for x in Xs]  # zero increments: no term changes
        assert torch.allclose(k.gram(rep), K, rtol=1e-12, atol=0)


def test_bad_discretization_and_amplitude():
    X = _paths(0, 2, 4, 2)
    with pytest.raises(ValueError, match="discretization"):
        TruncatedSignatureKernel(discretization="order2").gram(X)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="amplitude"):
            TruncatedSignatureKernel(discretization="order1", amplitude=bad).gram(X)


def test_registry_entries_and_sigma_axis():
    reg = kernel_registry()
    X = list(_paths(8, 4, 10, 3))
    X[2] = X[2][:5]
    for name in ("trunc_sig_linear_order1", "trunc_sig_rbf_order1"):
        spec = reg[name]
        k = spec.example()
        assert spec.cls is TruncatedSignatureKernel and spec.unequal_length
        assert k.discretization == "order1" and k.levels == "single"
        K = k.gram(X, normalize=True)
        assert torch.allclose(torch.diagonal(K), torch.ones(4, dtype=K.dtype))
        assert float(torch.linalg.eigvalsh(K).min()) > -1e-10
    k = reg["trunc_sig_rbf_order1"].example().set_params(static__sigma=2.0, amplitude=4.0)
    ref = TruncatedSignatureKernel(
        RBF(2.0), 3, 0.5, "single", discretization="order1", amplitude=4.0
    )
    assert torch.equal(k.gram(X), ref.gram(X))
