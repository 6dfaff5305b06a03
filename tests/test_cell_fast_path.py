"""The CV cells' fast scoring path (issue 34, item 1: the scoring phase's fixed cost) gives the
arrays of the public path bit for bit, and the public scorers keep their checks.

Oracle: the same cells with ``experiments._protocol.FAST_PATH = False``, which scores every
fold through :func:`experiments._scorers.score_fold` (each scorer's public ``fit``, ``score``,
``sweep``: every check at every call) and computes the metrics scorer by scorer
(:func:`experiments._protocol.fold_metrics`). Every stored array is compared with
``np.array_equal`` (same shape, same bits), every other field with ``==`` (timings aside).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from experiment_helpers import tiny_sines

import experiments._protocol as protocol
from experiments._protocol import Dataset, fold_metrics, fold_metrics_many, run_cv_cell
from experiments._scorers import CellScorers, score_fold
from novelty import (
    ConformanceScorer,
    KNNScorer,
    MahalanobisScorer,
    MeanEmbeddingScorer,
    OCSVMScorer,
    SOSREPScorer,
    SpectralSupport,
    VarianceNorm,
)
from novelty._constraints import _params
from novelty.scorers._validation import check_psd, psd_checks_shared

PRE = {"max_length": 100, "clip": 5.0, "eps": 1e-4, "basepoint": True}
ALL = ["conformance", "mahalanobis", "sse", "sosrep", "knn", "mean_embedding", "ocsvm"]
TIMINGS = ("gram_seconds", "score_seconds", "seconds")


def _data(seed=5) -> Dataset:
    return tiny_sines(seed)


def _config(share: str, **changes) -> dict:
    config = {"folds": 3, "repeats": 2, "seed": 1, "share": share,
              "alphas": [1e-8, 1e-5, 1e-2], "max_rank": 12, "sse_lams": [1e-4, 1e-2, 1e-1],
              "threshold": 1e-10, "preprocessing": PRE, "device": None, "threads": 1,
              "rank_rule": "ours"}  # fmt: skip
    return {**config, **changes}


def _assert_rows_equal(new: list[dict], old: list[dict]) -> None:
    assert len(new) == len(old) > 0
    for a, b in zip(new, old):
        assert set(a) == set(b)
        for key in a:
            if key in TIMINGS:
                continue
            if isinstance(a[key], np.ndarray) or isinstance(b[key], np.ndarray):
                assert a[key].dtype == b[key].dtype, key
                assert np.array_equal(a[key], b[key]), (a["scorer"], key)
            else:
                assert a[key] == b[key], (a["scorer"], key, a[key], b[key])


def _both(monkeypatch, run):
    """``run()`` through the fast path, then through the public one."""
    new = run()
    with monkeypatch.context() as m:
        m.setattr(protocol, "FAST_PATH", False)
        old = run()
    return new, old


CELLS = [
    ("flat_rbf", {"sigma": 1.0}, None, ALL),
    ("gak", {"factor": 1.0}, None, ALL),
    ("flat_linear", {}, None, ["sosrep", "mean_embedding", "ocsvm", "knn", "conformance"]),
    ("trunc_sig_rbf_order1", {"sigma": 1.0, "scale": 1.0}, [1, 2], ["mahalanobis", "sse"]),
]


@pytest.mark.parametrize("share", ["class", "fold"])
@pytest.mark.parametrize("kernel, point, levels, scorers", CELLS)
def test_cv_cell_rows_equal_the_public_path(monkeypatch, share, kernel, point, levels, scorers):
    data, config = _data(), _config(share)
    cell = {"cls": "a", "kernel": kernel, "point": point, "levels": levels,
            "time_channel": True, "scorers": scorers}  # fmt: skip
    new, old = _both(monkeypatch, lambda: run_cv_cell(cell, data, config))
    _assert_rows_equal(new, old)
    assert all(r["error"] is None for r in new if r["scorer"] != "sosrep")


def test_failing_scorers_record_the_same_messages(monkeypatch):
    """A bandwidth so small that the Gram is the identity: SOSREP fails (its message), the
    others score; a bad alpha fails the variance-norm family at its parameter check."""
    data = _data()
    cell = {"cls": "b", "kernel": "flat_rbf", "point": {"sigma": 1e-4}, "levels": None,
            "time_channel": False, "scorers": ALL}  # fmt: skip
    for config in (_config("class"), _config("fold", alphas=[1e-3, -1.0])):
        new, old = _both(monkeypatch, lambda c=config: run_cv_cell(cell, data, c))
        _assert_rows_equal(new, old)
        errors = {r["scorer"]: r["error"] for r in new}
        assert "underflows" in errors["sosrep"]
        if config["alphas"][-1] < 0:
            assert "'alpha' parameter" in errors["conformance"]
            assert errors["mahalanobis"] == errors["conformance"]
        assert errors["knn"] is None and errors["ocsvm"] is None


def test_test_cell_rows_equal_the_public_path(monkeypatch):
    data, config = _data(), _config("class")
    sel = {"params": '{"sigma": 1.0}', "time_channel": True, "axis_index": 1, "alpha": 1e-5,
           "rank": 3, "cv_objective": 1.5}  # fmt: skip
    cell = {"cls": "c", "kernel": "flat_rbf", "grid": "paper", "levels": None,
            "selections": {s: dict(sel, axis_index=0, rank=1) for s in ALL}}  # fmt: skip
    cell["selections"]["conformance"] = sel
    new, old = _both(monkeypatch, lambda: protocol.run_test_cell(cell, data, config))
    _assert_rows_equal(new, old)
    assert all(r["error"] is None for r in new)


def _grams(n=14, m=9, seed=0, linear=False):
    """An RBF Gram (or a normalised linear one, with negative entries) of n corpus points and
    m others: (Kcc, Koc, diagonal of the others)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, 4))
    if linear:
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        K = torch.from_numpy(X @ X.T)
    else:
        K = torch.from_numpy(np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 4.0))
    return K[:n, :n].clone(), K[n:, :n].clone(), torch.ones(m, dtype=K.dtype)


@pytest.mark.parametrize("pad", [True, False])
@pytest.mark.parametrize("linear", [False, True])
def test_scores_and_bad_grams_as_score_fold(pad, linear):
    """The scores of every scorer are those of score_fold, bit for bit; a fold whose Grams
    fail a check is scored by score_fold: the same messages."""
    Kcc, Koc, d_o = _grams(linear=linear)
    config = _config("fold")
    errors = (ValueError, ArithmeticError)
    asym = Kcc.clone()
    asym[0, 1] += 0.1
    nan = Koc.clone()
    nan[2, 3] = float("nan")
    for args in ((Kcc, Koc, d_o), (asym, Koc, d_o), (Kcc, nan, d_o), (Kcc, Koc, d_o[:-1])):
        got = CellScorers(ALL, config).score(*args, errors, pad=pad)
        want = score_fold(ALL, *args, config, errors, pad=pad)
        assert got[1] == want[1]
        assert set(got[0]) == set(want[0])
        for s in want[0]:
            assert np.array_equal(got[0][s], want[0][s]), s
    assert "not symmetric" in score_fold(ALL, asym, Koc, d_o, config, errors)[1]["knn"]


def test_sosrep_that_does_not_converge_is_the_same_failure_on_both_paths(monkeypatch):
    """A SOSREP fit that did not converge is recorded as that scorer's failure (a
    FloatingPointError naming the steps), never scored, by score_fold and the fast path
    alike; the other scorers are still scored."""
    from novelty.scorers._sosrep import SOSREPScorer

    fit = SOSREPScorer._fit

    def not_converged(self, K):
        fit(self, K)
        self.converged_ = False

    monkeypatch.setattr(SOSREPScorer, "_fit", not_converged)
    Kcc, Koc, d_o = _grams(linear=False)
    config, errors = _config("fold"), (ValueError, ArithmeticError)
    got = CellScorers(ALL, config).score(Kcc, Koc, d_o, errors, pad=True)
    want = score_fold(ALL, Kcc, Koc, d_o, config, errors, pad=True)
    assert got[1] == want[1]
    assert set(got[1]) == {"sosrep"} and "did not converge" in got[1]["sosrep"]
    assert "sosrep" not in got[0] and set(got[0]) == set(ALL) - {"sosrep"}


def test_fold_metrics_many_equals_fold_metrics():
    rng = np.random.default_rng(4)
    y = rng.random(30) < 0.4
    arrays = [
        rng.integers(0, 4, size=(3, 5, 30)).astype(float),  # many ties
        rng.normal(size=(2, 1, 30)),
        np.where(rng.random((1, 1, 30)) < 0.2, -np.inf, rng.normal(size=(1, 1, 30))),
        rng.normal(size=(4, 7, 30)),
    ]
    for (auc, ap), scores in zip(fold_metrics_many(arrays, y), arrays):
        want_auc, want_ap = fold_metrics(scores, y)
        assert np.array_equal(auc, want_auc) and np.array_equal(ap, want_ap)
    assert fold_metrics_many([], y) == []
    bad = [arrays[0], np.full((1, 1, 30), np.nan)]
    with pytest.raises(ValueError, match="NaN"):
        fold_metrics_many(bad, y)


def test_public_scorers_keep_their_checks():
    Kcc, Koc, d_o = _grams()
    asym = Kcc.clone()
    asym[0, 1] += 0.1
    for scorer in (MeanEmbeddingScorer(), OCSVMScorer(), KNNScorer(), SOSREPScorer()):
        with pytest.raises(ValueError, match="is not symmetric"):
            scorer.fit(asym)
    not_psd = Kcc.clone() - 2.0 * torch.eye(14, dtype=Kcc.dtype)
    for scorer in (MeanEmbeddingScorer(), OCSVMScorer()):
        with pytest.raises(ValueError, match="not positive semi-definite"):
            scorer.fit(not_psd)
    nan = Koc.clone()
    nan[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        ConformanceScorer().fit(Kcc).score(nan)
    with pytest.raises(ValueError, match="columns"):
        MeanEmbeddingScorer().fit(Kcc).score(Koc[:, :-1], d_o)
    with pytest.raises(ValueError, match="'alpha' parameter"):
        MahalanobisScorer(alpha=-1.0).fit(Kcc)
    scorer = SpectralSupport().fit(Kcc)
    scorer.set_params(lam=0.0)
    with pytest.raises(ValueError, match="'lam' parameter"):
        scorer.score(Koc, d_o)


def test_shared_psd_check_sees_a_changed_gram():
    """Inside psd_checks_shared a Gram changed in place is checked afresh."""
    K, _, _ = _grams()
    with psd_checks_shared():
        check_psd(K, "K", "test")
        check_psd(K, "K", "test")  # reused
        K -= 2.0 * torch.eye(K.shape[0], dtype=K.dtype)
        with pytest.raises(ValueError, match="not positive semi-definite"):
            check_psd(K, "K", "test")


@pytest.mark.parametrize(
    "estimator",
    [ConformanceScorer(alpha=0.3), SpectralSupport("nu", 0.1), SOSREPScorer(seed=3),
     KNNScorer(2, aggregate="mean"), OCSVMScorer(0.2), VarianceNorm(max_rank=None)],
)  # fmt: skip
def test_cached_parameter_names_give_get_params(estimator):
    assert _params(estimator) == estimator.get_params(deep=False)
