"""Studies at archive size (issue 25): the faster CV scoring gives the numbers of the path it
replaced, and test cells run as soon as their group's CV cells are done.

Oracles: the compiled metrics of the CV loop against the numpy ones they replace (the same
bits) and scikit-learn; the SSE sweep against one fit and ``score`` per lambda; whole CV cells
of every scorer against the same cells with the code before issue 25 patched in (the numpy
metrics, the SSE sweep projecting once per lambda) and the conformance minimum by brute force
in numpy (every partial sum, then the minimum), at 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from experiment_helpers import tiny_sines

import experiments._protocol as protocol
import novelty.scorers._variance_norm as vn_module
from experiments._cells import CVCell, Done, RunSetup, plan
from experiments._grids import PRESETS
from experiments._metrics import roc_auc_and_average_precision
from experiments._protocol import Dataset, run_cv_cell
from novelty import SpectralSupport, VarianceNorm
from novelty.scorers._spectral_support import FILTERS
from novelty.scorers._variance_norm_numba import conformance_sq_all_ranks

PRE = {"max_length": 100, "clip": 5.0, "eps": 1e-4, "basepoint": True}
ALL_SCORERS = ["conformance", "mahalanobis", "sse", "sosrep", "knn", "mean_embedding", "ocsvm"]


def _brute_conformance_sq(P, E, W):
    """min_n of the cumulative sums over ranks of W (P - E)^2, every (alpha, rank, test)."""
    d2 = (P[:, :, None] - E.T[None, :, :]) ** 2  # (n_t, M, N)
    parts = np.cumsum(W[:, None, :, None] * d2[None], axis=2)  # (n_a, n_t, M, N)
    return parts.min(axis=3).transpose(0, 2, 1)  # (n_a, M, n_t)


@pytest.mark.parametrize("n_t, M, N, n_a", [(7, 5, 9, 3), (1, 1, 2, 1), (13, 12, 30, 2)])
def test_conformance_core_equals_brute_force(n_t, M, N, n_a):
    rng = np.random.default_rng(n_t * 100 + N)
    P, E = rng.normal(size=(n_t, M)), rng.normal(size=(N, M))
    E[1] = P[0]  # a test point on a corpus point: 0 at every rank
    W = rng.uniform(0.1, 10.0, size=(n_a, M))
    got = conformance_sq_all_ranks(P, E, W)
    want = _brute_conformance_sq(P, E, W)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(got[:, :, 0], 0.0)


def test_conformance_core_with_ties_and_huge_weights():
    rng = np.random.default_rng(1)
    P = rng.integers(-2, 3, size=(6, 4)).astype(float)
    E = rng.integers(-2, 3, size=(8, 4)).astype(float)  # many equal distances
    W = np.array([[1e150, 1.0, 1e-150, 3.0]])
    np.testing.assert_array_equal(conformance_sq_all_ranks(P, E, W), _brute_conformance_sq(P, E, W))


@pytest.mark.parametrize("filt", FILTERS)
def test_sse_sweep_equals_one_fit_per_lambda(filt):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 5))
    K = torch.from_numpy(np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 10.0))
    Kcc, Koc, d_o = K[:25, :25], K[25:, :25], torch.ones(15, dtype=K.dtype)
    lams = [1e-4, 1e-2, 0.3]
    swept = SpectralSupport(filt, lams[0]).fit(Kcc).sweep(Koc, d_o, lams)
    assert swept.shape == (3, 1, 15)
    for i, lam in enumerate(lams):
        one = SpectralSupport(filt, lam).fit(Kcc).score(Koc, d_o)
        np.testing.assert_array_equal(np.asarray(swept[i, 0]), np.asarray(one))


def test_fold_metrics_are_the_bits_of_the_vectorised_metrics():
    """The compiled metrics against the numpy ones they replace in the CV loop (ties, +-inf,
    one positive, one negative), and against scikit-learn."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    from experiments._protocol import fold_metrics

    rng = np.random.default_rng(4)
    for trial in range(60):
        n = int(rng.integers(2, 200))
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 6)), n)
        s = rng.integers(0, 4, size=shape).astype(float) if trial % 2 else rng.normal(size=shape)
        if trial % 5 == 0:
            s[..., :2] = np.inf
            s[..., -1] = -np.inf
        y = rng.random(n) < (0.05 if trial % 7 == 0 else 0.4)
        y[0], y[-1] = True, False
        got, want = fold_metrics(s, y), roc_auc_and_average_precision(s, y)
        for g, w in zip(got, want):
            assert g.shape == shape[:-1]
            np.testing.assert_array_equal(g, w)
        if trial % 5:
            flat = s.reshape(-1, n)
            assert got[0].reshape(-1)[0] == pytest.approx(roc_auc_score(y, flat[0]), abs=1e-12)
            assert got[1].reshape(-1)[-1] == pytest.approx(
                average_precision_score(y, flat[-1]), abs=1e-12
            )
    with pytest.raises(ValueError, match="NaN"):
        fold_metrics(np.array([[0.1, np.nan]]), np.array([True, False]))


# ----------------------------------------------------------------------------- whole cells
def _old_sse_sweep(self, Kt, dt, values, ranks):
    """The sweep before issue 25: one full ``_support`` (projection included) per lambda."""
    from novelty.scorers._spectral_support import _ITERATIVE, _iterations, spectral_filter

    rows = []
    for lam in values:
        t = _iterations(self.filter, lam, self.iterations) if self.filter in _ITERATIVE else None
        g = spectral_filter(self.eigenvalues_, self.filter, float(lam), t, self.nu)
        proj = Kt @ self.eigenvectors_
        rows.append(1.0 - (proj**2 * g).sum(dim=1) / self.n_corpus_)
    return torch.stack(rows)[:, None, :]


def _data(seed=5) -> Dataset:
    return tiny_sines(seed)


def _config(share: str) -> dict:
    return {"folds": 3, "repeats": 2, "seed": 1, "share": share, "alphas": [1e-8, 1e-5, 1e-2],
            "max_rank": 12, "sse_lams": [1e-4, 1e-3, 1e-2, 1e-1], "threshold": 1e-10,
            "preprocessing": PRE, "device": None, "threads": 1, "rank_rule": "ours"}  # fmt: skip


@pytest.mark.parametrize("share", ["class", "fold"])
@pytest.mark.parametrize("kernel, point", [("flat_rbf", {"sigma": 1.0}), ("gak", {"factor": 1.0})])
def test_cv_cell_of_every_scorer_unchanged(monkeypatch, share, kernel, point):
    data, config = _data(), _config(share)
    cell = {"cls": "a", "kernel": kernel, "point": point, "levels": None,
            "time_channel": True, "scorers": ALL_SCORERS}  # fmt: skip
    new = run_cv_cell(cell, data, config)
    monkeypatch.setattr(vn_module, "conformance_sq_all_ranks", _brute_conformance_sq)
    monkeypatch.setattr(SpectralSupport, "_sweep", _old_sse_sweep)
    monkeypatch.setattr(protocol, "fold_metrics", roc_auc_and_average_precision)
    monkeypatch.setattr(protocol, "FAST_PATH", False)  # the per-scorer fold_metrics above
    old = run_cv_cell(cell, data, config)
    assert [r["scorer"] for r in new] == ALL_SCORERS == [r["scorer"] for r in old]
    for a, b in zip(new, old):
        assert a["error"] is None and b["error"] is None, (a["error"], b["error"])
        assert a["n_rank"] == b["n_rank"] and a["n_folds"] == b["n_folds"] == 6
        np.testing.assert_allclose(a["roc"], b["roc"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a["pr"], b["pr"], rtol=1e-12, atol=1e-12)


def test_variance_norm_scores_unchanged_against_brute_force(monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 4))
    K = torch.from_numpy(np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 8.0))
    vn = VarianceNorm(max_rank=20).fit(K[:30, :30])
    new = vn.conformance(K[30:, :30], [1e-8, 1e-2], rank="all")
    monkeypatch.setattr(vn_module, "conformance_sq_all_ranks", _brute_conformance_sq)
    old = vn.conformance(K[30:, :30], [1e-8, 1e-2], rank="all")
    np.testing.assert_allclose(new.numpy(), old.numpy(), rtol=1e-12, atol=0)


# ----------------------------------------------------------------------------- scheduling
def test_plan_lists_each_test_cell_right_after_its_cv_cells():
    grids = PRESETS["quick"].grids
    setup = RunSetup(
        datasets={"d": ("a", "b")}, kernels=("flat_rbf", "flat_linear"),
        scorers=("conformance",), grids=grids, time_channels=(False, True),
    )  # fmt: skip
    cells = plan(setup, Done())
    groups = [c.group for c in cells]
    for i, c in enumerate(cells):
        if c.kind == "test":
            before = [g for g, k in zip(groups[:i], cells[:i]) if isinstance(k, CVCell)]
            assert before.count(c.group) == 2  # both time channels, just before it
            assert all(g == c.group for g in groups[i - 2 : i])


def _npz(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(["a", "b"], 8)
    X = rng.normal(size=(16, 10, 2)) + (y == "b")[:, None, None]
    path = tmp_path / "two.npz"
    np.savez(path, X_train=X, y_train=y, X_test=X[::-1] + 0.1, y_test=y[::-1])
    return path


def test_run_stopped_early_has_the_test_rows_of_the_groups_it_finished(tmp_path):
    """4 cells = the first kernel's 2 CV and 2 test cells: with test cells queued behind every
    CV cell (before issue 25) the store held 4 CV rows and no test row."""
    import sqlite3

    from experiments._runner import RunOptions, run_benchmark

    store = tmp_path / "s.sqlite"
    opts = RunOptions(datasets=[str(_npz(tmp_path))], preset="quick", folds=2, repeats=1,
                      time_channel=[False], kernels=["flat_rbf", "flat_linear"],
                      scorers=["conformance"], store=str(store), max_cells=4, progress=False,
                      verbose=False)  # fmt: skip
    out = run_benchmark(opts)
    assert out["cells_computed"] == 4 and not out["complete"]
    con = sqlite3.connect(str(store))
    test = con.execute("SELECT kernel, cls, roc_auc FROM test ORDER BY cls").fetchall()
    cv = con.execute("SELECT DISTINCT kernel FROM cv").fetchall()
    con.close()
    assert [(k, c) for k, c, _ in test] == [("flat_rbf", "a"), ("flat_rbf", "b")]
    assert all(0.0 <= r <= 1.0 for *_, r in test)
    assert cv == [("flat_rbf",)]
    # resumed, the run ends with every test row
    out = run_benchmark(RunOptions(**{**opts.__dict__, "max_cells": None}))
    assert out["complete"]
    con = sqlite3.connect(str(store))
    assert con.execute("SELECT COUNT(*) FROM test").fetchone()[0] == 4
    con.close()


# ----------------------------------------------------------------------------- the data set
def test_lsst_like_data_set_has_lsst_shape():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "make_lsst_like.py"
    spec = importlib.util.spec_from_file_location("make_lsst_like", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    Xtr, ytr, Xte, yte = mod.make(0)
    assert Xtr.shape == (2459, 36, 6) and Xte.shape == (2466, 36, 6)
    _, sizes = np.unique(ytr, return_counts=True)
    assert len(sizes) == 14 and sizes.min() == 20 and sizes.max() == 600
    assert set(np.unique(yte)) == set(np.unique(ytr))
    np.testing.assert_array_equal(mod.make(0)[0], Xtr)  # seeded
    assert not np.array_equal(mod.make(1)[0], Xtr)
