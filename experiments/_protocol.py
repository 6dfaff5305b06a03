"""The one-versus-rest protocol (sections 3 to 5): CV splits, the Grams of a fold, the CV
cells, hyper-parameter selection and the test evaluation.

A *CV cell* is (data set, normal class, kernel, kernel grid point, time channel): for every
fold of the repeated stratified k-fold on the training split it computes one Gram over the
fold's normal corpus and its validation series, scores the validation series with every
scorer for every (alpha, rank) at once, and averages ROC-AUC and PR-AUC over the folds. A
kernel with a pass axis (the truncation level of the signature kernels) yields every level
from the same Gram pass.

What is shared. The pre-processing (z-score) is fitted on the normal corpus, so a Gram
depends on (fold, class, kernel parameters, time channel); every alpha, rank, level and
scorer share it. With ``share="class"`` the pre-processing is fitted once per class on the
whole normal training class, and one Gram of (all training series) x (class series) serves
every fold by slicing (k x r times fewer kernel evaluations; the z-score statistics then
include the fold's held-out normal series). The default ``share="fold"`` is the protocol.
Exact reuse, bit for bit: a process keeps the pre-processed folds of the (data set, class)
whose cells it is computing (every grid point and kernel of a class uses the same ones), and
a fold's three kernel calls compute what they share once (:func:`_computed_once`).

A *test cell* is (data set, class, kernel): for each scorer the CV optimum of ROC-AUC + PR-AUC
(first in grid order on ties) is refitted on the whole normal training class and evaluated
on the test split, the normal class positive.

The rank. A fold's corpus of N' series has at most N' - 1 components, and a rank r above
that scores with all of them; the whole class at the refit has more. When the CV objective
stays constant from the best rank up to ``max_rank`` (the plateau of ranks that all meant
"every component" in the folds), the selection is ``max_rank``, i.e. every component at the
refit too. Taking the plateau's first rank instead would keep only r of the refit's
components: on Epilepsy/sawing (30 series, folds of 22-23) the flattened RBF conformance
chose r = 22 (CV objective 1.9) and the refit dropped 7 of 29 near-degenerate components,
test ROC-AUC 0.24 instead of 0.97.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.model_selection import RepeatedStratifiedKFold

from ._grids import build_kernel
from ._metrics import _check as _check_metric_inputs
from ._metrics import roc_auc_and_average_precision
from ._scorers import CellScorers, n_ranks, pad_rank_metrics, rank_rule, score_fold, scorer_axis

__all__ = [
    "Dataset",
    "cv_splits",
    "fold_grams",
    "run_cv_cell",
    "run_test_cell",
    "select",
    "params_key",
]

#: Errors recorded in the store for a cell (a diverging kernel, a non-PSD Gram); anything
#: else (TypeError, KeyError, torch's RuntimeError for shape bugs, ...) is a bug and propagates.
RECORDED_ERRORS = (ValueError, ArithmeticError)  # ArithmeticError covers FloatingPointError

#: Cells score their folds through :class:`experiments._scorers.CellScorers` (checks once per
#: cell and fold) and compute a fold's metrics for all scorers at once
#: (:func:`fold_metrics_many`); False: :func:`experiments._scorers.score_fold` and
#: :func:`fold_metrics` per scorer, the reference the fast path equals bit for bit
#: (tests/test_cell_fast_path.py).
FAST_PATH = True


@dataclass(frozen=True)
class Dataset:
    """One UEA data set: arrays (n, T, d) or lists of (T_i, d); labels as strings."""

    name: str
    X_train: object
    y_train: np.ndarray
    X_test: object
    y_test: np.ndarray

    @property
    def classes(self) -> list[str]:
        return sorted(np.unique(self.y_train).tolist())

    @property
    def equal_length(self) -> bool:
        return not isinstance(self.X_train, list) and not isinstance(self.X_test, list)


def load_dataset(name: str, data_dir=None) -> Dataset:
    from .data import load_uea

    Xtr, ytr = load_uea(name, "train", data_dir=data_dir)
    Xte, yte = load_uea(name, "test", data_dir=data_dir)
    return Dataset(name, Xtr, np.asarray(ytr).astype(str), Xte, np.asarray(yte).astype(str))


def take(X, idx):
    """Rows ``idx`` of an array (n, T, d) or of a list of series."""
    if isinstance(X, list):
        return [X[int(i)] for i in idx]
    return X[np.asarray(idx)]


def cv_splits(y: np.ndarray, folds: int, repeats: int, seed: int) -> list[tuple]:
    """(train indices, validation indices) of repeated stratified k-fold, seeded."""
    rskf = RepeatedStratifiedKFold(n_splits=folds, n_repeats=repeats, random_state=seed)
    return list(rskf.split(np.zeros(len(y)), y))


def params_key(point: dict, level: int | None = None) -> str:
    """The canonical JSON of a kernel grid point (plus the level of a pass kernel)."""
    p = dict(point)
    if level is not None:
        p["level"] = int(level)
    return json.dumps(p, sort_keys=True)


def _shape(X) -> tuple[int, int]:
    """(d, T) of a pre-processed batch (T = the longest series)."""
    if isinstance(X, list):
        return X[0].shape[1], max(x.shape[0] for x in X)
    return X.shape[2], X.shape[1]


def _normalise(Kcc, Koc, d_o):
    dc = torch.diagonal(Kcc, dim1=-2, dim2=-1)
    for diag, name in ((dc, "corpus"), (d_o, "others")):
        if bool((diag <= 0).any()):
            raise FloatingPointError(
                f"normalisation needs k(x, x) > 0; the {name} diagonal holds "
                f"{float(diag.min()):.3g}"
            )
    # k(x, y) / (sqrt k(x, x) sqrt k(y, y)): the product of the roots, never the root of the
    # product (which overflows once k(x, x) k(y, y) passes 1.8e308, signature kernels do)
    sc, so = torch.sqrt(dc), torch.sqrt(d_o)
    Kcc = Kcc / sc[..., :, None] / sc[..., None, :]
    Kcc = 0.5 * (Kcc + Kcc.transpose(-1, -2))
    torch.diagonal(Kcc, dim1=-2, dim2=-1).fill_(1.0)
    Koc = Koc / so[..., :, None] / sc[..., None, :]
    return Kcc, Koc, torch.ones_like(d_o)


def fold_grams(kernel, C, O, levels: list[int] | None = None, features=None):
    """Normalised Grams of corpus ``C`` and others ``O``: (Kcc (L, N, N), Koc (L, n, N),
    diag of O (L, n)), L = len(levels) for a pass kernel (``gram_levels``), else 1.

    A kernel with a data-dependent parameter (``fit``, e.g. the GAK median heuristic) is
    fitted on the corpus first, so corpus and others see the same kernel. ``features``: a
    randomized-signature kernel's features of C and O solved ahead (:func:`_solve_ahead`),
    as ((draw key, values, lengths, Z) of C, the same of O); served when the kernel's
    parameters and the checked batches' values and lengths are those they were solved for."""
    if not kernel.get_tag("fit_is_empty"):
        kernel.fit(C)
    if levels is None:
        with _computed_once(kernel, features):
            Kcc = kernel.gram(C)[None]
            Koc = kernel.gram(O, C)[None]
            d_o = kernel.diag(O)[None]
    else:
        with _levels_shared(kernel):
            Kcc = _select_levels(kernel.gram_levels(C, normalize=True), levels)
            Koc = _select_levels(kernel.gram_levels(O, C, normalize=True), levels)
        d_o = torch.ones(Koc.shape[:2], dtype=Koc.dtype, device=Koc.device)
    return _normalise(Kcc.to(torch.float64), Koc.to(torch.float64), d_o.to(torch.float64))


@contextmanager
def _computed_once(kernel, features=None):
    """Inside the block the kernel computes what ``gram(C)``, ``gram(O, C)`` and ``diag(O)``
    share once per batch:

    - a randomized-signature kernel (an inner product of explicit features, ``_features``)
      solves the controlled ODE once for C and once for O (the three calls solve it for C
      twice and for O twice: half of a per-fold Gram's time);
    - its random draws (A, b, Z_0: a function of the kernel's parameters and the channel
      count) are taken from the process's last few draws (``_DRAWS``): a cell's 40 folds
      draw once (a draw of 200 features and 26 channels takes 25 ms, 13 % of such a cell);
    - a kernel that checks K(x, x) of both inputs of a cross Gram (``_checks_cross_diag``:
      the PDE signature kernels) computes the diagonal of O once (``gram(O, C)`` computes it
      for its check, ``diag(O)`` again).

    A batch is recognised by its values and lengths (compared exactly), the results are the
    kernel's own (handed out as copies), so every Gram is bit for bit the one computed without
    the block. Other kernels: no-op.

    ``features``: entries (draw key, values, lengths, Z) the randomized signature's memo starts
    with (features solved ahead for this kernel's parameters, :func:`_solve_ahead`); an entry
    of other parameters is ignored."""
    from tskernels import RandomizedSignatureKernel

    names = []
    if isinstance(kernel, RandomizedSignatureKernel):
        names.append("_features")
        kernel._draw = _draw_once(kernel)
    if type(kernel)._checks_cross_diag:
        names.append("_checked_diag")
    for name in names:
        seed = None
        if name == "_features" and features:
            key = _draw_key(kernel)
            seed = [entry[1:] for entry in features if entry[0] == key]
        setattr(kernel, name, _once(getattr(kernel, name), seed))  # shadows the method
    if isinstance(kernel, RandomizedSignatureKernel):
        names.append("_draw")
    try:
        yield
    finally:
        for name in names:
            delattr(kernel, name)


#: The last randomized-signature draws, (kernel class, parameters, device, dtype, d) -> draws.
_DRAWS: OrderedDict = OrderedDict()
_N_DRAWS = 4
#: The most bytes those draws keep (a draw holds d M^2 + d M + M numbers: 200 features on 26
#: channels 8 MB, on 963 channels 308 MB); a larger draw is used, not kept.
DRAWS_BYTES = 64 * 2**20


def _draw_once(kernel):
    """``kernel._draw(d)`` taken from ``_DRAWS`` when a kernel of the same class, parameters
    (all of ``get_params``), device and dtype drew for ``d`` channels before (copies)."""
    compute = kernel._draw
    params = _draw_key(kernel)

    def draw(d):
        key = (*params, int(d))
        with _LOCK:
            hit = _DRAWS.get(key)
            if hit is not None:
                _DRAWS.move_to_end(key)
        if hit is None:
            hit = compute(d)
            with _LOCK:
                if _nbytes_of(hit) <= DRAWS_BYTES:
                    _DRAWS[key] = hit
                while len(_DRAWS) > _N_DRAWS or _draws_nbytes() > DRAWS_BYTES:
                    _DRAWS.popitem(last=False)
        return tuple(t.clone() for t in hit)

    return draw


def _draw_key(kernel) -> tuple:
    """What a randomized-signature kernel's draws and features depend on besides the data:
    its class, all its parameters, device and dtype."""
    params = (type(kernel), repr(sorted(kernel.get_params().items())))
    return (*params, str(kernel._device), str(kernel._dtype))


def _nbytes_of(draw) -> int:
    return sum(t.element_size() * t.nelement() for t in draw)


def _draws_nbytes() -> int:
    return sum(_nbytes_of(draw) for draw in _DRAWS.values())


def _once(compute, seed=None):
    """``compute(X)`` of a SeriesBatch, remembered per batch (values and lengths); ``seed``:
    entries (values, lengths, result) known before the first call."""
    memo: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = list(seed or [])

    def once(X):
        for values, lengths, result in memo:
            if (
                values.shape == X.values.shape
                and torch.equal(lengths, X.lengths)
                and torch.equal(values, X.values)
            ):
                return result.clone()
        result = compute(X)
        memo.append((X.values, X.lengths, result))
        return result.clone()

    return once


#: Level terms of order-1 signature kernels at amplitude 1, kept across cells by
#: :func:`_levels_shared`: (parameters but the amplitude, device, dtype) -> {(what, digests of
#: the batches): terms}, the last ``_N_LEVEL_GROUPS`` parameter sets (the plan lists a class's
#: cells amplitude by amplitude, each over every bandwidth and time channel: 5 sets).
_LEVELS: OrderedDict = OrderedDict()
_N_LEVEL_GROUPS = 10
#: The most bytes of level terms kept (per process).
LEVELS_BYTES = 128 * 2**20
_LEVELS_NBYTES = [0]  # the bytes of the terms in _LEVELS


@contextmanager
def _levels_shared(kernel):
    """Inside the block an order-1 truncated signature kernel computed by its recursion over
    the double-differenced static Gram D (``trunc_sig_rbf_order1``, and
    ``trunc_sig_linear_order1`` where the explicit features cost more) takes its level terms
    P_m (m = 1..N) from those of a base kernel kept across cells: the same kernel with its
    amplitude a = f 2^e (and the Linear static kernel's scale c = g 2^k) replaced by the
    mantissa f (g), so that the preset's amplitudes 1/4 .. 4 of one bandwidth (the linear
    kernel's scales s / d) share one computation per batch pair. P_m = 2^(m (e + k)) P_m(base)
    bit for bit: D = 2^(e + k) D(base) exactly (a product by a power of two), and every sum
    and product of the recursion then carries the factor 2^(m (e + k)) exactly (binary
    floating point scales exactly by powers of two, barring overflow and subnormal values;
    the factor is applied in steps of at most 2^+-64, :func:`_times_pow2_`, so on any device
    and dtype it is exact wherever the result is a normal number; terms that are subnormal
    in the fresh computation differ in their last bits, which the kernel's + 1 hides).
    Other kernels: no-op."""
    from tskernels import Linear, TruncatedSignatureKernel

    if type(kernel) is not TruncatedSignatureKernel or kernel.discretization != "order1":
        yield
        return
    linear = type(kernel._static) is Linear
    fa, e = math.frexp(float(kernel.amplitude))
    base = copy.deepcopy(kernel)
    base.amplitude = fa
    if linear:
        fc, k = math.frexp(float(kernel._static.scale))
        base.static = Linear(scale=fc)
        e += k
    params = base.get_params(deep=True)
    group = (type(kernel), repr(sorted(params.items())), str(kernel._device), str(kernel._dtype))
    N = int(kernel.level)

    def scaled(P):
        out = P.clone()
        for m in range(N):
            _times_pow2_(out[m], e * (m + 1))
        return out

    def shared(what, compute, *batches):
        key = (what, *(_batch_digest(b) for b in batches))
        with _LOCK:
            entries = _LEVELS.get(group)
            if entries is None:
                entries = _LEVELS[group] = {}
            _LEVELS.move_to_end(group)
            hit = entries.get(key)
        if hit is not None:
            return scaled(hit)
        P = compute()
        size = P.element_size() * P.nelement()
        with _LOCK:
            fits = size <= LEVELS_BYTES  # else no other terms make room for these
            while len(_LEVELS) > 1 and (
                len(_LEVELS) > _N_LEVEL_GROUPS or (fits and _LEVELS_NBYTES[0] + size > LEVELS_BYTES)
            ):
                _, dropped = _LEVELS.popitem(last=False)  # the other parameters' terms first
                _LEVELS_NBYTES[0] -= sum(_nbytes_of((t,)) for t in dropped.values())
            # (cells in threads: this group may have been dropped meanwhile)
            kept = _LEVELS.get(group) is entries
            if kept and key not in entries and _LEVELS_NBYTES[0] + size <= LEVELS_BYTES:
                entries[key] = P  # else used, not kept
                _LEVELS_NBYTES[0] += size
        return scaled(P)

    def levels_block(X, Y, symmetric):
        return shared(("block", bool(symmetric)), lambda: base._levels_block(X, Y, symmetric), X, Y)

    def diag_levels(X):
        if linear and kernel._use_features(X.n, X.d, X.length):  # by features: not shared
            return TruncatedSignatureKernel._diag_levels(kernel, X)
        return shared(("diag",), lambda: base._diag_levels(X), X)

    kernel._levels_block = levels_block  # shadows the methods
    kernel._diag_levels = diag_levels
    try:
        yield
    finally:
        del kernel._levels_block, kernel._diag_levels


def _times_pow2_(t: torch.Tensor, exponent: int) -> None:
    """``t *= 2**exponent`` in place, by factors of at most 2^+-64 (powers of two, each a
    float32 and a float64; python numbers, so on any device): from t to the result the values
    move monotonically, so the product is exact wherever the result is a normal number (one
    factor 2^exponent overflows a float64 past 2^1023, a float32 past 2^127)."""
    while exponent:
        step = max(-64, min(64, exponent))
        t.mul_(2.0**step)
        exponent -= step


def _batch_digest(b) -> tuple:
    """A SeriesBatch by its shape, dtype and a 256-bit BLAKE2b digest of its lengths and
    values (the terms are kept without the batches; two batches with one digest would need a
    collision of the hash)."""
    h = hashlib.blake2b(digest_size=32)
    h.update(b.lengths.cpu().numpy().tobytes())
    h.update(b.values.detach().cpu().contiguous().numpy().tobytes())
    return (tuple(b.values.shape), str(b.values.dtype), h.digest())


def _levels_nbytes() -> int:
    return sum(_nbytes_of(entries.values()) for entries in _LEVELS.values())


def _select_levels(G: torch.Tensor, levels: list[int]) -> torch.Tensor:
    """Rows of ``G`` (n_levels, ...) at ``levels``: G holds levels 0..L or 1..L."""
    top = max(levels)
    if G.shape[0] == top + 1:
        offset = 0
    elif G.shape[0] == top:
        offset = 1
    else:
        raise ValueError(f"gram_levels gave {G.shape[0]} levels, expected {top} or {top + 1}")
    return G[[lv - offset for lv in levels]]


# ----------------------------------------------------------------------------- CV cells
def _preprocessor(time_channel: bool, config: dict):
    from tskernels.transforms import Preprocessor

    return Preprocessor(time_channel=time_channel, **config["preprocessing"])


@contextmanager
def _threads(n: int):
    """torch, numba and BLAS/OpenMP threads set to ``n`` for the block (restored afterwards):
    with one worker per core, more threads only oversubscribe (numba's parallel loops slow
    down several-fold on a shared machine; scipy's OpenBLAS eigendecomposition of a 118 x 118
    corpus Gram took 55-70 ms with its default 2 threads on a loaded 2-core machine against
    3 ms with one, and was most of a CV cell's time)."""
    import numba
    from threadpoolctl import threadpool_limits

    old_t, old_n = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(n)
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(old_t)
        numba.set_num_threads(old_n)


def run_cv_cell(cell: dict, data: Dataset, config: dict) -> list[dict]:
    """Compute one CV cell; returns its store rows (one per scorer and level)."""
    with _threads(int(config["threads"])):
        return _run_cv_cell(cell, data, config)


def _run_cv_cell(cell: dict, data: Dataset, config: dict) -> list[dict]:
    cls, tc, levels = cell["cls"], bool(cell["time_channel"]), cell["levels"]
    scorers = list(cell["scorers"])
    rule = rank_rule(config)
    L = 1 if levels is None else len(levels)
    y = data.y_train
    splits = cv_splits(y, config["folds"], config["repeats"], config["seed"])
    sums = {s: [0.0, 0.0] for s in scorers}  # roc, pr sums: arrays (L, n_axis, n_rank)
    n_folds = 0
    gram_seconds = 0.0
    score_seconds = {s: 0.0 for s in scorers}
    error, score_errors = None, {}
    shared = None
    fast = CellScorers(scorers, config) if FAST_PATH else None
    ranks: dict[str, int] = {}  # scorer -> n_ranks
    try:
        if config["share"] == "class":
            shared = _class_grams(cell, data, config)
            gram_seconds += shared["seconds"]
        folds = []
        for tr, va in splits:
            corpus = tr[y[tr] == cls]
            labels = y[va] == cls
            if len(corpus) < 2 or labels.all() or not labels.any():
                continue
            folds.append((corpus, va, labels))
        ahead: dict = {}  # fold -> (C, V, features): the pre-processed folds solved ahead
        for i, (corpus, va, labels) in enumerate(folds):
            t0 = time.perf_counter()
            if shared is None:
                if i not in ahead:
                    ahead = _solve_ahead(cell, data, config, folds, i)
                C, V, features = ahead.pop(i)
                d, T = _shape(C)
                kernel = build_kernel(cell["kernel"], cell["point"], d, T, levels, config["device"])
                Kcc, Kvc, d_v = fold_grams(kernel, C, V, levels, features=features)
            else:
                pos = np.searchsorted(shared["class_idx"], corpus)
                Kcc = shared["Kcc"][:, pos][:, :, pos]
                Kvc = shared["Kall"][:, va][:, :, pos]
                d_v = torch.ones(Kvc.shape[:2], dtype=Kvc.dtype)
            gram_seconds += time.perf_counter() - t0
            n_folds += 1
            for li in range(L):
                t0 = time.perf_counter()
                if fast is None:
                    scores, failed = score_fold(
                        scorers, Kcc[li], Kvc[li], d_v[li], config, RECORDED_ERRORS, pad=False
                    )
                    metrics = None
                else:
                    scores, failed = fast.score(
                        Kcc[li], Kvc[li], d_v[li], RECORDED_ERRORS, pad=False
                    )
                    ok = [s for s in scorers if s not in failed]
                    metrics = dict(zip(ok, fold_metrics_many([scores[s] for s in ok], labels)))
                for s in scorers:
                    if s in failed:
                        score_errors.setdefault((s, li), failed[s])
                        continue
                    # metrics of the fold's M ranks, padded to n_ranks by the rank rule
                    roc, pr = fold_metrics(scores[s], labels) if metrics is None else metrics[s]
                    if s not in ranks:
                        ranks[s] = n_ranks(s, config)
                    roc = pad_rank_metrics(roc, ranks[s], rule)
                    pr = pad_rank_metrics(pr, ranks[s], rule)
                    if isinstance(sums[s][0], float):
                        sums[s] = [np.zeros((L, *roc.shape)), np.zeros((L, *roc.shape))]
                    sums[s][0][li] += roc
                    sums[s][1][li] += pr
                dt = (time.perf_counter() - t0) / len(scorers)
                for s in scorers:
                    score_seconds[s] += dt
    except RECORDED_ERRORS as exc:
        error = f"{type(exc).__name__}: {exc}"
    if n_folds == 0 and error is None:
        error = "no usable fold (class too small for the number of folds)"
    rows = []
    share_g = gram_seconds / (L * len(scorers))
    for s in scorers:
        axis = scorer_axis(s, config)
        for li in range(L):
            lvl = None if levels is None else levels[li]
            err = error or score_errors.get((s, li))
            ok = err is None and not isinstance(sums[s][0], float)
            rows.append(
                {
                    "dataset": data.name,
                    "cls": cls,
                    "kernel": cell["kernel"],
                    "params": params_key(cell["point"], lvl),
                    "time_channel": int(tc),
                    "scorer": s,
                    "axis": json.dumps(axis),
                    "n_rank": None if not ok else int(sums[s][0].shape[-1]),
                    "roc": sums[s][0][li] / n_folds if ok else None,
                    "pr": sums[s][1][li] / n_folds if ok else None,
                    "n_folds": n_folds,
                    "gram_seconds": share_g,
                    "score_seconds": score_seconds[s] / L,
                    "error": err if not ok else None,
                }
            )
    return rows


#: Bytes of pre-processed series whose randomized-signature features :func:`_solve_ahead`
#: solves in one call (the folds of a cell up to this size; at least one fold).
SOLVE_AHEAD_BYTES = 64 * 2**20


def _solve_ahead(cell: dict, data: Dataset, config: dict, folds: list, start: int) -> dict:
    """The pre-processed inputs of fold ``start`` (:func:`_fold_inputs`), as
    {fold: (C, V, features)}. For a randomized-signature kernel, also those of the next folds
    up to ``SOLVE_AHEAD_BYTES`` of series, with the features of every fold's C and V solved
    in one call (:meth:`RandomizedSignatureKernel._features_of_batches`: one product a step
    over all those series instead of two small solves per fold; the random map is the same
    for every fold of the cell). ``features`` is None for other kernels."""
    from tskernels import RandomizedSignatureKernel

    levels = cell["levels"]
    tc = bool(cell["time_channel"])

    def inputs(i):
        corpus, va, _ = folds[i]
        return _fold_inputs(data, cell["cls"], corpus, va, tc, config)

    C, V = inputs(start)
    d, T = _shape(C)
    kernel = build_kernel(cell["kernel"], cell["point"], d, T, levels, config["device"])
    if levels is not None or not isinstance(kernel, RandomizedSignatureKernel):
        return {start: (C, V, None)}
    group = {start: (C, V)}
    size = _nbytes(C) + _nbytes(V)
    for i in range(start + 1, len(folds)):
        if size >= SOLVE_AHEAD_BYTES:
            break
        group[i] = inputs(i)
        size += sum(_nbytes(X) for X in group[i])
    batches = [kernel._check_input(X, "X") for pair in group.values() for X in pair]
    kernel._check_parameters()
    key = _draw_key(kernel)
    with _computed_once(kernel), kernel._threads():
        Z = kernel._features_of_batches(batches)
    out = {}
    for j, (i, (C, V)) in enumerate(group.items()):
        bc, bv = batches[2 * j], batches[2 * j + 1]
        out[i] = (C, V, ((key, bc.values, bc.lengths, Z[2 * j]),
                         (key, bv.values, bv.lengths, Z[2 * j + 1])))  # fmt: skip
    return out


#: Memory for the pre-processed folds kept by :func:`_fold_inputs` (per process).
FOLD_MEMO_BYTES = 128 * 2**20
_FOLD_MEMO: dict = {"group": None, "entries": {}, "nbytes": 0}
#: Guards the process's memos (``_FOLD_MEMO``, ``_DRAWS``) when cells run in threads.
_LOCK = threading.Lock()


def _fold_inputs(data: Dataset, cls: str, corpus, va, tc: bool, config: dict):
    """A fold's corpus C and validation series V, pre-processed by the fold's own fit
    (z-score and clip fitted on C): the same for every grid point and kernel of one
    (data set, class), so each process keeps those of the last (data set, class) it saw
    (up to ``FOLD_MEMO_BYTES``; the cells of a class come one after another in the plan)
    and hands out copies. A fold is recognised by its corpus and validation indices, the
    time channel and the pre-processing settings, and its raw series are compared with
    those it was computed from (so a changed array is never served stale); the arrays are
    those computed afresh, bit for bit."""
    memo = _FOLD_MEMO
    with _LOCK:
        if memo["group"] is None or memo["group"][0] is not data or memo["group"][1] != cls:
            memo.update(group=(data, cls), entries={}, nbytes=0)
        entries = memo["entries"]
    key = (
        bool(tc),
        json.dumps(config["preprocessing"], sort_keys=True),
        np.asarray(corpus).tobytes(),
        np.asarray(va).tobytes(),
    )
    raw = (take(data.X_train, corpus), take(data.X_train, va))
    hit = entries.get(key)
    if hit is None or not all(_equal(a, b) for a, b in zip(raw, hit[0])):
        pre = _preprocessor(tc, config).fit(raw[0])
        hit = (raw, (pre.transform(raw[0]), pre.transform(raw[1])))
        size = sum(_nbytes(X) for X in (*hit[0], *hit[1]))
        with _LOCK:  # cells may run in threads (a Dask worker's)
            if memo["entries"] is entries and key not in entries:
                if memo["nbytes"] + size <= FOLD_MEMO_BYTES:
                    entries[key] = hit
                    memo["nbytes"] += size
    return tuple(_copy(X) for X in hit[1])


def _equal(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    return np.array_equal(a, b)


def _nbytes(X) -> int:
    return sum(x.nbytes for x in X) if isinstance(X, list) else X.nbytes


def _copy(X):
    return [x.copy() for x in X] if isinstance(X, list) else X.copy()


def fold_metrics(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """(ROC-AUC, average precision) of every ranking in ``scores`` (..., n): the same bits as
    :func:`experiments._metrics.roc_auc_and_average_precision` (the same terms, summed by
    numpy in the same order), three times faster on a fold's (alpha, rank, n) scores: one
    unstable numpy sort per ranking, ties then put in index order by the compiled
    :func:`experiments._metrics_numba.metric_terms` (no temporaries per step)."""
    from ._metrics_numba import metric_terms

    s, y = _check_metric_inputs(scores, labels)
    n = y.size
    n_pos = int(y.sum())
    neg = -s.reshape(-1, n)
    mid, prec = metric_terms(neg, np.argsort(neg, axis=-1), y)
    auc = (mid.reshape(s.shape).sum(-1) - n_pos * (n_pos + 1) / 2.0) / (n_pos * (n - n_pos))
    return auc, prec.reshape(s.shape).sum(-1) / n_pos


def fold_metrics_many(arrays: list, labels) -> list[tuple[np.ndarray, np.ndarray]]:
    """[:func:`fold_metrics` (scores, labels) for scores in ``arrays``], the same bits, with
    one sort call and one compiled pass over the rankings of all the arrays (a fold's seven
    scorers: one call instead of seven). Each array is checked as :func:`fold_metrics`
    checks it, in order (the first bad one raises its message); each ranking's terms are
    computed and summed exactly as there (rows are independent: the sort and the compiled
    terms work row by row, and each array's sums run over its own rows)."""
    from ._metrics_numba import metric_terms

    if not arrays:
        return []
    checked = [_check_metric_inputs(scores, labels) for scores in arrays]
    y = checked[0][1]
    n = y.size
    n_pos = int(y.sum())
    neg = -np.concatenate([s.reshape(-1, n) for s, _ in checked])
    mid, prec = metric_terms(neg, np.argsort(neg, axis=-1), y)
    out, start = [], 0
    for s, _ in checked:
        rows = slice(start, start + s.size // n)
        start = rows.stop
        m, p = mid[rows].reshape(s.shape), prec[rows].reshape(s.shape)
        auc = (m.sum(-1) - n_pos * (n_pos + 1) / 2.0) / (n_pos * (n - n_pos))
        out.append((auc, p.sum(-1) / n_pos))
    return out


def _class_grams(cell: dict, data: Dataset, config: dict) -> dict:
    """share="class": pre-processing fitted on the whole class; Grams of every training series
    against the class series, normalised, for slicing per fold."""
    t0 = time.perf_counter()
    y = data.y_train
    class_idx = np.flatnonzero(y == cell["cls"])
    other_idx = np.flatnonzero(y != cell["cls"])
    pre = _preprocessor(bool(cell["time_channel"]), config).fit(take(data.X_train, class_idx))
    Z = pre.transform(data.X_train)
    C = take(Z, class_idx)
    d, T = _shape(C)
    kernel = build_kernel(cell["kernel"], cell["point"], d, T, cell["levels"], config["device"])
    Kcc, Koc, _ = fold_grams(kernel, C, take(Z, other_idx), cell["levels"])
    Kall = torch.empty((Kcc.shape[0], len(y), len(class_idx)), dtype=Kcc.dtype)
    Kall[:, class_idx] = Kcc.cpu()
    Kall[:, other_idx] = Koc.cpu()
    seconds = time.perf_counter() - t0
    return {"class_idx": class_idx, "Kcc": Kcc.cpu(), "Kall": Kall, "seconds": seconds}


# ----------------------------------------------------------------------------- selection
def select(
    cv_rows: dict, candidates: list[tuple[str, bool]], rank_rule: str = "ours"
) -> dict | None:
    """The CV optimum of ROC-AUC + PR-AUC over ``candidates`` [(params json, time channel)]
    and every (axis value, rank); first in candidate order on ties. ``cv_rows`` maps
    (params, tc) -> {"axis", "roc", "pr", "error"}. None if a candidate is missing; a dict
    with "error" if every candidate failed. ``rank_rule`` "ours": an optimum on a plateau
    up to the last rank selects the last rank; "reference": the first rank of the optimum
    (see :func:`experiments._scorers.rank_rule`)."""
    if rank_rule not in ("ours", "reference"):
        raise ValueError(f"`rank_rule` must be 'ours' or 'reference', got {rank_rule!r}")
    best = None
    errors = []
    for key in candidates:
        row = cv_rows.get(key)
        if row is None:
            return None
        if row["error"] is not None or row["roc"] is None:
            errors.append(row["error"])
            continue
        obj = row["roc"] + row["pr"]
        flat = int(np.argmax(obj))
        i, r = np.unravel_index(flat, obj.shape)
        value = float(obj[i, r])
        if rank_rule == "ours" and (obj[i, r:] == obj[i, r]).all():
            # a plateau up to the last rank: ranks beyond a fold corpus's component count
            # repeat its all-components scores, so the optimum is "every component", not the
            # plateau's first rank (which the refit on the larger whole class would truncate)
            r = obj.shape[1] - 1
        if best is None or value > best["cv_objective"]:
            best = {
                "params": key[0],
                "time_channel": bool(key[1]),
                "axis_index": int(i),
                "alpha": float(row["axis"][i]),
                "rank": int(r) + 1,
                "cv_objective": value,
            }
    if best is None:
        return {"error": "every candidate failed: " + "; ".join(sorted(set(map(str, errors))))}
    return best


# ----------------------------------------------------------------------------- test cells
def run_test_cell(cell: dict, data: Dataset, config: dict) -> list[dict]:
    """Refit each scorer's selection on the whole normal class; score the test split."""
    with _threads(int(config["threads"])):
        return _run_test_cell(cell, data, config)


def _run_test_cell(cell: dict, data: Dataset, config: dict) -> list[dict]:
    cls = cell["cls"]
    class_idx = np.flatnonzero(data.y_train == cls)
    labels = data.y_test == cls
    groups: dict[tuple, list[str]] = {}
    rows = []
    base = {"dataset": data.name, "cls": cls, "kernel": cell["kernel"], "grid": cell["grid"]}
    for s, sel in cell["selections"].items():
        if "error" in sel:
            rows.append({**base, "scorer": s, "error": sel["error"], "seconds": 0.0})
            continue
        groups.setdefault((sel["params"], sel["time_channel"]), []).append(s)
    for (params, tc), scorers in groups.items():
        t0 = time.perf_counter()
        point = json.loads(params)
        level = point.pop("level", None) if cell["levels"] is not None else None
        try:
            pre = _preprocessor(tc, config).fit(take(data.X_train, class_idx))
            C = pre.transform(take(data.X_train, class_idx))
            Te = pre.transform(data.X_test)
            d, T = _shape(C)
            levels = None if level is None else [level]
            kernel = build_kernel(cell["kernel"], point, d, T, levels, config["device"])
            Kcc, Kte, d_te = fold_grams(kernel, C, Te, levels)
            if FAST_PATH:
                scorer_set = CellScorers(scorers, config)
                scores, failed = scorer_set.score(Kcc[0], Kte[0], d_te[0], RECORDED_ERRORS)
            else:
                scores, failed = score_fold(
                    scorers, Kcc[0], Kte[0], d_te[0], config, RECORDED_ERRORS
                )
            err = None
        except RECORDED_ERRORS as exc:
            scores, failed, err = {}, {}, f"{type(exc).__name__}: {exc}"
        dt = (time.perf_counter() - t0) / len(scorers)
        for s in scorers:
            sel = cell["selections"][s]
            row = {
                **base, "scorer": s, "params": params, "time_channel": int(tc),
                "alpha": sel["alpha"], "rank": sel["rank"], "cv_objective": sel["cv_objective"],
                "seconds": dt, "error": err or failed.get(s),
            }  # fmt: skip
            if row["error"] is None:
                roc, pr = roc_auc_and_average_precision(
                    scores[s][sel["axis_index"], sel["rank"] - 1], labels
                )
                row["roc_auc"], row["pr_auc"] = float(roc), float(pr)
            rows.append(row)
    return rows
