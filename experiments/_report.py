"""Tables and plots from a results store.

Tables (Markdown and LaTeX), one per (metric, scorer) in the layout of the reference study:
data sets as rows, kernels as columns, each entry the test metric averaged over the data
set's classes (one-versus-rest); a "mean" row (mean per column) and a "mean rank" row
(kernels ranked within each data set, 1 = best, ties averaged). The figures (PNG) are drawn
by :mod:`experiments._figures` and listed, with notes on those left out, at the end of
report.md.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from ._grids import REFERENCE_KERNELS
from ._results import _axes, _latest_setting, _matrix, _test_rows, summary
from ._store import ResultStore, StoreError

__all__ = [
    "summary",
    "markdown_tables",
    "latex_tables",
    "print_summary",
    "write_report",
    "reference_comparison",
    "timing_breakdown",
    "failure_notes",
    "per_class",
    "per_class_markdown",
    "grid_edges",
    "edge_notes",
    "edge_is_preferred",
    "below_chance_notes",
    "below_chance_explained",
    "centre_check",
    "chance_sd",
    "run_notes",
]

METRICS = {"roc_auc": "ROC-AUC", "pr_auc": "PR-AUC"}


def failure_notes(res: dict) -> dict[str, int]:
    """Every distinct failure reason of ``res`` -> its footnote number (1, 2, ... in the
    order of the tables: data sets, kernels, scorers)."""
    datasets, kernels, scorers = _axes(res)
    notes: dict[str, int] = {}
    for d in datasets:
        for k in kernels:
            for s in scorers:
                for msg in res.get((d, k, s), {}).get("errors", {}):
                    notes.setdefault(msg, len(notes) + 1)
    return notes


def _marks(e: dict, notes: dict[str, int]) -> str:
    return ",".join(str(notes[m]) for m in e["errors"])


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1 = largest, ties averaged; NaN entries get NaN."""
    from scipy.stats import rankdata

    out = np.full(values.shape, np.nan)
    for i, row in enumerate(values):
        ok = ~np.isnan(row)
        if ok.any():
            out[i, ok] = rankdata(-row[ok])
    return out


def _tex_escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in "&%$#_{}":
            out.append("\\" + ch)
        elif ch == "\\":
            out.append(r"\textbackslash{}")
        elif ch in "~^":
            out.append(r"\textasciitilde{}" if ch == "~" else r"\textasciicircum{}")
        else:
            out.append(ch)
    return "".join(out)


def _table(res, metric, scorer, fmt: str, notes: dict[str, int] | None = None) -> str:
    datasets, kernels, _ = _axes(res)
    notes = failure_notes(res) if notes is None else notes
    M = _matrix(res, metric, scorer, datasets, kernels)
    failed = [[bool(res.get((d, k, scorer), {}).get("errors")) for k in kernels] for d in datasets]
    if np.isnan(M).all() and not any(map(any, failed)):
        return ""
    ranks = _ranks(M)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: mean "-"
        col_mean = np.nanmean(M, axis=0)
        rank_mean = np.nanmean(ranks, axis=0)
    title = f"{METRICS[metric]}, {scorer}"

    used: list[str] = []

    def cell(v, best, e=None):
        if e is not None and e.get("errors"):
            used.extend(m for m in e["errors"] if m not in used)
            if fmt == "md":
                return f"failed [{_marks(e, notes)}]"
            return f"failed\\textsuperscript{{{_marks(e, notes)}}}"
        if np.isnan(v):
            return "-"
        s = f"{v:.3f}"
        if best:
            return f"**{s}**" if fmt == "md" else f"\\textbf{{{s}}}"
        return s

    lines = []
    if fmt == "md":
        lines += [f"#### {title}", "", "| data set | " + " | ".join(kernels) + " |",
                  "|---" * (len(kernels) + 1) + "|"]  # fmt: skip
    else:
        esc = [k.replace("_", r"\_") for k in kernels]
        lines += [r"\begin{table}[ht]\centering\small", f"\\caption{{{title}}}",
                  r"\begin{tabular}{l" + "c" * len(kernels) + "}", r"\toprule",
                  "data set & " + " & ".join(esc) + r" \\", r"\midrule"]  # fmt: skip
    for i, d in enumerate(datasets):
        best = np.nanmax(M[i]) if not np.isnan(M[i]).all() else np.nan
        cells = [cell(v, v == best, res.get((d, k, scorer))) for v, k in zip(M[i], kernels)]
        if fmt == "md":
            lines.append(f"| {d} | " + " | ".join(cells) + " |")
        else:
            lines.append(f"{d} & " + " & ".join(cells) + r" \\")
    means = ["-" if np.isnan(v) else f"{v:.3f}" for v in col_mean]
    rks = ["-" if np.isnan(v) else f"{v:.2f}" for v in rank_mean]
    used.sort(key=lambda m: notes[m])
    if fmt == "md":
        lines += ["| mean | " + " | ".join(means) + " |", "| mean rank | " + " | ".join(rks) + " |"]
        if used:
            lines += [""] + [f"[{notes[m]}] {m}  " for m in used]
    else:
        lines += [r"\midrule", "mean & " + " & ".join(means) + r" \\",
                  "mean rank & " + " & ".join(rks) + r" \\", r"\bottomrule",
                  r"\end{tabular}"]  # fmt: skip
        if used:
            lines += [r"\par\smallskip\footnotesize"]
            lines += [f"[{notes[m]}] {_tex_escape(m)}\\\\" for m in used]
        lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def markdown_tables(res: dict) -> str:
    """One Markdown table per (metric, scorer); a failed entry reads "failed [n]", with the
    reason n below the table (numbered once for all tables)."""
    _, _, scorers = _axes(res)
    notes = failure_notes(res)
    return "\n".join(t for m in METRICS for s in scorers if (t := _table(res, m, s, "md", notes)))


def per_class(store: ResultStore, setting: str) -> list[dict]:
    """One row per (data set, normal class, kernel, scorer) of ``setting``: the test ROC-AUC
    and PR-AUC of that class made normal (NaN and the reason where it failed)."""
    rows = []
    for r in _test_rows(store, setting):
        bad = bool(r["error"])
        rows.append({
            "dataset": r["dataset"], "class": r["cls"], "kernel": r["kernel"],
            "scorer": r["scorer"], "roc_auc": float("nan") if bad else r["roc_auc"],
            "pr_auc": float("nan") if bad else r["pr_auc"], "error": r["error"] or "",
        })  # fmt: skip
    datasets, kernels, scorers = _axes({(r["dataset"], r["kernel"], r["scorer"]): 0 for r in rows})
    order = {n: i for i, n in enumerate(kernels + scorers)}
    rows.sort(key=lambda r: (r["dataset"], order[r["kernel"]], order[r["scorer"]], r["class"]))
    return rows


def per_class_markdown(rows: list[dict]) -> str:
    """Per data set, one Markdown table: (kernel, scorer) rows, one column per normal class,
    entries 'ROC-AUC / PR-AUC' (a failed entry reads "failed")."""
    out = []
    for d in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == d]
        classes = sorted({r["class"] for r in mine})
        cells: dict = {}
        for r in mine:
            v = "failed" if r["error"] else f"{r['roc_auc']:.3f} / {r['pr_auc']:.3f}"
            cells.setdefault((r["kernel"], r["scorer"]), {})[r["class"]] = v
        out += [f"### {d}", "", "| kernel | scorer | " + " | ".join(map(str, classes)) + " |",
                "|---|---|" + "---:|" * len(classes)]  # fmt: skip
        for (k, s), by in cells.items():
            out.append(f"| {k} | {s} | " + " | ".join(by.get(c, "") for c in classes) + " |")
        out.append("")
    return "\n".join(out)


def latex_tables(res: dict) -> str:
    _, _, scorers = _axes(res)
    notes = failure_notes(res)
    return "\n".join(t for m in METRICS for s in scorers if (t := _table(res, m, s, "tex", notes)))


def print_summary(res: dict, file=None, notes: dict[str, list[str]] | None = None) -> None:
    """Per data set: kernels x scorers, 'ROC-AUC / PR-AUC' averaged over the classes; a
    failed entry reads "failed [n]" with the reason n below the data set's table, then the
    data set's ``notes`` ({data set: lines}, :func:`run_notes`)."""
    datasets, kernels, scorers = _axes(res)
    failures = failure_notes(res)
    for d in datasets:
        used: list[str] = []
        print(f"\n{d}: test ROC-AUC / PR-AUC, mean over classes (normal class positive)",
              file=file)  # fmt: skip
        w = max(13, *(len(s) + 2 for s in scorers))
        kw = max(18, *(len(k) + 2 for k in kernels))  # the kernel column fits every name
        print(f"{'kernel':<{kw}}" + "".join(f"{s:>{w}}" for s in scorers), file=file)
        for k in kernels:
            cells = []
            for s in scorers:
                e = res.get((d, k, s))
                if e is None:
                    cells.append(f"{'':>{w}}")
                elif e["errors"]:
                    used.extend(m for m in e["errors"] if m not in used)
                    cells.append(f"failed [{_marks(e, failures)}]".rjust(w))
                elif math.isnan(e["roc_auc"]):
                    cells.append(f"{e['n_classes']}/{e['classes']} classes".rjust(w))
                else:
                    cells.append(f"{e['roc_auc']:.3f}/{e['pr_auc']:.3f}".rjust(w))
            print(f"{k:<{kw}}" + "".join(cells), file=file)
        for m in sorted(used, key=failures.get):
            print(f"  [{failures[m]}] {m}", file=file)
        for line in (notes or {}).get(d, []):
            print(f"  note: {line}", file=file)


# ----------------------------------------------------------------------------- notes
#: Grid axes without an order (a random seed): never reported at an edge.
UNORDERED_AXES = ("seed",)


def _value_text(v) -> str:
    """A grid value as the notes print it: an integer power of e as ``e^k`` (``e`` for e^1),
    anything else in ``%g``."""
    if isinstance(v, float) and v > 0 and v != 1.0:
        k = round(math.log(v))
        if k != 0 and math.isclose(v, math.e**k, rel_tol=1e-9):
            return "e" if k == 1 else f"e^{k}"
    return f"{v:g}"


def _widened(values: list, side: str) -> list | None:
    """The axis ``values`` with one more value beyond the edge ``side`` (the next step of a
    geometric progression for positive floats, of an arithmetic one for integers); None when
    that value would not be valid (an integer below 1, e.g. level 0)."""
    v = sorted(values)
    a, b = (v[0], v[1]) if side == "smallest" else (v[-1], v[-2])
    if all(isinstance(x, int) for x in v):
        new = a - (b - a)
        if new < 1:
            return None
    elif a > 0 and b > 0:
        new = a * a / b
    else:
        new = a - (b - a)
    return [new, *v] if side == "smallest" else [*v, new]


def grid_edges(selected: dict, axes: dict[str, list]) -> list[tuple[str, object, str]]:
    """The axes where a selection sits at the edge of its grid: (axis, value, "smallest" or
    "largest") for every axis of ``axes`` with at least two distinct values whose ``selected``
    value is the smallest or the largest of them (an axis without an order, the seed, is
    never reported; neither is an integer axis already at 1, which cannot widen below)."""
    out = []
    for axis, values in axes.items():
        distinct = sorted(set(values))
        if axis in UNORDERED_AXES or len(distinct) < 2 or axis not in selected:
            continue
        v = selected[axis]
        for side, edge in (("smallest", distinct[0]), ("largest", distinct[-1])):
            if v == edge and _widened(distinct, side) is not None:
                out.append((axis, v, side))
    return out


def _setting_axes(setting: dict, kernel: str, grid_id: str) -> dict[str, list] | None:
    """The grid axes (the pass levels as axis ``level``) of ``kernel`` under ``setting``
    (its preset, ``--grid`` overrides and ``--levels``), or None when the preset's grid in the
    code is no longer the one the test rows (``grid_id``) were selected from."""
    from ._cells import grid_hash
    from ._grids import PRESETS, kernel_grid_points

    preset = PRESETS.get(setting.get("preset"))
    if preset is None or kernel not in preset.grids:
        return None
    g = preset.grids[kernel]
    axes = {**g.axes, **(setting.get("grid") or {}).get(kernel, {})}
    levels = g.levels
    if levels is not None and setting.get("levels") is not None:
        levels = list(setting["levels"])
    points = kernel_grid_points(replace(g, axes=axes, levels=levels))
    if grid_hash(points, levels, list(setting.get("time_channel", []))) != grid_id:
        return None
    out = {a: [p[a] for p in points] for a in axes}
    if levels is not None:
        out[g.level_name] = list(levels)
    return out


def _cv_axes(store: ResultStore, setting: str, dataset: str, kernel: str) -> dict[str, list]:
    """The grid axes of ``kernel`` as the CV scored them (every parameter set in the cv
    table): the fallback when the setting's grid cannot be rebuilt."""
    axes: dict[str, list] = {}
    for r in store.query("SELECT DISTINCT params FROM cv WHERE setting=? AND dataset=? AND "
                         "kernel=?", (setting, dataset, kernel)):  # fmt: skip
        for a, v in json.loads(r["params"]).items():
            axes.setdefault(a, []).append(v)
    return axes


def edge_is_preferred(cv_rows: dict, axis: str, value) -> bool:
    """Whether the CV prefers ``axis`` = ``value``: the best CV objective (ROC-AUC + PR-AUC,
    over the scorer's axis and the ranks) of the candidates there is strictly above that of
    every other candidate. ``cv_rows`` maps (params json, time channel) -> {"roc", "pr",
    "error"} (``ResultStore.cv_rows``). A selection that won a tie (first in grid order) is
    no preference for the edge: the CV objective is flat there."""
    at = rest = -math.inf
    for (params, _tc), row in cv_rows.items():
        if row["error"] is not None or row["roc"] is None:
            continue
        obj = float(np.max(np.asarray(row["roc"]) + np.asarray(row["pr"])))
        if json.loads(params).get(axis) == value:
            at = max(at, obj)
        else:
            rest = max(rest, obj)
    return at > rest


def edge_notes(store: ResultStore, setting: str, keys=None) -> dict[str, list[str]]:
    """{data set: lines}, one line per (kernel, axis, edge value) where the CV selected a
    hyper-parameter at the edge of its grid (:func:`grid_edges`), preferring it to every
    inner value (:func:`edge_is_preferred`: a tie is not reported), for at least one normal
    class and scorer, e.g. "flat_rbf: sigma=e^-2 is the smallest grid value (e^-2..e^2),
    selected by conformance for 2 of 4 normal classes: widen the grid, e.g. --grid
    flat_rbf.sigma=0.0183,0.0498,0.135,0.368,1,2.72,7.39". ``keys``: only the test rows
    of these (data set, kernel, scorer) (default: all)."""
    known = store.settings().get(setting, {})
    rows = [r for r in _test_rows(store, setting) if not r["error"] and r["params"]
            and (keys is None or (r["dataset"], r["kernel"], r["scorer"]) in keys)]  # fmt: skip
    classes: dict[str, set] = {}
    hits: dict[tuple, dict] = {}
    axes_of: dict[tuple, dict] = {}
    for r in rows:
        d, k = r["dataset"], r["kernel"]
        classes.setdefault(d, set()).add(r["cls"])
        if (d, k) not in axes_of:
            axes_of[d, k] = _setting_axes(known, k, r["grid"]) or _cv_axes(store, setting, d, k)
        edges = grid_edges(json.loads(r["params"]), axes_of[d, k])
        cv = store.cv_rows(setting, d, r["cls"], k, r["scorer"]) if edges else {}
        for axis, v, side in edges:
            if not edge_is_preferred(cv, axis, v):
                continue
            h = hits.setdefault((d, k, axis, v, side), {"classes": set(), "scorers": []})
            h["classes"].add(r["cls"])
            if r["scorer"] not in h["scorers"]:
                h["scorers"].append(r["scorer"])
    notes: dict[str, list[str]] = {}
    for (d, k, axis, v, side), h in sorted(hits.items(), key=lambda t: t[0][:3]):
        values = sorted(set(axes_of[d, k][axis]))
        wider = ",".join(f"{x:.3g}" for x in _widened(values, side))
        how = f"--levels {wider}" if axis == "level" else f"--grid {k}.{axis}={wider}"
        notes.setdefault(d, []).append(
            f"{k}: {axis}={_value_text(v)} is the {side} grid value "
            f"({_value_text(values[0])}..{_value_text(values[-1])}), selected by "
            f"{', '.join(h['scorers'])} for {len(h['classes'])} of {len(classes[d])} normal "
            f"classes: widen the grid, e.g. {how}"
        )
    return notes


def below_chance_notes(res: dict) -> dict[str, list[str]]:
    """{data set: lines}, one line per kernel whose mean test ROC-AUC over the classes is
    below 0.5 (chance) for some scorer: the anomalies scored as more normal than the normal
    series, which a mean over kernels or data sets would hide."""
    low: dict[tuple, list[str]] = {}
    for (d, k, s), e in res.items():
        if not math.isnan(e["roc_auc"]) and e["roc_auc"] < 0.5:
            low.setdefault((d, k), []).append(f"{s} {e['roc_auc']:.3f}")
    notes: dict[str, list[str]] = {}
    for (d, k), which in sorted(low.items()):
        notes.setdefault(d, []).append(
            f"{k}: mean test ROC-AUC below chance (0.5) with {', '.join(which)}: the anomalies "
            "score as more normal than the normal series, likely a scale or orientation "
            "problem (a bandwidth off the data's scale, see the grid notes; fewer components "
            "kept than the refit has, see --max-rank; or another normal class than meant)"
        )
    return notes


def chance_sd(n_normal: int, n_anomalies: int) -> float:
    """Standard deviation of the ROC-AUC of a score that carries no information (ties
    aside), ``n_normal`` against ``n_anomalies`` series: sqrt((m + n + 1) / (12 m n))."""
    m, n = n_normal, n_anomalies
    return math.sqrt((m + n + 1) / (12 * m * n))


def centre_check(dataset: str, classes, preprocessing: dict) -> dict | None:
    """What one-versus-rest does to a quiet class, measured on the data: for each normal class
    ``c`` of ``classes``, the pre-processing of the study (:class:`~tskernels.transforms.
    Preprocessor` with ``preprocessing``; z-score per time step and channel) fitted on the
    training series of ``c``, then the ROC-AUC (``c`` positive) of the closeness of each test
    series to the centre of ``c`` (minus its Euclidean norm after pre-processing: the centre
    is the origin) between the test series of ``c`` and those of each other class.

    Below 0.5 for an anomaly class ``a``: the series of ``a`` lie nearer the centre of ``c``
    than the test series of ``c`` do (a quiet class inside a high-variance normal class), so
    a scorer of closeness to the corpus ranks them as the most normal series.

    Returns {"auc": {c: {a: ROC-AUC}}, "counts": {c: (n normal, n anomalies)}} or None when
    the data set cannot be loaded here (the check is best effort: a report needs no data)."""
    from sklearn.metrics import roc_auc_score

    from tskernels.transforms import Preprocessor

    from .data import load_data

    try:
        data = load_data(dataset)
    except Exception:  # a data set given by a path that moved, no data on this machine
        return None
    y_tr, y_te = np.asarray(data.y_train).astype(str), np.asarray(data.y_test).astype(str)
    train, test = _as_list(data.X_train), _as_list(data.X_test)
    out: dict = {"auc": {}, "counts": {}}
    for c in classes:
        mine = [x for x, y in zip(train, y_tr) if y == str(c)]
        if len(mine) < 2 or not (y_te == str(c)).any():
            continue
        pre = Preprocessor(**preprocessing).fit(_stack_or_list(mine))
        Z = _as_list(pre.transform(_stack_or_list(test)))
        close = -np.array([np.linalg.norm(np.asarray(z, dtype=float)) for z in Z])
        normal = y_te == str(c)
        out["counts"][str(c)] = (int(normal.sum()), int((~normal).sum()))
        out["auc"][str(c)] = {
            a: float(roc_auc_score(normal[keep], close[keep]))
            for a in sorted(set(y_te) - {str(c)})
            if (keep := normal | (y_te == a)).any()
        }
    return out


def _as_list(X) -> list:
    return list(X) if isinstance(X, (list, tuple)) else [x for x in np.asarray(X)]


def _stack_or_list(series: list):
    same = len({np.shape(x) for x in series}) == 1
    return np.stack([np.asarray(x) for x in series]) if same else series


def below_chance_explained(store: ResultStore, setting: str, res: dict) -> dict[str, list[str]]:
    """{data set: lines} for the data sets with a below-chance kernel (:func:`below_chance_notes`):
    the normal classes behind each below-chance mean (its per-class ROC-AUCs below 0.5), how far
    the means are from chance in units of the chance-level standard deviation
    (:func:`chance_sd`), and the measured one-versus-rest cause, :func:`centre_check`."""
    low = {(d, k, s) for (d, k, s), e in res.items() if e["roc_auc"] < 0.5}  # NaN: False
    if not low:
        return {}
    rows = [r for r in per_class(store, setting) if (r["dataset"], r["kernel"], r["scorer"]) in low]
    prep = store.settings().get(setting, {}).get("preprocessing", {})
    notes: dict[str, list[str]] = {}
    for d in sorted({k[0] for k in low}):
        mine = [r for r in rows if r["dataset"] == d]
        classes = sorted({r["class"] for r in mine})
        check = centre_check(d, classes, prep)
        by_class: dict[str, list[str]] = {}
        for r in mine:
            if r["roc_auc"] < 0.5:
                by_class.setdefault(r["class"], []).append(
                    f"{r['kernel']}/{r['scorer']} {r['roc_auc']:.2f}"
                )
        lines = [
            "below-chance kernels, their per-class ROC-AUCs below 0.5 by normal class: "
            + "; ".join(f"{c}: {', '.join(v)}" for c, v in sorted(by_class.items()))
        ]
        if check is None:
            notes[d] = lines + ["(the data set could not be loaded here to measure the cause)"]
            continue
        counts = list(check["counts"].values())
        if counts:
            sd = math.sqrt(sum(chance_sd(*c) ** 2 for c in counts)) / len(counts)
            means = sorted(res[key]["roc_auc"] for key in low if key[0] == d)
            lines.append(
                f"chance level: a score without information has a mean ROC-AUC of 0.5 with a "
                f"standard deviation of {sd:.3f} over these {len(counts)} classes "
                f"({counts[0][0]} normal / {counts[0][1]} anomalous test series each); the "
                f"below-chance means ({means[0]:.3f}..{means[-1]:.3f}) lie "
                f"{(0.5 - means[-1]) / sd:.1f} to {(0.5 - means[0]) / sd:.1f} of them below 0.5"
            )
        central = {
            c: {a: v for a, v in aucs.items() if v < 0.5} for c, aucs in check["auc"].items()
        }
        central = {c: v for c, v in central.items() if v}
        if central:
            lines.append(
                "measured effect behind them, one-versus-rest with the z-score fitted on the "
                "normal class: anomaly classes nearer the normal class' centre than its own "
                "test series (ROC-AUC of closeness to the centre < 0.5): "
                + "; ".join(
                    f"{c} normal: " + ", ".join(f"{a} {v:.2f}" for a, v in sorted(aucs.items()))
                    for c, aucs in sorted(central.items())
                )
                + ". A scorer of closeness to the corpus ranks these quieter series as the most "
                "normal; kernels that normalise away amplitude or whose features saturate "
                "cannot separate them by scale either"
            )
        rest = sorted(set(by_class) - set(central))
        explained = sum(len(v) for c, v in by_class.items() if c in central)
        total = sum(len(v) for v in by_class.values())
        lines.append(
            f"{explained} of the {total} per-class entries below 0.5 have such a normal class"
            + (
                f"; the other {total - explained} ({', '.join(rest)} normal) are not explained "
                "by this check (within the chance-level spread above, or a kernel-specific "
                "cause)"
                if rest
                else ""
            )
        )
        notes[d] = lines
    return notes


def run_notes(store: ResultStore, setting: str, res: dict) -> dict[str, list[str]]:
    """{data set: lines}: the edge-of-grid notes (:func:`edge_notes`) of the data sets in
    ``res``, then the below-chance notes (:func:`below_chance_notes`) and what explains them
    (:func:`below_chance_explained`)."""
    out: dict[str, list[str]] = {}
    parts = (
        edge_notes(store, setting, set(res)),
        below_chance_notes(res),
        below_chance_explained(store, setting, res),
    )
    for part in parts:
        for d, lines in part.items():
            out.setdefault(d, []).extend(lines)
    return out


# ----------------------------------------------------------------------------- timing
def timing_breakdown(store: ResultStore, setting: str | None = None) -> list[dict]:
    """Per (data set, kernel): CV Gram seconds, CV scoring seconds, test seconds, cells."""
    setting = setting or _latest_setting(store)
    cv = store.query(
        "SELECT dataset, kernel, SUM(gram_seconds) g, SUM(score_seconds) s, COUNT(*) n "
        "FROM cv WHERE setting=? GROUP BY dataset, kernel", (setting,),
    )  # fmt: skip
    te = {
        (r["dataset"], r["kernel"]): r["t"]
        for r in store.query(
            "SELECT dataset, kernel, SUM(seconds) t FROM test WHERE setting=? "
            "GROUP BY dataset, kernel",
            (setting,),
        )  # fmt: skip
    }
    out = []
    for r in cv:
        t = te.get((r["dataset"], r["kernel"]), 0.0) or 0.0
        g, s = r["g"] or 0.0, r["s"] or 0.0
        row = {"dataset": r["dataset"], "kernel": r["kernel"], "gram_s": g, "score_s": s}
        out.append({**row, "test_s": t, "total_s": g + s + t, "cv_rows": r["n"]})
    return out


def _timing_md(rows: list[dict], runs: list[dict]) -> str:
    lines = ["| data set | kernel | CV Gram s | CV scoring s | test s | total s |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['kernel']} | {r['gram_s']:.1f} | "
                     f"{r['score_s']:.1f} | {r['test_s']:.1f} | {r['total_s']:.1f} |")  # fmt: skip
    lines += ["", "Runs (wall seconds of each invocation on this store):", "",
              "| run | preset | workers | scheduler | cells | wall s | device |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in runs:
        wall = "-" if r["wall_seconds"] is None else f"{r['wall_seconds']:.1f}"
        lines.append(f"| {r['id']} | {r['preset']} | {r['workers']} | {r['scheduler']} | "
                     f"{r['cells_computed']} | {wall} | {r['device']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- reference
def reference_comparison(res: dict, reference_csv: str | Path) -> list[dict]:
    """Rows of (data set, scorer, kernel, ours, reference, difference) for ROC-AUC and
    PR-AUC wherever the reference CSV (dataset,scorer,kernel,roc_auc,pr_auc) has a figure.
    A reference kernel is compared with each of ours that was run among: the one of the
    same name, its ``_single`` variant, and the reference study's own kernel
    (:data:`~experiments._grids.REFERENCE_KERNELS`: the order-1 truncated signature kernels,
    the randomized signature with the activation first)."""
    out = []
    for r in read_reference(reference_csv):
        base = r["kernel"].replace(" ", "_")
        own = REFERENCE_KERNELS.get(r["kernel"], base)
        for kernel in dict.fromkeys((base, base + "_single", own)):
            key = (r["dataset"], kernel, r["scorer"])
            if key not in res:
                continue
            ours = res[key]
            out.append({"dataset": key[0], "scorer": key[2], "kernel": kernel,
                        "roc_auc": ours["roc_auc"], "ref_roc_auc": r["roc_auc"],
                        "pr_auc": ours["pr_auc"], "ref_pr_auc": r["pr_auc"]})  # fmt: skip
    return out


#: The columns a reference CSV must have.
REFERENCE_COLUMNS = ("dataset", "scorer", "kernel", "roc_auc", "pr_auc")


def read_reference(reference_csv: str | Path) -> list[dict]:
    """The rows of a reference CSV, checked: a header with the columns
    :data:`REFERENCE_COLUMNS` (others are ignored), ``roc_auc`` and ``pr_auc`` numbers in
    [0, 1] on every row, the AUCs as floats. ``FileNotFoundError`` for a missing file,
    :class:`~experiments._options.ConfigError` (one line naming the missing columns or the
    first bad line) for anything else, so a run can check its ``--reference`` before any
    work."""
    from ._options import ConfigError

    where = f"reference CSV {reference_csv}"
    if not Path(reference_csv).is_file():
        raise FileNotFoundError(f"{where}: no such file")
    try:
        with open(reference_csv, newline="") as f:
            reader = csv.DictReader(f)
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in REFERENCE_COLUMNS if c not in header]
            if missing:
                has = ", ".join(h for h in header if h) or "no header line"
                raise ConfigError(f"{where} lacks the column(s) {', '.join(missing)} (it has: "
                                  f"{has}); needs {', '.join(REFERENCE_COLUMNS)}")  # fmt: skip
            reader.fieldnames = header
            rows = []
            for line, r in enumerate(reader, start=2):
                row = {c: (r.get(c) or "").strip() for c in REFERENCE_COLUMNS}
                for c in ("roc_auc", "pr_auc"):
                    try:
                        v = float(row[c])
                    except ValueError:
                        v = math.nan
                    if not 0.0 <= v <= 1.0:
                        msg = f"{where}, line {line}: {c} must be in [0, 1], got {row[c]!r}"
                        raise ConfigError(msg)
                    row[c] = v
                rows.append(row)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{where}: cannot be read as CSV ({exc})") from None
    return rows


def _reference_md(rows: list[dict]) -> str:
    lines = ["| data set | scorer | kernel | ROC-AUC | reference | diff | PR-AUC | reference |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        diff = r["roc_auc"] - r["ref_roc_auc"]
        flag = "" if abs(diff) <= 0.03 else " (!)"
        lines.append(f"| {r['dataset']} | {r['scorer']} | {r['kernel']} | {r['roc_auc']:.3f} | "
                     f"{r['ref_roc_auc']:.3f} | {diff:+.3f}{flag} | {r['pr_auc']:.3f} | "
                     f"{r['ref_pr_auc']:.3f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- report
def write_report(store_path: str | Path, out_dir: str | Path, setting: str | None = None,
                 reference_csv: str | Path | None = None, plots: bool = True) -> dict:  # fmt: skip
    """Write ``report.md``, ``tables.tex``, ``results.csv``, ``results_per_class.csv`` and the
    PNG plots to ``out_dir``;
    returns {"files": [...], "summary": res}.

    Nothing is written (not even ``out_dir``) when the store cannot be read, holds no such
    setting or no test results for it (:class:`~experiments._store.StoreError`), or when
    ``reference_csv`` is missing (``FileNotFoundError``)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"the report folder {out} is a file")
    if reference_csv is not None:
        read_reference(reference_csv)  # checked before anything is written
    with ResultStore(store_path, mode="read") as store:
        known = store.settings()
        if setting is None:
            setting = _latest_setting(store)
            if setting is None:
                raise StoreError(f"the store {store_path} holds no results")
        elif setting not in known:
            have = ", ".join(sorted(known)) or "none"
            raise StoreError(f"the store {store_path} holds no setting {setting!r} "
                             f"(settings there: {have})")  # fmt: skip
        res = summary(store, setting)
        if not res:
            raise StoreError(f"the store {store_path} holds no test results for setting "
                             f"{setting} yet (resume its run with the same command)")  # fmt: skip
        out.mkdir(parents=True, exist_ok=True)
        files = []
        md = [f"# Results (store `{Path(store_path).name}`, setting `{setting}`)", "",
              "Test-split metrics, mean over the classes of each data set (one-versus-rest, "
              "normal class positive); hyper-parameters selected by repeated stratified "
              "k-fold CV on the training split. Best per data set in bold; a failed entry "
              "gives its reason below the table.", "",
              "```", json.dumps(known.get(setting, {}), sort_keys=True), "```", "",
              markdown_tables(res)]  # fmt: skip
        notes = run_notes(store, setting, res)
        if notes:
            md += ["## Notes", "", "Hyper-parameters selected at the edge of their grid, and "
                   "kernels below chance (mean test ROC-AUC < 0.5):", ""]  # fmt: skip
            md += [f"- {d}, {line}" for d, lines in sorted(notes.items()) for line in lines]
            md.append("")
        if reference_csv is not None:
            comp = reference_comparison(res, reference_csv)
            if comp:
                md += ["## Against the reference figures", "", _reference_md(comp)]
        pcs = per_class(store, setting)
        md += ["## Per class", "", "Test ROC-AUC / PR-AUC with each class made normal (the "
               "rest are the anomalies); also in `results_per_class.csv`.", "",
               per_class_markdown(pcs)]  # fmt: skip
        runs = store.query("SELECT * FROM runs WHERE setting=? ORDER BY id", (setting,))
        md += ["## Time", "", _timing_md(timing_breakdown(store, setting), runs)]
        (out / "report.md").write_text("\n".join(md))
        (out / "tables.tex").write_text(latex_tables(res))
        files += [out / "report.md", out / "tables.tex"]
        with open(out / "results.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["dataset", "kernel", "scorer", "roc_auc", "pr_auc", "n_classes", "error"])
            for (d, k, s), e in sorted(res.items()):
                err = "; ".join(f"{m} ({', '.join(c)})" for m, c in e["errors"].items())
                w.writerow([d, k, s, e["roc_auc"], e["pr_auc"], e["n_classes"], err])
        files.append(out / "results.csv")
        with open(out / "results_per_class.csv", "w", newline="") as f:
            w = csv.DictWriter(f, ["dataset", "class", "kernel", "scorer", "roc_auc", "pr_auc",
                                   "error"])  # fmt: skip
            w.writeheader()
            w.writerows(pcs)
        files.append(out / "results_per_class.csv")
        if plots:
            from ._figures import figures_markdown, write_figures

            figs, notes = write_figures(store, setting, res, out)
            files += figs
            with open(out / "report.md", "a") as f:
                f.write("\n" + figures_markdown(figs, notes))
    return {"files": [str(p) for p in files], "summary": res, "setting": setting}
