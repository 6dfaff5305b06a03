"""Fisher-divergence bandwidth selection: closed form vs Hutchinson, finite differences."""

import numpy as np
import pytest
import torch

from density import (
    KDE,
    SOSREP,
    GaussianKernel,
    LaplacianKernel,
    SDOKernel,
    fisher_objective,
    select_bandwidth,
)

rng = np.random.default_rng(0)
X3 = rng.standard_normal((120, 3))
V3 = rng.standard_normal((40, 3))


@pytest.mark.parametrize(
    "est",
    [
        SOSREP(GaussianKernel(0.8)),
        SOSREP(LaplacianKernel(1.0)),
        SOSREP(SDOKernel(a=0.05, n_features=3000, seed=0)),
        KDE(GaussianKernel(0.6)),
        KDE(SDOKernel(a=0.05, n_features=3000, seed=0)),
    ],
    ids=["sosrep-gauss", "sosrep-laplace", "sosrep-sdo", "kde-gauss", "kde-sdo"],
)
def test_closed_form_equals_hutchinson(est):
    est.fit(X3)
    closed = fisher_objective(est, V3, method="closed")
    hutch = fisher_objective(est, V3, method="hutchinson", n_probes=300, seed=1)
    assert hutch.stderr > 0
    assert abs(closed.value - hutch.value) < 4 * hutch.stderr, (closed, hutch)


def test_laplacian_matches_finite_differences():
    est = SOSREP(GaussianKernel(0.8)).fit(X3)
    e = est.expansion_
    x = torch.tensor(V3[:5])
    f, g, lap = e.raw_value_grad_laplacian(x)
    h = 1e-4
    lap_fd = torch.zeros(5, dtype=torch.float64)
    for j in range(3):
        step = torch.zeros(3, dtype=torch.float64)
        step[j] = h
        fp, fm = e.raw_value(x + step), e.raw_value(x - step)
        lap_fd += (fp - 2 * f + fm) / h**2
        np.testing.assert_allclose(g[:, j].numpy(), ((fp - fm) / (2 * h)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(lap.numpy(), lap_fd.numpy(), rtol=1e-4, atol=1e-8)


def test_sosrep_objective_is_two_laplacian_over_f():
    est = SOSREP(GaussianKernel(0.8)).fit(X3)
    f, lap = est.expansion_.raw_value_and_laplacian(torch.tensor(V3))
    assert fisher_objective(est, V3).value == pytest.approx(float((2 * lap / f).mean()))


def test_select_bandwidth_recovers_scale_in_1d():
    # N(0, s^2) data: the Fisher criterion should prefer a bandwidth well below s and the
    # extreme values of the grid must lose against an interior one
    data = np.random.default_rng(1).standard_normal((400, 1)) * 2.0
    grid = [0.02, 0.3, 0.6, 1.2, 20.0]
    est = select_bandwidth(SOSREP(GaussianKernel()), data, grid, seed=0)
    assert est.bandwidth_ in (0.3, 0.6, 1.2)
    assert np.nanargmin(est.bandwidth_scores_) == grid.index(est.bandwidth_)
    assert est.kernel_.sigma == est.bandwidth_
    assert est.alpha_.shape == (400,)  # refitted on all of X


def test_select_bandwidth_bad_inputs():
    with pytest.raises(ValueError, match="grid"):
        select_bandwidth(SOSREP(GaussianKernel()), X3, [])
    with pytest.raises(ValueError, match="positive finite"):
        select_bandwidth(SOSREP(GaussianKernel()), X3, [1.0, -1.0])
    with pytest.raises(ValueError, match="validation_fraction"):
        select_bandwidth(SOSREP(GaussianKernel()), X3, [1.0], validation_fraction=1.5)
    with pytest.raises(TypeError, match="SOSREP or KDE"):
        select_bandwidth(object(), X3, [1.0])
