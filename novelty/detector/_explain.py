r"""Which channels and which time steps make a series novel: occlusion explanations of a fitted
:class:`~novelty.KernelNoveltyDetector`.

**Method: occlusion.** A part of the series is replaced by the corpus's typical values and the
series is scored again; the part's attribution is the drop in the detector's novelty,

.. math::

    a(\text{part}) = s(x) - s(x^{\text{part} \leftarrow r}),

where :math:`s` is the detector's novelty (``-score_samples``, the standardised mean of its
members for the default recipe) and :math:`r` (T, d) the *reference* of :math:`x`. Positive: the
part raises the novelty (the series is more normal without it); about 0: the part does not
matter; negative: the corpus's typical values there look less normal than the series' own.
Occlusion needs nothing from the kernels but the scores, so it serves every kernel and scorer
alike, MiniRocket's piecewise-constant features included (gradients are zero almost everywhere
there), and it explains the detector's actual score, ensemble and all.

* **Channels**: channel :math:`c` replaced over the whole series,
  ``channels[i, c]`` :math:`= s(x) - s(x^{c \leftarrow r_c})`.
* **Time**: the channels :math:`S` that carry the novelty replaced over a window
  :math:`[b_k, b_k + L)`; ``times[i, t]`` is the mean drop over the windows that cover step
  :math:`t`. ``time_channels="top"`` (default): :math:`S = \{c : a_c \ge \rho \max_c a_c\}`,
  :math:`\rho` = ``top_share`` (default 0.5), the top channel alone when no channel attribution
  is positive; ``"all"``: every channel. Occluding channels that carry no novelty only adds
  noise (each pasted window moves the score a little), so "top" localises better (measured in
  docs/explain.md: a higher mean interval ROC-AUC on every kind of injected anomaly of the
  multivariate sets); the window copies then depend on the channel attributions and are scored
  in a second call.

  The window length is :math:`L = \max(1, \operatorname{round}(w T))` for ``window=w`` (a
  fraction of the length, default 0.1) or :math:`L = \min(T, \text{window})` steps (an int).
  There are :math:`W = \min(T - L + 1, \operatorname{round}(c (1 - w) / w) + 1)` windows
  (fraction) or :math:`W = \min(T - L + 1, \lceil c (T - L) / L \rceil + 1)` (steps),
  :math:`c` = ``coverage``, starting at :math:`b_k = \operatorname{round}(k (T - L) / (W - 1))`,
  :math:`k = 0..W-1`: the first at 0, the last ending at :math:`T`, spaced by about
  :math:`L / c`, so every step lies in about :math:`c` windows (at least one; the first and last
  few steps in fewer).

**Reference** :math:`r` (``reference``), from the raw corpus as the detector read it (the
corpus of a member that does not pre-process, the default recipe's MiniRocket member; else pass
``corpus=``). ``"nearest"`` (default): each occluded part gets its values from the corpus series
nearest to :math:`x` on the *rest* of the series (squared Euclidean distance over the steps and
channels outside the part, each channel z-scored by the corpus's mean and standard deviation;
the first on ties; a univariate series' channel: the nearest overall), a one-neighbour
imputation of what :math:`x` would look like there if it were normal. It needs no alignment of
the corpus in time: a per-step median of series with random phases is nearly flat, and pasting
it makes a normal part look novel. ``"median"``: the per-step, per-channel median of the
corpus. Corpus series of another length than :math:`x` are first resampled to its length by
linear interpolation on relative time.

**Cost.** Series :math:`i` is scored in :math:`1 + d + W_i` copies (itself, one per channel,
one per window). The copies of a batch of series (``batch_size`` copies at most) are scored
together: one call of the detector's members for the series and their channel copies, one for
their window copies (one call for all with ``time_channels="all"``), never a call per window.
With the defaults (``window=0.1``, ``coverage=2``), :math:`W = 19` whenever :math:`T \ge 20`
(fewer for shorter series), so at most :math:`20 + d` copies: explaining costs at most that
many scorings of the series, and less in practice, as a scoring call's fixed cost
(pre-processing, feature set-up) is shared by the copies (measured in docs/explain.md). For many
channels the channel copies dominate; ``coverage=1`` or a longer ``window`` lowers :math:`W`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from .._constraints import Interval, StrOptions, validate_arguments
from .._missing import resample_collection

__all__ = ["Explanation", "explain", "plot_explanation", "occlusion_windows"]

REFERENCES = ("nearest", "median")
TIME_CHANNELS = ("top", "all")
#: The arguments' constraints (the one dialect: :mod:`novelty._constraints`).
_WINDOW = [Interval(Integral, 1, None, closed="left"), Interval(Real, 0, 1, closed="right")]
_AT_LEAST_ONE = [Interval(Integral, 1, None, closed="left")]


@dataclass(frozen=True, eq=False)
class Explanation:
    """Occlusion attributions of series (:func:`explain`): how much each part raises the
    detector's novelty score (its drop when the part is replaced by the corpus's typical values).

    Attributes
    ----------
    channels : array (n, d), drop in novelty when channel c of series i is replaced.
    times : array (n, T) (equal lengths) or list of (T_i,) arrays: per step, the mean drop over
        the occluded windows that cover it.
    time_channels : array (n, d) of bool, the channels occluded in series i's windows.
    novelty : array (n,), the detector's novelty of each series (``-score_samples``).
    window : array (n,) of int, the window length L_i used for series i.
    n_windows : array (n,) of int, the number of windows W_i of series i.
    reference : str, "nearest" or "median".
    """

    channels: np.ndarray
    times: np.ndarray | list
    novelty: np.ndarray
    time_channels: np.ndarray
    window: np.ndarray
    n_windows: np.ndarray
    reference: str

    @property
    def ranking(self) -> np.ndarray:
        """Channels ordered by attribution, largest first, array (n, d) of channel indices
        (ties keep the lower index first)."""
        return np.argsort(-self.channels, axis=1, kind="stable")

    def __len__(self) -> int:
        return len(self.novelty)


@validate_arguments({"window": _WINDOW, "coverage": _AT_LEAST_ONE})
def occlusion_windows(T: int, window=0.1, coverage: int = 2) -> tuple[np.ndarray, int]:
    """Start steps of the occluded windows of a series of ``T`` steps and their length:
    returns (starts (W,), L); see the module docstring for the formula.

    >>> starts, L = occlusion_windows(100)
    >>> L, len(starts), int(starts[0]), int(starts[-1] + L)
    (10, 19, 0, 100)
    """
    L = _window_length(T, window)
    if isinstance(window, Integral):
        W = math.ceil(coverage * (T - L) / L) + 1
    else:  # the nominal (1 - w) / w: no jitter from rounding L
        w = float(window)
        W = round(coverage * (1.0 - w) / w) + 1
    W = min(W, T - L + 1)  # distinct starts
    if W == 1:
        return np.zeros(1, dtype=np.int64), L
    return np.round(np.arange(W) * ((T - L) / (W - 1))).astype(np.int64), L


@validate_arguments(
    {
        "window": _WINDOW,
        "coverage": _AT_LEAST_ONE,
        "reference": [StrOptions(set(REFERENCES))],
        "batch_size": _AT_LEAST_ONE,
        "time_channels": [StrOptions(set(TIME_CHANNELS))],
        "top_share": [Interval(Real, 0, 1, closed="right")],
    }
)
def explain(
    detector,
    X,
    *,
    window=0.1,
    coverage: int = 2,
    reference: str = "nearest",
    corpus=None,
    batch_size: int = 2048,
    time_channels: str = "top",
    top_share: float = 0.5,
) -> Explanation:
    """Occlusion attributions of the series of ``X`` per channel and per time step (module
    docstring for the formulas).

    Parameters
    ----------
    detector : a fitted :class:`~novelty.KernelNoveltyDetector`.
    X : series, any container ``fit`` accepts (read as ``score_samples`` reads it).
    window : float in (0, 1] (a fraction of each series' length, default 0.1) or int >= 1
        (steps; longer than a series: its whole length), the length of the occluded windows.
    coverage : int >= 1, default 2, about how many windows cover each step (stride
        ``ceil(L / coverage)``); the cost grows with it (module docstring, "Cost").
    reference : "nearest" (default) or "median", the typical values put in the occluded part.
    corpus : the raw normal series the detector was fitted on, needed only when no member keeps
        them (every member pre-processes); if given, the reference is taken from them.
    batch_size : int >= 1, copies scored per batch at most (whole series' copies per batch; a
        series with more copies gets a batch of its own).
    time_channels : "top" (default) or "all", the channels replaced in the occluded windows.
    top_share : float in (0, 1], default 0.5, with "top": the windows occlude the channels whose
        attribution is at least this share of the largest.

    Returns
    -------
    :class:`Explanation`
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(detector, "members_")
    Xs = _checked(detector, X)
    C = _raw_corpus(detector, corpus)
    series = list(Xs)
    d = detector.n_channels_
    refs = _References(C)

    # every series' copies: itself, one per channel, one per window
    plans = []
    for x in series:
        starts, L = occlusion_windows(len(x), window, coverage)
        plans.append((x, starts, L))

    n = len(series)
    novelty, channels = np.empty(n), np.empty((n, d))
    occluded = np.ones((n, d), dtype=bool)  # channels replaced in the windows
    times: list = [None] * n
    for chunk in _chunks([1 + d + len(p[1]) for p in plans], batch_size):
        # call 1: each series and its channel copies (with "all", its window copies too)
        copies = []
        for i in chunk:
            x, starts, L = plans[i]
            copies.extend(_channel_copies(x, refs.channel_values(reference, x)))
            if time_channels == "all":
                rw = refs.window_values(reference, x, starts, L, occluded[i])
                copies.extend(_window_copies(x, rw, starts, L, occluded[i]))
        s = _novelty_of(detector, copies)
        window_drops, pos = {}, 0
        for i in chunk:
            W = len(plans[i][1])
            novelty[i] = s[pos]
            channels[i] = s[pos] - s[pos + 1 : pos + 1 + d]
            pos += 1 + d
            if time_channels == "all":
                window_drops[i] = novelty[i] - s[pos : pos + W]
                pos += W
        if time_channels == "top":
            # call 2: the window copies, occluding the channels that carry the novelty
            copies = []
            for i in chunk:
                x, starts, L = plans[i]
                a = channels[i]
                occluded[i] = a >= top_share * a.max() if a.max() > 0 else a == a.max()
                rw = refs.window_values(reference, x, starts, L, occluded[i])
                copies.extend(_window_copies(x, rw, starts, L, occluded[i]))
            s, pos = _novelty_of(detector, copies), 0
            for i in chunk:
                W = len(plans[i][1])
                window_drops[i] = novelty[i] - s[pos : pos + W]
                pos += W
        for i in chunk:
            x, starts, L = plans[i]
            times[i] = _per_step(window_drops[i], starts, L, len(x))
    equal = Xs.equal_length
    return Explanation(
        channels=channels,
        times=np.stack(times) if equal else times,
        novelty=novelty,
        time_channels=occluded,
        window=np.array([p[2] for p in plans], dtype=np.int64),
        n_windows=np.array([len(p[1]) for p in plans], dtype=np.int64),
        reference=reference,
    )


@validate_arguments(
    {"i": [Interval(Integral, None, None, closed="neither")], "max_channels": _AT_LEAST_ONE}
)
def plot_explanation(detector_or_explanation, X, i: int = 0, *, max_channels: int = 6,
                     figsize=None, **explain_kwargs):  # fmt: skip
    """One figure for series ``i`` of ``X``: the channel ranking (bars of the channel
    attributions, largest first) and, below, the ``max_channels`` top-ranked channels of the
    series, each with the time attribution shaded behind it (red where a step raises the
    novelty: the positive part of ``times``, one colour scale for the figure).

    ``detector_or_explanation``: a fitted detector (series ``i`` is then explained with
    ``explain_kwargs``, and the reference it was occluded with is drawn dashed) or the
    :class:`Explanation` of the whole ``X``. Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    from .._layouts import as_series_collection

    if isinstance(detector_or_explanation, Explanation):
        if explain_kwargs:
            raise ValueError(
                f"options {sorted(explain_kwargs)} explain a series: give them with a detector, "
                "not with an Explanation"
            )
        ex = detector_or_explanation
        series = list(as_series_collection(X, missing="interpolate"))
        if len(series) != len(ex):
            raise ValueError(
                f"the Explanation holds {len(ex)} series and X {len(series)}: pass the X it "
                "explains"
            )
        if not -len(series) <= i < len(series):
            raise ValueError(f"`i`={i} is out of range for {len(series)} series")
        x = series[i]
        ch, tm, nov, ref = ex.channels[i], ex.times[i], ex.novelty[i], None
        occ = ex.time_channels[i]
        if len(tm) != len(x) or ch.shape[0] != x.shape[1]:
            raise ValueError(
                f"series {i} of X has shape {x.shape}, its explanation "
                f"({len(tm)} steps, {ch.shape[0]} channels): pass the X it explains"
            )
    else:
        detector = detector_or_explanation
        series = list(_checked(detector, X))
        if not -len(series) <= i < len(series):
            raise ValueError(f"`i`={i} is out of range for {len(series)} series")
        x = series[i]
        ex = explain(detector, [x], **explain_kwargs)
        ch, tm, nov, occ = ex.channels[0], ex.times[0], ex.novelty[0], ex.time_channels[0]
        refs = _References(_raw_corpus(detector, explain_kwargs.get("corpus")))
        ref = refs.channel_values(ex.reference, x).T  # what replaced each channel

    d = len(ch)
    order = np.argsort(-ch, kind="stable")
    shown = order[: min(d, max_channels)]
    if figsize is None:
        figsize = (9.0, 2.0 + 1.6 * len(shown))
    fig = plt.figure(figsize=figsize, layout="constrained")
    gs = fig.add_gridspec(1 + len(shown), 1, height_ratios=[1.4] + [1.0] * len(shown))
    ax = fig.add_subplot(gs[0])
    bars = min(d, 20)
    top = order[:bars]
    colours = ["#d62728" if v > 0 else "0.6" for v in ch[top]]
    ax.barh(np.arange(bars)[::-1], ch[top], color=colours)
    ax.set_yticks(np.arange(bars)[::-1], [f"ch {c}" for c in top], fontsize=7)
    ax.axvline(0.0, color="k", lw=0.8)
    ax.set_xlabel("drop in novelty when the channel is replaced (channel attribution)", fontsize=8)
    ax.set_title(
        f"series #{i}: novelty {nov:.3g}; channel ranking"
        + (f" (top {bars} of {d})" if bars < d else ""),
        fontsize=10,
    )
    pos = np.maximum(tm, 0.0)
    vmax = 1.6 * float(pos.max()) if pos.max() > 0 else 1.0  # the largest: a mid red
    t = np.arange(len(x))
    for k, c in enumerate(shown):
        a = fig.add_subplot(gs[1 + k])
        lo = min(x[:, c].min(), ref[:, c].min()) if ref is not None else x[:, c].min()
        hi = max(x[:, c].max(), ref[:, c].max()) if ref is not None else x[:, c].max()
        pad = 0.05 * (hi - lo) if hi > lo else 1.0
        a.imshow(pos[None, :], aspect="auto", cmap="Reds", vmin=0.0, vmax=vmax, alpha=0.5,
                 extent=(-0.5, len(x) - 0.5, lo - pad, hi + pad), interpolation="nearest",
                 origin="lower")  # fmt: skip
        if ref is not None:
            a.plot(
                t,
                ref[:, c],
                color="0.4",
                lw=0.9,
                ls="--",
                label=f"what replaced the channel ({ex.reference})",
            )
        a.plot(t, x[:, c], color="tab:blue", lw=1.1, label="series")
        a.set_ylim(lo - pad, hi + pad)
        a.set_title(f"channel {c}: attribution {ch[c]:.3g} (rank {k + 1})", fontsize=9)
        a.tick_params(labelsize=7)
        if k == 0:
            a.legend(fontsize=7, loc="upper right")
    occluded = ", ".join(str(c) for c in np.flatnonzero(occ))
    a.set_xlabel(
        f"time step (shaded: time attribution, positive part; windows replaced channel(s) "
        f"{occluded})",
        fontsize=8,
    )
    return fig


# ----------------------------------------------------------------------------- internals
class _References:
    """Typical values of the raw corpus ``C`` (list of (T_j, d) arrays) at a given length."""

    def __init__(self, C: list[np.ndarray]):
        self.C = C
        self._at: dict[int, np.ndarray] = {}
        P = np.concatenate(C)
        self.mean = P.mean(axis=0)
        sd = P.std(axis=0)
        self.sd = np.where(sd > 0, sd, 1.0)

    def at(self, T: int) -> np.ndarray:
        """The corpus resampled to length T, (N, T, d) (cached per length)."""
        if T not in self._at:
            self._at[T] = resample_collection(self.C, T)  # C is a list: a new array
        return self._at[T]

    def channel_values(self, reference: str, x: np.ndarray) -> np.ndarray:
        """(d, T): what replaces each channel of x."""
        if reference == "median":
            return self.median(len(x)).T
        A, D = self._distances(x)
        per_channel = D.sum(axis=1)  # (N, d)
        total = per_channel.sum(axis=1, keepdims=True)
        d = x.shape[1]
        rest = total - per_channel if d > 1 else total  # one channel: nearest overall
        jc = np.argmin(rest, axis=0)  # (d,)
        return A[jc, :, np.arange(d)]

    def window_values(self, reference, x, starts, L, S) -> np.ndarray:
        """(W, L, d): what replaces window k (steps [b_k, b_k + L) of the channels S)."""
        steps = starts[:, None] + np.arange(L)[None, :]
        if reference == "median":
            return self.median(len(x))[steps]
        A, D = self._distances(x)
        total = D.sum(axis=(1, 2))[:, None]
        inside_steps = D[:, :, S].sum(axis=2)
        cs = np.concatenate([np.zeros((len(A), 1)), np.cumsum(inside_steps, axis=1)], axis=1)
        inside = cs[:, starts + L] - cs[:, starts]  # (N, W)
        jw = np.argmin(total - inside, axis=0)  # (W,)
        return A[jw[:, None], steps]

    def _distances(self, x):
        A = self.at(len(x))  # (N, T, d)
        return A, ((A - x[None]) / self.sd) ** 2

    def median(self, T: int) -> np.ndarray:
        """Per-step, per-channel median of the corpus at length T, (T, d)."""
        return np.median(self.at(T), axis=0)


def _channel_copies(x, rc) -> list[np.ndarray]:
    """x, then one copy per channel c with channel c replaced by ``rc[c]`` (T,)."""
    d = x.shape[1]
    chan = np.repeat(x[None], d, axis=0)
    idx = np.arange(d)
    chan[idx, :, idx] = rc
    return [x, *chan]


def _window_copies(x, rw, starts, L, S) -> list[np.ndarray]:
    """One copy of x per window k, with steps [b_k, b_k + L) of the channels ``S`` (bool (d,))
    replaced by ``rw[k]`` (L, d)."""
    win = np.repeat(x[None], len(starts), axis=0)
    steps = starts[:, None] + np.arange(L)[None, :]  # (W, L)
    k = np.arange(len(starts))[:, None]
    part = win[k, steps]  # (W, L, d), a copy
    part[..., S] = rw[..., S]
    win[k, steps] = part
    return list(win)


def _per_step(drops: np.ndarray, starts: np.ndarray, L: int, T: int) -> np.ndarray:
    """Mean of the windows' drops over the windows covering each step, (T,)."""
    total = np.zeros(T + 1)
    count = np.zeros(T + 1)
    np.add.at(total, starts, drops)
    np.add.at(total, starts + L, -drops)
    np.add.at(count, starts, 1.0)
    np.add.at(count, starts + L, -1.0)
    return np.cumsum(total)[:T] / np.cumsum(count)[:T]


def _chunks(sizes: list[int], limit: int):
    """Consecutive groups of indices whose sizes sum to at most ``limit`` (a larger one alone)."""
    group, total = [], 0
    for i, m in enumerate(sizes):
        if group and total + m > limit:
            yield group
            group, total = [], 0
        group.append(i)
        total += m
    if group:
        yield group


def _novelty_of(detector, copies: list[np.ndarray]) -> np.ndarray:
    """The detector's novelty of checked, finite copies in one call of its members."""
    from tskernels import SeriesBatch

    equal = len({len(c) for c in copies}) == 1
    Z = SeriesBatch.from_checked(np.stack(copies) if equal else copies)
    return detector._combine([m.novelty(Z) for m in detector.members_])


def _checked(detector, X):
    """X read as the detector reads it, with its channel check."""
    Xs = detector._series(X, reset=False)
    detector._check_channels(X, Xs.d)
    return Xs


def raw_corpus(detector, corpus=None) -> list[np.ndarray] | None:
    """The raw corpus as a list of float64 (T_j, d) arrays: ``corpus`` if given (read as the
    detector reads series, NaN interpolated, its channels checked against the detector's),
    else the corpus of the first member without pre-processing, else None (every member
    pre-processes its series). The explanation's occlusion reference and the plot's band."""
    if corpus is not None:
        from .._layouts import as_series_collection

        C = list(as_series_collection(corpus, name="corpus", missing="interpolate"))
        if C[0].shape[1] != detector.n_channels_:
            raise ValueError(
                f"`corpus` has d={C[0].shape[1]} channels, the detector was fitted on "
                f"d={detector.n_channels_}"
            )
        return [np.asarray(c, dtype=np.float64) for c in C]
    for m in detector.members_:
        if getattr(m, "preprocessor_", None) is None and hasattr(m, "corpus_"):
            Z = m.corpus_
            if hasattr(Z, "detach"):
                Z = Z.detach().cpu().numpy()
            return [np.asarray(z, dtype=np.float64) for z in Z]
    return None


def _raw_corpus(detector, corpus) -> list[np.ndarray]:
    """:func:`raw_corpus`, which the occlusion reference needs."""
    C = raw_corpus(detector, corpus)
    if C is None:
        raise ValueError(
            "the detector keeps no raw corpus (every member pre-processes its series): pass "
            "corpus=<the normal series it was fitted on> for the occlusion reference"
        )
    return C


def _window_length(T: int, window) -> int:
    if isinstance(window, Integral):
        return int(min(window, T))
    return max(1, int(round(float(window) * T)))
