"""Peers written out for the benchmarks: ROCKAD's recipe (:class:`RocketRecipe`), used by the
Mauceri protocol (:mod:`experiments.mauceri`) and the showcase of ``make run``
(:mod:`experiments.showcase`). One implementation, tested against brute force in
tests/test_mauceri.py and tests/test_showcase.py."""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["RocketRecipe"]


class RocketRecipe:
    """ROCKAD's recipe: MiniRocket features (sktime's ``MiniRocketMultivariate``, 10,000
    kernels, ``random_state``) of the corpus, standardised with the corpus's mean and
    standard deviation; normality = minus the mean Euclidean distance to the ``min(k, N)``
    nearest corpus series in that space. X: (n, T, d) array."""

    def __init__(self, random_state: int = 0, n_neighbors: int = 5, num_kernels: int = 10_000):
        self.random_state = random_state
        self.n_neighbors = n_neighbors
        self.num_kernels = num_kernels

    def _features(self, X) -> np.ndarray:
        Xt = np.ascontiguousarray(np.asarray(X, dtype=np.float64).transpose(0, 2, 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(self.rocket_.transform(Xt), dtype=np.float64)

    def fit(self, X):
        from sklearn.neighbors import NearestNeighbors
        from sklearn.preprocessing import StandardScaler
        from sktime.transformations.panel.rocket import MiniRocketMultivariate

        self.rocket_ = MiniRocketMultivariate(
            num_kernels=self.num_kernels, random_state=self.random_state, n_jobs=1
        )
        Xt = np.ascontiguousarray(np.asarray(X, dtype=np.float64).transpose(0, 2, 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.rocket_.fit(Xt)
        F = self._features(X)
        self.scaler_ = StandardScaler().fit(F)
        k = min(self.n_neighbors, len(F))
        self.corpus_features_ = self.scaler_.transform(F)
        self.nn_ = NearestNeighbors(n_neighbors=k).fit(self.corpus_features_)
        return self

    def score_samples(self, X) -> np.ndarray:
        dist, _ = self.nn_.kneighbors(self.scaler_.transform(self._features(X)))
        return -dist.mean(axis=1)

    def held_out_novelty(self) -> np.ndarray:
        """Each corpus series' novelty with itself left out: the mean distance to its
        ``min(k, N - 1)`` nearest *other* corpus series (the recipe's calibration scores)."""
        F = self.corpus_features_
        k = min(self.n_neighbors, len(F) - 1)
        if k < 1:
            raise ValueError("held-out scores need at least 2 corpus series")
        from sklearn.neighbors import NearestNeighbors

        dist, _ = NearestNeighbors(n_neighbors=k + 1).fit(F).kneighbors(F)
        return dist[:, 1:].mean(axis=1)  # dist[:, 0] is the series itself (distance 0)
