r"""The window engine: window features, nearest normal windows in blocks, steps from windows.

**Features.** A window of ``w`` steps and ``d`` channels (channel-standardised by the normal
data's mean and standard deviation) is reduced per channel to ``p = min(w, n_segments)``
segment means (PAA; segment :math:`j` covers steps :math:`[\lfloor jw/p \rfloor,
\lfloor (j+1)w/p \rfloor)`, of length :math:`\ell_j`), each multiplied by
:math:`\sqrt{\ell_j}`, so that the squared Euclidean distance of two feature vectors is the
squared distance of the two windows after each is replaced by its segment means (a lower
bound of the windows' own squared distance; equal to it when ``p = w``). With
``znorm=True`` each channel of each window is first z-normalised by its own mean and standard
deviation (the deviation floored at :data:`ZNORM_FLOOR`, in units of the channel's normal
standard deviation, so a flat stretch is not blown up into noise). Features come from
cumulative sums over the block being scored: the windows themselves are never formed.

**Window novelty** is the mean over the ``k`` nearest reference (normal) windows of
:math:`\|f - g\| / \sqrt{w d}` (a root-mean-square difference per step and channel).
Distances are computed for blocks of windows (rows) sized so that the block's distance
matrix takes at most a quarter of ``max_memory``, from :math:`\|f\|^2 + \|g\|^2 - 2 f
\cdot g`, which rounds: a squared distance of at most :data:`DIST_RTOL`
:math:`(\|f\|^2 + \|g\|^2)` is taken as 0 (an exact repeat of a normal window is at
distance 0, not at a rounding of about 1e-8 that a member's calibration scale would blow up;
true distances so small, under about 1e-5 of the windows' root-mean-square, are lost).

**Steps from windows.** Windows start every ``stride`` steps from 0, plus one window ending at
the last step when the grid misses it. The novelty of step :math:`t` aggregates the windows
covering it (start in :math:`[t-w+1, t]`): their maximum or their mean. The per-channel shares
of a window's squared distance to its nearest reference window follow the same rule (the
window that gives the maximum, or the mean).

**Streaming** (:class:`Stream`): chunks are pushed in order; each window is computed once, a
step is emitted as soon as every window that can cover it is known (every grid window starting
at or before it; the final window only covers steps after the last grid window's start), and
the stream keeps at most the last ``w`` steps and the windows that still cover unemitted steps.
The concatenated output equals scoring the whole recording at once (``tests/test_windows.py``).

**Statistics features** (:class:`StatsFeaturizer`, opt-in members, docs/windows.md "Fourth
round"): per channel of the (channel-standardised) window, or of each of its ``parts``
consecutive parts (the PAA bounds above with ``p = parts``; at most ``window // 2`` parts, so
each holds at least two steps), three statistics: the mean, the standard deviation (divisor
the part's length) and the roughness, the mean absolute first difference within the part.
They ignore where in the window a pattern lies (with ``parts=2``, only which half), so a
window of other amplitude, level or frequency stands out even when it is not aligned with
any normal window. Each statistic is standardised by the mean and standard deviation of the
same statistic over the normal windows (:meth:`StatsFeaturizer.fit`; the deviation floored at
:data:`ZNORM_FLOOR` channel standard units, so a channel flat in the normal data is not blown
up). They come from cumulative sums of the values, their squares and their absolute first
differences, as the segment means do. Window novelty is then :math:`\|f - g\| /
\sqrt{D}` (``D = dim``: a root-mean-square difference per standardised statistic).

**Complexity-invariant distance** (``Featurizer(cid=True)``, opt-in members, docs/windows.md
"Fifth round"; Batista et al., 2014): the features carry one more, last, column, the window's
complexity :math:`c = \sqrt{\sum_{t, ch} (x_{t+1, ch} - x_{t, ch})^2 / ((w - 1) d)}` at full
resolution (of the z-normalised window under ``znorm``), and the distance of two windows is
:math:`\|f - g\| \cdot (\max(c_f, c_g) + e) / (\min(c_f, c_g) + e)` over the other columns,
:math:`e` = :data:`CID_FLOOR` times the reference windows' median complexity, or times
:data:`ZNORM_FLOOR` when that is smaller (so a flat window is far from busy normal windows, not
infinitely far, also when most normal windows are flat). Windows of equal complexity compare as
without it. The channel shares are those of the Euclidean part.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "CID_FLOOR",
    "CausalScales",
    "DIST_RTOL",
    "ZNORM_FLOOR",
    "Featurizer",
    "Reference",
    "StatsFeaturizer",
    "Stream",
    "score_recording",
]

#: floor of a window's standard deviation under ``znorm``, in channel (normal) standard units
ZNORM_FLOOR = 0.05
#: a squared distance at most this share of the two squared norms is rounding: taken as 0
DIST_RTOL = 1e-10
#: the floor added to both complexities of the complexity correction, as a share of the
#: reference windows' median complexity or of ZNORM_FLOOR, the larger (a flat window is not
#: infinitely far)
CID_FLOOR = 0.05


@dataclass
class Featurizer:
    """Window features of length ``window``, ``n_segments`` per channel (module docstring)."""

    window: int
    n_segments: int
    znorm: bool
    d: int
    cid: bool = False

    def __post_init__(self):
        w = self.window
        p = min(w, self.n_segments)
        self.p = p
        b = (np.arange(p + 1) * w) // p
        self.lo, self.hi = b[:-1], b[1:]
        self.len = (self.hi - self.lo).astype(np.float64)
        self.dim = self.d * p  # the columns that enter the distance
        if self.cid and w < 2:
            raise ValueError(f"a complexity correction needs a window of at least 2 steps, got {w}")
        self.norm = float(np.sqrt(w * self.d))  # window novelty: distance / norm

    def features(self, x: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Features (len(starts), d * p), channel-major, of the windows of ``x`` (n, d)
        starting at ``starts`` (each start + window <= n)."""
        w, p, d = self.window, self.p, self.d
        first = int(starts.min())
        last = int(starts.max()) + w
        seg = x[first:last]
        cs = np.zeros((seg.shape[0] + 1, d))
        np.cumsum(seg, axis=0, out=cs[1:])
        s = starts - first
        # sums[i, j, c]: sum of segment j of window i, channel c
        sums = cs[s[:, None] + self.hi[None, :]] - cs[s[:, None] + self.lo[None, :]]
        sq = np.sqrt(self.len)[None, :, None]
        if self.znorm:
            cs2 = np.zeros_like(cs)
            np.cumsum(seg * seg, axis=0, out=cs2[1:])
            tot = cs[s + w] - cs[s]
            tot2 = cs2[s + w] - cs2[s]
            mu = tot / w
            sd = np.sqrt(np.maximum(tot2 / w - mu * mu, 0.0))
            sd = np.maximum(sd, ZNORM_FLOOR)
            f = (sums - self.len[None, :, None] * mu[:, None, :]) / (sq * sd[:, None, :])
        else:
            f = sums / sq
        f = f.transpose(0, 2, 1).reshape(len(starts), d * p)
        if not self.cid:
            return np.ascontiguousarray(f)
        # the complexity estimate: root-mean-square first difference over the window's
        # w - 1 differences and d channels (of the z-normalised window under znorm)
        dd = np.zeros((seg.shape[0], d))  # dd[i]: sum of squared differences before step i
        np.cumsum(np.diff(seg, axis=0) ** 2, axis=0, out=dd[1:])
        sq_diff = dd[s + w - 1] - dd[s]  # (m, d)
        if self.znorm:
            sq_diff = sq_diff / (sd * sd)
        ce = np.sqrt(sq_diff.sum(axis=1) / ((w - 1) * d))
        return np.ascontiguousarray(np.column_stack([f, ce]))


@dataclass
class StatsFeaturizer:
    """Alignment-invariant window statistics (module docstring, "Statistics features"):
    per channel and part, (mean, standard deviation, roughness), standardised by the normal
    windows' statistics once :meth:`fit` has run. ``dim = d * parts_ * 3``, channel-major."""

    window: int
    d: int
    parts: int = 1

    #: the statistics per channel and part, in feature order
    STATS = ("mean", "std", "roughness")

    def __post_init__(self):
        w = self.window
        if w < 2:
            raise ValueError(f"statistics features need a window of at least 2 steps, got {w}")
        if self.parts < 1:
            raise ValueError(f"parts must be >= 1, got {self.parts}")
        p = max(1, min(int(self.parts), w // 2))
        self.p = p
        b = (np.arange(p + 1) * w) // p
        self.lo, self.hi = b[:-1], b[1:]
        self.len = (self.hi - self.lo).astype(np.float64)
        self.dim = self.d * p * len(self.STATS)
        self.norm = float(np.sqrt(self.dim))
        self.loc: np.ndarray | None = None
        self.scale: np.ndarray | None = None

    def raw(self, x: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Unstandardised statistics (len(starts), dim) of the windows of ``x`` (n, d)
        starting at ``starts``: for channel c, part j, statistic k, column
        ``(c * p + j) * 3 + k``."""
        w, d = self.window, self.d
        first = int(starts.min())
        seg = x[first : int(starts.max()) + w]
        n = seg.shape[0]
        cs = np.zeros((n + 1, d))
        cs2 = np.zeros((n + 1, d))
        csd = np.zeros((n, d))  # csd[i]: sum of |seg[t+1] - seg[t]| for t < i
        np.cumsum(seg, axis=0, out=cs[1:])
        np.cumsum(seg * seg, axis=0, out=cs2[1:])
        np.cumsum(np.abs(np.diff(seg, axis=0)), axis=0, out=csd[1:])
        s = (starts - first)[:, None]
        a, b = s + self.lo[None, :], s + self.hi[None, :]  # (m, p) part bounds
        ln = self.len[None, :, None]
        mu = (cs[b] - cs[a]) / ln
        var = (cs2[b] - cs2[a]) / ln - mu * mu
        sd = np.sqrt(np.maximum(var, 0.0))
        rough = (csd[b - 1] - csd[a]) / (ln - 1.0)
        f = np.stack([mu, sd, rough], axis=-1)  # (m, p, d, 3)
        return np.ascontiguousarray(f.transpose(0, 2, 1, 3).reshape(len(starts), self.dim))

    def fit(self, recordings, stride: int = 1) -> StatsFeaturizer:
        """Set the standardisation from the windows (every ``stride``-th start) of the normal
        recordings (each (T, d), channel-standardised); those shorter than the window are
        skipped. Returns self."""
        rows = []
        for r in recordings:
            if len(r) >= self.window:
                starts = np.arange(0, len(r) - self.window + 1, max(1, int(stride)))
                for i in range(0, len(starts), 20000):
                    rows.append(self.raw(r, starts[i : i + 20000]))
        if not rows:
            raise ValueError(f"no normal recording holds a window of {self.window} steps")
        F = np.concatenate(rows)
        self.loc = F.mean(axis=0)
        self.scale = np.maximum(F.std(axis=0), ZNORM_FLOOR)
        return self

    def features(self, x: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Standardised statistics (len(starts), dim) (:meth:`raw` minus ``loc``, over
        ``scale``); RuntimeError before :meth:`fit`."""
        if self.loc is None:
            raise RuntimeError("StatsFeaturizer.features before fit: no standardisation yet")
        return (self.raw(x, starts) - self.loc) / self.scale


@dataclass
class Reference:
    """Features of the normal windows (rows of ``F``), their squared norms, and where each
    window starts in the concatenated normal data (``gstart``, for held-out blocks)."""

    F: np.ndarray
    gstart: np.ndarray

    def __post_init__(self):
        self.sq = np.einsum("ij,ij->i", self.F, self.F)

    def subset(self, keep: np.ndarray, keep_floor: bool = False) -> Reference:
        """The rows ``keep``; with ``keep_floor`` a complexity-corrected reference keeps this
        one's complexity floor (a held-out calibration reference scores as the model does)."""
        out = Reference(self.F[keep], self.gstart[keep])
        if keep_floor and getattr(self, "_cid", None) is not None:
            F = np.ascontiguousarray(self._cid[0][keep])
            out._cid = (F, np.einsum("ij,ij->i", F, F), self.F[keep, -1], self._cid[3])
        return out

    def __len__(self) -> int:
        return self.F.shape[0]


def _cid_parts(ref: Reference):
    """(features, squared norms, complexities, floor) of a reference whose last column is the
    complexity estimate; cached on the reference."""
    parts = getattr(ref, "_cid", None)
    if parts is None:
        F = np.ascontiguousarray(ref.F[:, :-1])
        ce = ref.F[:, -1]
        # at least CID_FLOOR x ZNORM_FLOOR channel standard units: a mostly flat normal
        # stretch (median complexity 0) leaves no window infinitely far
        floor = CID_FLOOR * max(float(np.median(ce)) if len(ce) else 0.0, ZNORM_FLOOR)
        parts = (F, np.einsum("ij,ij->i", F, F), ce, floor)
        ref._cid = parts
    return parts


def nearest(Q, ref: Reference, k: int, d: int, norm: float, max_bytes: int, cid: bool = False):
    """For each row of Q: window novelty (mean of the k smallest distances / ``norm``, the
    featurizer's: sqrt(w d) for segment means, sqrt(dim) for statistics) and
    the per-channel shares (rows sum to 1) of the squared distance to the nearest reference
    window. Arrays (n,), (n, d).

    With ``cid`` the last column of ``Q`` and of ``ref.F`` is each window's complexity
    estimate ``c`` and the distance is the complexity-invariant one (module docstring):
    the Euclidean distance of the other columns times ``(max(c_q, c_r) + e) / (min(c_q, c_r)
    + e)``, ``e`` = :data:`CID_FLOOR` x the reference's median complexity (at least x
    :data:`ZNORM_FLOOR`)."""
    n = Q.shape[0]
    m = len(ref)
    k = min(k, m)
    rows = max(1, int(max_bytes) // (4 * 8 * max(m, 1)))
    nov = np.empty(n)
    share = np.empty((n, d))
    if cid:
        RF, rsq, rce, floor = _cid_parts(ref)
        Q, qce = Q[:, :-1], Q[:, -1]
    else:
        RF, rsq = ref.F, ref.sq
    qq = np.einsum("ij,ij->i", Q, Q)
    scale = norm
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        d2 = Q[i0:i1] @ RF.T
        d2 *= -2.0
        d2 += qq[i0:i1, None]
        d2 += rsq[None, :]
        np.maximum(d2, 0.0, out=d2)
        if cid:
            a, b = qce[i0:i1, None] + floor, rce[None, :] + floor  # floor > 0
            cf = np.maximum(a, b) / np.minimum(a, b)
            d2 *= cf * cf
        rows_i = np.arange(i1 - i0)
        idx = np.argmin(d2, axis=1)
        if k == 1:
            near = d2[rows_i, idx][:, None]
            cols = idx[:, None]
        else:
            cols = np.argpartition(d2, k - 1, axis=1)[:, :k]
            near = np.take_along_axis(d2, cols, axis=1)
        # rounding of the expansion, not distance (module docstring)
        rounding = near <= DIST_RTOL * (qq[i0:i1, None] + rsq[cols])
        nov[i0:i1] = np.sqrt(np.where(rounding, 0.0, near)).mean(axis=1) / scale
        diff = Q[i0:i1] - RF[idx]
        per = (diff * diff).reshape(i1 - i0, d, -1).sum(axis=2)
        # the nearest window at distance 0: no channel stands out
        per[d2[rows_i, idx] <= DIST_RTOL * (qq[i0:i1] + rsq[idx])] = 0.0
        tot = per.sum(axis=1, keepdims=True)
        share[i0:i1] = np.where(tot > 0, per / np.where(tot > 0, tot, 1.0), 1.0 / d)
    return nov, share


def aggregate_steps(starts, values, window: int, t0: int, t1: int, how: str) -> np.ndarray:
    """Rows for steps t0..t1-1 from window rows ``values`` (n, 1 + d) (column 0 the window
    novelty) at sorted ``starts``: the row of the covering window with the largest novelty
    (``how="max"``, ties to the earliest window) or the mean of the covering rows ("mean"),
    summed in window order so the result does not depend on how the steps were batched."""
    t = np.arange(t0, t1)
    lo = np.searchsorted(starts, t - window + 1, side="left")
    hi = np.searchsorted(starts, t, side="right")
    count = hi - lo
    if t1 > t0 and count.min() < 1:
        raise AssertionError("a step is covered by no window")  # the grid guarantees one
    kmax = int(count.max()) if t1 > t0 else 0
    n = len(starts)
    if how == "max":
        best = lo.copy()
        for j in range(1, kmax):
            cand = np.minimum(lo + j, n - 1)
            better = (lo + j < hi) & (values[cand, 0] > values[best, 0])
            best = np.where(better, cand, best)
        return values[best]
    acc = np.zeros((t1 - t0, values.shape[1]))
    for j in range(kmax):
        cand = np.minimum(lo + j, n - 1)
        acc += np.where((lo + j < hi)[:, None], values[cand], 0.0)
    return acc / count[:, None]


class Stream:
    """Score one recording chunk by chunk (module docstring, "Streaming"): ``push(chunk)``
    returns the rows (novelty, channel shares) of the steps now final, ``finish()`` the rest.
    ``chunk`` is already standardised, (n, d)."""

    def __init__(self, feat: Featurizer, ref: Reference, k: int, stride: int, how: str,
                 max_bytes: int, on_block=None):  # fmt: skip
        self.feat, self.ref, self.k, self.stride, self.how = feat, ref, k, stride, how
        self.max_bytes = max_bytes
        self.on_block = on_block
        self.w = feat.window
        self.buf = np.zeros((0, feat.d))
        self.buf_start = 0  # global index of buf[0]
        self.n_seen = 0
        self.next_start = 0
        self.starts: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.emitted = 0
        self.finished = False
        # windows per block: features, distances and shares within a quarter of the budget
        per_window = 8 * (feat.dim * 3 + 4 * max(len(ref), 1) + 2 * feat.d)
        self.block = max(1, int(max_bytes) // per_window)

    def _score(self, gstarts: np.ndarray) -> None:
        for i in range(0, len(gstarts), self.block):
            g = gstarts[i : i + self.block]
            F = self.feat.features(self.buf, g - self.buf_start)
            nov, share = nearest(F, self.ref, self.k, self.feat.d, self.feat.norm, self.max_bytes,
                                 cid=getattr(self.feat, "cid", False))  # fmt: skip
            self.starts.append(g)
            self.values.append(np.column_stack([nov, share]))
            if self.on_block is not None:
                self.on_block(len(g))

    def _emit(self, upto: int) -> np.ndarray:
        """Rows of steps emitted..upto-1; drops the windows that cover no later step."""
        if upto <= self.emitted:
            return np.zeros((0, 1 + self.feat.d))
        starts = np.concatenate(self.starts)
        values = np.concatenate(self.values)
        out = aggregate_steps(starts, values, self.w, self.emitted, upto, self.how)
        self.emitted = upto
        keep = starts + self.w > upto
        self.starts, self.values = [starts[keep]], [values[keep]]
        return out

    def push(self, chunk: np.ndarray) -> np.ndarray:
        if self.finished:
            raise RuntimeError("this stream is finished")
        chunk = np.asarray(chunk, dtype=np.float64)
        self.buf = np.concatenate([self.buf, chunk]) if len(self.buf) else chunk
        self.n_seen += len(chunk)
        last = self.n_seen - self.w  # the last start with a full window
        if last < self.next_start:
            return self._trim(np.zeros((0, 1 + self.feat.d)))
        g = np.arange(self.next_start, last + 1, self.stride)
        self.next_start = int(g[-1]) + self.stride
        self._score(g)
        return self._trim(self._emit(int(g[-1]) + 1))

    def _trim(self, out: np.ndarray) -> np.ndarray:
        keep_from = max(self.buf_start, self.n_seen - self.w)  # the last w steps
        if keep_from > self.buf_start:
            self.buf = self.buf[keep_from - self.buf_start :].copy()
            self.buf_start = keep_from
        return out

    def finish(self) -> np.ndarray:
        """Rows of the steps not yet emitted (the final window added when the grid misses the
        last step). ValueError when the recording is shorter than the window."""
        if self.finished:
            raise RuntimeError("this stream is finished")
        self.finished = True
        if self.n_seen < self.w:
            raise ValueError(
                f"the recording has {self.n_seen} steps, fewer than the window ({self.w})"
            )
        end = self.n_seen - self.w
        done = np.concatenate(self.starts) if self.starts else np.zeros(0, dtype=np.int64)
        if not (done.size and done[-1] == end):
            self._score(np.array([end]))
        return self._emit(self.n_seen)


def score_recording(x, feat, ref, k, stride, how, max_bytes, on_block=None) -> np.ndarray:
    """Rows (T, 1 + d) of one standardised recording x (T, d), in one pass."""
    s = Stream(feat, ref, k, stride, how, max_bytes, on_block)
    head = s.push(x)
    return np.concatenate([head, s.finish()])


class CausalScales:
    r"""Each member's scale at each step from its calibration and what it has seen so far of
    the recording (docs/windows.md, "Seventh round"): at step :math:`t` in block
    :math:`b = \lfloor t / E \rfloor` (``every`` = :math:`E` steps), member :math:`i`'s
    z is :math:`(s_{i,t} - m) / q`, :math:`(m, q)` = ``tail(H)`` (the median and the tail
    scale) of :math:`H` = its calibration step novelties (at most ``history`` of them: evenly
    spaced order statistics beyond that) and its own step novelties of this recording from
    :math:`\max(0, c - \text{history})` to :math:`c = \max(0, bE - g)` (``gap`` :math:`g`,
    the longest member window, so that no window covering a block's steps enters its scale).
    Only the past is used: a stream scored chunk by chunk gets the same z as in one pass, and
    the memory stays within ``history`` + ``every`` + ``gap`` steps a member."""

    def __init__(self, calibration, tail, gap: int, every: int, history: int):
        self.cal = [self._summary(np.asarray(c, dtype=np.float64), history) for c in calibration]
        self.tail, self.gap, self.every, self.history = tail, int(gap), int(every), int(history)
        self.past = [np.zeros(0) for _ in self.cal]
        self.past_start = 0  # step index of past[i][0]
        self.t = 0  # step index of the next novelty
        self._block = (-1, None)  # the last block's (index, [(median, scale)] per member)

    @staticmethod
    def _summary(c: np.ndarray, history: int) -> np.ndarray:
        if len(c) <= history:
            return c
        s = np.sort(c)
        return s[((np.arange(history) + 0.5) * len(c) / history).astype(np.int64)]

    def _scales(self, b: int) -> list:
        """Block ``b``'s (median, scale) per member, computed once a block (a stream pushed
        step by step asks for the same block up to ``every`` times)."""
        if self._block[0] != b:
            cut = max(0, b * self.every - self.gap)
            lo = max(0, cut - self.history)
            self._block = (b, [
                self.tail(np.concatenate([c, p[lo - self.past_start : cut - self.past_start]]))
                for c, p in zip(self.cal, self.past)
            ])  # fmt: skip
        return self._block[1]

    def z(self, nov: np.ndarray) -> np.ndarray:
        """z (m, n) of the members' novelties (m, n) of the next n steps."""
        m, n = nov.shape
        self.past = [np.concatenate([p, v]) for p, v in zip(self.past, nov)]
        out = np.empty((m, n))
        t0, t1 = self.t, self.t + n
        for b in range(t0 // self.every, -(-t1 // self.every) if n else t0 // self.every):
            a, e = max(t0, b * self.every), min(t1, (b + 1) * self.every)
            for i, (med, q) in enumerate(self._scales(b)):
                out[i, a - t0 : e - t0] = (nov[i, a - t0 : e - t0] - med) / q
        self.t = t1
        # keep what the next block can still need
        keep = max(0, (t1 // self.every) * self.every - self.gap - self.history)
        if keep > self.past_start:
            self.past = [p[keep - self.past_start :] for p in self.past]
            self.past_start = keep
        return out


class Ensemble:
    """Streams of several members over the same recording: one member's rows as they are;
    several: the mean weighted by ``weights`` (``combine`` "mean"; None: equal weights) or the
    maximum ("max") of the members' z-scores ``(novelty - median) / scale`` (``scales``: each
    member's (median, scale) of its calibration, or a :class:`CausalScales`), with the channel
    shares of the member whose z is largest at that step. Members of different windows or
    strides emit their steps at different times: the rows of a step are held until every
    member has emitted it."""

    def __init__(self, streams: list[Stream], scales, combine: str = "mean", weights=None):
        self.streams = streams
        self.weights = weights
        self.scales = scales
        self.combine = combine
        self.pending = [np.zeros((0, 1 + s.feat.d)) for s in streams]

    def push(self, chunk: np.ndarray) -> np.ndarray:
        return self._combine([s.push(chunk) for s in self.streams])

    def finish(self) -> np.ndarray:
        return self._combine([s.finish() for s in self.streams])

    def _combine(self, rows: list[np.ndarray]) -> np.ndarray:
        if self.scales is None:
            return rows[0]
        self.pending = [np.concatenate([p, r]) for p, r in zip(self.pending, rows)]
        n = min(len(p) for p in self.pending)
        rows = [p[:n] for p in self.pending]
        self.pending = [p[n:] for p in self.pending]
        if isinstance(self.scales, CausalScales):
            z = self.scales.z(np.stack([r[:, 0] for r in rows]))
        else:
            z = np.stack([(r[:, 0] - m) / q for r, (m, q) in zip(rows, self.scales)])
        best = np.argmax(z, axis=0)
        shares = np.stack([r[:, 1:] for r in rows])[best, np.arange(z.shape[1])]
        if self.combine == "max":
            nov = z.max(axis=0)
        else:
            nov = np.average(z, axis=0, weights=self.weights)
        return np.column_stack([nov, shares])
