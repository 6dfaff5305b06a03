"""Numerical range of kernels and scorers (issue 14, items 8-12 and 14): very large and very
small magnitudes, large offsets, and parameters checked where they are used."""

from __future__ import annotations

import decimal

import numpy as np
import pytest
import torch

import tskernels as tk
from density import KDE, GaussianKernel, LaplacianKernel
from novelty import KNNScorer, MeanEmbeddingScorer, VarianceNorm
from tskernels import NonFiniteKernelError, make_kernel

rng = np.random.default_rng(14)
X5 = rng.normal(size=(5, 4, 2))


# ----------------------------------------------------------------- item 8: normalisation
@pytest.mark.parametrize("scale", [1e100, 1e150, 1e-100, 1e-150])
def test_normalised_gram_is_scale_free(scale):
    k = tk.FlattenedKernel(tk.Linear())
    ref = k.gram(X5, normalize=True)
    torch.testing.assert_close(k.gram(X5 * scale, normalize=True), ref, rtol=1e-12, atol=1e-14)
    Y = X5[:3] * 0.5
    ref_xy = k.gram(X5, Y, normalize=True)
    got_xy = k.gram(X5 * scale, Y * scale, normalize=True)
    torch.testing.assert_close(got_xy, ref_xy, rtol=1e-12, atol=1e-14)


def test_normalised_gram_with_underflowing_diagonal_raises():
    # |x|^2 ~ 1e-320 is subnormal: K(x, x) has lost its precision; never +-inf or garbage
    k = tk.FlattenedKernel(tk.Linear())
    with pytest.raises(NonFiniteKernelError, match="underflow"):
        k.gram(X5 * 1e-160, normalize=True)
    with pytest.raises(NonFiniteKernelError, match="underflow"):
        k.gram(X5 * 1e-160, X5 * 1e-160, normalize=True)


def test_truncated_signature_levels_normalised_beyond_1e154():
    # levels 1..2 at x * 1e60 reach K(x, x) ~ 1e240: the product of two diagonals overflows
    k = tk.TruncatedSignatureKernel(level=2)
    Xb, Yb = X5 * 1e60, X5[:2] * 3e59
    K, dx, dy = k.gram_levels(Xb, Yb), k.gram_levels(Xb), k.gram_levels(Yb)
    got = k.gram_levels(Xb, Yb, normalize=True)
    # oracle in decimal arithmetic (no exponent limit)
    D = decimal.Decimal
    for lev in range(2):
        for i in range(5):
            for j in range(2):
                ref = (
                    D(float(K[lev, i, j]))
                    / (D(float(dx[lev, i, i])) * D(float(dy[lev, j, j]))).sqrt()
                )
                assert float(got[lev, i, j]) == pytest.approx(float(ref), rel=1e-13)
    sym = k.gram_levels(Xb, normalize=True)
    assert torch.equal(sym, sym.transpose(1, 2))
    torch.testing.assert_close(torch.diagonal(sym, dim1=1, dim2=2), torch.ones(2, 5).double())


# -------------------------------------------------------- item 9: variance-norm weights
def test_variance_norm_huge_eigenvalues():
    F = rng.normal(size=(12, 3))
    G = F @ F.T
    Y = rng.normal(size=(4, 3))
    ref = VarianceNorm().fit(G)
    big = VarianceNorm().fit(G * 1e160)
    # scaling the Gram by c scales s by c; with alpha scaled too the scores are unchanged
    for method in ("mahalanobis", "conformance"):
        a = getattr(ref, method)(Y @ F.T, 1e-3)
        b = getattr(big, method)(Y @ F.T * 1e160, 1e-3 * 1e160)
        torch.testing.assert_close(b, a, rtol=1e-9, atol=0)
        assert bool((b > 0).all())
    w = big.weights(1.0)
    torch.testing.assert_close(w * big.eigenvalues_, torch.ones_like(w), rtol=1e-12, atol=0)


def test_variance_norm_overflowing_gram_raises():
    # features v_i sqrt(M) with mean 0.8: B_12 - a_1 = -1.8 M overflows for M = 1.5e308
    v = np.array([1.0, -1.0] + [1.0] * 8)
    with pytest.raises(ValueError, match="too large"):
        VarianceNorm().fit(np.outer(v, v) * 1.5e308)
    # a Gram whose centring stays finite is scored right: scale c with alpha scaled by c
    local = np.random.default_rng(0)
    F, Y = local.normal(size=(12, 3)), local.normal(size=(4, 3))
    G = F @ F.T
    c = 1.5e308 / np.abs(G).max() / 8
    got = VarianceNorm().fit(G * c).mahalanobis(Y @ F.T * c, 1e-3 * c)
    ref = VarianceNorm().fit(G).mahalanobis(Y @ F.T, 1e-3)
    torch.testing.assert_close(got, ref, rtol=1e-9, atol=0)


# --------------------------------------------------- item 10: translation invariance
@pytest.mark.parametrize(
    "name", ["flat_rbf", "integral_rbf", "trunc_sig_rbf", "pde_sig_rbf", "gak"]
)
@pytest.mark.parametrize("offset", [1e6, 1e8])
def test_rbf_type_kernels_are_translation_invariant(name, offset):
    k = make_kernel(name)
    ref = k.gram(X5)
    got = k.gram(X5 + offset)
    # the data keep ~16 - log10(offset) digits: tolerance on that scale
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-15 * offset * 50)
    assert float(torch.linalg.eigvalsh(got).min()) > -1e-6


def test_static_rbf_translation_invariant():
    P = rng.normal(size=(30, 3))
    for k in (tk.RBF(0.7), tk.Laplacian(0.7)):
        torch.testing.assert_close(k.gram(P + 1e8), k.gram(P), rtol=0, atol=1e-6)


@pytest.mark.parametrize("kernel", [GaussianKernel(0.5), LaplacianKernel(0.5)])
def test_density_kernels_translation_invariant(kernel):
    P = rng.normal(size=(40, 3))
    a = KDE(kernel).fit(P).score_samples(P[:5])
    b = KDE(kernel).fit(P + 1e8).score_samples(P[:5] + 1e8)
    torch.testing.assert_close(b, a, rtol=1e-6, atol=0)


# ------------------------------------------------------------ item 11: huge magnitudes
def test_kde_huge_magnitudes_right_answer():
    P = rng.normal(size=(20, 3))
    # points 1e160 apart: only the point itself contributes to its density
    got = KDE(GaussianKernel(0.5)).fit(P * 1e160).score_samples(P[:4] * 1e160)
    expected = -np.log(20) - 1.5 * np.log(2 * np.pi * 0.25)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    got = KDE(LaplacianKernel(0.5)).fit(P * 1e160).score_samples(P[:4] * 1e160)
    assert np.isfinite(got).all()


def test_kde_small_bandwidth_relative_to_spread():
    # spread 1e10, sigma 0.5: the squared-norm expansion would leave a residue of ~1e4 at
    # coinciding points; the self term must still count exactly
    P = rng.normal(size=(20, 3)) * 1e10
    got = KDE(GaussianKernel(0.5)).fit(P).score_samples(P[:4])
    np.testing.assert_allclose(got, -np.log(20) - 1.5 * np.log(2 * np.pi * 0.25))


def test_knn_and_mean_embedding_huge_gram_entries():
    F = rng.normal(size=(8, 3))
    Y = rng.normal(size=(3, 3))
    c = 1.5e308 / float(np.abs(np.concatenate([F @ F.T, Y @ F.T])).max()) / 4
    for scorer in (KNNScorer(2), KNNScorer(3, aggregate="mean"), MeanEmbeddingScorer()):
        ref = torch.as_tensor(scorer.fit(F @ F.T).score(Y @ F.T, (Y**2).sum(1)))
        got = torch.as_tensor(scorer.fit(F @ F.T * c).score(Y @ F.T * c, (Y**2).sum(1) * c))
        torch.testing.assert_close(got, ref * np.sqrt(c), rtol=1e-10, atol=0)
    G = np.array([[1.5e308, 0.0], [0.0, 1.5e308]])
    got = torch.as_tensor(KNNScorer().fit(G).score(G, np.diag(G)))
    torch.testing.assert_close(got, torch.zeros(2, dtype=torch.float64))
    got = torch.as_tensor(MeanEmbeddingScorer().fit(G).score(G, np.diag(G)))
    torch.testing.assert_close(got, torch.full((2,), np.sqrt(0.5 * 1.5e308), dtype=torch.float64))


def test_reservoir_clip_inputs_huge_data():
    k = make_kernel("reservoir")  # clip_inputs=True
    big = k.gram(X5 * 1e200)
    assert not torch.equal(big, k.gram(X5 * 0.0))
    # every point clipped to the same radius in its own direction
    torch.testing.assert_close(big, k.gram(X5 * 1e10), rtol=1e-12, atol=0)
    unclipped = tk.VolterraReservoirKernel(tau=0.1, lam=0.7)
    with pytest.raises(ValueError, match=r"`tau` must be below 1e-200"):
        unclipped.gram(X5 / np.linalg.norm(X5, axis=-1).max() * 1e200)


# ------------------------------------------------ item 12: integral kernel, unequal T
def test_integral_kernel_value_depends_only_on_the_pair():
    k = make_kernel("integral_poly")
    x = rng.normal(size=(3, 2))
    y = rng.normal(size=(7, 2))
    torch.testing.assert_close(k.gram([x])[0, 0], k.gram([x, y])[0, 0], rtol=1e-13, atol=0)
    series = [rng.normal(size=(T, 2)) for T in (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 100, 3, 8)]
    for kern in (make_kernel("integral_poly"), make_kernel("integral_rbf")):
        K = kern.gram(series)
        single = np.array([[float(kern.gram([a], [b])[0, 0]) for b in series] for a in series])
        np.testing.assert_allclose(K.numpy(), single, rtol=1e-12)
        np.testing.assert_allclose(kern.diag(series).numpy(), np.diag(single), rtol=1e-12)
        Kn = kern.gram(series, normalize=True)
        np.testing.assert_allclose(
            Kn.numpy(), single / np.sqrt(np.outer(np.diag(single), np.diag(single))), rtol=1e-12
        )
        # cross Gram, symmetric Gram and blockwise assembly agree
        K2 = kern.set_params(block_size=3).gram(series, series)
        np.testing.assert_allclose(K2.numpy(), single, rtol=1e-12)
        kern.set_params(block_size=None)


# ----------------------------------------------- item 14: parameters checked at use
@pytest.mark.parametrize("name", sorted(tk.kernel_registry()))
@pytest.mark.parametrize(
    "param, value",
    [
        ("block_size", 0),
        ("block_size", -2),
        ("block_size", 1.5),
        ("max_memory", "big"),
        ("max_memory", 0),
        ("max_memory", True),
    ],
)
def test_every_kernel_rejects_bad_execution_parameters(name, param, value):
    X = rng.normal(size=(3, 5, 2)) * 0.3
    spec = tk.kernel_registry()[name]
    k = spec.fitted_example(X) if hasattr(spec, "fitted_example") else spec.example()
    k.set_params(**{param: value})
    with pytest.raises(ValueError, match=f"^The '{param}' parameter of {type(k).__name__}"):
        k.gram(X)
    with pytest.raises(ValueError, match=f"^The '{param}' parameter of {type(k).__name__}"):
        k.diag(X)


@pytest.mark.parametrize(
    "static, param, value",
    [
        (tk.RBF(1.0), "sigma", -3),
        (tk.Laplacian(1.0), "sigma", 0.0),
        (tk.Linear(), "scale", -1),
        (tk.Polynomial(), "degree", 0),
        (tk.Polynomial(), "c", -1.0),
    ],
)
def test_static_parameters_checked_at_use(static, param, value):
    static.set_params(**{param: value})
    expected = f"^The '{param}' parameter of {type(static).__name__} must be"
    with pytest.raises(ValueError, match=expected):
        static.gram(rng.normal(size=(3, 2)))
    for kernel in (tk.FlattenedKernel(static), tk.IntegralKernel(static)):
        with pytest.raises(ValueError, match=expected):  # the static kernel's own check
            kernel.gram(X5)


@pytest.mark.parametrize("scale", [1e-160, 1e160])
def test_gak_extreme_scales(scale):
    k = tk.GAK().fit(X5)  # gram writes no attribute: sigma_ after fit
    ref = k.gram(X5)
    torch.testing.assert_close(tk.GAK().gram(X5 * scale), ref, rtol=1e-10, atol=1e-12)
    # an explicit bandwidth on the data's scale: the same kernel (exact power-of-two rescale)
    sigma = float(k.sigma_)
    torch.testing.assert_close(
        tk.GAK(sigma=sigma * scale).gram(X5 * scale), ref, rtol=1e-10, atol=1e-12
    )


def test_float32_overflowing_input_named():
    k = tk.FlattenedKernel(tk.Linear(), dtype=torch.float32)
    with pytest.raises(ValueError, match="beyond the torch.float32 range"):
        k.gram(X5 * 1e100)


def test_experiments_fold_normalisation_beyond_1e154():
    # the protocol's own normalisation (a fold's corpus and validation Grams): diagonals of
    # 1e200 multiply past 1.8e308; the result must equal the normalisation at unit scale
    from experiments._protocol import _normalise

    k = tk.FlattenedKernel(tk.Linear())
    C, O = X5, X5[:3] * 0.5 + 0.1
    Kcc, Koc, d_o = k.gram(C)[None], k.gram(O, C)[None], k.diag(O)[None]
    ref = _normalise(Kcc, Koc, d_o)
    got = _normalise(Kcc * 1e200, Koc * 1e200, d_o * 1e200)
    for a, b in zip(got, ref):
        assert bool(torch.isfinite(a).all())
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-15)
