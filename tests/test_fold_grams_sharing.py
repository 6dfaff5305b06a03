"""fold_grams computes what a fold's three kernel calls share once (issue 34, item 1): the
randomized signature's features of the corpus and of the other series are solved once each,
the PDE signature kernel's diagonal of the other series once, and the Grams are bit for bit
those of the plain calls (the oracle: gram(C), gram(O, C) and diag(O) of a fresh kernel,
normalised the same way)."""

from __future__ import annotations

import contextlib

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


# ----------------------------------------------------------------- pre-processed folds
def _tiny():
    from experiments._protocol import Dataset

    rng = np.random.default_rng(2)
    X = np.cumsum(rng.normal(size=(30, 15, 2)), axis=1)
    y = np.array(["a", "b", "c"] * 10)
    return Dataset("tiny", X, y, X[:9].copy(), y[:9].copy())


PRE = {"max_length": 100, "clip": 5.0, "eps": 1e-4, "basepoint": True}


def _cfg():
    return {"folds": 3, "repeats": 2, "seed": 1, "share": "fold", "alphas": [1e-8, 1e-2],
            "max_rank": 6, "sse_lams": [1e-3, 1e-1], "threshold": 1e-10,
            "preprocessing": PRE, "device": None, "threads": 1,
            "rank_rule": "ours"}  # fmt: skip


def _cell(sigma, tc=True, cls="a"):
    return {"cls": cls, "kernel": "flat_rbf", "point": {"sigma": sigma}, "levels": None,
            "time_channel": tc, "scorers": ["conformance", "mahalanobis"]}  # fmt: skip


def _fits(monkeypatch) -> list:
    from tskernels.transforms import Preprocessor

    calls = []
    original = Preprocessor.fit

    def counted(self, X, y=None):
        calls.append(len(X))
        return original(self, X, y)

    monkeypatch.setattr(Preprocessor, "fit", counted)
    return calls


def _same_rows(a, b):
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        for k in ("scorer", "params", "n_folds", "error", "n_rank"):
            assert ra[k] == rb[k]
        assert np.array_equal(ra["roc"], rb["roc"]) and np.array_equal(ra["pr"], rb["pr"])


def test_folds_preprocessed_once_per_class_and_rows_bit_equal(monkeypatch):
    import experiments._protocol as protocol
    from experiments._protocol import run_cv_cell

    try:
        data, config = _tiny(), _cfg()
        fresh = []
        for sigma in (0.5, 2.0):  # the oracle: every cell with an empty memo
            monkeypatch.setattr(protocol, "_FOLD_MEMO", {"group": None, "entries": {}, "nbytes": 0})
            fresh.append(run_cv_cell(_cell(sigma), data, config))
        monkeypatch.setattr(protocol, "_FOLD_MEMO", {"group": None, "entries": {}, "nbytes": 0})
        calls = _fits(monkeypatch)
        first = run_cv_cell(_cell(0.5), data, config)
        assert len(calls) == 6  # 3 folds x 2 repeats
        second = run_cv_cell(_cell(2.0), data, config)
        assert len(calls) == 6  # the second grid point reuses every fold
        _same_rows(first, fresh[0])
        _same_rows(second, fresh[1])
        run_cv_cell(_cell(2.0, tc=False), data, config)  # another time channel: its own folds
        assert len(calls) == 12
        run_cv_cell(_cell(2.0, cls="b"), data, config)  # another class: the memo starts over
        assert len(calls) == 18
        assert (
            all(k[0] for k in protocol._FOLD_MEMO["entries"])
            and len(protocol._FOLD_MEMO["entries"]) == 6
        )
    finally:
        protocol._FOLD_MEMO.update(group=None, entries={}, nbytes=0)


def test_fold_memo_hands_out_copies_and_keeps_to_its_budget(monkeypatch):
    import experiments._protocol as protocol

    data, config = _tiny(), _cfg()
    monkeypatch.setattr(protocol, "_FOLD_MEMO", {"group": None, "entries": {}, "nbytes": 0})
    corpus, va = np.arange(0, 12, 3), np.arange(12, 30)
    C, V = protocol._fold_inputs(data, "a", corpus, va, True, config)
    C[:] = np.nan
    C2, V2 = protocol._fold_inputs(data, "a", corpus, va, True, config)
    assert np.isfinite(C2).all() and np.array_equal(V, V2)
    monkeypatch.setattr(protocol, "FOLD_MEMO_BYTES", 0)
    monkeypatch.setattr(protocol, "_FOLD_MEMO", {"group": None, "entries": {}, "nbytes": 0})
    calls = _fits(monkeypatch)
    for _ in range(2):
        protocol._fold_inputs(data, "a", corpus, va, True, config)
    assert len(calls) == 2 and protocol._FOLD_MEMO["entries"] == {}


def test_fold_memo_never_serves_a_changed_data_set(monkeypatch):
    import experiments._protocol as protocol

    data, config = _tiny(), _cfg()
    monkeypatch.setattr(protocol, "_FOLD_MEMO", {"group": None, "entries": {}, "nbytes": 0})
    corpus, va = np.arange(0, 12, 3), np.arange(12, 30)
    C, V = protocol._fold_inputs(data, "a", corpus, va, True, config)
    data.X_train[20] += 1.0  # a validation series changes in place
    C2, V2 = protocol._fold_inputs(data, "a", corpus, va, True, config)
    assert np.array_equal(C, C2) and not np.array_equal(V, V2)
    monkeypatch.setattr(protocol, "_FOLD_MEMO", {"group": None, "entries": {}, "nbytes": 0})
    assert all(
        np.array_equal(x, y)
        for x, y in zip((C2, V2), protocol._fold_inputs(data, "a", corpus, va, True, config))
    )


def test_randomized_signature_draws_once_per_cell_and_rows_bit_equal(monkeypatch):
    import experiments._protocol as protocol
    from experiments._protocol import run_cv_cell

    data, config = _tiny(), _cfg()
    cell = {"cls": "a", "kernel": "rand_sig_tanh", "levels": None, "time_channel": True,
            "point": {"features": 10, "variance": 0.1, "seed": 3},
            "scorers": ["conformance", "mahalanobis"]}  # fmt: skip
    draws = []
    original = RandomizedSignatureKernel._draw

    def counted(self, d):
        draws.append(d)
        return original(self, d)

    monkeypatch.setattr(RandomizedSignatureKernel, "_draw", counted)
    monkeypatch.setattr(protocol, "_DRAWS", protocol.OrderedDict())
    monkeypatch.setattr(protocol, "_FOLD_MEMO", {"group": None, "entries": {}, "nbytes": 0})
    rows = run_cv_cell(cell, data, config)
    assert draws == [3]  # 6 folds, 2 batches each: one draw (2 channels + time)
    # the oracle: every kernel call plain (no memo of draws, features or folds)
    monkeypatch.setattr(protocol, "_computed_once", lambda kernel: contextlib.nullcontext())
    monkeypatch.setattr(protocol, "FOLD_MEMO_BYTES", 0)
    monkeypatch.setattr(protocol, "_FOLD_MEMO", {"group": None, "entries": {}, "nbytes": 0})
    plain = run_cv_cell(cell, data, config)
    assert len(draws) == 1 + 24
    _same_rows(rows, plain)
    assert all(r["error"] is None for r in rows)


def test_randomized_signature_draws_kept_within_their_byte_budget(monkeypatch):
    import experiments._protocol as protocol

    C, O = _walks(6), _walks(4, seed=1)
    monkeypatch.setattr(protocol, "_DRAWS", protocol.OrderedDict())
    # a draw of 10 features on 3 channels: 3 * 100 + 3 * 10 + 10 float64 = 2,720 bytes
    monkeypatch.setattr(protocol, "DRAWS_BYTES", 2 * 2720)
    for seed in range(3):
        fold_grams(RandomizedSignatureKernel(n_features=10, seed=seed), C, O)
    assert list(key[-1] for key in protocol._DRAWS) == [3, 3]  # the last two, 5,440 bytes
    assert protocol._draws_nbytes() == 2 * 2720
    monkeypatch.setattr(protocol, "DRAWS_BYTES", 2719)  # one draw is too large: used, not kept
    monkeypatch.setattr(protocol, "_DRAWS", protocol.OrderedDict())
    K = fold_grams(RandomizedSignatureKernel(n_features=10, seed=0), C, O)
    assert not protocol._DRAWS
    for a, b in zip(K, _plain(RandomizedSignatureKernel(n_features=10, seed=0), C, O)):
        assert torch.equal(a, b)
