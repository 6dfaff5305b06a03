r"""A memory-mapped corpus fitted in blocks: ``KernelNoveltyDetector(approximation="features")``
on an ``np.memmap`` of N series never holds the corpus in memory, only its features.

**When.** ``fit(X)`` takes this path when X is an ``np.memmap`` (``np.load(path,
mmap_mode="r")`` or a slice of one) of shape (N, T, d), ``y`` is None, N > ``n_components``,
the kernel is a :class:`tskernels.FlattenedKernel` or :class:`tskernels.IntegralKernel` with
an RBF static kernel (random Fourier features, :class:`~._approximation.RandomFeatures`) and the
scorer is ``"knn"``. Anything else (an in-memory array, another kernel or scorer) takes the
in-memory path, whose results are unchanged.

**Passes** (blocks of ``block_rows`` series, at most ``BLOCK_BYTES`` of float64 working
memory each; a memory map is read by file reads, so its pages do not stay mapped):

1. each block is checked and converted exactly as ``fit`` checks an array
   (:func:`novelty.as_series_collection`: float64, finite, ``missing``); its series are hashed
   (:func:`~._members.series_digest`: the in-sample warning and the exact copies, held out
   together as in :class:`~._approx_member.ApproximateMember`), and the pre-processing's
   statistics are merged (Chan et al.'s pairwise update of count, mean and sum of squared
   deviations: the mean and population std of ``Preprocessor(zscore=mode).fit`` on the whole
   corpus, to rounding, about 1e-15 relative);
2. each block is checked again, pre-processed and mapped to its random features in float64
   (:meth:`RandomFeatures.transform`, bit for bit the in-memory map of the block), and stored
   **in float32**, with the residual :math:`k(x,x) - \|\Phi(x)\|^2` of the float64 features;
   this pass can run on other processes (:func:`mapping_blocks`, e.g. Dask workers).

The calibration set H (``min(1000, N // 2)`` series drawn as the approximate member draws them)
gets its exact leave-one-out 1-NN scores, as in the in-memory path.

**Memory**: the features, 4 N D bytes (D = ``n_components``), plus 16 N bytes (residuals
and norms) plus the digests (about 100 N bytes) plus O(``BLOCK_BYTES``) per block; the
corpus itself never (T d 8 N bytes as float64; 4.8 GB at N = 10^6, T = 100, d = 6).

**Scores** (:class:`StoredFeatureKNN`): the nearest corpus rows by :func:`nearest_in_blocks`,
an exact blocked search (float32 matrix products tiled over queries *and* corpus rows, so that
each tile is a compute-bound BLAS call, then the k + ``FAST_EXTRA`` candidates' distances
recomputed in float64 from the differences). Storing a corpus row in float32 moves it by
:math:`\|\delta\| \le 2^{-24}\|\Phi(x)\|`, and a distance to a fixed query is 1-Lipschitz in the
row (triangle inequality), so each k-NN distance moves by at most :math:`2^{-24}
\max_x\|\Phi(x)\|` (6e-8 for normalised features) against the float64 in-memory scorer; a
candidate pick in float32 can differ from float64's only between corpus rows whose squared
distances tie to about 1e-7 (:func:`novelty.scorers._feature_scorers.nearest_squared_distances`
states the same for its float32 path). Tested: scores within 1e-6 of the in-memory detector's,
and within 1e-12 of a float64 brute force on the stored features.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import mmap
import time
import warnings

import numpy as np
import torch

from ..scorers._feature_scorers import FAST_EXTRA, FeatureKNN, _residual
from ._approximation import RandomFeatures
from ._members import BaseMember

__all__ = [
    "BLOCK_BYTES",
    "BlockReader",
    "MappedCorpus",
    "NN_BLOCK_BYTES",
    "StoredFeatureKNN",
    "StreamedMember",
    "mapping_blocks",
    "nearest_in_blocks",
    "streamed_fit",
]

#: Working memory (bytes) of one block of corpus series in the streamed fit (float64 series,
#: their pre-processed copy and features).
BLOCK_BYTES = 128 * 2**20
#: Bytes of one (queries x corpus rows) float32 tile of squared distances in
#: :func:`nearest_in_blocks`.
NN_BLOCK_BYTES = 64 * 2**20
#: Test series mapped and scored at a time.
SCORE_BATCH = 8192

_MAPPER: contextvars.ContextVar = contextvars.ContextVar("novelty_block_mapper", default=None)


@contextlib.contextmanager
def mapping_blocks(mapper):
    """Run the feature pass (pass 2) of the streamed fits inside the block through ``mapper``:
    ``mapper(func, args)`` takes a module-level function and a list of argument tuples and
    yields ``(position, func(*args[position]))`` in any order (a Dask ``Client.map`` with
    ``as_completed``, say). The results are those of the serial pass, bit for bit."""
    token = _MAPPER.set(mapper)
    try:
        yield
    finally:
        _MAPPER.reset(token)


# ---------------------------------------------------------------------- reading blocks
class BlockReader:
    """Rows ``[i, j)`` of an (N, T, d) array as a numpy array; picklable. A C-contiguous memory
    map is read from its file (``np.fromfile`` at the rows' byte offset), so that the pages
    read do not stay mapped in the process (its resident memory is the block, not the file),
    and so that another process can read it; anything else is sliced."""

    def __init__(self, X):
        self.shape, self.dtype = tuple(X.shape), X.dtype
        self.path = self.offset = None
        self.array = X
        base = getattr(X, "_mmap", None)
        if isinstance(X, np.memmap) and base is not None and X.flags.c_contiguous and X.filename:
            start = np.frombuffer(base, dtype=np.uint8).ctypes.data
            aligned = X.offset - X.offset % mmap.ALLOCATIONGRANULARITY
            self.path, self.offset = X.filename, aligned + (X.ctypes.data - start)
            self.array = None

    def __call__(self, i: int, j: int) -> np.ndarray:
        if self.array is not None:
            return np.asarray(self.array[i:j])
        per_row = int(np.prod(self.shape[1:]))
        with open(self.path, "rb") as f:
            f.seek(self.offset + i * per_row * self.dtype.itemsize)
            a = np.fromfile(f, dtype=self.dtype, count=(j - i) * per_row)
        return a.reshape((j - i, *self.shape[1:]))

    def __getstate__(self):
        state = dict(self.__dict__)
        if self.path is not None:
            state["array"] = None
        return state


def _checked(raw: np.ndarray, missing: str, T: int, d: int) -> np.ndarray:
    """The block as ``fit`` checks an array: float64 (n, T, d), finite (``missing``)."""
    from .._layouts import as_series_collection

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # d > T is warned about once, on the whole corpus
        A = as_series_collection(raw, missing=missing)
    if isinstance(A, list) or A.shape[1:] != (T, d):
        raise ValueError(
            f"the streamed fit of a memory-mapped corpus needs equal-length series without "
            f"trailing NaN padding (shape (N, {T}, {d})); load it into memory "
            "(np.asarray(X)) for series of unequal lengths"
        )
    return A


def _feature_block(reader, i, j, missing, T, d, pre, fmap):
    """Pass 2 for rows [i, j): (float32 features (n, D), float64 residuals (n,), float64
    squared norms of the float32 rows (n,))."""
    from tskernels import SeriesBatch

    B = SeriesBatch.from_checked(_checked(reader(i, j), missing, T, d))
    Z = B if pre is None else pre.transform(B)
    Phi, diag = fmap.transform(Z)
    res = _residual(Phi, diag, "the corpus features")  # of the float64 features
    P32 = Phi.to(torch.float32)
    sq = torch.linalg.vector_norm(P32.double(), dim=1) ** 2
    return P32.numpy(), res.numpy(), sq.numpy()


# ---------------------------------------------------------------------- pre-processing
class _Moments:
    """Count, mean and sum of squared deviations over axis 0, merged block by block (Chan,
    Golub and LeVeque's pairwise update)."""

    def __init__(self):
        self.n, self.mean, self.m2 = 0, None, None

    def add(self, V: np.ndarray) -> None:
        nb = V.shape[0]
        mb = V.mean(axis=0)
        m2b = ((V - mb) ** 2).sum(axis=0)
        if self.n == 0:
            self.n, self.mean, self.m2 = nb, mb, m2b
            return
        n = self.n + nb
        delta = mb - self.mean
        self.mean = self.mean + delta * (nb / n)
        self.m2 = self.m2 + m2b + delta**2 * (self.n * nb / n)
        self.n = n

    def std(self) -> np.ndarray:
        return np.sqrt(self.m2 / self.n)


def _preprocessor(mode, window: int, moments: _Moments, d: int):
    """``Preprocessor(zscore=mode)`` as ``fit`` on the whole corpus sets it, from the merged
    statistics of the (pooled) corpus."""
    from tskernels.transforms import Preprocessor, ZScore

    pre = Preprocessor(zscore=mode)
    zs = ZScore(pre.eps, per=mode)
    zs.per_step_ = mode == "step"
    zs.mean_, zs.std_ = moments.mean, moments.std()
    pre.window_, pre.zscore_, pre.n_channels_ = window, zs, d
    return pre


# ---------------------------------------------------------------------- eligibility
def _eligible(det, X, y) -> bool:
    import tskernels as tk

    if not isinstance(X, np.memmap) or X.ndim != 3 or y is not None:
        return False
    if det.approximation != "features" or det.layout is not None:
        return False
    if not isinstance(det.scorer, str) or det.scorer != "knn":
        return False
    k = det.kernel
    if not isinstance(k, tk.FlattenedKernel | tk.IntegralKernel):
        return False
    if not isinstance(k.static if k.static is not None else tk.RBF(), tk.RBF):
        return False
    if not bool(k.get_tag("fit_is_empty")):
        return False
    return X.shape[0] > det.n_components and X.shape[0] >= 2


# ---------------------------------------------------------------------- the fit
def streamed_fit(det, X, y) -> bool:
    """Fit ``det`` on the memory map ``X`` in blocks when the path applies (module docstring);
    False, with nothing done, otherwise."""
    if not _eligible(det, X, y):
        return False
    from ._members import MemberSpec, preprocess_mode, series_digest
    from ._progress import plan, step

    start = time.perf_counter()
    N, T, d = X.shape
    spec = MemberSpec.of_detector(det)
    if T < d:
        warnings.warn(
            f"X has {d} channels and {T} time steps per series: is it (n, d, T)? expected "
            "(n, T, d)",
            UserWarning,
            stacklevel=4,
        )
    reader = BlockReader(X)
    D = int(det.n_components)
    rows = max(1, min(N, BLOCK_BYTES // (8 * (3 * T * d + 3 * D))))
    blocks = [(i, min(N, i + rows)) for i in range(0, N, rows)]
    plan(2 * len(blocks) + 1)  # two passes, then the calibration

    # pass 1: check, hash, statistics of the pre-processing
    from tskernels import SeriesBatch
    from tskernels.transforms import _pool, pooling_window

    mode = preprocess_mode(spec.preprocess)
    window = pooling_window(T)
    moments = _Moments()
    digests: list[bytes] = []
    for i, j in blocks:
        A = _checked(reader(i, j), det.missing, T, d)
        digests.extend(series_digest(x) for x in A)
        if mode is not None:
            P = _pool(SeriesBatch.from_checked(A), window).numpy()
            moments.add(P.reshape(-1, d) if mode == "channel" else P)
        step("fit: checking the corpus")
    # a digest seen before is confirmed by the values it was computed from (the checked row:
    # NaN gaps filled as ``missing`` says), as the in-memory fit compares checked series
    groups = _duplicate_groups(digests, lambda i: _checked(reader(i, i + 1), det.missing, T, d)[0])
    pre = None if mode is None else _preprocessor(mode, window, moments, d)

    # the kernel's parameters checked (its fit learns nothing), the random features drawn
    from sklearn.base import clone

    kernel = clone(spec.kernel)
    first = SeriesBatch.from_checked(_checked(reader(0, min(N, 2)), det.missing, T, d))
    kernel.fit(first if pre is None else pre.transform(first))
    fmap = RandomFeatures(kernel, D, normalize=bool(spec.normalize), seed=det.random_state)
    fmap.fit()

    # pass 2: features, float32
    Phi = torch.empty((N, D), dtype=torch.float32)
    res = torch.empty(N, dtype=torch.float64)
    sq = torch.empty(N, dtype=torch.float64)
    args = [(reader, i, j, det.missing, T, d, pre, fmap) for i, j in blocks]
    mapper = _MAPPER.get()
    if mapper is not None and reader.path is None:
        raise ValueError(
            "mapping_blocks needs a C-contiguous memory map of a file (its blocks are read by "
            "the workers), got a view that is not; pass np.load(path, mmap_mode='r')[a:b]"
        )
    results = (
        ((p, _feature_block(*a)) for p, a in enumerate(args)) if mapper is None else
        mapper(_feature_block, args)
    )  # fmt: skip
    for p, (P32, r, s) in results:
        i, j = blocks[p]
        Phi[i:j] = torch.from_numpy(P32)
        res[i:j] = torch.from_numpy(r)
        sq[i:j] = torch.from_numpy(s)
        step("fit: features")

    # calibration set H and the scorer, as the approximate member's
    from ._approx_member import calibration_rows, make_feature_scorer

    H = calibration_rows(N, groups, np.random.default_rng(det.random_state))

    base = make_feature_scorer(spec, spec.corpus_size(N))
    scorer = StoredFeatureKNN(**base.get_params()).fit_stored(Phi, res, sq)
    calibration = scorer.leave_one_out(H, groups).numpy() if H.size else np.empty(0)
    step("fit: calibration")

    member = StreamedMember(spec)
    if pre is not None:
        member.preprocessor_ = pre
    member.kernel_, member.features_, member.scorer_ = kernel, fmap, scorer
    member.approximation_ = "features"
    member.n_components = D
    T_seen = T if pre is None else int(pre.transform(first).lengths.max())
    member.corpus_ = MappedCorpus(X, T_seen)
    member.duplicate_groups_ = groups
    member.calibration_indices_ = H
    member.calibration_ = calibration
    member.update_state_ = {"raw": X}

    if hasattr(det, "n_features_in_"):
        del det.n_features_in_
    det.n_channels_ = d
    det.n_corpus_ = N
    det._corpus_digests = frozenset(digests)
    del digests
    det._set_calibration([member], N)
    det.fit_seconds_ = time.perf_counter() - start
    return True


def _duplicate_groups(digests: list[bytes], series_at) -> np.ndarray | None:
    """:func:`~._members.duplicate_groups` from the series' digests: equal digests are
    confirmed equal by their values (``series_at(i)``, the checked series i, read again)
    before they share a group."""
    from ._members import groups_of_digests

    return groups_of_digests(digests, series_at)


# ---------------------------------------------------------------------- the member
class MappedCorpus:
    """A streamed member's corpus, not held in memory: ``raw`` (the memory map of the raw
    series) and ``lengths`` (the pre-processed series' length, one per series, as a
    :class:`tskernels.SeriesBatch` has them)."""

    def __init__(self, raw, length: int):
        self.raw = raw
        self.lengths = torch.full((len(raw),), int(length), dtype=torch.long)

    def __len__(self) -> int:
        return len(self.raw)


class StreamedMember(BaseMember):
    """The member of a streamed fit: ``novelty_tensor(X)`` as the approximate member's
    (pre-processing, random features, k-NN on the stored float32 corpus features);
    ``corpus_`` a :class:`MappedCorpus`. Not updated without a refit."""

    def fit(self, X, preprocessors):  # pragma: no cover - fitted by streamed_fit
        raise NotImplementedError("a StreamedMember is fitted by streamed_fit")

    def check_updatable(self) -> None:
        raise NotImplementedError(
            "update(refit=False) is not available for a detector fitted on a memory-mapped "
            "corpus in blocks; use update(X_new, refit=True)"
        )

    def update(self, X_new, raw, groups):
        self.check_updatable()

    def novelty_tensor(self, X) -> torch.Tensor:
        """Novelty of the checked series ``X``, float64 (n,), ``SCORE_BATCH`` at a time (one
        step of the progress bar each)."""
        from ._progress import plan, step

        Z = self._prepare(X, {})
        parts = [torch.zeros(0, dtype=torch.float64)]
        plan(math.ceil(len(Z) / SCORE_BATCH))
        for i in range(0, len(Z), SCORE_BATCH):
            Phi, diag = self.features_.transform(Z[i : i + SCORE_BATCH])
            parts.append(self.scorer_.score(Phi, diag))
            step(f"score: {min(len(Z), i + SCORE_BATCH)} of {len(Z)} series")
        return torch.cat(parts).to(torch.float64)


# ---------------------------------------------------------------------- the search
class StoredFeatureKNN(FeatureKNN):
    """:class:`~novelty.scorers._feature_scorers.FeatureKNN` on corpus features stored in
    float32 (4 N D bytes), searched by :func:`nearest_in_blocks` (module docstring for the
    tolerance against the float64 scorer)."""

    def fit_stored(self, Phi32: torch.Tensor, residual: torch.Tensor, sq: torch.Tensor):
        """Phi32 (N, D) float32; ``residual`` (N,) :math:`k(x,x) - \\|\\Phi(x)\\|^2` of the
        float64 features; ``sq`` (N,) the float32 rows' squared norms (float64)."""
        self._params(Phi32.shape[0])
        self.corpus_ = Phi32
        self.residual_ = residual
        self.sq_norms_ = sq
        self.n_corpus_, self.n_features_ = Phi32.shape
        return self

    def _nearest(self, P: torch.Tensor, k: int, q_extra) -> torch.Tensor:
        """FeatureKNN's search (its ``score``) over the stored float32 rows, in blocks."""
        d2, _ = nearest_in_blocks(
            P, self.corpus_, k, q_extra=q_extra,
            e_extra=None if q_extra is None else self.residual_, e_sq=self.sq_norms_,
        )  # fmt: skip
        return d2

    def leave_one_out(self, rows, groups=None) -> torch.Tensor:
        self._check_fitted()
        rows = torch.as_tensor(np.asarray(rows), dtype=torch.long).reshape(-1)
        kernel = self.distance == "kernel"
        k = self._left_out_k(rows, groups)
        if groups is None:
            pairs = (torch.arange(rows.numel()), rows)
        else:
            g = np.asarray(groups)
            q, c = [], []
            for p, r in enumerate(rows.tolist()):
                same = np.flatnonzero(g == g[r])
                q.append(np.full(same.size, p))
                c.append(same)
            pairs = (torch.from_numpy(np.concatenate(q)), torch.from_numpy(np.concatenate(c)))
        d2, _ = nearest_in_blocks(
            self.corpus_[rows].double(), self.corpus_, k,
            q_extra=self.residual_[rows] if kernel else None,
            e_extra=self.residual_ if kernel else None, e_sq=self.sq_norms_, exclude=pairs,
        )  # fmt: skip
        return self._aggregate(d2)

    def __repr__(self) -> str:
        return "Stored" + super().__repr__()


def nearest_in_blocks(
    Q: torch.Tensor,
    E: torch.Tensor,
    k: int = 1,
    *,
    q_extra: torch.Tensor | None = None,
    e_extra: torch.Tensor | None = None,
    e_sq: torch.Tensor | None = None,
    exclude: tuple[torch.Tensor, torch.Tensor] | None = None,
    block_bytes: int | None = None,
    extra: int = FAST_EXTRA,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The k smallest :math:`\|q - e\|^2 + q_\mathrm{extra} + e_\mathrm{extra}` over the rows
    e of E (float32 or float64, (N, D)) for each row q of Q (float64 (n, D)): (values (n, k)
    ascending, float64; indices (n, k)).

    Tiles of :math:`\|e\|^2 + e_\mathrm{extra} - 2 q^\top e` in float32, at most
    ``block_bytes`` each (square-ish: queries x corpus rows, so each product is a
    compute-bound matrix multiplication and E is read n / rows-per-tile times), keep the
    k + ``extra`` best candidates per query; their distances are then recomputed in float64
    from the differences (no cancellation near 0) and the k best returned. ``block_bytes``:
    default ``NN_BLOCK_BYTES``. ``e_sq``: the
    rows' squared norms (float64, computed here when None). ``exclude`` = (query positions,
    corpus rows): pairs left out (leave-one-out, exact copies). Memory: one tile plus the
    candidates, O(``block_bytes`` + n (k + extra) D) in the recomputation per query tile.
    """
    n, N = Q.shape[0], E.shape[0]
    Dm = E.shape[1]
    block_bytes = NN_BLOCK_BYTES if block_bytes is None else int(block_bytes)
    left = 0
    if exclude is not None and exclude[0].numel():
        left = int(torch.bincount(exclude[0], minlength=n).max())
    if k > N - left:
        raise ValueError(f"k={k} neighbours requested from {N - left} corpus vectors")
    kc = min(N - left, k + extra)
    ee = torch.zeros(N, dtype=torch.float64) if e_extra is None else e_extra.double()
    qe = torch.zeros(n, dtype=torch.float64) if q_extra is None else q_extra.double()
    if e_sq is None:
        e_sq = torch.empty(N, dtype=torch.float64)
        for i in range(0, N, 65536):
            e_sq[i : i + 65536] = torch.linalg.vector_norm(E[i : i + 65536].double(), dim=1) ** 2
    base = (e_sq + ee).to(torch.float32)
    side = max(kc, int(math.sqrt(block_bytes / 4)))
    bq = max(1, min(n, side))
    bc = max(kc, min(N, block_bytes // (4 * bq)))
    vals = torch.empty((n, k), dtype=torch.float64)
    idx = torch.empty((n, k), dtype=torch.long)
    for q0 in range(0, n, bq):
        q1 = min(n, q0 + bq)
        q32 = Q[q0:q1].to(torch.float32)
        best_v = torch.full((q1 - q0, kc), math.inf, dtype=torch.float32)
        best_j = torch.zeros((q1 - q0, kc), dtype=torch.long)
        if exclude is not None:
            inq = (exclude[0] >= q0) & (exclude[0] < q1)
            xq, xc = exclude[0][inq] - q0, exclude[1][inq]
        for c0 in range(0, N, bc):
            c1 = min(N, c0 + bc)
            Eb = E[c0:c1] if E.dtype == torch.float32 else E[c0:c1].to(torch.float32)
            d2 = torch.addmm(base[c0:c1][None, :], q32, Eb.T, alpha=-2.0)
            if exclude is not None:
                inc = (xc >= c0) & (xc < c1)
                d2[xq[inc], xc[inc] - c0] = math.inf
            m = min(kc, c1 - c0)
            if m == 1:
                v, j = d2.min(dim=1, keepdim=True)
            else:
                v, j = torch.topk(d2, m, dim=1, largest=False)
            v_all = torch.cat([best_v, v], dim=1)
            j_all = torch.cat([best_j, j + c0], dim=1)
            best_v, pos = torch.topk(v_all, kc, dim=1, largest=False)
            best_j = torch.gather(j_all, 1, pos)
        q64 = Q[q0:q1].double()
        exact = torch.empty((q1 - q0, kc), dtype=torch.float64)
        step_rows = max(1, block_bytes // (8 * kc * Dm))
        for s in range(0, q1 - q0, step_rows):
            jj = best_j[s : s + step_rows]
            diff = q64[s : s + step_rows, None, :] - E[jj].double()
            exact[s : s + step_rows] = (diff * diff).sum(-1)
        exact += ee[best_j] + qe[q0:q1, None]
        exact[torch.isinf(best_v)] = math.inf  # a left-out pair never comes back
        exact, order = torch.sort(exact, dim=1)
        vals[q0:q1] = exact[:, :k]
        idx[q0:q1] = torch.gather(best_j, 1, order)[:, :k]
    return vals, idx
