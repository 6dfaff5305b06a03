"""A picture of a fitted :class:`~novelty.KernelNoveltyDetector` on new series.

:func:`plot_scores` draws (a) the distribution of the corpus's held-out novelty scores and of
the new series' novelty, with the conformal threshold, and (b) per channel, the series that
``predict`` flags over the per-time-step quantile band of the corpus. matplotlib is imported
inside the function, so ``import novelty`` does not load it.
"""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np

from .._constraints import Interval, validate_arguments
from .._missing import resample_collection

__all__ = ["plot_scores"]

#: ``max_flagged`` and ``max_channels`` (the one dialect: :mod:`novelty._constraints`).
_AT_LEAST_ONE = [Interval(Integral, 1, None, closed="left")]

_FLAG_COLOURS = ["#d62728", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def _series_list(Xs) -> list[np.ndarray]:
    """A list of (T_i, d) float arrays from the validated containers the detector keeps."""
    if hasattr(Xs, "detach"):  # a torch tensor (a pre-processor may return one)
        Xs = Xs.detach().cpu().numpy()
    if isinstance(Xs, np.ndarray):
        return [np.asarray(x, dtype=np.float64) for x in Xs]
    return [np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, np.float64) for x in Xs]


def _band_source(detector, X, corpus):
    """(corpus series, the new series in the same space, a note on that space): the raw
    corpus (:func:`~novelty.detector._explain.raw_corpus`) when there is one."""
    from ._explain import raw_corpus

    C = raw_corpus(detector, corpus)
    Xs = detector._series(X, reset=False)
    if C is not None:
        return C, _series_list(Xs), ""
    m = detector.members_[0]
    note = "pre-processed series (the detector's corpus; pass corpus= for the raw series)"
    return _series_list(m.corpus_), _series_list(m.preprocessor_.transform(Xs)), note


@validate_arguments({"max_flagged": _AT_LEAST_ONE, "max_channels": _AT_LEAST_ONE})
def plot_scores(detector, X, *, corpus=None, max_flagged: int = 5, max_channels: int = 6,
                band=(0.05, 0.95), figsize=None):  # fmt: skip
    """Plot a fitted detector's novelty scores on ``X`` and the series it flags.

    Top panel: histograms of the corpus's held-out novelty scores
    (``detector.calibration_scores_``) and of the novelty of the new series
    (``-detector.score_samples(X)``), with the conformal threshold ``detector.threshold_`` (no
    line when it is ``+inf``: the corpus is too small to flag anything; the panel says so).
    The new series appear as ticks under the histogram, red where flagged.

    Lower panels, one per channel: the corpus's per-time-step ``band`` quantiles (default
    5-95 %) and median, with the flagged series (``detector.predict(X) == -1``, the
    ``max_flagged`` most novel) drawn over them; when nothing is flagged, the most novel
    series is drawn instead. With more than ``max_channels`` channels, those where the drawn
    series leave the band the most are shown. Series of unequal lengths are resampled to a
    common grid on relative time.

    Parameters
    ----------
    detector : a fitted :class:`~novelty.KernelNoveltyDetector`.
    X : new series, any container ``fit`` accepts.
    corpus : the normal series the detector was fitted on (optional). The detector keeps its
        corpus only as its members saw it: raw when one member does not pre-process (the
        default recipe), otherwise pre-processed; then the band and the series are drawn
        pre-processed, unless ``corpus`` is given.
    max_flagged, max_channels : int >= 1, how many series and channels to draw at most.
    band : (low, high) quantiles of the corpus band, 0 <= low < high <= 1.
    figsize : matplotlib figure size (default from the number of channels).

    Returns
    -------
    fig : matplotlib Figure
    axes : dict with "scores" (the histogram's Axes) and "channels" (list of Axes, one per
        drawn channel, with ``channel`` index in their title).
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(detector, "members_")
    lo, hi = (float(b) for b in band)
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"`band` must be two quantiles 0 <= low < high <= 1, got {band!r}")
    import matplotlib.pyplot as plt

    score = np.asarray(detector.score_samples(X), dtype=np.float64)
    novelty = -score
    flagged = (score - detector.offset_) < 0  # exactly predict(X) == -1
    cal = np.asarray(detector.calibration_scores_, dtype=np.float64)
    thr = float(detector.threshold_)

    C, S, space_note = _band_source(detector, X, corpus)
    order = np.argsort(-novelty, kind="stable")
    shown = [i for i in order if flagged[i]][:max_flagged]
    none_flagged = not shown
    if none_flagged:
        shown = [int(order[0])]
    d = C[0].shape[1]
    lengths = {len(s) for s in C} | {len(S[i]) for i in shown}
    if len(lengths) == 1:
        T = lengths.pop()
        t = np.arange(T)
        Cg, Sg = np.stack(C), np.stack([S[i] for i in shown])
        t_label = "time step"
    else:
        T = int(np.median([len(s) for s in C]))
        t = np.linspace(0.0, 1.0, max(T, 2))
        Cg, Sg = resample_collection(C, len(t)), resample_collection([S[i] for i in shown], len(t))
        t_label = f"relative time (unequal lengths resampled to {len(t)} points)"
    q_lo, q_med, q_hi = np.quantile(Cg, [lo, 0.5, hi], axis=0)  # (T, d) each
    excess = np.maximum(Sg - q_hi, 0) + np.maximum(q_lo - Sg, 0)
    if d > max_channels:
        channels = sorted(np.argsort(-excess.sum(axis=(0, 1)), kind="stable")[:max_channels])
    else:
        channels = list(range(d))

    n_cols = min(3, len(channels))
    n_rows = math.ceil(len(channels) / n_cols)
    if figsize is None:
        figsize = (4.0 * n_cols + 1.0, 3.2 + 2.4 * n_rows)
    fig = plt.figure(figsize=figsize, layout="constrained")
    gs = fig.add_gridspec(1 + n_rows, n_cols, height_ratios=[1.3] + [1.0] * n_rows)

    # (a) score distributions
    ax = fig.add_subplot(gs[0, :])
    both = np.concatenate([cal, novelty])
    finite = both[np.isfinite(both)]
    bins = np.histogram_bin_edges(finite, bins=30) if finite.size else 10
    ax.hist(cal[np.isfinite(cal)], bins=bins, density=True, color="0.6", alpha=0.7,
            label=f"corpus, held out (n={cal.size})")  # fmt: skip
    ax.hist(novelty[np.isfinite(novelty)], bins=bins, density=True, histtype="step", lw=1.8,
            color="tab:blue", label=f"new series (n={novelty.size})")  # fmt: skip
    ymax = ax.get_ylim()[1]
    rug = np.where(np.isfinite(novelty), novelty, np.nanmax(finite) if finite.size else 0.0)
    ax.plot(rug[~flagged], np.full((~flagged).sum(), -0.04 * ymax), "|", color="tab:blue", ms=9)
    ax.plot(rug[flagged], np.full(flagged.sum(), -0.04 * ymax), "|", color="#d62728", ms=11,
            mew=2, label=f"flagged ({int(flagged.sum())})")  # fmt: skip
    ax.set_ylim(-0.09 * ymax, ymax)
    if math.isfinite(thr):
        label = f"threshold {thr:.3g} (contamination {detector.contamination:g})"
        ax.axvline(thr, color="k", ls="--", lw=1.2, label=label)
    else:
        ax.text(0.99, 0.95, f"threshold +inf: {detector.n_corpus_} corpus series cannot flag "
                f"at contamination {detector.contamination:g}", transform=ax.transAxes,
                ha="right", va="top", fontsize=8, color="#d62728")  # fmt: skip
    n_inf = int((~np.isfinite(both)).sum())
    if n_inf:
        ax.text(0.01, 0.95, f"{n_inf} infinite scores not in the histograms",
                transform=ax.transAxes, ha="left", va="top", fontsize=8)  # fmt: skip
    ax.set_xlabel("novelty score (higher = less like the corpus)")
    ax.set_ylabel("density")
    ax.legend(fontsize=8, loc="upper left" if not n_inf else "center left")

    # (b) flagged series over the corpus band, per channel
    ch_axes = []
    for j, c in enumerate(channels):
        a = fig.add_subplot(gs[1 + j // n_cols, j % n_cols])
        a.fill_between(t, q_lo[:, c], q_hi[:, c], color="0.75", lw=0,
                       label=f"corpus {lo:.0%}-{hi:.0%} band")  # fmt: skip
        a.plot(t, q_med[:, c], color="k", lw=1, label="corpus median")
        for k, i in enumerate(shown):
            a.plot(t, Sg[k, :, c], color=_FLAG_COLOURS[k % len(_FLAG_COLOURS)], lw=1.1,
                   alpha=0.85, label=f"series #{i}, novelty {novelty[i]:.3g}")  # fmt: skip
        a.set_title(f"channel {c}", fontsize=9)
        a.tick_params(labelsize=7)
        if j // n_cols == n_rows - 1:
            a.set_xlabel(t_label, fontsize=8)
        ch_axes.append(a)
    if ch_axes:
        handles, labels = ch_axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4),
                   fontsize=8, frameon=False)  # fmt: skip
    what = (
        f"nothing flagged: the most novel series (#{shown[0]}) over the corpus band"
        if none_flagged
        else f"the {len(shown)} most novel flagged series over the corpus band"
    )
    if d > max_channels:
        what += f"; the {len(channels)} of {d} channels where they leave the band most"
    if space_note:
        what += f"\n{space_note}"
    fig.suptitle(what, fontsize=10)
    return fig, {"scores": ax, "channels": ch_axes}
