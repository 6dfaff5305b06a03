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
    count_calls, activation_first
):
    C, O = _walks(7), _walks(11, seed=1)
    params = dict(n_features=16, scale=0.3, seed=4, activation_first=activation_first)
    expected = _plain(RandomizedSignatureKernel(**params), C, O)
    calls = count_calls(RandomizedSignatureKernel, "_features", lambda self, X: X.n)
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
    monkeypatch.setattr(
        protocol, "_computed_once", lambda kernel, features=None: contextlib.nullcontext()
    )
    monkeypatch.setattr(protocol, "_solve_ahead", _plain_ahead)
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


# ------------------------------------------- issue 34, item 1, fourth pass: across folds, cells
def _plain_ahead(cell, data, config, folds, start):
    """The per-fold path: fold ``start``'s inputs, no features solved ahead."""
    from experiments._protocol import _fold_inputs

    corpus, va, _ = folds[start]
    C, V = _fold_inputs(data, cell["cls"], corpus, va, bool(cell["time_channel"]), config)
    return {start: (C, V, None)}


def _close_rows(a, b, tol=1e-12):
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        for k in ("scorer", "params", "n_folds", "error", "n_rank"):
            assert ra[k] == rb[k]
        np.testing.assert_allclose(ra["roc"], rb["roc"], rtol=0, atol=tol)
        np.testing.assert_allclose(ra["pr"], rb["pr"], rtol=0, atol=tol)


def _ragged(n, seed):
    rng = np.random.default_rng(seed)
    return [np.cumsum(rng.normal(size=(int(T), 3)), axis=0) * 0.3 for T in rng.integers(5, 21, n)]


@pytest.mark.parametrize("activation_first", [False, True])
@pytest.mark.parametrize("ragged", [False, True])
def test_features_of_batches_equal_one_solve_per_batch(activation_first, ragged):
    from tskernels import as_series_batch

    k = RandomizedSignatureKernel(
        n_features=12, scale=0.4, seed=2, activation_first=activation_first
    )
    sets = [_ragged(n, s) if ragged else _walks(n, seed=s) for s, n in enumerate((3, 9, 1, 6))]
    batches = [as_series_batch(X) for X in sets]
    together = k._features_of_batches(batches)
    for b, Z in zip(batches, together):
        alone = k._features(b)
        assert Z.shape == alone.shape
        torch.testing.assert_close(Z, alone, rtol=1e-12, atol=0)
        torch.testing.assert_close(Z, k._euler(b, *k._draw(b.d)), rtol=1e-12, atol=0)


def test_features_in_row_blocks_equal_the_reference(monkeypatch):
    import tskernels._randomized_signature as rs
    from tskernels import as_series_batch

    k = RandomizedSignatureKernel(n_features=8, scale=0.5, seed=1)
    X = as_series_batch(_ragged(23, 4))
    whole = k._features(X)
    monkeypatch.setattr(rs, "ROW_BLOCK_BYTES", 5 * 8 * 3 * 8)  # blocks of 5 rows
    calls = []
    original = RandomizedSignatureKernel._euler_cpu

    def counted(self, Xb, *args):
        calls.append(Xb.n)
        return original(self, Xb, *args)

    monkeypatch.setattr(RandomizedSignatureKernel, "_euler_cpu", counted)
    blocked = k._features(X)
    assert calls == [5, 5, 5, 5, 3]
    torch.testing.assert_close(blocked, whole, rtol=1e-12, atol=0)
    torch.testing.assert_close(blocked, k._euler(X, *k._draw(X.d)), rtol=1e-12, atol=0)


def _rand_cell(cls="a"):
    return {"cls": cls, "kernel": "rand_sig_tanh", "levels": None, "time_channel": True,
            "point": {"features": 10, "variance": 0.1, "seed": 3},
            "scorers": ["conformance", "mahalanobis"]}  # fmt: skip


def _ragged_data():
    from experiments._protocol import Dataset

    X = _ragged(30, 7)
    y = np.array(["a", "b", "c"] * 10)
    return Dataset("ragged", X, y, X[:9], y[:9].copy())


@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize("budget", [None, 1])
def test_cv_cell_solves_every_folds_features_at_once(monkeypatch, count_calls, ragged, budget):
    """A cell's folds are solved as one batch (or one fold a call within a budget of one
    byte): the rows equal those of the per-fold solves to 1e-12 (bit for bit on this
    machine's MKL, but the BLAS does not promise it)."""
    import experiments._protocol as protocol
    from experiments._protocol import run_cv_cell

    data, config = (_ragged_data() if ragged else _tiny()), _cfg()
    if budget is not None:
        monkeypatch.setattr(protocol, "SOLVE_AHEAD_BYTES", budget)
    calls = count_calls(RandomizedSignatureKernel, "_features", lambda self, X: X.n)
    rows = run_cv_cell(_rand_cell(), data, config)
    # 6 folds (3 x 2), each 10 validation series and a corpus of 6 or 7 (20 a repeat)
    assert len(calls) == (1 if budget is None else 6)
    assert sum(calls) == 6 * 10 + 2 * 20
    calls.clear()
    monkeypatch.setattr(protocol, "_solve_ahead", _plain_ahead)
    plain = run_cv_cell(_rand_cell(), data, config)
    assert len(calls) == 12  # a corpus and a validation solve per fold
    _close_rows(rows, plain)
    assert all(r["error"] is None for r in rows)


def test_features_solved_ahead_are_not_served_to_other_parameters():
    """Entries solved for other parameters are ignored (the kernel solves its own)."""
    from experiments._protocol import _draw_key
    from tskernels import as_series_batch

    C, O = _walks(5), _walks(4, seed=1)
    k_other = RandomizedSignatureKernel(n_features=8, seed=9)
    bc, bo = as_series_batch(C), as_series_batch(O)
    wrong = torch.zeros(5, 8), torch.zeros(4, 8)
    feats = ((_draw_key(k_other), bc.values, bc.lengths, wrong[0]),
             (_draw_key(k_other), bo.values, bo.lengths, wrong[1]))  # fmt: skip
    k = RandomizedSignatureKernel(n_features=8, seed=1)
    got = fold_grams(k, C, O, features=feats)
    for g, e in zip(got, _plain(RandomizedSignatureKernel(n_features=8, seed=1), C, O)):
        assert torch.equal(g, e)
    good = tuple((_draw_key(k),) + f[1:3] + (w,) for f, w in zip(feats, wrong))
    with pytest.raises(FloatingPointError, match="k\\(x, x\\) > 0"):  # served: all zeros
        fold_grams(RandomizedSignatureKernel(n_features=8, seed=1), C, O, features=good)


def _empty_levels(monkeypatch):
    import experiments._protocol as protocol

    monkeypatch.setattr(protocol, "_LEVELS", protocol.OrderedDict())
    monkeypatch.setattr(protocol, "_LEVELS_NBYTES", [0])


def _order1_cell(sigma, scale, cls="a"):
    return {"cls": cls, "kernel": "trunc_sig_rbf_order1", "levels": [1, 2, 3, 5],
            "point": {"sigma": sigma, "scale": scale}, "time_channel": True,
            "scorers": ["conformance", "mahalanobis"]}  # fmt: skip


def test_order1_level_terms_shared_across_amplitudes_bit_equal(monkeypatch, count_calls):
    """The five amplitudes (powers of two) of one bandwidth: the level terms are computed
    for the first cell only, and every cell's rows are bit for bit those computed afresh."""
    import experiments._protocol as protocol
    from experiments._protocol import run_cv_cell
    from tskernels import TruncatedSignatureKernel

    data, config = _tiny(), _cfg()
    _empty_levels(monkeypatch)
    calls = count_calls(
        TruncatedSignatureKernel, "_levels_block", lambda self, *a: float(self.amplitude)
    )
    scales = (0.25, 0.5, 1.0, 2.0, 4.0)
    shared = [run_cv_cell(_order1_cell(0.5, a), data, config) for a in scales]
    n_first = len(calls)
    assert n_first > 0 and set(calls) == {0.5}  # the first cell, at the base amplitude 1 / 2
    other = run_cv_cell(_order1_cell(2.0, 4.0), data, config)  # another bandwidth: its own
    assert len(calls) == 2 * n_first
    calls.clear()
    fresh = []
    for a in scales:
        _empty_levels(monkeypatch)
        fresh.append(run_cv_cell(_order1_cell(0.5, a), data, config))
    assert len(calls) == 5 * n_first
    monkeypatch.setattr(protocol, "_levels_shared", lambda kernel: contextlib.nullcontext())
    plain = [run_cv_cell(_order1_cell(0.5, a), data, config) for a in scales]
    assert calls[5 * n_first :] == [a for a in scales for _ in range(n_first)]
    for s, f, p in zip(shared, fresh, plain):
        _same_rows(s, p)
        _same_rows(f, p)
    _same_rows(other, run_cv_cell(_order1_cell(2.0, 4.0), data, config))


def test_order1_level_terms_shared_by_mantissa_bit_equal(monkeypatch, count_calls):
    """Amplitudes 3 and 0.75 (= 3 / 4) share the base kernel of amplitude 0.75; 0.3 has its
    own; every Gram is bit for bit the plain one, and the methods are restored."""
    import experiments._protocol as protocol
    from tskernels import RBF, TruncatedSignatureKernel

    C, O = _walks(5, T=10), _walks(4, T=10, seed=1)
    _empty_levels(monkeypatch)
    calls = count_calls(
        TruncatedSignatureKernel, "_levels_block", lambda self, *a: float(self.amplitude)
    )

    def kern(a):
        return TruncatedSignatureKernel(
            RBF(1.0), level=3, amplitude=a, levels="single", discretization="order1"
        )

    for a in (3.0, 0.75, 0.3):
        k = kern(a)
        got = fold_grams(k, C, O, [1, 2, 3])
        assert "_levels_block" not in k.__dict__ and "_diag_levels" not in k.__dict__
        exp = (kern(a).gram_levels(C, normalize=True), kern(a).gram_levels(O, C, normalize=True))
        assert torch.equal(got[0], exp[0]) and torch.equal(got[1], exp[1])
    assert len(protocol._LEVELS) == 2  # mantissas 0.75 and 0.6
    # each a's Kcc and Koc blocks: the base's for 3.0, none for 0.75 (served), the base's for
    # 0.3; each followed by the plain oracle's at a itself
    assert calls == [0.75, 0.75, 3.0, 3.0, 0.75, 0.75, 0.6, 0.6, 0.3, 0.3]


def test_order1_linear_signature_cells_share_their_scales_bit_equal(monkeypatch):
    """trunc_sig_linear_order1: the static Linear(s / d) of the five scales (powers of two)
    share one recursion per batch pair; every cell's rows are bit for bit the plain ones."""
    import experiments._protocol as protocol
    from experiments._protocol import run_cv_cell

    data, config = _tiny(), _cfg()
    _empty_levels(monkeypatch)

    def cell(scale):
        return {"cls": "b", "kernel": "trunc_sig_linear_order1", "levels": [1, 2, 4, 7],
                "point": {"scale": scale}, "time_channel": True,
                "scorers": ["conformance", "mahalanobis"]}  # fmt: skip

    scales = (0.25, 0.5, 1.0, 2.0, 4.0)
    shared = [run_cv_cell(cell(a), data, config) for a in scales]
    assert len(protocol._LEVELS) == 1
    monkeypatch.setattr(protocol, "_levels_shared", lambda kernel: contextlib.nullcontext())
    for a, rows in zip(scales, shared):
        _same_rows(rows, run_cv_cell(cell(a), data, config))
        assert all(r["error"] is None for r in rows)


def test_order1_level_terms_kept_within_their_budget(monkeypatch):
    import experiments._protocol as protocol
    from tskernels import RBF, TruncatedSignatureKernel

    C, O = _walks(5, T=10), _walks(4, T=10, seed=1)

    def kern(sigma):
        return TruncatedSignatureKernel(RBF(sigma), level=3, amplitude=2.0, discretization="order1")

    _empty_levels(monkeypatch)
    monkeypatch.setattr(protocol, "LEVELS_BYTES", 0)
    got = fold_grams(kern(1.0), C, O, [1, 3])
    assert protocol._levels_nbytes() == 0 == protocol._LEVELS_NBYTES[0]
    assert torch.equal(got[1], kern(1.0).gram_levels(O, C, normalize=True)[[0, 2]])
    # one bandwidth's terms (Kcc, Koc, the two diagonals: 3 x (25 + 20 + 4 + 5) float64)
    _empty_levels(monkeypatch)
    monkeypatch.setattr(protocol, "LEVELS_BYTES", 3 * 54 * 8)
    fold_grams(kern(1.0), C, O, [1, 3])
    assert protocol._LEVELS_NBYTES[0] == 3 * 54 * 8 == protocol._levels_nbytes()
    fold_grams(kern(2.0), C, O, [1, 3])  # the older bandwidth's terms make room
    assert [g[1] for g in protocol._LEVELS] == [
        repr(sorted(kern(2.0).set_params(amplitude=0.5).get_params(deep=True).items()))
    ]
    assert protocol._LEVELS_NBYTES[0] == protocol._levels_nbytes() == 3 * 54 * 8
    monkeypatch.setattr(protocol, "_N_LEVEL_GROUPS", 1)
    monkeypatch.setattr(protocol, "LEVELS_BYTES", 2**20)
    for sigma in (0.5, 3.0):
        fold_grams(kern(sigma), C, O, [1, 3])
    assert len(protocol._LEVELS) == 1
    assert protocol._LEVELS_NBYTES[0] == protocol._levels_nbytes() == 3 * 54 * 8


def test_order1_linear_signature_uses_the_recursion_when_features_cost_more():
    """The order-1 linear signature at level 7 on 7 channels and 30 steps: 960,799 features a
    series against 29^2 x 7 recursion cells a pair; the auto rule takes the recursion (it took
    the features whenever they fit). The two agree to 1e-12."""
    from tskernels import TruncatedSignatureKernel

    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(3, 30, 7)), axis=1) * 0.2

    def kern(algorithm):
        return TruncatedSignatureKernel(
            level=7, scale=0.5, levels="single", discretization="order1", algorithm=algorithm
        )

    assert not kern("auto")._use_features(3, 7, 30)
    assert kern("auto")._use_features(3, 2, 30)  # 254 features: cheaper, and they fit
    auto = kern("auto").gram_levels(X, normalize=True)
    feats = kern("features").gram_levels(X, normalize=True)
    torch.testing.assert_close(
        auto, kern("recursion").gram_levels(X, normalize=True), rtol=0, atol=0
    )
    torch.testing.assert_close(auto, feats, rtol=1e-12, atol=1e-12)
