"""Bandwidth selection protocols: inductive vs transductive (``X_select``), rules min and
first_stable (the first stable local minimum, on constructed curves and on fits)."""

import warnings

import numpy as np
import pytest

from density import (
    KDE,
    SOSREP,
    GaussianKernel,
    LaplacianKernel,
    SDOKernel,
    first_stable_minimum,
    select_bandwidth,
)


# -- the rule on constructed curves ----------------------------------------------------------
def test_narrow_dip_met_first_is_skipped():
    # grid order = increasing bandwidth; read from the largest bandwidth down, the one-point
    # dip at index 8 comes first (the curve falls again right after it), then a real basin
    curve = [8, 6, 4, 3, 4, 6, 8, 9, 2, 9, 10]
    assert first_stable_minimum(curve) == 3
    assert int(np.argmin(curve)) == 8  # what rule "min" takes
    assert first_stable_minimum(curve, window=1) == 8  # a window of 1 accepts the dip


@pytest.mark.parametrize(
    "curve",
    [
        [5.0, 4.0, 3.0, 2.0, 1.0, 0.0],  # monotone falling: the minimum is the last point
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],  # monotone rising
        [1.0] * 7,  # flat
        [3.0, 2.0, 1.0, 2.0],  # too short for a window of 2 on each side
        [5.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0],  # falls onto a plateau that never rises again
    ],
    ids=["falling", "rising", "flat", "short", "plateau-to-end"],
)
def test_curves_without_a_stable_minimum(curve):
    assert first_stable_minimum(curve) is None


def test_first_interior_basin_wins_over_a_global_minimum_at_the_end():
    curve = [5.0, 3.0, 1.0, 3.0, 5.0, 4.0, 2.0, 0.0]
    assert first_stable_minimum(curve) == 2
    assert int(np.argmin(curve)) == 7


def test_of_two_basins_the_larger_bandwidth_wins():
    assert first_stable_minimum([5.0, 3.0, 1.0, 3.0, 5.0, 3.0, 2.0, 3.0, 5.0]) == 6


def test_basin_too_close_to_an_end_is_not_stable():
    # index 6 has one point on its right: not a stable minimum with window 2
    curve = [6.0, 3.0, 2.0, 3.0, 5.0, 4.0, 1.0, 4.0]
    assert first_stable_minimum(curve) == 2


def test_flat_bottom_basin_and_nan_positions():
    assert first_stable_minimum([5.0, 3.0, 1.0, 1.0, 1.0, 3.0, 5.0]) == 3
    # nan entries (dropped grid values) are removed; the index is in the input's positions
    curve = [8, 6, np.nan, 4, 3, 4, 6, 8, np.nan, 9, 2, 9, 10]
    assert first_stable_minimum(curve) == 4
    assert first_stable_minimum([np.nan] * 6) is None


def test_rule_input_checks():
    with pytest.raises(ValueError, match="window"):
        first_stable_minimum([1.0, 0.0, 1.0], window=0)
    with pytest.raises(ValueError, match="1-D"):
        first_stable_minimum(np.zeros((3, 3)))


# -- rule "min" is the former behaviour ------------------------------------------------------
# Values produced by select_bandwidth before X_select / rule existed (same data, grid, seed).
def _reg_data():
    rng = np.random.default_rng(3)
    return np.vstack([rng.standard_normal((120, 2)), rng.standard_normal((40, 2)) * 0.3 + 3])


@pytest.mark.parametrize(
    "est, grid, best, scores",
    [
        (
            SOSREP(GaussianKernel()),
            [0.1, 0.2, 0.4, 0.8, 1.6],
            0.8,
            [
                1633.2934474682245,
                81.09203414681909,
                -0.00048678091930542955,
                -1.854718192773121,
                -0.7284267231441012,
            ],
        ),
        (
            SOSREP(LaplacianKernel()),
            [0.1, 0.2, 0.4, 0.8, 1.6],
            0.4,
            [
                66.39339986618135,
                4.94871513743901,
                -1.9669021640719608,
                -1.8540043452420167,
                -1.060783622018039,
            ],
        ),
        (
            KDE(GaussianKernel()),
            [0.1, 0.2, 0.4, 0.8, 1.6],
            0.4,
            [
                451.89591285221843,
                19.207178235982546,
                -2.0018864091110813,
                -1.28140462273216,
                -0.43510807224908066,
            ],
        ),
        (
            SOSREP(SDOKernel(n_features=2000, seed=1)),
            [1e-4, 1e-3, 1e-2, 1e-1],
            1e-4,
            [-77.09162061049756, -16.288971522470348, -5.432925995367734, -0.7664251003516482],
        ),
    ],
    ids=["sosrep-gauss", "sosrep-lap", "kde-gauss", "sosrep-sdo"],
)
def test_rule_min_reproduces_the_former_selection(est, grid, best, scores):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = select_bandwidth(est, _reg_data(), grid, seed=2)
    assert out.bandwidth_ == best
    np.testing.assert_allclose(out.bandwidth_scores_, scores, rtol=1e-7)
    assert out.bandwidth_protocol_ == "inductive" and out.bandwidth_rule_ == "min"
    assert not out.bandwidth_fallback_


# -- transductive protocol -------------------------------------------------------------------
def _normal(n, seed, scale=2.0):
    return np.random.default_rng(seed).standard_normal((n, 1)) * scale


GRID_1D = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2]


def test_transductive_on_a_sample_of_the_same_law_matches_inductive():
    X = _normal(400, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ind = select_bandwidth(SOSREP(GaussianKernel()), X, GRID_1D, seed=0)
        tra = select_bandwidth(SOSREP(GaussianKernel()), X, GRID_1D, X_select=_normal(400, 7))
    assert tra.bandwidth_protocol_ == "transductive"
    assert ind.bandwidth_ not in (GRID_1D[0], GRID_1D[-1])
    # same choice up to one grid step, curves of the same shape
    assert abs(GRID_1D.index(tra.bandwidth_) - GRID_1D.index(ind.bandwidth_)) <= 1
    assert (
        np.corrcoef(
            np.log1p(np.abs(ind.bandwidth_scores_)), np.log1p(np.abs(tra.bandwidth_scores_))
        )[0, 1]
        > 0.9
    )
    assert tra.alpha_.shape == (400,)  # fitted on all of X (the chosen grid fit, no refit)
    assert tra.kernel_.sigma == tra.bandwidth_


def test_transductive_choice_follows_the_selection_points():
    # the same model family scored on a wider law must prefer a wider kernel
    X = _normal(400, 1, scale=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = select_bandwidth(SOSREP(GaussianKernel()), X, GRID_1D, X_select=_normal(300, 2, 1.0))
        wide = select_bandwidth(SOSREP(GaussianKernel()), X, GRID_1D, X_select=_normal(300, 2, 4.0))
    assert wide.bandwidth_ > same.bandwidth_


def test_transductive_first_stable_on_fits_and_unsorted_grid():
    X = _normal(300, 3)
    grid = [1.6, 0.05, 0.4, 3.2, 0.1, 0.8, 0.2]  # unsorted: the rule reads increasing bandwidth
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = select_bandwidth(
            SOSREP(GaussianKernel()), X, grid, X_select=_normal(200, 4), rule="first_stable"
        )
    order = np.argsort(grid)
    j = first_stable_minimum(est.bandwidth_scores_[order])
    if j is None:
        assert est.bandwidth_fallback_
        assert est.bandwidth_ == grid[int(np.nanargmin(est.bandwidth_scores_))]
    else:
        assert not est.bandwidth_fallback_ and est.bandwidth_ == grid[int(order[j])]
    assert est.bandwidth_rule_ == "first_stable"
    np.testing.assert_array_equal(est.bandwidth_grid_, grid)  # kept in the caller's order


def test_first_stable_falls_back_to_the_minimum_on_a_monotone_curve():
    data = _normal(150, 4, scale=1.0)
    with pytest.warns(UserWarning, match="end of the grid"):
        est = select_bandwidth(
            SOSREP(GaussianKernel()), data, [5.0, 10.0, 20.0], seed=0, rule="first_stable"
        )
    assert est.bandwidth_fallback_ and est.bandwidth_ == 5.0


def test_transductive_duplicates_of_fit_points_are_left_out():
    X = _normal(200, 5)
    sel = np.vstack([X[:30], _normal(50, 6)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = select_bandwidth(KDE(GaussianKernel()), X, [0.2, 0.4, 0.8], X_select=sel)
    assert est.n_duplicates_excluded_ == 30
    with pytest.raises(ValueError, match="every `X_select` point duplicates"):
        select_bandwidth(KDE(GaussianKernel()), X, [0.2, 0.4], X_select=X[:10])


def test_bad_protocol_inputs():
    X = _normal(50, 0)
    est = SOSREP(GaussianKernel())
    with pytest.raises(ValueError, match="rule"):
        select_bandwidth(est, X, [0.5, 1.0], rule="largest")
    with pytest.raises(ValueError, match="window"):
        select_bandwidth(est, X, [0.5, 1.0], rule="first_stable", window=0)
    bad = _normal(10, 1)
    bad[3, 0] = np.nan
    with pytest.raises(ValueError, match="X_select.*NaN"):
        select_bandwidth(est, X, [0.5, 1.0], X_select=bad)
    with pytest.raises(ValueError, match="`X_select` has 2 features but `X` has 1"):
        select_bandwidth(est, X, [0.5, 1.0], X_select=np.zeros((5, 2)))
    with pytest.raises(ValueError, match="X_select.*2-D"):
        select_bandwidth(est, X, [0.5, 1.0], X_select=np.zeros(5))
    with pytest.raises(ValueError, match="X_select.*0 sample"):
        select_bandwidth(est, X, [0.5, 1.0], X_select=np.zeros((0, 1)))
