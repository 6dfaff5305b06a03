"""SDO kernel random features against numerical integration of the defining integral."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

from density import SDOKernel, sdo_default_m, sdo_log_scale

D = 40_000  # features: Monte-Carlo standard error ~ k(0) / sqrt(D)


def _sdo_1d(t, a):
    """k_a(0, t) in d = 1, m = 1 by quadrature (QAWF Fourier integral on [0, inf))."""
    g = lambda z: 1.0 / (1.0 + a * (2 * math.pi) ** 2 * z * z)  # noqa: E731
    if t == 0:
        return 2 * integrate.quad(g, 0, np.inf)[0]
    return 2 * integrate.quad(g, 0, np.inf, weight="cos", wvar=2 * math.pi * abs(t))[0]


def _sdo_2d(t, a):
    """k_a(0, t) in d = 2, m = 2: 2 pi int_0^inf r J0(2 pi |t| r) / (1 + a (2 pi r)^4) dr."""
    s = a**0.25  # natural length scale: integrate in r' = s r
    tn = float(np.linalg.norm(t))

    def h(r):
        return r * special.j0(2 * math.pi * tn * r / s) / (1.0 + (2 * math.pi * r) ** 4)

    val = integrate.quad(h, 0, 60, limit=2000)[0] + integrate.quad(h, 60, np.inf, limit=2000)[0]
    return 2 * math.pi * val / s**2


def _mc(kernel, x, y):
    """RFF estimate of k(x, y) and its standard error over the D features."""
    fx = kernel._features(torch.tensor([x], dtype=torch.float64))[0].numpy()
    fy = kernel._features(torch.tensor([y], dtype=torch.float64))[0].numpy()
    terms = math.exp(kernel.log_scale_) * kernel.n_features * fx * fy
    return terms.mean(), terms.std(ddof=1) / math.sqrt(len(terms))


@pytest.mark.parametrize("a", [1e-4, 1.0, 1e4])
def test_sdo_1d_matches_quadrature(a):
    k = SDOKernel(a=a, n_features=D, seed=0).fit(torch.zeros(1, 1))
    closed = lambda t: math.exp(-abs(t) / math.sqrt(a)) / (2 * math.sqrt(a))  # noqa: E731
    for t in (0.0, 0.3 * math.sqrt(a), 1.5 * math.sqrt(a)):
        ref = _sdo_1d(t, a)
        assert ref == pytest.approx(closed(t), rel=1e-6)  # quadrature sanity
        est, se = _mc(k, [0.0], [t])
        assert abs(est - ref) < 4 * se + 1e-12 * ref, (t, est, ref, se)
        # the public gram gives the same estimate
        g = float(k.gram([[0.0]], [[t]])[0, 0])
        assert g == pytest.approx(est, rel=1e-9)


@pytest.mark.parametrize("a", [1e-4, 1.0, 1e4])
def test_sdo_2d_matches_quadrature(a):
    k = SDOKernel(a=a, n_features=D, seed=1).fit(torch.zeros(1, 2))
    assert k.m_ == 2
    s = a**0.25
    ref0 = _sdo_2d(np.zeros(2), a)
    assert ref0 == pytest.approx(math.exp(sdo_log_scale(a, 2, 2)), rel=1e-6)
    for t in (np.zeros(2), np.array([0.2, 0.1]) * s, np.array([-0.9, 0.6]) * s):
        ref = _sdo_2d(t, a)
        est, se = _mc(k, [0.3, -0.2], list(np.array([0.3, -0.2]) + t))
        assert abs(est - ref) < 4 * se, (t, est, ref, se)


@pytest.mark.parametrize("d,a", [(3, 1e-4), (3, 1e4), (10, 1.0), (99, 1e2)])
def test_radial_law_is_exact_beta_prime(d, a):
    """u = a (2 pi r)^(2m) must follow beta-prime(p, 1-p), i.e. 1/(1+u) ~ Beta(1-p, p)."""
    k = SDOKernel(a=a, n_features=20_000, seed=2).fit(torch.zeros(1, d))
    m = sdo_default_m(d)
    log_u = math.log(a) + 2 * m * torch.log(k.omega_.norm(dim=1)).numpy()  # |omega| = 2 pi r
    c = special.expit(-log_u)  # 1/(1+u), accurate where u is huge (small p-complement)
    p = d / (2 * m)
    assert stats.kstest(c, stats.beta(1 - p, p).cdf).pvalue > 1e-3
    # directions uniform on the sphere: the mean direction vanishes
    theta = (k.omega_ / k.omega_.norm(dim=1, keepdim=True)).numpy()
    assert np.abs(theta.mean(0)).max() < 5 / math.sqrt(20_000)


def test_features_drawn_once_and_reused():
    X = np.random.default_rng(0).random((20, 3))
    k = SDOKernel(a=0.1, n_features=500, seed=3).fit(torch.as_tensor(X))
    G1 = k.gram(X)
    G2 = k.gram(X)
    assert torch.equal(G1, G2)
    k2 = SDOKernel(a=0.1, n_features=500, seed=3).fit(torch.as_tensor(X))
    assert torch.equal(k2.gram(X), G1)  # same seed, same draw
    k3 = SDOKernel(a=0.1, n_features=500, seed=4).fit(torch.as_tensor(X))
    assert not torch.equal(k3.gram(X), G1)


def test_log_scale_large_d_is_finite():
    # k_a(x, x) under/overflows in linear space for large d; its log stays finite
    ls = sdo_log_scale(1e-4, 400, 201)
    assert np.isfinite(ls)
    assert math.exp(ls) == 0.0 or not np.isfinite(math.exp(ls)) or abs(ls) < 700


def test_bad_sdo_parameters():
    X = torch.zeros(2, 4)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(
            ValueError,
            match=r"The 'a' parameter of SDOKernel must be None or a float in the range \(0.0, "
            r"inf\)",
        ):
            SDOKernel(a=bad).fit(X)
    with pytest.raises(ValueError, match="must exceed d/2"):
        SDOKernel(a=1.0, m=2).fit(X)
    with pytest.raises(ValueError, match="n_features"):
        SDOKernel(a=1.0, n_features=0).fit(X)
