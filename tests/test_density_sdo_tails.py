"""The SDO kernel's tails (issue 31, finding 9): the exact profile (Bessel-K sum) against
quadrature and the random features, its non-increasing envelope, and SOSREP-SDO ranking points
far outside the data below the distribution's tails."""

import math

import numpy as np
import pytest
import torch
from test_density_sdo import _mc, _sdo_2d

from density import SOSREP, SDOKernel, sdo_log_envelope, sdo_log_scale, sdo_profile


def test_profile_matches_closed_form_and_quadrature():
    t = np.array([0.1, 0.5, 1.0, 3.0, 10.0])
    np.testing.assert_allclose(sdo_profile(t, 1, 1), np.exp(-t), rtol=1e-12)  # d = m = 1
    k0 = math.exp(sdo_log_scale(1.0, 2, 2))
    for r in (0.4, 1.0, 2.5, 4.0):  # d = m = 2, a = 1: quadrature, to its accuracy
        ref = _sdo_2d(np.array([r, 0.0]), 1.0) / k0
        assert sdo_profile([r], 2, 2)[0] == pytest.approx(ref, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("d", [3, 5, 8])
def test_profile_matches_random_features(d):
    k = SDOKernel(a=1.0, n_features=100_000, seed=d).fit(torch.zeros(1, d))
    k0 = math.exp(k.log_scale_)
    for r in (0.5, 1.5, 3.0):
        y = [0.0] * d
        y[0] = r
        est, se = _mc(k, [0.0] * d, y)
        assert abs(est / k0 - sdo_profile([r], d, k.m_)[0]) < 4 * se / k0 + 1e-9, (r, est, se)


@pytest.mark.parametrize("d, m", [(1, 1), (1, 3), (2, 2), (3, 2), (6, 4), (20, 11)])
def test_envelope_bounds_the_profile_and_decays(d, m):
    t = np.linspace(0.5, 60.0, 4000)
    env = sdo_log_envelope(t, d, m)
    assert (env <= 0).all() and (np.diff(env) <= 0).all()
    with np.errstate(divide="ignore"):
        prof = np.log(np.abs(sdo_profile(t, d, m)))
    ok = np.isfinite(prof) & (t > 2)  # past the terms' cancellation near 0
    assert (prof[ok] <= env[ok] + 1e-9).all()
    # the slowest terms' exponential rate sin(pi / (2m)) far away
    far = sdo_log_envelope(np.array([1e5, 2e5]), d, m)
    assert (far[0] - far[1]) / 1e5 == pytest.approx(math.sin(math.pi / (2 * m)), rel=0.02)
    assert sdo_log_envelope(np.array([0.0]), d, m)[0] == 0.0


def _ring(r, n=8):
    a = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.c_[r * np.cos(a), r * np.sin(a)]


def test_sosrep_sdo_far_points_rank_below_the_tails():
    X = np.random.default_rng(0).standard_normal((500, 2))
    est = SOSREP(SDOKernel(a=0.05, n_features=4000, seed=0)).fit(X)
    tails = est.score_samples(np.r_[_ring(3.0), _ring(3.5), _ring(4.0), [[4.0, 4.0]]])
    for r in (10.0, 100.0, 1e6):
        far = est.score_samples(_ring(r))
        assert far.max() < tails.min(), (r, far.max(), tails.min())
    s = est.score_samples([[4.0, 4.0], [1e6, 1e6]])
    assert s[1] < s[0]  # the finding: (1e6, 1e6) scored above (4, 4)
    # non-increasing along rays, and unchanged (the raw value) near the data
    radii = [10.0, 30.0, 100.0, 1e3, 1e6]
    ray = est.score_samples(np.c_[radii, np.zeros(5)])
    assert (np.diff(ray) <= 0).all() and ray[-1] < -1e6
    near = _ring(1.0)
    raw = 2 * np.log(np.abs(est.f(near)))
    np.testing.assert_allclose(est.score_samples(near), raw, rtol=1e-12)


def test_kde_sdo_far_points_rank_below_the_tails():
    from density import KDE

    X = np.random.default_rng(1).standard_normal((300, 2))
    kde = KDE(SDOKernel(a=0.05, n_features=4000, seed=0)).fit(X)
    tails = kde.score_samples(np.r_[_ring(3.0), _ring(4.0)])
    tails = tails[np.isfinite(tails)]
    assert kde.score_samples(_ring(100.0)).max() < tails.min()
