"""fold_grams computes what a fold's three kernel calls share once (issue 34, item 1): the
randomized signature's features of the corpus and of the other series are solved once each,
the PDE signature kernel's diagonal of the other series once, and the Grams are bit for bit
those of the plain calls (the oracle: gram(C), gram(O, C) and diag(O) of a fresh kernel,
normalised the same way)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experiments._protocol import _normalise, fold_grams
from tskernels import GlobalAlignmentKernel, RandomizedSignatureKernel, SignaturePDEKernel


def _walks(n, T=20, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1) * 0.3


def _plain(kernel, C, O):
    if not kernel.get_tag("fit_is_empty"):
        kernel.fit(C)
    Kcc, Koc, d_o = kernel.gram(C)[None], kernel.gram(O, C)[None], kernel.diag(O)[None]
    return _normalise(Kcc.double(), Koc.double(), d_o.double())


@pytest.mark.parametrize("activation_first", [False, True])
def test_randomized_signature_features_solved_once_and_grams_bit_equal(
    monkeypatch, activation_first
):
    C, O = _walks(7), _walks(11, seed=1)
    params = dict(n_features=16, scale=0.3, seed=4, activation_first=activation_first)
    expected = _plain(RandomizedSignatureKernel(**params), C, O)
    calls = []
    original = RandomizedSignatureKernel._features

    def counted(self, X):
        calls.append(X.n)
        return original(self, X)

    monkeypatch.setattr(RandomizedSignatureKernel, "_features", counted)
    kernel = RandomizedSignatureKernel(**params)
    got = fold_grams(kernel, C, O)
    assert sorted(calls) == [7, 11]  # the plain calls solve 7, 7, 11, 11
    for g, e in zip(got, expected):
        assert torch.equal(g, e)
    assert "_features" not in kernel.__dict__  # the memo is gone after the block
    calls.clear()
    kernel.gram(C)
    kernel.gram(C)
    assert calls == [7, 7]


def test_memo_tells_batches_apart_by_value():
    """Two batches of the same shape (and a batch equal to another up to one value) get their
    own features."""
    C = _walks(6)
    O = C.copy()
    O[3, 5, 1] += 1e-9
    kernel = RandomizedSignatureKernel(n_features=8, seed=1)
    Kcc, Koc, d_o = fold_grams(kernel, C, O)
    exp = _plain(RandomizedSignatureKernel(n_features=8, seed=1), C, O)
    assert torch.equal(Koc, exp[1]) and torch.equal(d_o, exp[2]) and torch.equal(Kcc, exp[0])
    assert not torch.equal(Koc[0, 3], Kcc[0, 3])


def test_other_kernels_unchanged():
    C, O = _walks(5), _walks(4, seed=2)
    got = fold_grams(GlobalAlignmentKernel(sigma_factor=1.0), C, O)
    exp = _plain(GlobalAlignmentKernel(sigma_factor=1.0), C, O)
    for g, e in zip(got, exp):
        assert torch.equal(g, e)


def test_pde_signature_diagonal_of_the_others_computed_once(monkeypatch):
    C, O = _walks(5, T=12), _walks(6, T=12, seed=3)
    expected = _plain(SignaturePDEKernel(), C, O)
    calls = []
    original = SignaturePDEKernel._diag

    def counted(self, X):
        calls.append(X.n)
        return original(self, X)

    monkeypatch.setattr(SignaturePDEKernel, "_diag", counted)
    kernel = SignaturePDEKernel()
    got = fold_grams(kernel, C, O)
    assert sorted(calls) == [5, 6]  # the plain calls: 6 (check in gram(O, C)), 5, 6 (diag)
    for g, e in zip(got, expected):
        assert torch.equal(g, e)
    assert "_checked_diag" not in kernel.__dict__
