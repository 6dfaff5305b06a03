"""NaN held-out scores (a scorer that failed) are an error of fit and of update, and an update
that fails leaves the detector as it was (KernelNoveltyDetector._set_calibration: "NaN
held-out scores raise before anything is set"; novelty.detector._update: "an error leaves the
detector as it was")."""

from __future__ import annotations

import pickle
from numbers import Integral

import numpy as np
import pytest
import torch

import tskernels as tk
from novelty import KernelNoveltyDetector, MeanEmbeddingScorer
from novelty._constraints import Interval


class NaNAbove(MeanEmbeddingScorer):
    """The mean-embedding distance, NaN once fitted on more than ``limit`` series."""

    _parameter_constraints = {"limit": [Interval(Integral, 0, None, closed="left")]}

    def __init__(self, limit: int = 0):
        self.limit = limit

    def _score(self, Kt: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
        s = super()._score(Kt, dt)
        return torch.full_like(s, torch.nan) if self.n_corpus_ > self.limit else s


def _walks(n, seed=0):
    return np.cumsum(np.random.default_rng(seed).normal(size=(n, 20, 2)), axis=1)


def _detector(limit):
    kernel = tk.FlattenedKernel(tk.RBF(10.0))
    return KernelNoveltyDetector(kernel=kernel, scorer=NaNAbove(limit), contamination=0.2)


def test_nan_held_out_scores_fail_the_fit():
    with pytest.raises(ValueError, match="held-out novelty scores of the corpus are NaN"):
        _detector(limit=0).fit(_walks(12))


def test_a_failed_update_leaves_the_detector_as_it_was():
    X = _walks(12)
    det = _detector(limit=12).fit(X)  # held-out refits on fewer than 12 series: finite
    assert np.isfinite(det.calibration_scores_).all()
    before = pickle.dumps(det)
    new = _walks(3, seed=1)
    scores = det.score_samples(new)
    with pytest.raises(ValueError, match="held-out novelty scores of the corpus are NaN"):
        det.update(new)  # the union's refits hold 14 series: NaN
    assert pickle.dumps(det) == before
    assert det.n_corpus_ == 12
    np.testing.assert_array_equal(det.score_samples(new), scores)


def test_a_fit_that_fails_on_nan_leaves_the_detector_unfitted():
    from sklearn.exceptions import NotFittedError

    det = _detector(limit=0)
    with pytest.raises(ValueError, match="NaN"):
        det.fit(_walks(12))
    assert not hasattr(det, "members_")
    with pytest.raises(NotFittedError):
        det.score_samples(_walks(3, seed=1))
