"""The report's explanation of below-chance kernels (issue 34, item 3): the chance-level
spread of a mean ROC-AUC, the measured one-versus-rest effect of a quiet class inside a
high-variance normal class, and the notes that combine them."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import experiments._report as report
from experiments.data import UserData


def test_chance_sd_matches_simulation():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(4000, 40))  # the first 10 of each row are the normal series
    ranks = scores.argsort(axis=1).argsort(axis=1) + 1  # Mann-Whitney: AUC from rank sums
    aucs = (ranks[:, :10].sum(axis=1) - 10 * 11 / 2) / (10 * 30)
    y = np.r_[np.ones(10), np.zeros(30)]
    assert aucs[0] == pytest.approx(roc_auc_score(y, scores[0]))
    sd = report.chance_sd(10, 30)
    assert sd == pytest.approx(np.sqrt(41 / 3600))
    assert np.std(aucs) == pytest.approx(sd, rel=0.05)  # 4000 draws: SE of an SD ~ 1.1 %


def _quiet_inside_loud(seed=0):
    """'loud' series with large per-step spread, 'quiet' near zero, 'shifted' far off."""
    rng = np.random.default_rng(seed)

    def make(n):
        loud = 3.0 * rng.normal(size=(n, 20, 2))
        quiet = 0.1 * rng.normal(size=(n, 20, 2))
        shifted = 10.0 + rng.normal(size=(n, 20, 2))
        return np.concatenate([loud, quiet, shifted]), np.repeat(["loud", "quiet", "shifted"], n)

    (Xtr, ytr), (Xte, yte) = make(8), make(6)
    return UserData("toy", Xtr, ytr, Xte, yte, "toy")


def test_centre_check_finds_the_quiet_class(monkeypatch):
    monkeypatch.setattr("experiments.data.load_data", lambda name: _quiet_inside_loud())
    out = report.centre_check("toy", ["loud", "quiet"], {"basepoint": False, "clip": None})
    assert out["counts"]["loud"] == (6, 12)
    assert out["auc"]["loud"]["quiet"] == 0.0  # every quiet series nearer the centre
    assert out["auc"]["loud"]["shifted"] == 1.0
    assert out["auc"]["quiet"] == {"loud": 1.0, "shifted": 1.0}


def test_centre_check_without_data_is_none(monkeypatch):
    def missing(name):
        raise FileNotFoundError(name)

    monkeypatch.setattr("experiments.data.load_data", missing)
    assert report.centre_check("gone", ["a"], {}) is None


class _Store:
    def settings(self):
        return {"s": {"preprocessing": {"basepoint": False, "clip": None}}}


def test_below_chance_explained_names_classes_spread_and_effect(monkeypatch):
    monkeypatch.setattr("experiments.data.load_data", lambda name: _quiet_inside_loud())
    rows = [
        {"dataset": "toy", "class": c, "kernel": "k", "scorer": "knn", "roc_auc": v}
        for c, v in (("loud", 0.2), ("quiet", 0.45), ("shifted", 0.6))
    ]
    monkeypatch.setattr(report, "per_class", lambda store, setting: rows)
    res = {("toy", "k", "knn"): {"roc_auc": 0.4167}, ("toy", "j", "knn"): {"roc_auc": 0.9}}
    (lines,) = report.below_chance_explained(_Store(), "s", res).values()
    text = "\n".join(lines)
    assert "loud: k/knn 0.20" in text and "quiet: k/knn 0.45" in text
    assert "shifted: " not in lines[0]  # 0.6 is not below chance
    sd = report.chance_sd(6, 12) / np.sqrt(3)  # the mean over the 3 classes of the rows
    assert f"standard deviation of {sd:.3f}" in text
    assert "loud normal: quiet 0.00" in text
    assert "1 of the 2 per-class entries below 0.5 have such a normal class" in text
    assert "the other 1 (quiet normal) are not explained" in text
    assert (
        report.below_chance_explained(
            _Store(), "s", {("toy", "j", "knn"): res[("toy", "j", "knn")]}
        )
        == {}
    )
