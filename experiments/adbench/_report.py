"""The ADBench tables: mean AUC-ROC and rank per method, and the bandwidth-sensitivity
summary of the diagnostic methods."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._options import option
from ._methods import METHODS, SENSITIVITY_FACTORS, TABLE_METHODS, _factor_tag
from ._run import DEFAULT_DB
from ._store import ADBenchStore

__all__ = ["ReportOptions", "report", "sensitivity_table", "table"]


def table(
    db: Path,
    methods: list[str] | None = None,
    complete_only: bool = True,
    seeds: list[int] | None = None,
):
    """(markdown text, mean AUC per method, mean rank per method) from the results file.

    ``methods``: default ``TABLE_METHODS`` (COF, SOD and the diagnostic ones only by name).
    ``seeds``: only these seeds (default all); a data set counts a method's mean over the seeds
    it has, and the "(Ns)" tag gives the fewest seeds any method has there."""
    methods = methods or TABLE_METHODS
    with ADBenchStore(db, mode="read") as store:
        rows = store.aucs()
    if seeds is not None:
        rows = [r for r in rows if r[2] in seeds]
    if not rows:
        return "no results yet", {}, {}
    aucs: dict = {}
    times: dict = {}
    for ds, m, _s, auc, t in rows:
        if methods and m not in methods:
            continue
        aucs.setdefault((ds, m), []).append(auc)
        times.setdefault(m, []).append(t)
    ms = sorted({m for _, m in aucs}, key=lambda m: list(METHODS).index(m) if m in METHODS else 99)
    dss = sorted({d for d, _ in aucs}, key=lambda s: int(s.split("_")[0]))
    if complete_only:
        dss = [d for d in dss if all((d, m) in aucs for m in ms)]
    mean = {(d, m): float(np.mean(aucs[(d, m)])) for d in dss for m in ms if (d, m) in aucs}
    ranks: dict = {m: [] for m in ms}
    for d in dss:
        present = [m for m in ms if (d, m) in mean]
        vals = np.array([-mean[(d, m)] for m in present])
        from scipy.stats import rankdata

        for m, r in zip(present, rankdata(vals)):
            ranks[m].append(r)
    mean_auc = {
        m: float(np.mean([mean[(d, m)] for d in dss if (d, m) in mean]))
        for m in ms
        if any((d, m) in mean for d in dss)
    }
    mean_rank = {m: float(np.mean(ranks[m])) for m in ms if ranks[m]}
    lines = ["| data set | " + " | ".join(ms) + " |", "|---" * (len(ms) + 1) + "|"]
    for d in dss:
        cells = []
        best = max(mean[(d, m)] for m in ms if (d, m) in mean)
        for m in ms:
            if (d, m) not in mean:
                cells.append("-")
                continue
            v = f"{mean[(d, m)]:.3f}"
            cells.append(f"**{v}**" if mean[(d, m)] == best else v)
        nseeds = min(len(aucs[(d, m)]) for m in ms if (d, m) in aucs)
        lines.append(f"| {d} ({nseeds}s) | " + " | ".join(cells) + " |")
    lines.append(
        "| **mean AUC** | " + " | ".join(f"{mean_auc.get(m, float('nan')):.3f}" for m in ms) + " |"
    )
    lines.append(
        "| **mean rank** | "
        + " | ".join(f"{mean_rank.get(m, float('nan')):.2f}" for m in ms)
        + " |"
    )
    lines.append("| median s/run | " + " | ".join(f"{np.median(times[m]):.2f}" for m in ms) + " |")
    return "\n".join(lines), mean_auc, mean_rank


def _seed_means(db: Path, seeds: list[int] | None) -> dict:
    """{(data set, method): mean AUC over the given seeds} of the rows without error."""
    with ADBenchStore(db, mode="read") as store:
        rows = store.aucs()
    acc: dict = {}
    for ds, m, s, auc, _t in rows:
        if seeds is None or s in seeds:
            acc.setdefault((ds, m), []).append(auc)
    return {k: float(np.mean(v)) for k, v in acc.items()}


def sensitivity_table(db: Path, seeds: list[int] | None = None) -> str:
    """Markdown summary of the bandwidth-sensitivity study (``DIAGNOSTIC_METHODS``).

    On the data sets where every fixed factor, the selected method and all main methods have
    results: mean AUC-ROC of SOSREP-SDO and KDE-SDO at each fixed length factor, with the
    Fisher-divergence selection on the default and on the wide grid, and the per-data-set best
    factor chosen *with the test labels* (an upper bound no valid selection rule reaches);
    the place each would take by mean AUC among the main methods; and SOSREP vs KDE per factor.
    """
    mean = _seed_means(db, seeds)
    dss = sorted({d for d, _ in mean}, key=lambda s: int(s.split("_")[0]))
    fixed = {
        k: [f"{k}-SDO@{_factor_tag(f)}" for f in SENSITIVITY_FACTORS] for k in ("SOSREP", "KDE")
    }
    needed = fixed["SOSREP"] + fixed["KDE"] + ["SOSREP-SDO-wide"]
    main = [m for m in TABLE_METHODS if any((d, m) in mean for d in dss)]
    dss = [d for d in dss if all((d, m) in mean for m in needed + main)]
    if not dss:
        return "no data set has every method of the study yet"
    main_auc = {m: float(np.mean([mean[(d, m)] for d in dss])) for m in main}

    def place(value: float, exclude: str) -> str:
        others = [v for m, v in main_auc.items() if m != exclude]
        return f"{1 + sum(v > value for v in others)} of {len(others) + 1}"

    lines = [
        f"{len(dss)} data sets, seeds {seeds if seeds is not None else 'all'}; place = rank by "
        f"mean AUC-ROC among the {len(main)} main methods with this variant in the method's stead.",
        "",
        "| variant | SOSREP-SDO | place | KDE-SDO | place | SOSREP > KDE on |",
        "|---|---|---|---|---|---|",
    ]

    def row(label: str, s_vals: list[float], k_vals: list[float]) -> str:
        ms, mk = float(np.mean(s_vals)), float(np.mean(k_vals))
        wins = sum(a > b for a, b in zip(s_vals, k_vals))
        return (
            f"| {label} | {ms:.3f} | {place(ms, 'SOSREP-SDO')} | {mk:.3f} | "
            f"{place(mk, 'KDE-SDO')} | {wins} of {len(dss)} |"
        )

    for f, ms_, mk_ in zip(SENSITIVITY_FACTORS, fixed["SOSREP"], fixed["KDE"]):
        lines.append(
            row(
                f"fixed l = {_factor_tag(f)} r",
                [mean[(d, ms_)] for d in dss],
                [mean[(d, mk_)] for d in dss],
            )
        )
    sel_s = [mean[(d, "SOSREP-SDO")] for d in dss]
    sel_k = [mean[(d, "KDE-SDO")] for d in dss]
    lines.append(row("Fisher divergence, grid r x {1, 2, 4, 8} (main)", sel_s, sel_k))
    wide = [mean[(d, "SOSREP-SDO-wide")] for d in dss]
    ms = float(np.mean(wide))
    lines.append(
        f"| Fisher divergence, grid r x 2^-4..2^5 | {ms:.3f} | {place(ms, 'SOSREP-SDO')} "
        "| - | - | - |"
    )
    if all((d, f"{k}-SDO@1-clean") in mean for d in dss for k in ("SOSREP", "KDE")):
        cs = [mean[(d, "SOSREP-SDO@1-clean")] for d in dss]
        ck = [mean[(d, "KDE-SDO@1-clean")] for d in dss]
        wins = sum(a > b for a, b in zip(cs, ck))
        lines.append(
            f"| fixed l = 1 r, trained on the normal rows only (not ADBench's protocol) "
            f"| {np.mean(cs):.3f} | - | {np.mean(ck):.3f} | - | {wins} of {len(dss)} |"
        )
    best_s = [max(mean[(d, m)] for m in fixed["SOSREP"]) for d in dss]
    best_k = [max(mean[(d, m)] for m in fixed["KDE"]) for d in dss]
    lines.append(row("best fixed factor per data set, chosen with test labels", best_s, best_k))
    top = sorted(main_auc, key=main_auc.get, reverse=True)[:4]
    lines += [
        "",
        "Main methods on these data sets: "
        + ", ".join(f"{m} {main_auc[m]:.3f}" for m in top)
        + ".",
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class ReportOptions:
    """Everything ``python -m experiments adbench report`` accepts."""

    db: str = option(str(DEFAULT_DB), help="SQLite file of the results")
    methods: list[str] | None = option(None, nargs="*", help="default: the main methods")
    seeds: list[int] | None = option(None, nargs="*", type=int, help="default: every seed")
    all_datasets: bool = option(
        False, action="store_true",
        help="include data sets where some method has no result yet",
    )  # fmt: skip
    out: str | None = option(None, help="also write the markdown table here")
    sensitivity: bool = option(
        False, action="store_true",
        help="summarise the bandwidth-sensitivity study (the diagnostic methods) instead",
    )  # fmt: skip


def report(opts: ReportOptions) -> None:
    if opts.sensitivity:
        text = sensitivity_table(Path(opts.db), opts.seeds)
        print(text)
        if opts.out:
            Path(opts.out).write_text(text + "\n")
        return
    text, mean_auc, mean_rank = table(
        Path(opts.db), opts.methods, not opts.all_datasets, opts.seeds
    )
    print(text)
    if mean_rank:
        order = sorted(mean_rank, key=mean_rank.get)
        print("\nby mean rank: " + ", ".join(f"{m} {mean_rank[m]:.2f}" for m in order))
    if opts.out:
        Path(opts.out).write_text(text + "\n")
