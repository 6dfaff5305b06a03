"""A scorer is defined in one place (issue 24, item 2): its class declares its name,
description, parameter constraints, feature form and held-out scoring, and the registry, the
detector, ``approximation=`` and the experiments CLI read them; how the study runs it (family,
CLI grid) is the experiments' table, ``experiments._grids.scorer_setup`` (issue 33).

The proof: a toy scorer (minus the mean kernel value against the corpus), registered with one
line, runs through the detector, the approximate path and a one-cell experiments run, each
checked against a brute-force oracle, and is gone after ``unregister_scorer``."""

from __future__ import annotations

import csv
import sqlite3
from numbers import Real

import numpy as np
import pytest
import torch
from experiment_helpers import run_cli

import tskernels as tk
from experiments._grids import scorer_names, scorer_setup
from experiments._scorers import FAMILIES
from novelty import (
    FeatureScorer,
    GramScorer,
    KernelNoveltyDetector,
    register_scorer,
    scorer_registry,
    unregister_scorer,
)
from novelty.scorers._gram_scorer import Interval


# --------------------------------------------------------------------------- the toy scorer
class FeatureMeanKernel(FeatureScorer):
    r"""Feature form of :class:`MeanKernel`: :math:`-\Phi(y)^\top \bar\Phi`."""

    def __init__(self, offset: float = 0.0):
        self.offset = offset

    def fit(self, Phi, diag=None):
        self.mean_ = torch.as_tensor(Phi, dtype=torch.float64).mean(dim=0)
        return self

    def score(self, Phi_test, diag_test=None):
        return self.offset - torch.as_tensor(Phi_test, dtype=torch.float64) @ self.mean_


class MeanKernel(GramScorer):
    r"""Toy: minus the mean kernel value against the corpus, :math:`-\tfrac1N\sum_i k(y, x_i)`
    (plus ``offset``)."""

    name = "toy_mean_kernel"
    description = "minus the mean kernel value against the corpus (a test's toy)"
    feature_form = FeatureMeanKernel
    _parameter_constraints = {"offset": [Interval(Real, None, None, closed="neither")]}
    requires_diag = False

    def __init__(self, offset: float = 0.0):
        self.offset = offset

    def _fit(self, K):
        self.n_fit_ = K.shape[0]

    def _score(self, K_test, diag_test):
        return self.offset - K_test.mean(dim=1)


@pytest.fixture
def toy():
    register_scorer(MeanKernel)  # the one line that adds a scorer
    yield MeanKernel.name
    unregister_scorer(MeanKernel.name)


def _walks(n, T=12, d=2, seed=0):
    return np.cumsum(np.random.default_rng(seed).normal(size=(n, T, d)), axis=1)


def _cosine(A, B):
    """The normalised flattened linear kernel, by hand: cosines of the flattened series."""
    A = A.reshape(len(A), -1) / np.linalg.norm(A.reshape(len(A), -1), axis=1, keepdims=True)
    B = B.reshape(len(B), -1) / np.linalg.norm(B.reshape(len(B), -1), axis=1, keepdims=True)
    return A @ B.T


# --------------------------------------------------------------------------- end to end
def test_a_registered_toy_scorer_runs_in_the_detector(toy):
    X, Y = _walks(20), _walks(5, seed=1)
    det = KernelNoveltyDetector(
        kernel=tk.FlattenedKernel(tk.Linear()), scorer=toy, preprocess=False
    ).fit(X)
    np.testing.assert_allclose(-det.score_samples(Y), -_cosine(Y, X).mean(axis=1), atol=1e-12)
    # the calibration: each corpus series against the 19 others (leave-one-out refits)
    K = _cosine(X, X)
    loo = -(K.sum(axis=1) - np.diag(K)) / (len(X) - 1)
    np.testing.assert_allclose(np.sort(det.calibration_scores_), np.sort(loo), atol=1e-12)
    # scorer_params reach the class (its constraints are checked)
    det2 = KernelNoveltyDetector(
        kernel=tk.FlattenedKernel(tk.Linear()), scorer=toy, preprocess=False,
        scorer_params={"offset": 2.0},
    ).fit(X)  # fmt: skip
    np.testing.assert_allclose(det2.score_samples(Y), det.score_samples(Y) - 2.0, atol=1e-12)
    with pytest.raises(ValueError, match="offset"):
        KernelNoveltyDetector(
            kernel=tk.FlattenedKernel(tk.Linear()), scorer=toy, scorer_params={"offset": "x"}
        ).fit(X)


def test_a_registered_toy_scorer_runs_on_approximate_features(toy):
    X, Y = _walks(60, seed=2), _walks(6, seed=3)
    kernel = tk.IntegralKernel(tk.RBF(1.0))
    det = KernelNoveltyDetector(
        kernel=kernel, scorer=toy, preprocess=False, approximation="nystroem", n_components=20
    ).fit(X)
    member = det.members_[0]
    assert isinstance(member.scorer_, FeatureMeanKernel)  # the class's feature form
    # oracle: minus each new series' features against the corpus mean feature, by hand
    Phi, _ = member.features_.transform(tk.as_series_batch(X))
    Phi_y, _ = member.features_.transform(tk.as_series_batch(Y))
    want = -(Phi_y.numpy() @ Phi.numpy().mean(axis=0))
    np.testing.assert_allclose(-det.score_samples(Y), want, atol=1e-10)
    # held-out scores of the calibration set H (30 series): leave-one-out refits on the rest
    H = member.calibration_indices_
    P = Phi.numpy()
    loo = [-(P[h] @ np.delete(P, h, axis=0).mean(axis=0)) for h in H]
    np.testing.assert_allclose(member.calibration_, loo, atol=1e-10)


def test_a_scorer_without_feature_form_refuses_approximation(toy):
    class NoFeatures(MeanKernel):
        name = "toy_no_features"
        feature_form = None

    register_scorer(NoFeatures)
    try:
        with pytest.raises(ValueError, match="toy_no_features.*no feature-space version"):
            KernelNoveltyDetector(
                kernel=tk.IntegralKernel(tk.RBF(1.0)), scorer="toy_no_features",
                approximation="nystroem", n_components=5,
            ).fit(_walks(12))  # fmt: skip
    finally:
        unregister_scorer("toy_no_features")


def _write_csv(path, n_per_class=8, T=12):
    rng = np.random.default_rng(0)
    t = np.linspace(0, 2 * np.pi, T)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "time", "c0", "c1", "label"])
        for i, k in enumerate(np.repeat([0.0, 1.5], n_per_class)):
            x = np.stack([np.sin(t + k), np.cos(t + k)], 1) + 0.1 * rng.normal(size=(T, 2))
            for j, row in enumerate(x):
                w.writerow([f"s{i:02d}", j, *row, "ab"[int(k > 0)]])


def test_a_registered_toy_scorer_runs_in_the_experiments_cli(toy, tmp_path, capsys):
    assert toy in scorer_names()  # a CLI name now
    data, store = tmp_path / "tiny.csv", tmp_path / "s.sqlite"
    _write_csv(data)
    argv = ["run", "--dataset", str(data), "--preset", "quick", "--kernels", "flat_rbf",
            "--scorers", toy, "--folds", "2", "--time-channel", "no", "--max-rank", "3",
            "--store", str(store), "--no-progress"]  # fmt: skip
    rc, out, err = run_cli(argv, capsys)
    assert rc == 0, err
    with sqlite3.connect(store) as con:
        rows = con.execute("SELECT scorer, roc_auc, error FROM test").fetchall()
    assert rows and all(s == toy and e is None and 0 <= r <= 1 for s, r, e in rows), rows
    rc, out, _ = run_cli(["list", "--check", "--data-dir", str(tmp_path)], capsys)
    assert rc == 0 and f"{toy:<15} baseline: {MeanKernel.description}" in out


def test_unregistering_removes_the_scorer_everywhere(toy):
    unregister_scorer(toy)
    try:
        assert toy not in scorer_registry() and toy not in scorer_names()
        with pytest.raises(ValueError, match=toy):
            KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.Linear()), scorer=toy).fit(_walks(8))
    finally:
        register_scorer(MeanKernel)  # the fixture unregisters it


def test_register_scorer_refuses_a_taken_name_and_a_bad_class():
    class Impostor(MeanKernel):
        name = "knn"

    with pytest.raises(ValueError, match="'knn' is taken by KNNScorer"):
        register_scorer(Impostor)
    with pytest.raises(TypeError, match="GramScorer subclass"):
        register_scorer(FeatureMeanKernel)
    with pytest.raises(ValueError, match="built-in"):
        unregister_scorer("knn")
    register_scorer(scorer_registry()["knn"])  # the same class again: nothing happens
    assert list(scorer_registry()).count("knn") == 1


# --------------------------------------------------------------------------- declarations
@pytest.mark.parametrize("name", list(scorer_registry()))
def test_every_registered_scorer_declares_its_definition(name):
    cls = scorer_registry()[name]
    assert cls.name == name
    setup = scorer_setup(cls)
    assert setup.family in FAMILIES
    assert isinstance(cls.description, str) and cls.description
    assert set(cls._parameter_constraints) == set(cls().get_params())
    assert (setup.cli_grid is None) == (cls.sweep_axis is None)
    if setup.cli_grid is not None:  # a run-config key of every preset
        from experiments._runner import RunOptions, _effective

        config = _effective(RunOptions(datasets=["BasicMotions"], preset="quick")).config
        assert isinstance(config[setup.cli_grid], list) and config[setup.cli_grid]
    assert callable(cls.held_out_scores) and isinstance(cls.held_out_steps(5), int)
    form = cls.feature_form
    if form is not None:  # takes the Gram class's parameters
        assert issubclass(form, FeatureScorer)
        form(**cls().get_params())


def _features(n, m, seed, unit=False):
    Phi = np.random.default_rng(seed).normal(size=(n, m))
    return Phi / np.linalg.norm(Phi, axis=1, keepdims=True) if unit else Phi


@pytest.mark.parametrize(
    "name", [n for n, c in scorer_registry().items() if c.feature_form is not None]
)
def test_feature_forms_equal_their_gram_scorers_on_exact_features(name):
    # K = Phi Phi^T exactly: the feature form scores as the Gram scorer does (no residual)
    cls = scorer_registry()[name]
    unit = cls.requires_normalized
    P, Q = _features(30, 6, 0, unit), _features(7, 6, 1, unit)
    dp, dq = (P**2).sum(1), (Q**2).sum(1)
    gram = cls().fit(P @ P.T).score(Q @ P.T, dq)
    feature = cls.feature_form(**cls().get_params()).fit(torch.from_numpy(P), dp)
    got = feature.score(torch.from_numpy(Q), torch.from_numpy(dq)).numpy()
    np.testing.assert_allclose(got, gram, rtol=1e-6, atol=1e-8)


def test_a_feature_scorer_must_implement_fit_and_score():
    """The contract is abstract: a class without ``score`` cannot be built; the variance-norm
    engine, which has two scores, says which to call."""
    import torch

    from novelty import FeatureScorer, FeatureVarianceNorm

    class FitOnly(FeatureScorer):
        def fit(self, Phi, diag=None):
            return self

    with pytest.raises(TypeError, match="abstract"):
        FitOnly()
    engine = FeatureVarianceNorm().fit(torch.randn(6, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="mahalanobis.*conformance"):
        engine.score(torch.randn(2, 3, dtype=torch.float64))
