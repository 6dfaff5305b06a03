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


def test_mollified_expansion_is_gaussian_smoothing():
    # oracle: f_h(x) = E f(x + h eps), eps ~ N(0, I), by Monte Carlo over eps
    from density._bandwidth import mollified_expansion

    X2 = rng.standard_normal((60, 2))
    est = SOSREP(SDOKernel(a=0.05, n_features=2000, seed=0)).fit(X2)
    e = est.expansion_
    h = 0.3
    x = torch.tensor(rng.standard_normal((4, 2)))
    smooth = mollified_expansion(e, h).raw_value(x).numpy()
    gen = torch.Generator().manual_seed(0)
    eps = torch.randn(4000, 2, generator=gen, dtype=torch.float64)
    for i in range(4):
        vals = e.raw_value(x[i] + h * eps).numpy()
        se = vals.std(ddof=1) / np.sqrt(len(vals))
        assert abs(vals.mean() - smooth[i]) < 4.5 * se, (i, vals.mean(), smooth[i], se)


def test_sdo_default_smoothing_and_validation():
    est = SOSREP(SDOKernel(a=0.05, n_features=2000, seed=0)).fit(X3)
    auto = fisher_objective(est, V3).value
    assert auto == pytest.approx(fisher_objective(est, V3, smoothing=0.5).value)
    assert auto != pytest.approx(fisher_objective(est, V3, smoothing=0.0).value)
    with pytest.raises(ValueError, match="smoothing"):
        fisher_objective(est, V3, smoothing=-1.0)
    gauss = SOSREP(GaussianKernel(0.8)).fit(X3)
    with pytest.raises(ValueError, match="random-feature"):
        fisher_objective(gauss, V3, smoothing=0.5)


def test_duplicates_are_left_out_of_the_criterion():
    # duplicated rows: without the exclusion, held-out copies of fit points send the criterion
    # to -inf as sigma -> 0 (-d / sigma^2), and the smallest grid value would win
    base = np.random.default_rng(0).standard_normal((300, 1))
    data = np.vstack([base, base[:60]])  # 60 rows twice
    grid = [0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6]
    with _no_warn():
        est = select_bandwidth(SOSREP(GaussianKernel()), data, grid, seed=0)
    assert est.n_duplicates_excluded_ > 0
    assert est.bandwidth_ > grid[0]
    assert not est.bandwidth_at_edge_
    # the same data kept in the criterion (oracle: held-out score by hand) favours sigma -> 0
    from sklearn.base import clone

    fit, val = data[:300], data[300:]  # every held-out row duplicates a fit row
    v_small = fisher_objective(clone(SOSREP(GaussianKernel(0.02))).fit(fit), val).value
    v_mid = fisher_objective(clone(SOSREP(GaussianKernel(0.4))).fit(fit), val).value
    assert v_small < v_mid


def test_minimum_at_grid_edge_warns():
    data = np.random.default_rng(4).standard_normal((150, 1))
    with pytest.warns(UserWarning, match="end of the grid"):
        est = select_bandwidth(SOSREP(GaussianKernel()), data, [5.0, 10.0, 20.0], seed=0)
    assert est.bandwidth_at_edge_


class _no_warn:
    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("error", UserWarning)

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def test_duplicates_found_exactly_in_many_dimensions():
    # matmul-based distances round |x - x| to ~1e-7 in d = 60; the tie test must not
    base = np.random.default_rng(5).random((200, 60))
    data = np.vstack([base, base[:40]])
    n_val = int(round(0.2 * len(data)))
    perm = np.random.default_rng(0).permutation(len(data))
    val, fit = data[perm[:n_val]], data[perm[n_val:]]
    expected = int(sum((fit == v).all(1).any() for v in val))  # oracle: exact row equality
    assert expected > 0
    est = select_bandwidth(KDE(GaussianKernel()), data, [0.5, 1.0, 2.0, 4.0], seed=0)
    assert est.n_duplicates_excluded_ == expected
