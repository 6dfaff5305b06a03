"""The streamed fit of a memory-mapped corpus holds exact copies out together as the in-memory
fit does, also copies with a NaN gap (filled by ``missing="interpolate"``): their digests are
of the checked series, and so is the comparison that confirms a digest match (it read the raw
rows, NaN included, and never confirmed one)."""

from __future__ import annotations

import numpy as np

import tskernels as tk
from novelty import KernelNoveltyDetector


def test_copies_with_a_gap_are_one_group_in_the_streamed_fit(tmp_path):
    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(40, 12, 1)), axis=1)
    X[5, 3, 0] = np.nan  # a gap, filled by interpolation
    X[6] = X[5]  # an exact copy, gap included
    np.save(tmp_path / "corpus.npy", X)
    mapped = np.load(tmp_path / "corpus.npy", mmap_mode="r")
    kw = dict(kernel=tk.FlattenedKernel(tk.RBF(5.0)), scorer="knn", approximation="features",
              n_components=8)  # fmt: skip
    streamed = KernelNoveltyDetector(**kw).fit(mapped)
    in_memory = KernelNoveltyDetector(**kw).fit(np.array(mapped))
    assert type(streamed.members_[0]).__name__ == "StreamedMember"
    groups = streamed.members_[0].duplicate_groups_
    assert groups is not None and groups[5] == groups[6]
    np.testing.assert_array_equal(groups, in_memory.members_[0].duplicate_groups_)
    np.testing.assert_allclose(
        streamed.calibration_scores_, in_memory.calibration_scores_, rtol=0, atol=1e-6
    )
