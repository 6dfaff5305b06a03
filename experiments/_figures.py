"""The report's figures (PNG), with a note in place of each figure that would carry nothing.

- ``conformance_vs_mahalanobis.png``: one point per (data set, kernel), the kernel's fixed
  colour (:data:`KERNEL_COLOURS`).
- ``critical_difference_<scorer>.png``: for each scorer, a critical-difference diagram of the
  kernels over the data sets (aeon's :func:`~aeon.visualisation.plot_critical_difference`:
  mean ranks, Friedman test, then cliques from one-sided Wilcoxon signed-rank tests with Holm's
  correction at ``CD_ALPHA``). The unit is the data set (its classes averaged, as in the
  tables): the classes of one data set share its series and are not independent problems.
  It is drawn only when the tests could reject at all (:func:`min_datasets`), otherwise a note
  says how many data sets are missing.
- ``selected_hyperparameters.png``: how often each candidate value was selected, only for the
  hyper-parameters whose grid holds more than one value.
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import numpy as np

from ._results import _axes, _matrix, _test_rows

__all__ = ["KERNEL_COLOURS", "CD_ALPHA", "kernel_colour", "min_datasets", "write_figures"]

#: Significance level of the critical-difference diagrams (aeon's default).
CD_ALPHA = 0.1

#: One fixed colour per registered kernel: matplotlib's tab10, then darker or more saturated
#: hues unlike any of them, in the order of the report's tables, so a kernel keeps its colour
#: in every figure and every report.
KERNEL_COLOURS = dict(
    zip(
        [
            "flat_linear", "flat_rbf", "flat_poly", "integral_rbf", "integral_poly", "gak",
            "reservoir", "trunc_sig_linear", "trunc_sig_rbf", "pde_sig_rbf", "rand_sig_tanh",
            "rocket_linear", "rocket_rbf", "pde_sig_linear", "trunc_sig_linear_order1",
            "trunc_sig_rbf_order1",
        ],
        [
            "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#000075", "#800000", "#469990",
            "#f032e6", "#e6ab02",
        ],
    )
)  # fmt: skip
# kernels registered by a user: a colour chosen by a hash of the name (stable, may repeat)
_EXTRA_COLOURS = ["#aaffc3", "#dcbeff", "#9a6324", "#fabed4", "#a9a9a9", "#808000"]


def kernel_colour(name: str) -> str:
    """The kernel's fixed colour (hex): :data:`KERNEL_COLOURS`, or for a kernel not in it a
    colour chosen by a hash of its name."""
    if name in KERNEL_COLOURS:
        return KERNEL_COLOURS[name]
    return _EXTRA_COLOURS[zlib.crc32(name.encode()) % len(_EXTRA_COLOURS)]


def min_datasets(n_methods: int, alpha: float = CD_ALPHA) -> int:
    r"""The fewest data sets on which the critical-difference tests can reject anything.

    The cliques come from one-sided Wilcoxon signed-rank tests at :math:`\alpha / (k - 1)`
    (Holm's first step, as aeon applies it). With :math:`n` data sets the exact test's
    smallest p-value is :math:`2^{-n}` (every difference of one sign), so it can reject only
    when :math:`2^{-n} \le \alpha/(k-1)`. The Friedman test that precedes them has its largest
    statistic :math:`n(k-1)` (identical rankings everywhere) and must reach :math:`\alpha`
    too. For :math:`\alpha = 0.1`: 5 data sets for 3 kernels, 7 for 11.
    """
    from scipy.stats import chi2

    k = int(n_methods)
    if k < 2:
        raise ValueError(f"`n_methods` must be at least 2, got {n_methods}")
    n = max(1, math.ceil(math.log2((k - 1) / alpha) - 1e-12))
    while chi2.sf(n * (k - 1), k - 1) >= alpha:
        n += 1
    return n


def write_figures(store, setting: str, res: dict, out: Path) -> tuple[list[Path], list[str]]:
    """Write the figures of ``setting`` to ``out``: (paths written, notes for the report on
    figures left out and why)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths: list[Path] = []
    notes: list[str] = []
    for draw in (_conformance_vs_mahalanobis, _critical_differences, _hyperparameters):
        p, n = draw(store, setting, res, Path(out), plt)
        paths += p
        notes += n
    return paths, notes


def figures_markdown(paths, notes) -> str:
    """The report's "Figures" section: each picture, then the notes."""
    lines = ["## Figures", ""]
    for p in paths:
        lines += [f"![{Path(p).stem}]({Path(p).name})", ""]
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- figures
def _conformance_vs_mahalanobis(store, setting, res, out, plt):

    datasets, kernels, scorers = _axes(res)
    if not {"conformance", "mahalanobis"} <= set(scorers):
        return [], []
    fig, ax = plt.subplots(figsize=(6.2, 5))
    for k in kernels:
        xs = [res.get((d, k, "mahalanobis"), {}).get("roc_auc", np.nan) for d in datasets]
        ys = [res.get((d, k, "conformance"), {}).get("roc_auc", np.nan) for d in datasets]
        ax.scatter(xs, ys, label=k, s=28, color=kernel_colour(k), edgecolors="white", lw=0.4)
    ax.plot([0, 1], [0, 1], "k--", lw=0.8)
    ax.set(xlim=(0, 1), ylim=(0, 1), aspect="equal")
    ax.set_xlabel("Mahalanobis ROC-AUC")
    ax.set_ylabel("conformance ROC-AUC")
    ax.set_title(f"one point per data set and kernel ({len(datasets)} data sets)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    p = out / "conformance_vs_mahalanobis.png"
    fig.savefig(p, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [p], []


def _critical_differences(store, setting, res, out, plt):

    datasets, kernels, scorers = _axes(res)
    paths, notes = [], []
    few: dict[tuple, list[str]] = {}
    for s in scorers:
        M = _matrix(res, "roc_auc", s, datasets, kernels)
        keep = ~np.isnan(M).any(axis=0)
        names = [k for k, c in zip(kernels, keep) if c]
        left = [k for k, c in zip(kernels, keep) if not c]
        M = M[:, keep]
        lost = f" ({', '.join(left)} left out: no result on every data set)" if left else ""
        if len(names) < 3:
            notes.append(f"No critical-difference diagram for {s}: {len(names)} kernel(s) with "
                         f"a result on every data set, at least 3 needed{lost}.")  # fmt: skip
            continue
        need = min_datasets(len(names))
        if len(datasets) < need:
            few.setdefault((need, len(names), lost), []).append(s)
            continue
        p = out / f"critical_difference_{s}.png"
        _cd_diagram(M, names, f"ROC-AUC, {s}: {len(datasets)} data sets{lost}", p, plt)
        paths.append(p)
    if few:  # one note for every scorer short of data sets
        which = [s for ss in few.values() for s in ss]
        need = "; ".join(f"{', '.join(ss)}: at least {n} for {k} kernels{lost}"
                         for (n, k, lost), ss in few.items())  # fmt: skip
        notes.append(
            f"No critical-difference diagram for {', '.join(which)}: {len(datasets)} data "
            f"set(s), too few for the one-sided Wilcoxon signed-rank tests with Holm's "
            f"correction at alpha={CD_ALPHA:g} to reject anything (their smallest p-value, "
            f"2^-n, must reach alpha/(k-1)). Needed: {need}."
        )
    return paths, notes


def _cd_diagram(M: np.ndarray, names: list[str], title: str, path: Path, plt) -> None:
    import warnings

    from aeon.visualisation import plot_critical_difference

    with warnings.catch_warnings():  # aeon warns when two kernels tie on every data set
        warnings.simplefilter("ignore", UserWarning)
        fig, ax = plot_critical_difference(
            M, names, highlight={k: kernel_colour(k) for k in names}, alpha=CD_ALPHA,
            test="wilcoxon", correction="holm", width=7, textspace=1.7,
        )  # fmt: skip
    fig.suptitle(title, fontsize=9, y=1.02)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _candidates(store, setting: str) -> dict[str, set]:
    """The grid's values of each hyper-parameter, from the CV table (every point tried)."""
    cand: dict[str, set] = {}
    rows = store.query(
        "SELECT DISTINCT kernel, params, time_channel, scorer, axis, n_rank FROM cv "
        "WHERE setting=?", (setting,),
    )  # fmt: skip
    for r in rows:
        cand.setdefault("time channel", set()).add(float(r["time_channel"]))
        for name, v in json.loads(r["params"]).items():
            cand.setdefault(f"{r['kernel']}: {name}", set()).add(float(v))
        if r["scorer"] in ("conformance", "mahalanobis"):
            if r["axis"]:
                alphas = json.loads(r["axis"])
                cand.setdefault("log10 alpha", set()).update(math.log10(a) for a in alphas)
            if r["n_rank"]:
                cand.setdefault("rank", set()).update(float(i) for i in range(1, r["n_rank"] + 1))
    return cand


def _hyperparameters(store, setting, res, out, plt):
    rows = _test_rows(store, setting, "AND error IS NULL")
    if not rows:
        return [], []
    values: dict[str, list] = {}
    for r in rows:
        if r["scorer"] in ("conformance", "mahalanobis"):
            values.setdefault("log10 alpha", []).append(math.log10(r["alpha"]))
            values.setdefault("rank", []).append(float(r["rank"]))
        values.setdefault("time channel", []).append(float(r["time_channel"]))
        for name, v in json.loads(r["params"]).items():
            values.setdefault(f"{r['kernel']}: {name}", []).append(float(v))
    cand = _candidates(store, setting)
    for name, v in values.items():  # a value selected but not in the CV table (older stores)
        cand.setdefault(name, set()).update(v)
    shown = sorted(n for n in values if len(cand[n]) > 1)
    single = sorted(n for n in values if len(cand[n]) <= 1)
    notes = []
    if single:
        notes.append(f"Hyper-parameters with a single grid value (not plotted): "
                     f"{', '.join(single)}.")  # fmt: skip
    if not shown:
        return [], notes
    cols = min(4, len(shown))
    n_rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(n_rows, cols, figsize=(3.3 * cols, 2.5 * n_rows), squeeze=False)
    for ax, name in zip(axes.flat, shown):
        v = np.asarray(values[name])
        grid = np.array(sorted(cand[name]))
        kernel = name.split(": ")[0] if ": " in name else None
        colour = kernel_colour(kernel) if kernel else "0.4"
        if len(grid) <= 12:
            counts = [int(np.isclose(v, g, rtol=1e-9, atol=0).sum()) for g in grid]
            ax.bar(range(len(grid)), counts, color=colour)
            ax.set_xticks(range(len(grid)), [f"{g:.3g}" for g in grid], fontsize=7,
                          rotation=45 if len(grid) > 5 else 0)  # fmt: skip
        else:
            ax.hist(v, bins=12, color=colour)
        ax.set_title(name, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    fig.suptitle("selected hyper-parameters: how often each grid value was chosen "
                 "(all data sets, classes, scorers)", fontsize=9)  # fmt: skip
    fig.tight_layout()
    p = out / "selected_hyperparameters.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return [p], notes
