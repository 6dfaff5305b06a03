"""The benchmark's markdown report: per data set the mean ROC-AUC over its classes, then the
mean, the mean rank and W/T/L over the data sets every shown method completed, the false-alarm
and time table; aeon's critical-difference diagram; the header of a docs page. Read from the
rows of :func:`.store.fetch_rows` (or any rows of that layout)."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
from pathlib import Path

import numpy as np

from . import CLIError
from .methods import method_order
from .problems import MAX_CLASSES, MAX_CORPUS, MAX_TEST

__all__ = ["docs_header", "report_markdown", "score_cells", "summarize", "write_cd_diagram"]


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def summarize(
    rows: list[dict],
    methods: list[str] | None = None,
    failed: str = "leave-out",
    reference: str | None = None,
    tie: float = 0.005,
) -> dict:
    """Per data set and method: mean ROC-AUC over classes (and seeds) where complete.

    A (data set, method) is complete when every (class, seed) of the data set has a row
    (classes counted from ``n_classes``, seeds from the rows of any shown method there) with an
    AUC, or, with ``failed="chance"``, a row at all: a failed problem (error, no AUC) then
    counts as ROC-AUC 0.5. Only data sets complete for every shown method enter the mean, the
    mean rank (rank 1 = highest AUC, ties averaged), the wins/ties/losses of each method
    against ``reference`` (a tie: data-set means within ``tie``) and the second table (mean
    |FAR - nominal| over problems with corpus size >= 20, median fit and score seconds,
    failed problems)."""
    from scipy.stats import rankdata

    if failed not in ("leave-out", "chance"):
        raise CLIError(f"--failed must be leave-out or chance, got {failed!r}")
    methods = methods or method_order({r["method"] for r in rows})
    rows = [r for r in rows if r["method"] in methods]
    datasets = sorted({r["dataset"] for r in rows})
    auc: dict = {}
    n_classes: dict = {}
    seeds: dict = {}
    n_failed = {m: 0 for m in methods}
    for r in rows:
        n_classes[r["dataset"]] = r["n_classes"]
        seeds.setdefault(r["dataset"], set()).add(r["seed"])
        value = r["auc"]
        if value is None:
            n_failed[r["method"]] += 1
            if failed == "chance":
                value = 0.5
        if value is not None:
            auc.setdefault((r["dataset"], r["method"]), {})[(r["class"], r["seed"])] = value
    cell, progress = {}, {}
    for d in datasets:
        need = n_classes[d] * len(seeds[d])
        for m in methods:
            got = auc.get((d, m), {})
            progress[(d, m)] = (len(got), need)
            if len(got) >= need:
                cell[(d, m)] = float(np.mean(list(got.values())))
    complete = [d for d in datasets if all((d, m) in cell for m in methods)]
    mean = {
        m: float(np.mean([cell[(d, m)] for d in complete])) if complete else None for m in methods
    }
    ranks = {m: [] for m in methods}
    for d in complete:
        for m, r in zip(methods, rankdata([-cell[(d, m)] for m in methods])):
            ranks[m].append(float(r))
    mean_rank = {m: float(np.mean(ranks[m])) if ranks[m] else None for m in methods}
    wtl = {}
    if reference in methods:
        for m in methods:
            diff = [cell[(d, m)] - cell[(d, reference)] for d in complete]
            wtl[m] = (
                sum(x > tie for x in diff),
                sum(abs(x) <= tie for x in diff),
                sum(x < -tie for x in diff),
            )
    in_complete = [r for r in rows if r["dataset"] in complete and r["auc"] is not None]
    far_gap, fit_med, score_med = {}, {}, {}
    for m in methods:
        mine = [r for r in in_complete if r["method"] == m]
        gaps = [
            abs(r["far"] - r["far_nominal"])
            for r in mine
            if r["n_corpus"] >= 20 and r["far"] is not None and r["far_nominal"] is not None
        ]
        far_gap[m] = (float(np.mean(gaps)) if gaps else None, len(gaps))
        fit_med[m] = float(np.median([r["fit_s"] for r in mine])) if mine else None
        score = [r.get("score_s") for r in mine if r.get("score_s") is not None]
        score_med[m] = float(np.median(score)) if score else None
    return dict(
        methods=methods,
        datasets=datasets,
        complete=complete,
        cell=cell,
        progress=progress,
        mean=mean,
        mean_rank=mean_rank,
        wtl=wtl,
        reference=reference,
        far_gap=far_gap,
        fit_median=fit_med,
        score_median=score_med,
        n_failed=n_failed,
    )


def score_cells(methods, values, best, progress) -> list[str]:
    """One table row's cells: each method's score (bold when it equals ``best``; None: no
    bold), or ``got/need`` from ``progress(method)`` for a cell still running."""
    cells = []
    for m, v in zip(methods, values):
        if v is None:
            got, need = progress(m)
            cells.append(f"{got}/{need}")
        else:
            cells.append(f"**{v:.3f}**" if v == best else f"{v:.3f}")
    return cells


def report_markdown(
    rows: list[dict],
    methods: list[str] | None = None,
    failed: str = "leave-out",
    reference: str | None = None,
) -> str:
    """The markdown tables of :func:`summarize`: per data set the mean ROC-AUC (bold: the
    best of a complete data set; ``k/n``: classes done so far), the mean, mean rank and W/T/L
    rows, then per method the false-alarm gap, the median times and the failed problems."""
    s = summarize(rows, methods, failed=failed, reference=reference)
    ms = s["methods"]
    if not ms or not s["datasets"]:
        return "no results yet"
    lines = [
        "Mean ROC-AUC over the classes of each data set (anomaly = any other class); "
        "`k/n`: classes done so far.",
        "",
        "| data set | " + " | ".join(ms) + " |",
        "|---" * (len(ms) + 1) + "|",
    ]
    for d in s["datasets"]:
        vals = [s["cell"].get((d, m)) for m in ms]
        best = max(vals) if d in s["complete"] and len(ms) > 1 else None
        cells = score_cells(ms, vals, best, lambda m, d=d: s["progress"][(d, m)])
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    lines.append("| **mean** | " + " | ".join(_fmt(s["mean"][m], ".3f") for m in ms) + " |")
    lines.append(
        "| **mean rank** | " + " | ".join(_fmt(s["mean_rank"][m], ".2f") for m in ms) + " |"
    )
    if s["wtl"]:
        lines.append(
            f"| **W/T/L vs {s['reference']}** | "
            + " | ".join("{}/{}/{}".format(*s["wtl"][m]) for m in ms)
            + " |"
        )
    left = [d for d in s["datasets"] if d not in s["complete"]]
    failed_note = "; a failed problem (n/a) counts as ROC-AUC 0.5" if failed == "chance" else ""
    lines += [
        "",
        f"Mean and rank over {len(s['complete'])} data set(s)"
        + failed_note
        + (f"; left out (not complete for every method): {', '.join(left)}." if left else ".")
        + (
            " W/T/L: data-set means more than 0.005 above / within 0.005 / below."
            if s["wtl"]
            else ""
        ),
        "",
        "| method | mean abs(false alarm - nominal), corpus >= 20 | problems | median fit s "
        "| median score s | failed problems |",
        "|---|---|---|---|---|---|",
    ]
    for m in ms:
        gap, k = s["far_gap"][m]
        lines.append(
            f"| {m} | {_fmt(gap, '.3f')} | {k} | {_fmt(s['fit_median'][m], '.2f')} "
            f"| {_fmt(s['score_median'][m], '.2f')} | {s['n_failed'][m]} |"
        )
    return "\n".join(lines)


def write_cd_diagram(rows: list[dict], methods: list[str], path, failed: str, title: str) -> str:
    """aeon's critical-difference diagram (Wilcoxon-Holm, alpha 0.05) of the data-set means;
    returns a line for the docs (or why none was drawn: fewer than 5 complete data sets, or
    fewer than 3 methods, which aeon's Friedman test refuses)."""
    s = summarize(rows, methods, failed=failed)
    if len(s["complete"]) < 5 or len(methods) < 2:
        return f"no critical-difference diagram: {len(s['complete'])} complete data set(s)"
    if len(methods) < 3:
        return f"no critical-difference diagram: {len(methods)} methods (aeon's test needs 3)"
    import warnings as _w

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from aeon.visualisation import plot_critical_difference

    M = np.array([[s["cell"][(d, m)] for m in methods] for d in s["complete"]])
    with _w.catch_warnings():
        _w.simplefilter("ignore", UserWarning)
        fig, _ = plot_critical_difference(
            M, list(methods), alpha=0.05, test="wilcoxon", correction="holm", width=7
        )
    fig.suptitle(title, fontsize=9, y=1.02)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return f"critical-difference diagram over {len(s['complete'])} data sets: {path}"


def docs_header(argv: list[str], datasets: list[str], settings: dict | None = None) -> str:
    cmd = "python benchmarks/bench_detector.py " + " ".join(shlex.quote(a) for a in argv)
    st = {"max_corpus": MAX_CORPUS, "max_test": MAX_TEST, "max_classes": MAX_CLASSES}
    st.update(settings or {})
    return "\n".join(
        [
            "# Detector benchmark: KernelNoveltyDetector vs ROCKAD vs PyOD",
            "",
            f"Produced by `{cmd}` on {datetime.date.today().isoformat()}, machine: "
            f"{os.cpu_count()} cores ({platform.machine()}, {platform.system()}), from the store "
            "written by `python benchmarks/bench_detector.py run` (protocol in that script's "
            f"docstring: one-versus-rest, at most {st['max_classes']} classes per data set, "
            f"corpus <= {st['max_corpus']} training series of the class, test <= "
            f"{st['max_test']} series of the test split, ROC-AUC with the anomaly as positive).",
            "",
            f"Data sets: {', '.join(datasets)}.",
            "",
        ]
    )
