"""The rank kept by the variance norm (Gram and feature forms): eigenvalues above the
threshold, at most max_rank; a corpus whose points coincide is an error naming the matrix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from novelty import FeatureVarianceNorm, MahalanobisScorer
from novelty.scorers._variance_norm import kept_rank


def test_kept_rank_threshold_and_cap():
    s = torch.tensor([3.0, 1.0, 1e-3, 1e-12])
    assert kept_rank(s, 1e-10, None, "x") == 3
    assert kept_rank(s, 1e-10, 2, "x") == 2
    assert kept_rank(s, 0.5, None, "x") == 2
    with pytest.raises(ValueError, match="no eigenvalue of the thing exceeds threshold=5"):
        kept_rank(s, 5.0, None, "the thing")


def test_coincident_corpus_is_an_error_in_both_forms():
    with pytest.raises(ValueError, match="no eigenvalue of the centred corpus Gram"):
        MahalanobisScorer().fit(np.ones((6, 6)))
    with pytest.raises(ValueError, match="no eigenvalue of the feature covariance"):
        FeatureVarianceNorm().fit(torch.ones(6, 4, dtype=torch.float64))


def test_both_forms_keep_the_same_rank_on_a_linear_kernel():
    # the Gram of features Phi (linear kernel) and their covariance share the nonzero
    # spectrum up to the factor N, so both forms keep the same components
    Phi = torch.from_numpy(np.random.default_rng(0).normal(size=(12, 3)))
    gram = MahalanobisScorer(alpha=1e-8).fit((Phi @ Phi.T).numpy())
    feat = FeatureVarianceNorm().fit(Phi)
    assert gram.n_components_ == feat.n_components_ == 3
