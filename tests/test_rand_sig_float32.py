"""The paper preset's randomized signature in float32 (issue 34, item 1, session 13): the grid
axis ``precision`` of the ``rand_sig_tanh`` grids (``experiments._grids``), its kernels'
dtype, and how far float32 moves the features and a CV cell's scores from float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experiments._grids import PRESETS, build_kernel, kernel_grid_points
from experiments._protocol import Dataset, run_cv_cell
from experiments._rand_sig32 import Float32RandomizedSignature
from tskernels import RandomizedSignatureKernel

RAND_SIG = ("rand_sig_tanh", "rand_sig_tanh_first")


def _walks(n, T, d, seed=0):
    rng = np.random.default_rng(seed)
    X = np.cumsum(rng.normal(size=(n, T, d)), axis=1)
    return (X - X.mean(axis=(0, 1))) / X.std(axis=(0, 1))  # about the protocol's z-score


def test_paper_grid_builds_rand_sig_in_float32_and_the_others_in_float64():
    grids = PRESETS["paper"].grids
    for name, grid in grids.items():
        points = kernel_grid_points(grid)
        for point in (points[0], points[-1]):
            kernel = build_kernel(name, point, 3, 10, grid.levels)
            want = torch.float32 if name in RAND_SIG else torch.float64
            assert kernel._dtype == want, (name, point)
            assert isinstance(kernel, Float32RandomizedSignature) == (name in RAND_SIG)
    for name in RAND_SIG:
        points = kernel_grid_points(grids[name])
        assert len(points) == 5 * 8 * 5  # the axis adds no grid point
        assert {p["precision"] for p in points} == {32}
        kernel = build_kernel(name, points[0], 3, 10)
        assert kernel.activation_first == (name == "rand_sig_tanh_first")
        A, b, z0 = kernel._draw(3)
        assert A.dtype == b.dtype == z0.dtype == torch.float32


def test_float32_solve_then_float64_gram():
    # the ODE solved in float32 (the features are exactly the float32 kernel's, widened), the
    # Gram and diagonal formed in float64 from them (not the float32 kernel's float32 Gram)
    point = {"features": 50, "variance": 1e-3, "seed": 4, "precision": 32}
    kernel = build_kernel("rand_sig_tanh", point, 4, 30)
    X, Y = _walks(7, 30, 4), _walks(5, 30, 4, seed=1)
    plain32 = RandomizedSignatureKernel(n_features=50, scale=1e-3, seed=4, dtype=torch.float32)
    ZX, ZY = plain32.features(X), plain32.features(Y)
    assert ZX.dtype == torch.float32
    assert torch.equal(kernel.features(X), ZX.double())
    want = ZX.double() @ ZY.double().T / 50
    got = kernel.gram(X, Y)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-14, atol=0)
    torch.testing.assert_close(kernel.diag(Y), (ZY.double() ** 2).sum(1) / 50, rtol=1e-14, atol=0)
    assert not torch.equal(plain32.gram(X, Y).double(), got)  # the float32 product differs


def test_other_presets_and_points_without_the_axis_stay_float64():
    # quick: one point of each; own: its trimmed grid of rand_sig_tanh (the opt-in
    # rand_sig_tanh_first of own is the paper's grid, float32 included)
    for preset, name in (("quick", RAND_SIG[0]), ("quick", RAND_SIG[1]), ("own", RAND_SIG[0])):
        for point in kernel_grid_points(PRESETS[preset].grids[name]):
            assert build_kernel(name, point, 3, 10)._dtype == torch.float64, (preset, name)
    assert PRESETS["own"].grids[RAND_SIG[1]] == PRESETS["paper"].grids[RAND_SIG[1]]
    point = {"features": 10, "variance": 0.1, "seed": 1}
    assert build_kernel("rand_sig_tanh", point, 3, 10)._dtype == torch.float64
    k64 = build_kernel("rand_sig_tanh", dict(point, precision=64), 3, 10)
    assert k64._dtype == torch.float64
    X = _walks(5, 12, 3)
    plain = RandomizedSignatureKernel(n_features=10, scale=0.1, seed=1)
    assert torch.equal(k64.features(X), plain.features(X))


@pytest.mark.parametrize("precision", [16, 32.5, True, "32"])
def test_a_precision_other_than_32_or_64_is_refused(precision):
    point = {"features": 10, "variance": 0.1, "seed": 1, "precision": precision}
    with pytest.raises(ValueError, match="`precision` must be one of 32, 64"):
        build_kernel("rand_sig_tanh", point, 3, 10)


@pytest.mark.parametrize("features", [10, 50, 200])
@pytest.mark.parametrize("variance", [1e-5, 1e-3])
@pytest.mark.parametrize("first", [False, True])
def test_float32_features_equal_float64_to_1e5_relative(features, variance, first):
    # the oracle: the same kernel in float64. At these variances the controlled ODE is well
    # conditioned (at the grid's largest variances it is not, in float64 either: the docs)
    X = _walks(20, 60, 4, seed=features)
    kw = dict(n_features=features, scale=variance, seed=2, activation_first=first)
    Z64 = RandomizedSignatureKernel(**kw).features(X)
    Z32 = RandomizedSignatureKernel(**kw, dtype=torch.float32).features(X)
    assert Z32.dtype == torch.float32
    rel = float(((Z32.double() - Z64).abs().amax(1) / Z64.abs().amax(1)).max())
    assert rel < 1e-5
    assert rel > 1e-10  # really computed in float32 (not float64 cast at the end)


def _dataset(n=24, T=30, d=2):
    rng = np.random.default_rng(0)

    def draw(m):
        y = np.array(["a", "b"] * (m // 2))
        X = np.cumsum(rng.normal(size=(m, T, d)), axis=1) * 0.1
        X[y == "b"] += np.linspace(0, 1, T)[None, :, None]
        return X, y

    Xtr, ytr = draw(n)
    Xte, yte = draw(n)
    return Dataset("walks", Xtr, ytr, Xte, yte)


def _config():
    from experiments._runner import cell_config

    return cell_config("paper", share="fold", folds=2, repeats=2)


@pytest.mark.parametrize("variance", [1e-5, 1e-3])
def test_a_cv_cell_in_float32_scores_as_in_float64(variance, monkeypatch):
    data = _dataset()
    rows, solves = {}, []
    for precision in (32, 64):
        calls = []

        def counted(k, *a, calls=calls, real=RandomizedSignatureKernel._euler_cpu):
            calls.append(1)
            return real(k, *a)

        monkeypatch.setattr(RandomizedSignatureKernel, "_euler_cpu", counted)
        point = {"features": 50, "variance": variance, "seed": 0, "precision": precision}
        cell = {"cls": "a", "kernel": "rand_sig_tanh", "point": point, "levels": None,
                "time_channel": True, "scorers": ["conformance", "mahalanobis"]}  # fmt: skip
        rows[precision] = run_cv_cell(cell, data, _config())
        solves.append(len(calls))
        monkeypatch.undo()
    # the folds' features solved ahead in one float32 solve, as in float64 (one kernel type)
    assert solves == [1, 1]
    # 4 folds of 12 validation series (6 normal): one swapped (normal, other) pair in one
    # fold moves that fold's ROC-AUC by 1/36 and the cell's mean by 1/144. Float32 may swap a
    # near tie (measured: 1 of the 600 (alpha, rank) entries by one pair), never more
    pair = 1 / 36 / 4
    for r32, r64 in zip(rows[32], rows[64]):
        assert r32["scorer"] == r64["scorer"] and r32["error"] is None and r64["error"] is None
        for what in ("roc", "pr"):
            diff = np.abs(r32[what] - r64[what])
            assert diff.max() <= 2 * pair + 1e-12, (r32["scorer"], what)
            assert (diff > 1e-12).mean() <= 0.02, (r32["scorer"], what)
