"""The CV rank rules (issue 12, item 4) and the fast path of a CV cell (issue 15, item 3).

Rank rules, on constructed folds whose corpora have fewer components than ``max_rank``:
"ours" pads a fold's ROC-AUC / PR-AUC above its component count M with the rank-M values
(the all-components scores) and maps a plateau up to ``max_rank`` to every component;
"reference" pads with zeros and keeps the first optimal rank. The oracle is the per-rank
computation: ``VarianceNorm(...).conformance(K, alpha, rank=r)`` one (alpha, rank) at a time
and scikit-learn's metrics.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from experiments._grids import build_kernel
from experiments._protocol import (
    Dataset,
    _threads,
    cv_splits,
    run_cv_cell,
    run_test_cell,
    select,
)
from experiments._scorers import pad_rank_metrics, rank_rule, score_fold

PRE = {"max_length": 100, "clip": 5.0, "eps": 1e-4, "basepoint": True}


def _config(**kw) -> dict:
    base = {"folds": 3, "repeats": 2, "seed": 3, "share": "fold", "alphas": [1e-8, 1e-2],
            "max_rank": 9, "sse_lams": [1e-4, 1e-2, 1e-1], "threshold": 1e-10,
            "device": None, "threads": 1, "preprocessing": PRE}  # fmt: skip
    return {**base, **kw}


def _data() -> Dataset:
    """10 series of class "a" (fold corpora of 6 or 7: M = 5 or 6 < max_rank = 9) and 12 of
    class "b" (a drift), T = 12, d = 2."""
    rng = np.random.default_rng(7)

    def draw(n_a, n_b):
        y = np.array(["a"] * n_a + ["b"] * n_b)
        X = np.cumsum(rng.normal(size=(len(y), 12, 2)), axis=1) * 0.3
        X[y == "b"] += np.linspace(0.0, 1.5, 12)[None, :, None]
        return X, y

    Xtr, ytr = draw(10, 12)
    Xte, yte = draw(10, 12)
    return Dataset("constructed", Xtr, ytr, Xte, yte)


CELL = {"cls": "a", "kernel": "flat_rbf", "point": {"sigma": 1.0}, "levels": None,
        "time_channel": False, "scorers": ["conformance", "mahalanobis"]}  # fmt: skip


def _oracle(data: Dataset, config: dict, rule: str) -> tuple[dict, list[int]]:
    """Fold-averaged (roc, pr) arrays (n_alpha, max_rank) per scorer, one (alpha, rank) at a
    time; and the fold component counts."""
    from novelty import VarianceNorm
    from tskernels.transforms import Preprocessor

    X, y = data.X_train, data.y_train
    R, alphas = config["max_rank"], config["alphas"]
    out = {s: [np.zeros((len(alphas), R)), np.zeros((len(alphas), R))] for s in CELL["scorers"]}
    splits = cv_splits(y, config["folds"], config["repeats"], config["seed"])
    Ms = []
    for tr, va in splits:
        corpus = tr[y[tr] == "a"]
        pre = Preprocessor(**PRE).fit(X[corpus])
        C, V = pre.transform(X[corpus]), pre.transform(X[va])
        kernel = build_kernel("flat_rbf", {"sigma": 1.0}, C.shape[2], C.shape[1])
        vn = VarianceNorm(max_rank=R).fit(kernel.gram(C, normalize=True))
        Kvc = kernel.gram(V, C, normalize=True)
        M = vn.n_components_
        Ms.append(M)
        labels = y[va] == "a"
        for s in CELL["scorers"]:
            method = vn.conformance if s == "conformance" else vn.mahalanobis
            for i, a in enumerate(alphas):
                for r in range(R):
                    if r + 1 > M and rule == "reference":
                        continue  # zeros
                    score = 1.0 / (method(Kvc, a, rank=min(r + 1, M)).numpy() + 1e-3)
                    out[s][0][i, r] += roc_auc_score(labels, score) / len(splits)
                    out[s][1][i, r] += average_precision_score(labels, score) / len(splits)
    return out, Ms


@pytest.mark.parametrize("rule", ["ours", "reference"])
def test_cv_cell_rank_rule_against_per_rank_oracle(rule):
    data = _data()
    config = _config(rank_rule=rule)
    rows = {r["scorer"]: r for r in run_cv_cell(CELL, data, config)}
    oracle, Ms = _oracle(data, config, rule)
    assert set(Ms) == {5, 6}  # corpora of 6 and 7 series: fewer components than max_rank
    for s, row in rows.items():
        assert row["error"] is None and row["roc"].shape == (2, 9)
        np.testing.assert_allclose(row["roc"], oracle[s][0], atol=1e-12)
        np.testing.assert_allclose(row["pr"], oracle[s][1], atol=1e-12)


def test_the_two_rules_differ_as_described():
    data = _data()
    ours = {r["scorer"]: r for r in run_cv_cell(CELL, data, _config(rank_rule="ours"))}
    ref = {r["scorer"]: r for r in run_cv_cell(CELL, data, _config(rank_rule="reference"))}
    _, Ms = _oracle(data, _config(), "ours")
    m_min, m_max = min(Ms), max(Ms)
    frac_max = Ms.count(m_max) / len(Ms)  # folds that still have a component at rank m_max
    for s in ours:
        a, b = ours[s]["roc"], ref[s]["roc"]
        # up to the smallest fold's component count the rules agree
        np.testing.assert_array_equal(a[:, :m_min], b[:, :m_min])
        # beyond the largest, ours is a plateau at the all-components value, reference 0
        assert (a[:, m_max:] == a[:, m_max - 1 : m_max]).all()
        assert (b[:, m_max:] == 0).all()
        # in between, the reference's mean counts the folds without that rank as 0
        assert (b[:, m_max - 1] <= frac_max + 1e-12).all()
        assert (b[:, m_max - 1] < a[:, m_max - 1]).all()
    # the selection: ours' plateau selects every component, reference's first optimum
    obj = np.array([[1.0, 1.4, 1.8, 1.8, 0.0, 0.0]])
    rows = {("p", False): {"axis": [1e-8], "roc": obj / 2, "pr": obj / 2, "error": None}}
    assert select(rows, [("p", False)], "reference")["rank"] == 3
    assert select(rows, [("p", False)], "ours")["rank"] == 3  # not a plateau to the end
    obj = np.array([[1.0, 1.4, 1.8, 1.8, 1.8, 1.8]])
    rows = {("p", False): {"axis": [1e-8], "roc": obj / 2, "pr": obj / 2, "error": None}}
    assert select(rows, [("p", False)], "reference")["rank"] == 3
    assert select(rows, [("p", False)], "ours")["rank"] == 6
    with pytest.raises(ValueError, match="rank_rule"):
        select(rows, [("p", False)], "other")


def test_reference_refit_keeps_exactly_the_chosen_rank():
    from novelty import VarianceNorm
    from tskernels.transforms import Preprocessor

    data = _data()
    config = _config(rank_rule="reference")
    sel = {"params": '{"sigma": 1.0}', "time_channel": False, "axis_index": 0,
           "alpha": 1e-8, "rank": 3, "cv_objective": 1.0}  # fmt: skip
    cell = {"cls": "a", "kernel": "flat_rbf", "grid": "g", "levels": None,
            "selections": {"conformance": sel}}  # fmt: skip
    (row,) = run_test_cell(cell, data, config)
    pre = Preprocessor(**PRE).fit(data.X_train[data.y_train == "a"])
    C, Te = pre.transform(data.X_train[data.y_train == "a"]), pre.transform(data.X_test)
    kernel = build_kernel("flat_rbf", {"sigma": 1.0}, C.shape[2], C.shape[1])
    vn = VarianceNorm(max_rank=9).fit(kernel.gram(C, normalize=True))
    assert vn.n_components_ > 3
    score = 1.0 / (vn.conformance(kernel.gram(Te, C, normalize=True), 1e-8, rank=3) + 1e-3)
    assert row["roc_auc"] == pytest.approx(roc_auc_score(data.y_test == "a", score), abs=1e-12)


def test_pad_rank_metrics_and_rule_checks():
    m = np.array([[0.5, 0.7, 0.6], [0.1, 0.2, 0.3]])
    np.testing.assert_array_equal(
        pad_rank_metrics(m, 5, "ours"), [[0.5, 0.7, 0.6, 0.6, 0.6], [0.1, 0.2, 0.3, 0.3, 0.3]]
    )
    np.testing.assert_array_equal(
        pad_rank_metrics(m, 5, "reference"), [[0.5, 0.7, 0.6, 0, 0], [0.1, 0.2, 0.3, 0, 0]]
    )
    np.testing.assert_array_equal(pad_rank_metrics(m, 2, "reference"), m[:, :2])
    assert rank_rule({}) == "ours"
    with pytest.raises(ValueError, match="rank_rule"):
        rank_rule({"rank_rule": "zeros"})


# ----------------------------------------------------------------------------- fast path
def _fold_grams(seed=0, n_c=15, n_o=20):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_c + n_o, 6))
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    K = torch.from_numpy(np.exp(-d2 / 12.0))
    return K[:n_c, :n_c].contiguous(), K[n_c:, :n_c].contiguous(), torch.ones(n_o, dtype=K.dtype)


def test_sse_one_eigendecomposition_equals_one_fit_per_lambda():
    from novelty import SpectralSupport

    Kcc, Koc, d_o = _fold_grams()
    config = _config()
    scores, failed = score_fold(["sse"], Kcc, Koc, d_o, config)
    assert not failed and scores["sse"].shape == (3, 1, 20)
    for i, lam in enumerate(config["sse_lams"]):
        old = -np.asarray(SpectralSupport("tikhonov", lam).fit(Kcc).score(Koc, d_o))
        np.testing.assert_array_equal(scores["sse"][i, 0], old)


def test_unpadded_scores_are_the_first_ranks_of_the_padded_ones():
    Kcc, Koc, d_o = _fold_grams(n_c=6)
    config = _config(max_rank=9)
    padded, _ = score_fold(["conformance", "mahalanobis"], Kcc, Koc, d_o, config)
    short, _ = score_fold(["conformance", "mahalanobis"], Kcc, Koc, d_o, config, pad=False)
    for s in padded:
        M = short[s].shape[1]
        assert M == 5 and padded[s].shape[1] == 9
        np.testing.assert_array_equal(padded[s][:, :M], short[s])
        np.testing.assert_array_equal(padded[s][:, M:], np.repeat(short[s][:, -1:], 4, axis=1))


def test_threads_limit_blas_and_restore():
    from threadpoolctl import threadpool_info

    before = {d["filepath"]: d["num_threads"] for d in threadpool_info()}
    with _threads(1):
        assert all(d["num_threads"] == 1 for d in threadpool_info())
    assert {d["filepath"]: d["num_threads"] for d in threadpool_info()} == before


def test_scorers_read_the_novelty_registry():
    import novelty
    from experiments._grids import scorer_names
    from experiments._scorers import baseline_names, expand_scorers, n_ranks, scorer_axis

    registry = novelty.scorer_registry()
    # the CLI's names are the registry's (read without importing torch), and "baselines"
    assert scorer_names() == [*registry, "baselines"]
    assert baseline_names() == ["knn", "mean_embedding", "ocsvm"]
    config = _config()
    for name, cls in registry.items():
        axis = cls.sweep_axis
        expected = {"alpha": config["alphas"], "lam": config["sse_lams"], None: [0.0]}[axis]
        assert scorer_axis(name, config) == list(expected)
        assert n_ranks(name, config) == (config["max_rank"] if cls.rank_param else 1)
    usable, messages = expand_scorers(["conformance", "baselines", "sse"])
    assert usable == ["conformance", "knn", "mean_embedding", "ocsvm", "sse"] and not messages
