"""CV selection of the rank and its transfer to the refit on the whole normal class, and the
single-level truncated signature grids (the reference study's variant)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from experiments._grids import PRESETS, REGISTRY_NAME, build_kernel
from experiments._protocol import (
    Dataset,
    load_dataset,
    params_key,
    run_cv_cell,
    run_test_cell,
    select,
)
from experiments._runner import resolve_kernels

UEA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "uea"
CONFIG = {"folds": 4, "repeats": 1, "seed": 0, "share": "fold", "alphas": [1e-8],
          "max_rank": 50, "sse_lams": [1e-3], "threshold": 1e-10, "device": None,
          "threads": 1, "preprocessing": {"max_length": 100, "clip": 5.0, "eps": 1e-4,
                                          "basepoint": True}}  # fmt: skip


def _row(obj: np.ndarray) -> dict:
    return {"axis": [1e-8, 1e-2], "roc": obj / 2, "pr": obj / 2, "error": None}


def test_rank_plateau_selects_every_component():
    # ranks 3..6 repeat the all-components scores of the folds (corpora of 4 series): the
    # optimum is "all components", i.e. the last rank, not the plateau's first
    obj = np.array([[1.0, 1.2, 1.6, 1.6, 1.6, 1.6], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    sel = select({("p", False): _row(obj)}, [("p", False)])
    assert (sel["rank"], sel["alpha"], sel["cv_objective"]) == (6, 1e-8, pytest.approx(1.6))
    # an interior optimum (the objective falls afterwards) keeps its rank
    obj = np.array([[1.0, 1.7, 1.6, 1.6, 1.6, 1.6], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    assert select({("p", False): _row(obj)}, [("p", False)])["rank"] == 2
    # a tie inside the curve that does not reach the last rank keeps the first rank
    obj = np.array([[1.0, 1.7, 1.7, 1.5, 1.5, 1.5], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    assert select({("p", False): _row(obj)}, [("p", False)])["rank"] == 2


def _conformance_by_hand(B: np.ndarray, S: np.ndarray, alpha: float, rank: int) -> np.ndarray:
    """Protocol section 1 in plain numpy: conformance distances of the rows of S."""
    N = len(B)
    a = B.mean(0)
    A = (B - a[:, None] - a[None] + a.mean()) / N
    s, U = np.linalg.eigh(A)
    s, U = s[::-1], U[:, ::-1]
    M = min(int((s > 1e-10).sum()), rank)
    s, U = s[:M], U[:, :M]
    E = (B - B.mean(1, keepdims=True)) @ U / np.sqrt(N * s)
    P = (S - S.mean(1, keepdims=True)) @ U / np.sqrt(N * s)
    w = s / (s + alpha) ** 2
    return np.sqrt((((P[:, None, :] - E[None]) ** 2) * w).sum(2).min(1))


@pytest.mark.skipif(not (UEA / "Epilepsy").exists(), reason="shared UEA data not available")
def test_epilepsy_sawing_refit_keeps_every_component():
    """Regression: CV on folds of 22-23 sawing series chose rank 22 (= every component in
    each fold) and the refit on all 30 kept only 22 of 29 near-degenerate components: test
    ROC-AUC 0.24. With the plateau rule the refit keeps all 29 (ROC-AUC 0.97)."""
    from tskernels.transforms import Preprocessor

    data = load_dataset("Epilepsy", UEA)
    point = {"sigma": float(f"{math.exp(-1):.12g}")}
    cell = {"cls": "sawing", "kernel": "flat_rbf", "point": point, "levels": None,
            "time_channel": True, "scorers": ["conformance"]}  # fmt: skip
    (row,) = run_cv_cell(cell, data, CONFIG)
    assert row["error"] is None and row["roc"].shape == (1, 50)
    # every fold corpus has at most 22 components: ranks 22..50 are one plateau
    assert np.all(row["roc"][0, 21:] == row["roc"][0, 21])
    key = (params_key(point), True)
    sel = select({key: {"axis": [1e-8], "roc": row["roc"], "pr": row["pr"], "error": None}},
                 [key])  # fmt: skip
    assert sel["rank"] == 50
    test_cell = {"dataset": "Epilepsy", "cls": "sawing", "kernel": "flat_rbf", "grid": "g",
                 "levels": None, "selections": {"conformance": sel}}  # fmt: skip
    (test,) = run_test_cell(test_cell, data, CONFIG)
    # oracle: numpy pre-processing, RBF Gram and conformance with all components
    corpus = data.X_train[data.y_train == "sawing"]
    pre = Preprocessor(time_channel=True).fit(corpus)
    C, Te = pre.transform(corpus), pre.transform(data.X_test)
    n, T, d = C.shape
    sig2 = 2 * (point["sigma"] * math.sqrt(d * T)) ** 2

    def rbf(X, Y):
        x, y = X.reshape(len(X), -1), Y.reshape(len(Y), -1)
        return np.exp(-((x[:, None] - y[None]) ** 2).sum(-1) / sig2)

    labels = data.y_test == "sawing"
    dist = _conformance_by_hand(rbf(C, C), rbf(Te, C), 1e-8, 50)
    assert test["roc_auc"] == pytest.approx(roc_auc_score(labels, 1 / (dist + 1e-3)), abs=1e-9)
    assert test["pr_auc"] == pytest.approx(
        average_precision_score(labels, 1 / (dist + 1e-3)), abs=1e-9
    )
    assert test["roc_auc"] > 0.9
    # what the first rank of the plateau gave at the refit (the bug)
    dist22 = _conformance_by_hand(rbf(C, C), rbf(Te, C), 1e-8, 22)
    assert roc_auc_score(labels, 1 / (dist22 + 1e-3)) < 0.5


def test_single_level_grids():
    grids = PRESETS["paper"].grids
    for name in ("trunc_sig_linear_single", "trunc_sig_rbf_single"):
        assert grids[name].levels == list(range(1, 8)) and not grids[name].default
        k = build_kernel(name, {"scale": 1.0}, 3, 10, levels=[1, 2])
        assert k.levels == "single" and k.level == 2
        assert build_kernel(REGISTRY_NAME[name], {"scale": 1.0}, 3, 10, [1]).levels == (
            "cumulative"
        )
    default, _ = resolve_kernels(None, grids)
    # the default zoo: the order-1 signature kernels; exact and single-level ones are opt-in
    assert {"trunc_sig_linear_order1", "trunc_sig_rbf_order1"} <= set(default)
    assert not {"trunc_sig_linear", "trunc_sig_rbf", "trunc_sig_linear_single"} & set(default)
    named, _ = resolve_kernels(["trunc_sig_linear_single"], grids)
    assert named == ["trunc_sig_linear_single"]


def test_single_level_cv_cell_matches_level_differences():
    """The single-level variant's Gram at level n is 1 + (K_n - K_{n-1}) of the cumulative
    kernel (unnormalised); the CV cell of the single grid scores those Grams."""
    from experiments._protocol import fold_grams

    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 8, 2)).cumsum(1) * 0.3
    cum = build_kernel("trunc_sig_linear", {"scale": 1.0}, 2, 8, levels=[1, 2, 3])
    single = build_kernel("trunc_sig_linear_single", {"scale": 1.0}, 2, 8, levels=[1, 2, 3])
    Kc = cum.gram_levels(X)
    Ks = single.gram_levels(X)
    torch.testing.assert_close(Ks[0], Kc[0])
    torch.testing.assert_close(Ks[1:], 1.0 + Kc[1:] - Kc[:-1])
    Kcc, Koc, _ = fold_grams(single, X[:8], X[8:], [2, 3])
    diag = torch.diagonal(Ks, dim1=1, dim2=2)
    norm = Ks / torch.sqrt(diag[:, :, None] * diag[:, None, :])
    torch.testing.assert_close(Kcc, norm[1:, :8, :8])
    torch.testing.assert_close(Koc, norm[1:, 8:, :8])
    # a small end-to-end CV cell on the single grid
    y = np.array(["a", "b"] * 6)
    data = Dataset("toy", X, y, X, y)
    cell = {"cls": "a", "kernel": "trunc_sig_linear_single", "point": {"scale": 1.0},
            "levels": [1, 2, 3], "time_channel": False, "scorers": ["mahalanobis"]}  # fmt: skip
    rows = run_cv_cell(cell, data, dict(CONFIG, folds=2, max_rank=3))
    assert [r["params"] for r in rows] == [params_key({"scale": 1.0}, lv) for lv in (1, 2, 3)]
    assert all(r["error"] is None for r in rows)


def test_reference_kernel_grids():
    """The reference study's kernels (protocol section 2): the order-1 single-level truncated
    signature kernels with the lifts Linear(scale = s / d) and RBF(sigma sqrt(d)) x amplitude
    s, levels 1..7 (in the default zoo); the randomized signature with the activation first
    (opt-in)."""
    from experiments._grids import REFERENCE_KERNELS

    grids = PRESETS["paper"].grids
    assert set(REFERENCE_KERNELS.values()) <= set(grids)
    assert grids["trunc_sig_linear_order1"].default and grids["trunc_sig_rbf_order1"].default
    assert not grids["rand_sig_tanh_first"].default
    assert grids["trunc_sig_rbf_order1"].levels == list(range(1, 8))
    assert sorted(grids["trunc_sig_rbf_order1"].axes) == ["scale", "sigma"]
    lin = build_kernel("trunc_sig_linear_order1", {"scale": 2.0}, 4, 10, [1, 3])
    assert (lin.discretization, lin.levels, lin.level, lin.scale) == ("order1", "single", 3, 1.0)
    assert lin.static.scale == pytest.approx(2.0 / 4)
    rbf = build_kernel("trunc_sig_rbf_order1", {"scale": 0.5, "sigma": 2.0}, 4, 10, [2])
    assert rbf.static.sigma == pytest.approx(2.0 * 2) and rbf.amplitude == 0.5
    assert (rbf.discretization, rbf.levels, rbf.scale) == ("order1", "single", 1.0)
    rs = build_kernel("rand_sig_tanh_first", {"features": 10, "variance": 0.1, "seed": 1}, 4, 10)
    assert rs.activation_first and rs.n_features == 10 and rs.scale == 0.1
    default, _ = resolve_kernels(None, grids)
    assert "trunc_sig_linear_order1" in default and "rand_sig_tanh_first" not in default
