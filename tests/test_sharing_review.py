"""Review of issue 34 item 1's sharing (order-1 level terms across amplitudes, randomized
signature features solved ahead): the oracle is always a fresh kernel at the cell's own
parameters, computed without any sharing, compared bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import experiments._protocol as protocol
from experiments._protocol import _normalise, _select_levels, fold_grams
from tskernels import RBF, Linear, TruncatedSignatureKernel


def _walks(n, T=10, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)), axis=1) * 0.3


C, O = _walks(5), _walks(4, seed=1)


@pytest.fixture(autouse=True)
def _empty_levels(monkeypatch):
    monkeypatch.setattr(protocol, "_LEVELS", protocol.OrderedDict())
    monkeypatch.setattr(protocol, "_LEVELS_NBYTES", [0])


def _kern(a, static, level=5, **kw):
    return TruncatedSignatureKernel(
        static, level=level, amplitude=a, levels="single", discretization="order1", **kw
    )


def _plain(k, levels):
    """fold_grams' three outputs computed without any sharing."""
    Kcc = _select_levels(k.gram_levels(C, normalize=True), levels)
    Koc = _select_levels(k.gram_levels(O, C, normalize=True), levels)
    d_o = torch.ones(Koc.shape[:2], dtype=Koc.dtype)
    return _normalise(Kcc.double(), Koc.double(), d_o.double())


def _warm(a, static, level=5, **kw):
    """The shared terms computed first at the mantissa of ``a`` (then a is served)."""
    fold_grams(_kern(math.frexp(a)[0], static, level, **kw), C, O, list(range(1, level + 1)))


@pytest.mark.parametrize("static", [RBF(1.0), Linear(1.0), Linear(0.3)], ids=repr)
@pytest.mark.parametrize(
    "a", [2.0**-40, 2.0**40, 3.0, 0.1, 0.75 * 2.0**-40, 1.0, 2.0**-200, 2.0**200]
)
def test_served_scales_bit_equal_to_a_fresh_kernel(static, a):
    """Powers of two and other ratios to the mantissa, down to 2^-200 and up to 2^200 (P_5
    near 2^1000): served terms give the fresh kernel's Grams bit for bit."""
    levels = [1, 2, 3, 4, 5]
    _warm(a, static)
    got = fold_grams(_kern(a, static), C, O, levels)
    for g, e in zip(got, _plain(_kern(a, static), levels)):
        assert torch.equal(g, e)


@pytest.mark.parametrize("a", [2.0**-258, 2.0**-40, 1.0, 2.0**40, 2.0**254])
def test_raw_level_terms_scaled_exactly(a):
    """The raw terms P_m themselves (before the + 1): bit for bit those of a fresh kernel
    wherever those are normal numbers (at 2^-258 the level-4 terms are subnormal in the fresh
    computation, which rounds every product; compared there to 1e-300 absolute, which the
    + 1 hides)."""
    k = _kern(a, RBF(1.0), level=4)
    Xb = k._check_input(C, "X")
    fresh = k._levels_blockwise(Xb, None)
    for _round in range(2):  # computed at the base, then served from the memo
        k = _kern(a, RBF(1.0), level=4)
        with protocol._levels_shared(k):
            shared = k._levels_blockwise(Xb, None)
        normal = fresh.abs() >= torch.finfo(torch.float64).tiny
        assert torch.equal(shared[normal], fresh[normal])
        torch.testing.assert_close(shared, fresh, rtol=1e-12, atol=1e-300)


def test_huge_amplitude_scaled_as_the_fresh_kernel_does():
    """Amplitude 2^255 = 0.5 x 2^256 at level 4: the factor 2^1024 of level 4 is no double
    (the shared path raised OverflowError 'math range error'), though the terms are (the
    mantissa's P_4 is below 1: the fresh kernel's P_4 is finite)."""
    a = 2.0**255
    k = _kern(a, RBF(1.0), level=4)
    Xb = k._check_input(C, "X")
    fresh = k._levels_blockwise(Xb, None)
    assert bool(torch.isfinite(fresh).all())
    k = _kern(a, RBF(1.0), level=4)
    with protocol._levels_shared(k):
        shared = k._levels_blockwise(Xb, None)
    assert torch.equal(shared, fresh)


def test_float32_kernel_scaled_beyond_the_float32_factor_range():
    """A float32 kernel at amplitude 2^25, level 5: the factor 2^130 is no float32 (it was
    taken to float32: inf), though the terms are (the fresh kernel's are finite)."""
    a = 2.0**25
    k = _kern(a, RBF(1.0), level=5, dtype=torch.float32)
    Xb = k._check_input(C, "X")
    fresh = k._levels_blockwise(Xb, None)
    assert bool(torch.isfinite(fresh).all())
    k = _kern(a, RBF(1.0), level=5, dtype=torch.float32)
    with protocol._levels_shared(k):
        shared = k._levels_blockwise(Xb, None)
    assert torch.equal(shared, fresh)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_served_scales_on_the_gpu():
    """On a GPU the terms live on the device (the factors were a CPU tensor of several
    entries: a device mismatch)."""
    levels = [1, 2, 3]
    k = _kern(4.0, RBF(1.0), level=3, device="cuda")
    got = fold_grams(k, C, O, levels)
    exp = _plain(_kern(4.0, RBF(1.0), level=3, device="cuda"), levels)
    for g, e in zip(got, exp):
        assert torch.equal(g.cpu(), e.cpu())


def test_served_terms_are_copies():
    """Mutating what the shared path hands out leaves the memo as it was."""
    k = _kern(2.0, RBF(1.0), level=3)
    Xb = k._check_input(C, "X")
    with protocol._levels_shared(k):
        first = k._diag_levels(Xb)
        first.fill_(123.0)
        again = k._diag_levels(Xb)
    assert torch.equal(again, _kern(2.0, RBF(1.0), level=3)._diag_levels(Xb))


@pytest.mark.parametrize(
    "change",
    [
        {"static": RBF(2.0)},
        {"level": 4},
        {"scale": 0.5},
        {"dtype": torch.float32},
    ],
    ids=["bandwidth", "level", "path scale", "dtype"],
)
def test_no_stale_terms_for_other_parameters(change):
    """The same batches under another parameter (all but the amplitude) are never served the
    first kernel's terms."""
    base = {"static": RBF(1.0), "level": 3}
    fold_grams(_kern(2.0, **base), C, O, [1, 2, 3])
    kw = {**base, **change}
    static, level = kw.pop("static"), kw.pop("level")
    levels = list(range(1, level + 1))
    got = fold_grams(_kern(2.0, static, level, **kw), C, O, levels)
    for g, e in zip(got, _plain(_kern(2.0, static, level, **kw), levels)):
        assert torch.equal(g, e)


def test_no_stale_terms_for_other_lengths_or_padding():
    """Same values but another length of the last series (its padding): its own terms."""
    Cr = [c for c in C]
    Cr[-1] = Cr[-1][:6]
    k = _kern(2.0, RBF(1.0), level=3)
    fold_grams(k, C, O, [1, 2, 3])
    got = fold_grams(_kern(2.0, RBF(1.0), level=3), Cr, O, [1, 2, 3])
    k = _kern(2.0, RBF(1.0), level=3)
    exp = (
        k.gram_levels(Cr, normalize=True),
        k.gram_levels(O, Cr, normalize=True),
    )
    assert torch.equal(got[0], exp[0]) and torch.equal(got[1], exp[1])


def test_byte_count_stays_true_when_the_group_is_dropped_while_computing(monkeypatch):
    """Cells in threads: while one cell computes its terms, others' groups may push its group
    out of the memo; its terms are then used, not kept, and the running byte count stays the
    bytes held (it counted terms stored in the dropped group, for ever)."""
    monkeypatch.setattr(protocol, "_N_LEVEL_GROUPS", 1)
    original = TruncatedSignatureKernel._levels_block
    nested = []

    def meanwhile(self, X, Y, symmetric):
        if not nested:  # another cell, another bandwidth, in between
            nested.append(1)
            fold_grams(_kern(2.0, RBF(3.0), level=3), C, O, [1, 2, 3])
        return original(self, X, Y, symmetric)

    monkeypatch.setattr(TruncatedSignatureKernel, "_levels_block", meanwhile)
    got = fold_grams(_kern(2.0, RBF(1.0), level=3), C, O, [1, 2, 3])
    assert protocol._LEVELS_NBYTES[0] == protocol._levels_nbytes()
    for g, e in zip(got, _plain(_kern(2.0, RBF(1.0), level=3), [1, 2, 3])):
        assert torch.equal(g, e)


def test_terms_too_large_to_keep_drop_no_other_group(monkeypatch):
    """Terms larger than the whole budget are used, not kept, and make no room for
    themselves (the other bandwidths' terms stay)."""
    fold_grams(_kern(2.0, RBF(1.0), level=3), C, O, [1, 2, 3])
    kept = protocol._LEVELS_NBYTES[0]
    monkeypatch.setattr(protocol, "LEVELS_BYTES", kept + 1)
    big = _walks(40, seed=5)
    k = _kern(2.0, RBF(2.0), level=3)
    k.gram_levels(big)  # warm nothing: the plain path
    with protocol._levels_shared(k):
        k.gram_levels(big)
    assert len(protocol._LEVELS) == 2  # the first bandwidth's terms are still there
    assert protocol._LEVELS_NBYTES[0] == protocol._levels_nbytes() == kept


def test_exact_linear_signature_keeps_the_features_when_they_fit():
    """The full-geometric-order (exact) truncated signature with the linear lift: its torch
    recursion costs far more a cell than a feature product (d = 5, N = 7, T = 40, 40 series:
    0.07 CPU s by features, 7.7 s by the recursion; d = 7, N = 5, T = 20: 0.02 against 1.23),
    so ``auto`` takes the features whenever they all fit, as before the order-1 rule (which
    took the recursion here, 10 to 100 times slower); order 1 keeps its cost rule."""
    assert TruncatedSignatureKernel(level=7, scale=0.5)._use_features(40, 5, 40)
    assert TruncatedSignatureKernel(level=5, scale=0.5)._use_features(40, 7, 20)
    order1 = TruncatedSignatureKernel(level=7, scale=0.5, discretization="order1")
    assert not order1._use_features(40, 5, 40)  # 97,655 features against 39^2 x 7 cells
    X = _walks(3, T=6, d=5) * 0.3
    auto = TruncatedSignatureKernel(level=4, scale=0.5).gram_levels(X)
    feats = TruncatedSignatureKernel(level=4, scale=0.5, algorithm="features").gram_levels(X)
    assert torch.equal(auto, feats)


# ------------------------------------------------- randomized signature: folds solved ahead
def _dataset(name, seed, dtype=np.float64, ragged=False):
    from experiments._protocol import Dataset

    rng = np.random.default_rng(seed)
    if ragged:
        X = [np.cumsum(rng.normal(size=(int(T), 2)), 0).astype(dtype) for T in
             rng.integers(6, 16, 30)]  # fmt: skip
    else:
        X = np.cumsum(rng.normal(size=(30, 15, 2)), axis=1).astype(dtype)
    y = np.array(["a", "b", "c"] * 10)
    return Dataset(name, X, y, X[:9], y[:9].copy())


CFG = {"folds": 3, "repeats": 2, "seed": 1, "share": "fold", "alphas": [1e-8, 1e-2],
       "max_rank": 6, "sse_lams": [1e-3, 1e-1], "threshold": 1e-10,
       "preprocessing": {"max_length": 100, "clip": 5.0, "eps": 1e-4, "basepoint": True},
       "device": None, "threads": 1, "rank_rule": "ours"}  # fmt: skip
RAND_CELL = {"cls": "a", "kernel": "rand_sig_tanh", "levels": None, "time_channel": True,
             "point": {"features": 10, "variance": 0.1, "seed": 3},
             "scorers": ["conformance", "mahalanobis"]}  # fmt: skip


def _plain_cell(monkeypatch, data):
    """The cell with nothing shared: no features solved ahead, no memo of draws, features or
    folds."""
    import contextlib

    from experiments._protocol import _fold_inputs, run_cv_cell

    def plain_ahead(cell, data, config, folds, start):
        corpus, va, _ = folds[start]
        C, V = _fold_inputs(data, cell["cls"], corpus, va, bool(cell["time_channel"]), config)
        return {start: (C, V, None)}

    with monkeypatch.context() as m:
        m.setattr(protocol, "_computed_once", lambda k, features=None: contextlib.nullcontext())
        m.setattr(protocol, "_solve_ahead", plain_ahead)
        m.setattr(protocol, "FOLD_MEMO_BYTES", 0)
        m.setattr(protocol, "_FOLD_MEMO", {"group": None, "entries": {}, "nbytes": 0})
        m.setattr(protocol, "_DRAWS", protocol.OrderedDict())
        return run_cv_cell(RAND_CELL, data, CFG)


def _rows_close(a, b):
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        for k in ("scorer", "params", "n_folds", "error", "n_rank"):
            assert ra[k] == rb[k]
        np.testing.assert_allclose(ra["roc"], rb["roc"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(ra["pr"], rb["pr"], rtol=0, atol=1e-12)


def _counted_features(count_calls) -> list:
    from tskernels import RandomizedSignatureKernel

    return count_calls(RandomizedSignatureKernel, "_features", lambda self, X: X.n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ragged", [False, True])
def test_solve_ahead_float32_and_ragged_data(monkeypatch, count_calls, dtype, ragged):
    """float32 or unequal-length data: one solve for the cell's six folds, every feature
    served (no second solve), rows those of the plain cell."""
    from experiments._protocol import run_cv_cell

    data = _dataset("d", 3, dtype, ragged)
    calls = _counted_features(count_calls)
    rows = run_cv_cell(RAND_CELL, data, CFG)
    assert len(calls) == 1
    _rows_close(rows, _plain_cell(monkeypatch, data))
    assert all(r["error"] is None for r in rows)


def test_solve_ahead_budget_of_about_two_folds(monkeypatch, count_calls):
    """A budget that one fold's series pass: the folds go in groups (each at least one fold,
    the last fold of a group the one that passes the budget), every fold solved once."""
    from experiments._protocol import _fold_inputs, _nbytes, cv_splits, run_cv_cell

    data = _dataset("d", 4)
    tr, va = cv_splits(data.y_train, 3, 2, 1)[0]
    C, V = _fold_inputs(data, "a", tr[data.y_train[tr] == "a"], va, True, CFG)
    monkeypatch.setattr(protocol, "SOLVE_AHEAD_BYTES", int(1.5 * (_nbytes(C) + _nbytes(V))))
    calls = _counted_features(count_calls)
    rows = run_cv_cell(RAND_CELL, data, CFG)
    assert len(calls) == 3 and sum(calls) == 6 * 10 + 2 * 20  # folds 2 + 2 + 2
    _rows_close(rows, _plain_cell(monkeypatch, data))


def test_cells_of_two_data_sets_alternating_in_one_process(monkeypatch):
    """One worker runs cells of data sets A, B, A: each gets its own features (rows those of
    its plain cell), whatever the process kept from the other."""
    from experiments._protocol import run_cv_cell

    A, B = _dataset("A", 5), _dataset("B", 6)
    got = [run_cv_cell(RAND_CELL, D, CFG) for D in (A, B, A)]
    plain_a, plain_b = _plain_cell(monkeypatch, A), _plain_cell(monkeypatch, B)
    _rows_close(got[0], plain_a)
    _rows_close(got[1], plain_b)
    _rows_close(got[2], plain_a)
    assert not np.allclose(plain_a[0]["roc"], plain_b[0]["roc"])
