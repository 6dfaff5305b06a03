r"""Novelty inside long recordings: a score, a p-value and a flag per time step.

``WindowNoveltyDetector().fit(normal)`` cuts the normal recording(s) into sliding windows of
``window`` steps and keeps their features (:mod:`novelty.windows._engine`: channel-standardised
windows reduced to segment means). A new recording is cut the same way; each window's novelty
is its distance to the nearest normal windows, and each step's novelty is the maximum (or
mean) over the windows covering it. ``score_samples`` is minus that novelty (higher = more
normal), one value per step.

**Calibration per step.** Overlapping windows share steps, so neither windows nor steps are
independent, and the normal windows cannot score themselves. The concatenated normal data is
cut into ``n_folds`` contiguous blocks (fewer when a block would hold fewer than two windows or
one longest member window); for each block, the reference is every normal window
that ends at least ``window`` steps before the block or starts at least ``window`` steps after
it, and the block's steps are scored as a recording of their own (the ``window - 1`` steps next to a
cut, covered by fewer windows than inside a recording, are left out). With members of several
windows ("multiscale", "ladder"), each member's reference leaves out the windows that overlap the
block or come within ``min(member window, window)`` steps of it (a member longer than the
window keeps the window's gap: a gap of its own length would leave almost no reference when
the normal data is short), and the steps left out near a cut follow the longest window, so
every member scores the same steps; the calibration novelty of a step is then the members'
combination, as for a new step. When the normal data holds fewer than
``MIN_CALIBRATION_BLOCKS`` (8) longest member windows, ``fit`` warns: the held-out blocks are
then few and the flag share of new normal data varies much from fit to fit (docs/windows.md).
These held-out step novelties :math:`c_1..c_n` are ``calibration_scores_``; a new step of
novelty :math:`s` gets the conformal p-value :math:`p = (1 + \#\{c_i \ge s\}) / (n + 1)`
and ``predict`` flags :math:`p \le` ``contamination``.

What ``contamination`` guarantees: for a new recording of the same (stationary) normal
process, the *expected share of its steps* that are flagged is at most about
``contamination``. Each held-out step is scored by a reference that excludes its own
neighbourhood, as a new step is; the held-out references are (K-1)/K of the normal data, so
held-out novelties are, if anything, larger than a new step's, which errs on the side of fewer
flags. It is a statement about the mean over steps, not a per-recording binomial count: flags
come in runs (one unusual stretch covers ``window`` steps), so the share of flagged steps in
one recording varies much more than a binomial with ``T`` trials would.
``tests/test_windows.py`` checks it by simulation: the flag shares of independent pure-normal
recordings (AR(1) noise, a noisy sine) average to ``contamination`` within a confidence
interval computed from their spread across recordings. A process that drifts away from the
normal data is, correctly, flagged more.

**Streaming.** :meth:`stream` returns a scorer that takes a recording chunk by chunk; each member
keeps the last steps of its own window and never recomputes a window, and the scores it
returns equal ``score_samples`` of the whole recording.

**Memory.** ``max_memory`` (bytes) bounds the working memory of scoring: windows are scored in
blocks whose distance matrices fit in it, and the reference is thinned (a larger reference
stride) so that its features take at most a quarter of it. Beyond that, scoring holds a copy
of the recording and, for each member, one row of ``d + 1`` floats per window and per step.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, OutlierMixin
from sklearn.utils.validation import check_is_fitted

from .._constraints import Interval, StrOptions

__all__ = ["WindowNoveltyDetector", "WindowExplanation", "WindowStream"]

DEFAULT_MAX_MEMORY = 256 * 2**20
#: the choices ``detector`` and ``aggregate`` take when None (decided on the benchmark's
#: tuning half: docs/windows.md)
DEFAULT_DETECTOR = "ladder"
DEFAULT_AGGREGATE = "mean"
DEFAULT_MEMBER_SCALE = "tail"
DETECTORS = ("knn", "znorm-knn", "knn+znorm", "multiscale", "ladder", "stats-knn", "stats2-knn",
             "ladder+stats", "cid-knn", "cid-znorm-knn")  # fmt: skip
#: the members of each detector: (window multiple, kind, weight in the mean); kind False:
#: segment means, True: z-normalised segment means, "stats" / "stats2": window statistics over
#: the whole window / its two halves (:class:`novelty.windows._engine.StatsFeaturizer`;
#: opt-in, docs/windows.md "Fourth round")
MEMBERS = {
    "knn": ((1, False, 1.0),),
    "znorm-knn": ((1, True, 1.0),),
    "stats-knn": ((1, "stats", 1.0),),
    "stats2-knn": ((1, "stats2", 1.0),),
    "knn+znorm": ((1, False, 1 / 2), (1, True, 1 / 2)),
    "multiscale": ((1, False, 1 / 3), (2, False, 1 / 3), (1, True, 1 / 3)),
    # level members at w/2, w, 2w, 4w share 2/3, the shape member at w has 1/3
    "ladder": (
        (0.5, False, 1 / 6),
        (1, False, 1 / 6),
        (2, False, 1 / 6),
        (4, False, 1 / 6),
        (1, True, 1 / 3),
    ),  # fmt: skip
    # opt-in (issue 32, fourth round; not adopted: docs/windows.md): the ladder's level
    # members share 4/9, its shape member 2/9, statistics members at w/2, w, 2w, 4w 1/3
    # opt-in (issue 32, fifth round; not adopted: docs/windows.md): one member at the window
    # with the complexity-invariant distance, on channel-standardised or z-normalised windows
    "cid-knn": ((1, "cid", 1.0),),
    "cid-znorm-knn": ((1, "zcid", 1.0),),
    "ladder+stats": (
        (0.5, False, 1 / 9),
        (1, False, 1 / 9),
        (2, False, 1 / 9),
        (4, False, 1 / 9),
        (1, True, 2 / 9),
        (0.5, "stats", 1 / 12),
        (1, "stats", 1 / 12),
        (2, "stats", 1 / 12),
        (4, "stats", 1 / 12),
    ),  # fmt: skip
}
#: the upper quantile of the "tail" member scale
TAIL_QUANTILE = 99.0
#: ``member_scale="causal"``: the scales are renewed every so many steps, from at most so many
#: calibration novelties and past steps of the recording (docs/windows.md, "Seventh round")
CAUSAL_EVERY = 64
CAUSAL_HISTORY = 8192
#: a member window longer than the window is clipped to ``total // MEMBER_CAP_BLOCKS`` normal
#: steps (and half the longest recording)
MEMBER_CAP_BLOCKS = 4
#: ``fit`` warns when the normal data holds fewer longest member windows than this: the
#: calibration is then noisy and conservative (docs/windows.md, "Short normal data")
MIN_CALIBRATION_BLOCKS = 8
#: the gap between a held-out block and its reference: "window" (the default) ``min(member
#: window, window_)`` steps, "member" the member's own window (the rule before issue 32's
#: short-data fix; kept for experiments/window_bench/calibration_short*.py)
CALIBRATION_GAP = "window"


class WindowNoveltyDetector(OutlierMixin, BaseEstimator):
    r"""Novelty of each time step of long recordings against normal recordings.

    Parameters
    ----------
    window : "auto" (default) or int >= 2. "auto": the dominant period of the normal data
        (autocorrelation), clipped to [16, min(512, T/4)] (:func:`novelty.windows._period.
        auto_window`); ``window_`` holds the value used.
    stride : "auto" (default) or int >= 1, steps between window starts when scoring (and in
        calibration). "auto": ``max(1, window // 8)`` for each member's window, so each step
        is covered by about 8 windows of each member. At most the shortest member window
        (``min(member_windows_)``: the window, or for "ladder" its half, at least
        ``min(window, 16)``); a longer one is refused.
    detector : None (default, the tuned choice: "ladder"), "knn", "znorm-knn",
        "knn+znorm", "multiscale" or "ladder". "knn": windows standardised per channel by the
        normal data's statistics (level and shape); "znorm-knn": each window and channel
        z-normalised on its own (shape only, level and scale ignored); "knn+znorm": both,
        each member's step novelty :math:`s` put on the scale of its own held-out
        calibration novelties, :math:`z = (s - \operatorname{median}) / \mathrm{scale}`
        (``member_scale``), and the z averaged (as :class:`novelty.KernelNoveltyDetector`
        combines its members); "multiscale": three members so combined, "knn" at the
        window, "knn" at twice the window and "znorm-knn" at the window; "ladder": "knn" at
        :math:`w/2, w, 2w, 4w` and "znorm-knn" at :math:`w`, combined as
        :math:`z = \tfrac16 (z_{w/2} + z_w + z_{2w} + z_{4w}) + \tfrac13 z^{\mathrm{shape}}_w`:
        a hedge against a period estimate off by a factor of two or four (and a unit that
        spans several periods), with the level members sharing two thirds, as in
        "multiscale". A member at :math:`m w` has ``round(m * n_segments)`` segments (so
        segments keep their length) and its window is clipped to
        ``[min(w, 16), max(w, cap)]``, ``cap`` a quarter of the normal steps and half the
        longest recording. ``member_windows_`` holds the members' windows. The channel
        shares are those of the member with the largest z.
        Opt-in, not tuned as default (docs/windows.md, "Fourth round"): "stats-knn", one
        member of window statistics (per channel the mean, standard deviation and mean
        absolute first difference, each standardised by the normal windows':
        :class:`novelty.windows._engine.StatsFeaturizer`), insensitive to where in the window
        a pattern lies; "stats2-knn", the same over the window's two halves;
        "ladder+stats", the ladder's members weighted 4/9 (level) and 2/9 (shape) with
        statistics members at :math:`w/2, w, 2w, 4w` sharing 1/3. The model file holds
        the statistics members' standardisation. Opt-in, not adopted (docs/windows.md,
        "Fifth round"): "cid-knn" and "cid-znorm-knn", one member like "knn" or
        "znorm-knn" whose distance is complexity-invariant: the Euclidean distance times
        :math:`(\max(c_q, c_r) + e) / (\min(c_q, c_r) + e)`, :math:`c` a window's
        root-mean-square first difference, :math:`e` 5 % of the normal windows' median
        :math:`c`, at least 0.0025 (:mod:`novelty.windows._engine`).
    aggregate : None (default, the tuned choice), "max" or "mean": a step's novelty from the
        windows covering it.
    combine : "mean" (default) or "max": how several members' z-scores are combined (the
        mean is weighted as above; the maximum ignores the weights).
    member_scale : None (default, the tuned choice: "tail"), "tail" or "iqr": the scale of a
        member's z, from its held-out calibration novelties :math:`c`: "tail"
        :math:`q_{0.99}(c) - \operatorname{median}(c)` (the members agree where the flag
        threshold lies, in normal data's upper tail), "iqr" the interquartile range (either
        falls back to the standard deviation, then 1, when it is 0). ``member_scale_`` holds
        the one used. "causal": the tail scale, renewed every ``CAUSAL_EVERY`` (64) steps while
        a recording is scored from the member's calibration novelties and its own step
        novelties of that recording so far (up to the longest member window before the block;
        at most ``CAUSAL_HISTORY`` = 8192 of each), so that a stream that differs from the
        held-out normal blocks as a whole (a drift, a normal stretch scored against less of
        itself) does not let one member's offset drown the others; the price: a long or
        recurring novelty raises its own members' scales and scores lower as it goes on
        (:class:`novelty.windows._engine.CausalScales`; docs/windows.md, "Seventh round").
        ``calibration_scores_`` stay on the fixed calibration scales.
    contamination : float in (0, 0.5], default 0.01, the expected share of steps of new
        normal data that ``predict`` flags (module docstring: what it guarantees).
    n_neighbors : int >= 1, default 1, the window novelty is the mean distance to this many
        nearest normal windows.
    n_segments : int >= 1, default 32, segment means per channel and window (PAA; at most
        ``window``, which makes the distance exact).
    n_folds : int >= 2, default 5, held-out blocks of the calibration (fewer when the normal
        data holds fewer than ``2 * window * n_folds`` steps, or fewer than ``n_folds``
        longest member windows).
    max_reference : int >= 1, default 20000, the most normal windows kept per member (the
        reference stride grows beyond that).
    max_memory : None (256 MiB) or int >= 1, bytes of working memory (module docstring).
    missing : "interpolate" (default) or "error": NaN in a recording is interpolated per channel
        (:func:`novelty.interpolate_missing`) or refused. Inf is always an error.
    verbose : bool or int, a progress bar on stderr during fit and scoring.

    Input: one recording as an array (T, d) or (T,) (a 2-D array is one recording: T steps by
    d channels), a pandas DataFrame (rows = steps, in index order; its columns name the
    channels and must be numeric) or Series; ``fit`` and ``update`` also take a list of
    recordings or an array (n, T, d). Rows are taken as equally spaced steps.

    Attributes
    ----------
    window_, stride_, reference_stride_, detector_, aggregate_, combine_ : what was used
        (fixed at fit: a parameter changed by ``set_params`` takes effect at the next fit).
    channel_names_ : list of str. mean_, scale_ : the channel standardisation.
    calibration_scores_ : held-out step novelties (module docstring). threshold_ : the
        novelty above which a step is flagged; ``offset_ = -threshold_``.
    n_folds_ : the held-out blocks used. fit_seconds_ : wall time of fit.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(4000)
    >>> normal = np.sin(2 * np.pi * t / 50) + 0.1 * rng.normal(size=4000)
    >>> det = WindowNoveltyDetector().fit(normal)
    >>> det.window_
    50
    >>> new = np.sin(2 * np.pi * t[:1000] / 50) + 0.1 * rng.normal(size=1000)
    >>> new[500:540] = 0.0
    >>> det.member_windows_  # knn at 25, 50, 100 and 200 steps, znorm-knn at 50
    [25, 50, 100, 200, 50]
    >>> flagged = np.flatnonzero(det.predict(new) == -1)
    >>> bool(((flagged >= 300) & (flagged < 740)).mean() > 0.9)  # within the longest window
    True
    """

    _parameter_constraints = {
        "window": [StrOptions({"auto"}), Interval(Integral, 2, None, closed="left")],
        "stride": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "detector": [None, StrOptions(set(DETECTORS))],
        "aggregate": [None, StrOptions({"max", "mean"})],
        "combine": [StrOptions({"mean", "max"})],
        "member_scale": [None, StrOptions({"iqr", "tail", "causal"})],
        "contamination": [Interval(Real, 0, 0.5, closed="right")],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "n_segments": [Interval(Integral, 1, None, closed="left")],
        "n_folds": [Interval(Integral, 2, None, closed="left")],
        "max_reference": [Interval(Integral, 1, None, closed="left")],
        "max_memory": [None, Interval(Integral, 1, None, closed="left")],
        "missing": [StrOptions({"interpolate", "error"})],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        window="auto",
        stride="auto",
        detector: str | None = None,
        aggregate: str | None = None,
        combine: str = "mean",
        member_scale: str | None = None,
        contamination: float = 0.01,
        n_neighbors: int = 1,
        n_segments: int = 32,
        n_folds: int = 5,
        max_reference: int = 20000,
        max_memory: int | None = None,
        missing: str = "interpolate",
        verbose: bool | int = False,
    ):
        self.window = window
        self.stride = stride
        self.detector = detector
        self.aggregate = aggregate
        self.combine = combine
        self.member_scale = member_scale
        self.contamination = contamination
        self.n_neighbors = n_neighbors
        self.n_segments = n_segments
        self.n_folds = n_folds
        self.max_reference = max_reference
        self.max_memory = max_memory
        self.missing = missing
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None) -> WindowNoveltyDetector:
        """Fit on normal data: one recording, or a list of recordings (``y`` is ignored)."""
        from ..detector._progress import progress

        self._check_params()
        with progress(self.verbose, "fit"):
            return self._fit(X)

    def _fit(self, X) -> WindowNoveltyDetector:
        start = time.perf_counter()
        recs, names = _read(X, self.missing, many=True, name="X")
        d = recs[0].shape[1]
        for i, r in enumerate(recs):
            if r.shape[1] != d:
                raise ValueError(
                    f"recording {i} has {r.shape[1]} channels, recording 0 has {d}: all normal "
                    "recordings must have the same channels"
                )
        self.n_channels_ = d
        self.channel_names_ = names or [f"channel_{c}" for c in range(d)]
        self._from_frame = names is not None
        allx = np.concatenate(recs)
        self.mean_ = allx.mean(axis=0)
        sd = allx.std(axis=0)
        self.scale_ = np.where(sd > 0, sd, 1.0)
        z = [(r - self.mean_) / self.scale_ for r in recs]
        total = sum(len(r) for r in z)
        if self.window == "auto":
            from ._period import auto_window

            w = auto_window(z)
        else:
            w = int(self.window)
        if total < 4 * w or max(len(r) for r in z) < 2 * w:
            raise ValueError(
                f"window={w} needs at least {4 * w} normal steps with one recording of at least "
                f"{2 * w} (the calibration holds out blocks of at least two windows); got "
                f"{total} steps, the longest recording {max(len(r) for r in z)}: pass more "
                "normal data or a smaller window"
            )
        if self.stride != "auto" and int(self.stride) > w:
            raise ValueError(f"stride={self.stride} is larger than the window ({w}): steps would "
                             "be left uncovered")  # fmt: skip
        self.window_ = w
        self.stride_ = max(1, w // 8) if self.stride == "auto" else int(self.stride)
        self.detector_ = self.detector or DEFAULT_DETECTOR
        self.aggregate_ = self.aggregate or DEFAULT_AGGREGATE
        self.combine_ = self.combine  # fixed with the calibration: set_params needs a refit
        # a member at m x window: at most what the data allows for the window itself
        cap = min(total // MEMBER_CAP_BLOCKS, max(len(r) for r in z) // 2)
        self.member_windows_ = [_member_window(m, w, cap) for m, _, _ in MEMBERS[self.detector_]]
        if self.stride != "auto" and int(self.stride) > min(self.member_windows_):
            raise ValueError(
                f"stride={self.stride} is larger than the shortest member window "
                f"({min(self.member_windows_)}, of detector {self.detector_!r}): steps would be "
                "left uncovered; pass a smaller stride or stride='auto'"
            )
        self._warn_short(total)
        self._featurizers = self._make_featurizers()
        self._budget = int(self.max_memory or DEFAULT_MAX_MEMORY)
        # the shortest member has the most windows: it sets the reference stride
        w_min = min(self.member_windows_)
        n_windows = sum(max(0, len(r) - w_min + 1) for r in z)
        self.reference_stride_ = max(1, math.ceil(n_windows / self._reference_cap()))
        self._fit_statistics(z)
        offsets = np.cumsum([0] + [len(r) for r in z])
        self.references_ = self._thinned(
            [self._reference(f, z, offsets[:-1]) for f in self._featurizers]
        )
        self.n_normal_steps_ = int(total)
        cal = self._calibrate(z, offsets)
        self.member_scale_ = self.member_scale or DEFAULT_MEMBER_SCALE
        scale = _robust_scale if self.member_scale_ == "iqr" else _tail_scale
        self.member_scales_ = None if len(cal) == 1 else [scale(c) for c in cal]
        # "causal": each member's calibration novelties seed its scale while scoring
        self.member_calibration_ = (
            [np.asarray(c, dtype=np.float64) for c in cal]
            if self.member_scale_ == "causal" and len(cal) > 1
            else None
        )
        self.calibration_scores_ = self._combine_novelty(cal)
        self._set_threshold()
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def _warn_short(self, total: int) -> None:
        """UserWarning when the normal data holds fewer than ``MIN_CALIBRATION_BLOCKS``
        windows of the longest member (docs/windows.md, "Short normal data")."""
        longest, b = self.max_window_, MIN_CALIBRATION_BLOCKS
        if total // longest >= b:
            return
        top = max(m for m, _, _ in MEMBERS[self.detector_])
        # the longest member unclipped: what more normal data of the same process would need at
        # this window (window="auto" on more data may choose a longer one: the message names it)
        need = b * max(
            _member_window(m, self.window_, 2**62) for m, _, _ in MEMBERS[self.detector_]
        )
        # the largest window whose longest member (at most top x window) fits b times; below 2
        # (fewer than 2 * ceil(b * top) steps) no window does
        smaller = total // math.ceil(b * top)
        alt = (
            f"or a smaller window= (at most {smaller} for detector {self.detector_!r})"
            if smaller >= 2
            else f"(no window >= 2 is small enough for detector {self.detector_!r})"
        )
        warnings.warn(
            f"the normal data has {total} steps, only {total // longest} windows of the longest "
            f"member window ({longest} steps; fewer than {b}): the calibration has few "
            "independent held-out blocks, so the share of flagged steps on new normal data "
            "varies much from fit to fit; pass more normal data (at least "
            f"{need} steps with window={self.window_}) {alt}",
            UserWarning,
            stacklevel=4,
        )

    @property
    def reference_(self):
        """The normal windows' features (of the first member when there are two)."""
        check_is_fitted(self, "references_")
        return self.references_[0]

    @property
    def max_window_(self) -> int:
        """The longest member window (the data a recording and a held-out block need)."""
        return int(max(self._member_windows()))

    def _window_words(self) -> str:
        """The window a recording needs, in an error message: ``window_``, or the longest
        member window when a member's is longer (e.g. "100: the longest member's; window_ is
        50")."""
        if self.max_window_ == self.window_:
            return str(self.window_)
        return f"{self.max_window_}: the longest member's; window_ is {self.window_}"

    def _member_windows(self) -> list:
        ws = getattr(self, "member_windows_", None)
        return list(ws) if ws is not None else [self.window_] * len(MEMBERS[self.detector_])

    def _member_strides(self) -> list:
        """A member's stride: ``stride`` when set, else its window // 8. ValueError when
        ``stride`` is longer than the shortest member window (set after fit)."""
        if self.stride != "auto":
            shortest = min(f.window for f in self._featurizers)
            if int(self.stride) > shortest:
                raise ValueError(
                    f"stride={self.stride} is larger than the shortest member window "
                    f"({shortest}) of this fitted model: steps would be left uncovered; set a "
                    "smaller stride (or stride='auto') and refit"
                )
            return [int(self.stride)] * len(self._featurizers)
        return [max(1, f.window // 8) for f in self._featurizers]

    def _make_featurizers(self):
        """One featurizer per member (``MEMBERS``): a member at ``m`` x the window has
        ``m`` x ``n_segments`` segments, so its segments are as long as the base member's."""
        from ._engine import Featurizer, StatsFeaturizer

        out = []
        for (m, zn, _), wm in zip(MEMBERS[self.detector_], self._member_windows()):
            if zn in ("stats", "stats2"):
                parts = 2 if zn == "stats2" else 1
                out.append(StatsFeaturizer(window=int(wm), d=self.n_channels_, parts=parts))
                continue
            segs = max(1, round(int(self.n_segments) * m))
            cid = zn in ("cid", "zcid")
            out.append(Featurizer(window=int(wm), n_segments=segs, znorm=zn in (True, "zcid"),
                                  d=self.n_channels_, cid=cid))  # fmt: skip
        return out

    def _fit_statistics(self, z) -> None:
        """The statistics members' standardisation, from the normal windows at the reference
        stride (frozen afterwards, as the channel standardisation is)."""
        from ._engine import StatsFeaturizer

        for f in self._featurizers:
            if isinstance(f, StatsFeaturizer):
                f.fit(z, self.reference_stride_)

    def _reference_cap(self) -> int:
        """The most reference windows per member: ``max_reference``, and the members'
        features within a quarter of ``max_memory``."""
        dim = sum(f.dim for f in self._featurizers)
        return max(1, min(int(self.max_reference), self._budget // (4 * 8 * dim)))

    def _thinned(self, refs: list) -> list:
        """The members' references, every other window kept (and ``reference_stride_``
        doubled) while one member holds more than :meth:`_reference_cap` windows (several
        recordings each add a window beyond what the stride alone allows)."""
        cap = self._reference_cap()
        while max(len(ref) for ref in refs) > cap:
            refs = [ref.subset(np.arange(0, len(ref), 2)) for ref in refs]
            self.reference_stride_ *= 2
        return refs

    def _combine_novelty(self, novelties: list) -> np.ndarray:
        """One member: its novelty; several: the weighted mean (``MEMBERS``' weights) or the
        maximum of their z-scores on their own calibration scales."""
        if self.member_scales_ is None:
            return np.asarray(novelties[0], dtype=np.float64)
        z = [(v - m) / q for v, (m, q) in zip(novelties, self.member_scales_)]
        if self.combine_ == "max":
            return np.max(z, axis=0)
        return np.average(z, axis=0, weights=self._member_weights())

    def _member_weights(self) -> np.ndarray:
        return np.array([wt for _, _, wt in MEMBERS[self.detector_]])

    def _reference(self, featurizer, z, offsets):
        from ._engine import Reference, _cid_parts

        feats, gstarts = [], []
        for r, off in zip(z, offsets):
            if len(r) < featurizer.window:
                continue
            starts = np.arange(0, len(r) - featurizer.window + 1, self.reference_stride_)
            for i in range(0, len(starts), 20000):
                feats.append(featurizer.features(r, starts[i : i + 20000]))
            gstarts.append(starts + off)
        ref = Reference(np.concatenate(feats), np.concatenate(gstarts))
        if getattr(featurizer, "cid", False):
            _cid_parts(ref)  # the complexity floor, before held-out subsets copy it
        return ref

    def _calibrate(self, z, offsets) -> list:
        """Held-out step novelties of the normal data, one array per member, on the same
        steps (module docstring). The blocks follow the base window (``window_``), each
        member's reference leaves out the windows that overlap the block or come within
        :func:`_calibration_gap` steps of it, and the
        steps left out near a cut follow the longest member window, so that every member
        scores the same steps."""
        from ..detector._progress import plan, step
        from ._engine import _cid_parts, score_recording

        w = self.max_window_
        total = int(offsets[-1])
        # each block holds two base windows and one longest member window
        k = int(min(self.n_folds, total // (2 * self.window_), total // w))
        bounds = [round(i * total / k) for i in range(k + 1)]
        strides = self._member_strides()
        plan(k)
        out = [[] for _ in self._featurizers]
        used = 0
        for g0, g1 in zip(bounds[:-1], bounds[1:]):
            step(f"block {used + 1} of {k}")
            gaps = [_calibration_gap(f.window, self.window_) for f in self._featurizers]
            keeps = [
                (ref.gstart + f.window + gap <= g0) | (ref.gstart >= g1 + gap)
                for f, ref, gap in zip(self._featurizers, self.references_, gaps)
            ]
            if not all(kp.any() for kp in keeps):
                continue
            for i, (f, ref, kp) in enumerate(zip(self._featurizers, self.references_, keeps)):
                if getattr(f, "cid", False):
                    _cid_parts(ref)  # the model's complexity floor, kept by the subset
                sub = ref.subset(kp, keep_floor=True)
                for r, off in zip(z, offsets[:-1]):
                    a, b = max(g0, off), min(g1, off + len(r))
                    if b - a < w:
                        continue
                    rows = score_recording(
                        r[a - off : b - off], f, sub, int(self.n_neighbors),
                        strides[i], self.aggregate_, self._budget,
                    )  # fmt: skip
                    # a step near a cut has fewer covering windows than inside a recording:
                    # steps within w - 1 of a cut (not of a recording's own ends) are left out
                    lo = min(w - 1, (b - a - w) // 2) if a > off else 0
                    hi = min(w - 1, (b - a - w) // 2) if b < off + len(r) else 0
                    out[i].append(rows[lo : len(rows) - hi, 0])
            used += 1
        if not out[0]:
            raise ValueError(
                f"no held-out block of the normal data could be scored with the longest member "
                f"window ({w} steps; window_ is {self.window_}): pass more normal data (longer "
                "recordings) or a smaller window"
            )
        self.n_folds_ = used
        return [np.concatenate(o) for o in out]

    def _set_threshold(self) -> None:
        from ..detector._calibration import conformal_threshold

        self.threshold_ = conformal_threshold(self.calibration_scores_, self.contamination)
        self.offset_ = -self.threshold_

    # ------------------------------------------------------------------ scoring
    def _rows(self, X) -> np.ndarray:
        """(T, 1 + d) rows of one recording: novelty, channel shares."""
        check_is_fitted(self, "references_")
        self._check_params()
        from ..detector._progress import plan, progress, step

        x = self._standardised(X)
        with progress(self.verbose, "score"):
            plan(sum(max(0, len(x) - f.window) // st + 2
                     for f, st in zip(self._featurizers, self._member_strides())))  # fmt: skip
            s = self._stream(on_block=lambda n: step(n=n))
            head = s.push(x)
            return np.concatenate([head, s.finish()])

    def _stream(self, on_block=None):
        from ._engine import CausalScales, Ensemble, Stream

        streams = [
            Stream(
                f,
                ref,
                int(self.n_neighbors),
                stride,
                self.aggregate_,
                self._budget,
                on_block=on_block,
            )  # fmt: skip
            for f, ref, stride in zip(self._featurizers, self.references_, self._member_strides())
        ]
        scales = self.member_scales_
        if scales is not None and getattr(self, "member_calibration_", None) is not None:
            scales = CausalScales(self.member_calibration_, _tail_scale, self.max_window_,
                                  CAUSAL_EVERY, CAUSAL_HISTORY)  # fmt: skip
        return Ensemble(streams, scales, self.combine_, self._member_weights())

    def _standardised(self, X) -> np.ndarray:
        recs, names = _read(X, self.missing, many=False, name="X")
        x = recs[0]
        if names is not None and self._from_frame:
            missing = [c for c in self.channel_names_ if c not in names]
            if missing:
                raise ValueError(
                    f"channel(s) {missing} of the normal data are missing; got columns {names}"
                )
            x = x[:, [names.index(c) for c in self.channel_names_]]
        elif x.shape[1] != self.n_channels_:
            raise ValueError(
                f"channel mismatch: fitted on recordings with d={self.n_channels_} channels, "
                f"got d={x.shape[1]} (a 2-D array is one recording, T steps by d channels)"
            )
        if len(x) < self.max_window_:
            raise ValueError(
                f"the recording has {len(x)} steps, fewer than the window ({self._window_words()})"
            )
        return (x - self.mean_) / self.scale_

    def score_samples(self, X) -> np.ndarray:
        """Normality of each step (higher = more normal): minus its novelty, array (T,)."""
        return -self._rows(X)[:, 0]

    def decision_function(self, X) -> np.ndarray:
        """``score_samples - offset_``: negative exactly where ``predict`` is -1, array (T,)."""
        return self.score_samples(X) - self.offset_

    def p_values(self, X) -> np.ndarray:
        r"""Conformal p-value of each step, :math:`(1 + \#\{c_i \ge s_t\}) / (n + 1)`, (T,)."""
        return self.p_values_of(self.score_samples(X))

    def p_values_of(self, scores) -> np.ndarray:
        """p-values of step scores already computed (``score_samples`` or a stream's)."""
        from ..detector._calibration import conformal_p_values

        check_is_fitted(self, "references_")
        return conformal_p_values(self.calibration_scores_, -np.asarray(scores, dtype=float))

    def predict(self, X) -> np.ndarray:
        """+1 / -1 per step: -1 where the novelty exceeds ``threshold_`` (equivalently where
        the p-value is <= ``contamination``), array (T,)."""
        return np.where(self.decision_function(X) >= 0, 1, -1)

    def explain(self, X) -> WindowExplanation:
        """Which channel and when: per step, the shares of the channels in the squared
        distance of the deciding window (``aggregate="max"``: the covering window of largest
        novelty; "mean": averaged over the covering windows) to its nearest normal window, with
        the novelty, p-value and flag (:class:`WindowExplanation`)."""
        rows = self._rows(X)
        nov = rows[:, 0]
        from ..detector._calibration import conformal_p_values

        return WindowExplanation(
            novelty=nov,
            p_values=conformal_p_values(self.calibration_scores_, nov),
            flagged=nov > self.threshold_,
            channel_shares=rows[:, 1:],
            channel_names=list(self.channel_names_),
        )

    def stream(self) -> WindowStream:
        """A scorer for one recording arriving in chunks (:class:`WindowStream`)."""
        check_is_fitted(self, "references_")
        return WindowStream(self)

    def save(self, path, extra: dict | None = None):
        """Write the fitted detector to ``path`` (atomically), data only: an ``.npz`` of its
        arrays and a JSON text, loaded without pickle (:mod:`novelty.windows._persist`)."""
        from ._persist import save_window_model

        check_is_fitted(self, "references_")
        return save_window_model(self, path, extra)

    @classmethod
    def load(cls, path) -> WindowNoveltyDetector:
        """The detector saved at ``path`` by :meth:`save` (ValueError for another file)."""
        from ._persist import load_window_model

        return load_window_model(path, cls)[0]

    # ------------------------------------------------------------------ update
    def update(self, X_normal) -> WindowNoveltyDetector:
        """Add new normal data without a refit; returns self. The channel standardisation,
        window and stride stay frozen. Each new recording is first scored against the current
        reference (it is held out from it, as the calibration blocks are) and its step
        novelties join ``calibration_scores_``; then its windows join the reference (every
        ``reference_stride_``-th; when the reference passes ``max_reference`` windows it keeps
        every other one). Recordings shorter than ``2 * window_`` are refused."""
        check_is_fitted(self, "references_")
        self._check_params()
        from ._engine import Reference

        recs, names = _read(X_normal, self.missing, many=True, name="X_normal")
        if names is not None and self._from_frame:
            recs = [_aligned(r, names, self.channel_names_, "X_normal") for r in recs]
        z = []
        for r in recs:
            if r.shape[1] != self.n_channels_:
                raise ValueError(f"channel mismatch: fitted on d={self.n_channels_} channels, "
                                 f"got d={r.shape[1]}")  # fmt: skip
            if len(r) < 2 * self.max_window_:
                raise ValueError(f"update needs recordings of at least {2 * self.max_window_} "
                                 f"steps (two windows of {self._window_words()}), "
                                 f"got {len(r)}")  # fmt: skip
            z.append((r - self.mean_) / self.scale_)
        cal = [self.calibration_scores_]
        for r in z:
            if getattr(self, "member_calibration_", None) is not None:
                # "causal": each member's novelties join its own calibration; the combined
                # calibration stays on the fixed calibration scales, as at fit
                from ._engine import score_recording

                novs = [score_recording(r, f, ref, int(self.n_neighbors), st, self.aggregate_,
                                        self._budget)[:, 0]
                        for f, ref, st in zip(self._featurizers, self.references_,
                                              self._member_strides())]  # fmt: skip
                self.member_calibration_ = [
                    np.concatenate([c, v]) for c, v in zip(self.member_calibration_, novs)
                ]
                cal.append(self._combine_novelty(novs))
                continue
            s = self._stream()
            rows = np.concatenate([s.push(r), s.finish()])
            cal.append(rows[:, 0])
        offsets = self.n_normal_steps_ + self.max_window_ + np.cumsum([0] + [len(r) for r in z])
        refs = []
        for f, old in zip(self._featurizers, self.references_):
            new = self._reference(f, z, offsets[:-1])
            refs.append(Reference(np.concatenate([old.F, new.F]),
                                  np.concatenate([old.gstart, new.gstart])))  # fmt: skip
        self.references_ = self._thinned(refs)
        self.n_normal_steps_ = int(offsets[-1])
        self.calibration_scores_ = np.concatenate(cal)
        self._set_threshold()
        return self

    # ------------------------------------------------------------------ internals
    def _check_params(self) -> None:
        from .._constraints import validate_params

        validate_params(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.missing == "interpolate"
        tags.non_deterministic = False
        return tags


class WindowStream:
    """One recording scored chunk by chunk: ``push(chunk)`` returns the scores (higher = more
    normal, as ``score_samples``) of the steps that are now final, ``finish()`` those of the
    last steps. Concatenated, they equal ``score_samples`` of the whole recording. Each
    window is computed once; each member holds the last steps of its own window."""

    def __init__(self, det: WindowNoveltyDetector):
        self.det = det
        self._s = det._stream()
        self.n_steps = 0

    def push(self, chunk) -> np.ndarray:
        if hasattr(chunk, "__len__") and len(chunk) == 0:  # an empty batch: nothing new
            return np.zeros(0)
        recs, _ = _read(chunk, self.det.missing, many=False, name="chunk")
        x = recs[0]
        if x.shape[1] != self.det.n_channels_:
            raise ValueError(f"channel mismatch: fitted on d={self.det.n_channels_} channels, "
                             f"got d={x.shape[1]}")  # fmt: skip
        self.n_steps += len(x)
        return -self._s.push((x - self.det.mean_) / self.det.scale_)[:, 0]

    def finish(self) -> np.ndarray:
        """Scores of the last steps. ValueError when the recording is shorter than the
        longest member window (as ``score_samples``)."""
        if self.n_steps < self.det.max_window_:
            raise ValueError(f"the recording has {self.n_steps} steps, fewer than the window "
                             f"({self.det._window_words()})")  # fmt: skip
        return -self._s.finish()[:, 0]


@dataclass
class WindowExplanation:
    """Per step of one recording: ``novelty``, ``p_values``, ``flagged``, ``channel_shares``
    (T, d), rows summing to 1; ``channel`` is the name of the largest share."""

    novelty: np.ndarray
    p_values: np.ndarray
    flagged: np.ndarray
    channel_shares: np.ndarray
    channel_names: list

    @property
    def channel(self) -> np.ndarray:
        return np.asarray(self.channel_names, dtype=object)[np.argmax(self.channel_shares, 1)]

    def to_frame(self):
        """A DataFrame, one row per step: novelty, p_value, flagged, channel, and one share
        column per channel."""
        import pandas as pd

        df = pd.DataFrame(
            {
                "novelty": self.novelty,
                "p_value": self.p_values,
                "flagged": self.flagged.astype(int),
                "channel": self.channel,
            }
        )
        for c, name in enumerate(self.channel_names):
            df[f"share_{name}"] = self.channel_shares[:, c]
        return df

    def segments(self):
        """The runs of consecutive flagged steps, a DataFrame: ``start``, ``end`` (last step,
        inclusive), ``peak`` (step of largest novelty), ``novelty`` (that largest), ``p_value``
        (smallest), ``channel`` (largest novelty-weighted share over the run)."""
        import pandas as pd

        f = self.flagged.astype(np.int8)
        edges = np.diff(np.concatenate([[0], f, [0]]))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        rows = []
        for a, b in zip(starts, ends):
            nov = self.novelty[a:b]
            share = (self.channel_shares[a:b] * nov[:, None]).sum(axis=0)
            rows.append(
                {
                    "start": int(a),
                    "end": int(b - 1),
                    "peak": int(a + np.argmax(nov)),
                    "novelty": float(nov.max()),
                    "p_value": float(self.p_values[a:b].min()),
                    "channel": self.channel_names[int(np.argmax(share))],
                }
            )
        cols = ["start", "end", "peak", "novelty", "p_value", "channel"]
        return pd.DataFrame(rows, columns=cols)


def _member_window(m: float, w: int, cap: int) -> int:
    """A member's window, ``m`` x the window ``w``: at least ``min(w, 16)`` and at most
    ``max(w, cap)`` (cap: a quarter of the normal steps, half the longest recording)."""
    return int(min(max(round(m * w), min(w, 16)), max(w, cap)))


def _calibration_gap(member: int, w: int) -> int:
    """Steps between a held-out block and the nearest reference window of a member of window
    ``member``: ``min(member, w)`` (``CALIBRATION_GAP`` "window"), so a long member's
    reference is not thinned by a gap longer than the base window; ``member`` ("member")."""
    return int(member) if CALIBRATION_GAP == "member" else int(min(member, w))


def _tail_scale(c: np.ndarray) -> tuple[float, float]:
    """(median, q99 - median) of a member's calibration novelties, q99 their 99th percentile
    (not above the median: the standard deviation, or 1)."""
    med, hi = np.percentile(c, [50, TAIL_QUANTILE])
    tail = hi - med
    if not tail > 0:
        tail = float(np.std(c)) or 1.0
    return float(med), float(tail)


def _robust_scale(c: np.ndarray) -> tuple[float, float]:
    """(median, IQR) of a member's calibration novelties (IQR 0: the standard deviation, or 1)."""
    q1, med, q3 = np.percentile(c, [25, 50, 75])
    iqr = q3 - q1
    if not iqr > 0:
        iqr = float(np.std(c)) or 1.0
    return float(med), float(iqr)


# ---------------------------------------------------------------------- input
def _one(x, missing: str, name: str):
    """One recording as float64 (T, d), and its channel names (None for arrays)."""
    names = None
    if hasattr(x, "columns"):  # a DataFrame: rows are steps in index order
        if not x.index.is_monotonic_increasing:
            x = x.sort_index()
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        bad = [str(c) for c in x.columns
               if not is_numeric_dtype(x[c].dtype) or is_bool_dtype(x[c].dtype)]  # fmt: skip
        if bad:
            raise ValueError(f"`{name}` has non-numeric column(s) {bad}: pass only the channels "
                             "(the time as the index)")  # fmt: skip
        names = [str(c) for c in x.columns]
        x = x.to_numpy(dtype=np.float64)
    elif hasattr(x, "to_numpy") and hasattr(x, "index"):  # a Series
        names = [str(x.name) if x.name is not None else "channel_0"]
        x = x.sort_index().to_numpy(dtype=np.float64)
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"`{name}` is not numeric: {err}") from None
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"`{name}` must be one recording (T, d) or (T,), got shape {a.shape}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"`{name}` is empty (shape {a.shape})")
    if not np.isfinite(a).all():
        if np.isinf(a).any():
            t, c = np.argwhere(np.isinf(a))[0]
            raise ValueError(f"`{name}` contains an infinite value at step {t}, channel {c}")
        if missing == "error":
            t, c = np.argwhere(np.isnan(a))[0]
            raise ValueError(f'`{name}` has a missing value (NaN) at step {t}, channel {c} and '
                             'missing="error"')  # fmt: skip
        from .._missing import interpolate_missing

        a = interpolate_missing(a, name=name)
    return a, names


def _aligned(a: np.ndarray, names, wanted: list, name: str) -> np.ndarray:
    """``a``'s columns in the order of the channel names ``wanted`` (an array without names
    is taken as it is); ValueError when its names are other channels."""
    if names is None or names == wanted:
        return a
    if sorted(names) != sorted(wanted):
        raise ValueError(f"`{name}` has channels {names}, expected {wanted}")
    return a[:, [names.index(c) for c in wanted]]


def _read(X, missing: str, many: bool, name: str):
    """A list of (T, d) recordings and the channel names (or None)."""
    if isinstance(X, (list, tuple)):
        if not many:
            raise ValueError(f"`{name}` is a list: score one recording at a time")
        if len(X) == 0:
            raise ValueError(f"`{name}` is an empty list of recordings")
        out = [_one(x, missing, f"{name}[{i}]") for i, x in enumerate(X)]
        names = out[0][1]
        recs = [a if names is None else _aligned(a, n, names, f"{name}[{i}]")
                for i, (a, n) in enumerate(out)]  # fmt: skip
        return recs, names
    if not hasattr(X, "columns") and np.ndim(X) == 3:
        if not many:
            raise ValueError(f"`{name}` is 3-D {np.shape(X)}: score one recording (T, d) at a "
                             "time")  # fmt: skip
        return [_one(x, missing, f"{name}[{i}]")[0] for i, x in enumerate(np.asarray(X))], None
    a, names = _one(X, missing, name)
    return [a], names
