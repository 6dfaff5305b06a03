"""Work done once per fit (issue 33 item 2): the corpus is hashed once for the detector and all
its members, and the scorer (not the member) says what it keeps for ``update``
(``GramScorer.extension_state``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tskernels as tk
from novelty import KernelNoveltyDetector, KNNScorer, MeanEmbeddingScorer
from novelty.detector import _members
from novelty.detector._members import (
    duplicate_groups,
    groups_of_digests,
    known_duplicate_groups,
    series_digest,
)


def _walks(n, T=20, d=2, seed=0):
    return np.cumsum(np.random.default_rng(seed).normal(size=(n, T, d)), axis=1)


def _gram(X):
    return torch.as_tensor(tk.FlattenedKernel(tk.RBF(8.0)).gram(X, normalize=True))


# ------------------------------------------------------------------ hashing once
def test_a_fit_hashes_each_corpus_series_once_for_all_members(monkeypatch):
    X = _walks(12)
    X[5] = X[2]  # a copy: the members still get the groups
    calls = []

    def counting(x):
        calls.append(1)
        return series_digest(x)

    monkeypatch.setattr(_members, "series_digest", counting)
    det = KernelNoveltyDetector(contamination=0.2).fit(X)  # default recipe: 3 members (d=2)
    assert len(det.members_) == 3
    assert len(calls) == len(X)  # was len(X) per member and once more for the detector
    for m in det.members_:
        np.testing.assert_array_equal(m.duplicate_groups_, duplicate_groups(X))
    a, b = det.members_[0].duplicate_groups_, det.members_[1].duplicate_groups_
    assert a is not b  # each member owns its array


def test_known_groups_serve_only_that_collection_and_only_inside():
    X = _walks(4)
    Y = X.copy()
    fake = np.array([0, 0, 1, 2])
    with known_duplicate_groups(X, fake):
        np.testing.assert_array_equal(duplicate_groups(X), fake)
        assert duplicate_groups(Y) is None  # an equal collection is hashed, not assumed
    assert duplicate_groups(X) is None


def test_groups_of_digests_reads_only_repeated_digests_and_numbers_by_first_occurrence():
    X = _walks(5)
    S = [X[3], X[1], X[3], X[0], X[1], X[3]]
    reads = []

    def at(i):
        reads.append(i)
        return S[i]

    groups = groups_of_digests([series_digest(x) for x in S], at)
    np.testing.assert_array_equal(groups, [0, 1, 0, 2, 1, 0])
    assert 3 not in reads  # a digest seen once is never read back
    assert groups_of_digests([series_digest(x) for x in X], at) is None


@pytest.mark.parametrize("scorer", ["knn", "mahalanobis"])
def test_a_fit_builds_the_scorer_twice(monkeypatch, scorer):
    """Once to check its parameters before any Gram, once for the member (was five times:
    also for the corpus-size check, the held-out template and the update state); the held-out
    refits are clones of the member's scorer."""
    built = []
    make = _members.make_scorer

    def counting(*args, **kwargs):
        built.append(1)
        return make(*args, **kwargs)

    monkeypatch.setattr(_members, "make_scorer", counting)
    KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.RBF(8.0)), scorer=scorer).fit(_walks(25))
    assert len(built) == 2


# ------------------------------------------------------------------ what update keeps
def test_a_refitting_scorer_keeps_the_gram_itself():
    K = _gram(_walks(6))
    s = MeanEmbeddingScorer().fit(K)
    state = s.extension_state(K)
    assert set(state) == {"gram"} and state["gram"] is K
    assert s.extension_state(K, held_out=False)["gram"] is K


@pytest.mark.parametrize("n_neighbors", [1, 3, 20])
def test_knn_keeps_its_nearest_distances_outside_the_group(n_neighbors):
    X = _walks(8)
    X[6] = X[1]
    K = _gram(X)
    groups = duplicate_groups(X)
    scorer = KNNScorer(n_neighbors=n_neighbors)
    scorer.limit_to_corpus(len(X))
    state = scorer.fit(K).extension_state(K, groups)
    assert set(state) == {"nearest_d2"}
    diag = torch.diagonal(K)
    d2 = (diag[:, None] + diag[None, :] - 2.0 * K).clamp_min(0.0).numpy()
    k = min(n_neighbors, len(X))
    for i in range(len(X)):  # brute force: the sorted distances to the other groups, +inf pad
        others = np.sort(d2[i, groups != groups[i]])
        want = np.r_[others, np.full(len(X), np.inf)][:k]
        np.testing.assert_allclose(state["nearest_d2"][i].numpy(), want, rtol=0, atol=1e-12)
    assert scorer.extension_state(K, groups, held_out=False) == {}
