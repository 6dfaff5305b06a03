"""The peers' input: missing values filled by the rule our detector applies itself, unequal
lengths resampled linearly to the corpus's longest (:func:`novelty._missing.resample_linear`,
the one implementation), and PyOD's flattened rows (:class:`Flattener`, over
:class:`tskernels.transforms.Preprocessor`). Our detectors get the raw series instead."""

from __future__ import annotations

import numpy as np

__all__ = ["Flattener", "fill_missing", "flatten_pair", "lengths", "peer_input", "to_length"]

#: PyOD's flattening: pooled to <= MAX_LENGTH steps, z-scored with EPS, clipped at CLIP.
MAX_LENGTH = 100
EPS = 1e-4
CLIP = 5.0


def lengths(X) -> list[int]:
    """The series' lengths: (n, T, d) array or list of (T_i, d) arrays."""
    return [X.shape[1]] * len(X) if isinstance(X, np.ndarray) else [len(x) for x in X]


def to_length(X, length: int) -> np.ndarray:
    """(n, length, d) float64 array; series of another length are resampled linearly
    (:func:`novelty._missing.resample_collection`)."""
    from novelty._missing import resample_collection

    return resample_collection(X, length)


def fill_missing(X):
    """The series with NaN filled by :func:`novelty.interpolate_missing` (the same container
    back, untouched when there is no NaN)."""
    if isinstance(X, np.ndarray):
        if not np.isnan(X).any():
            return X
        from novelty import interpolate_missing

        return np.stack([interpolate_missing(x, name=f"X[{i}]") for i, x in enumerate(X)])
    if not any(np.isnan(x).any() for x in X):
        return X
    from novelty import interpolate_missing

    return [interpolate_missing(x, name=f"X[{i}]") for i, x in enumerate(X)]


def peer_input(corpus, test) -> tuple[np.ndarray, np.ndarray]:
    """(corpus, test) as (n, T, d) arrays for a peer: NaN filled (:func:`fill_missing`), then
    every series resampled to the corpus's maximum length (:func:`to_length`)."""
    corpus, test = fill_missing(corpus), fill_missing(test)
    length = max(lengths(corpus))
    return to_length(corpus, length), to_length(test, length)


class Flattener:
    """The PyOD input: resample to the corpus's maximum length (if lengths differ), then the
    protocol's :class:`~tskernels.transforms.Preprocessor` without basepoint (average pool,
    window ``1 + (T - 1) // 100``; z-score per (time step, channel) with corpus statistics,
    eps 1e-4; clip to +-5), flattened to (n, T' d)."""

    def fit(self, corpus) -> Flattener:
        from tskernels.transforms import Preprocessor

        self.length_ = max(lengths(corpus))
        pre = Preprocessor(max_length=MAX_LENGTH, clip=CLIP, eps=EPS, basepoint=False)
        self.preprocessor_ = pre.fit(to_length(corpus, self.length_))
        return self

    def transform(self, X) -> np.ndarray:
        Z = self.preprocessor_.transform(to_length(X, self.length_))
        return Z.reshape(len(Z), -1)


def flatten_pair(corpus, test) -> tuple[np.ndarray, np.ndarray]:
    """(corpus rows, test rows) of a :class:`Flattener` fitted on the corpus."""
    f = Flattener().fit(corpus)
    return f.transform(corpus), f.transform(test)
