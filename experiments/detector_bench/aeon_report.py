"""The tables of the aeon-API route (:mod:`.aeon`): per data set our detector's and ROCKAD's
mean ROC-AUC (through the benchmark's :func:`.report.summarize`), means, ranks, W/T/L,
Wilcoxon signed-rank tests over data sets and problems, times, the adaptations aeon's tags
required, and a cross-check against a store of ``benchmarks/bench_detector.py``."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

from .aeon import MEAN5, MEAN5_STATES
from .report import score_cells, summarize

__all__ = ["as_bench_rows", "compare_with_store", "machine", "report_markdown"]


def as_bench_rows(rows: list[dict]) -> list[dict]:
    """bench_detector's row layout (for its ``summarize``): ``ours`` and ``rockad`` at random
    state 0, and ``rockad_mean5`` (mean ROC-AUC of ROCKAD's random states 0-4 on a problem,
    times summed) where all five are stored."""
    out, by_problem = [], {}
    for r in rows:
        base = dict(
            dataset=r["dataset"], seed=0, n_classes=r["n_classes"], auc=r["auc"], far=None,
            far_nominal=None, fit_s=r["fit_s"], score_s=r["score_s"], n_corpus=r["n_corpus"],
        )  # fmt: skip
        base["class"] = r["class"]
        if r["random_state"] == 0:
            out.append({**base, "method": r["method"]})
        if r["method"] == "rockad":
            by_problem.setdefault((r["dataset"], r["class"]), {})[r["random_state"]] = base
    for (_, _), states in by_problem.items():
        if all(s in states for s in MEAN5_STATES):
            five = [states[s] for s in MEAN5_STATES]
            ok = [b for b in five if b["auc"] is not None]
            mean = {
                "auc": float(np.mean([b["auc"] for b in ok])) if ok else None,
                "fit_s": float(np.sum([b["fit_s"] for b in ok])) if ok else None,
                "score_s": float(np.sum([b["score_s"] for b in ok])) if ok else None,
            }
            out.append({**five[0], **mean, "method": MEAN5})
    return out


def compare_with_store(rows: list[dict], sqlite_path) -> dict:
    """max |AUC(aeon route) - AUC(bench_detector store)| per method on the same problems
    (bench_detector's ``ours_default``, ``rockad``, ``rockad_mean5`` at seed 0)."""
    import sqlite3

    names = {"ours": "ours_default", "rockad": "rockad", MEAN5: MEAN5}
    con = sqlite3.connect(sqlite_path)
    ref = {
        (d, c, m): a
        for d, c, m, a in con.execute(
            "SELECT dataset, class, method, auc FROM results WHERE seed = 0 AND auc IS NOT NULL"
        )
    }
    out = {}
    for r in as_bench_rows(rows):
        k = (r["dataset"], r["class"], names[r["method"]])
        if k in ref and r["auc"] is not None:
            n, m = out.get(r["method"], (0, 0.0))
            out[r["method"]] = (n + 1, max(m, abs(r["auc"] - ref[k])))
    return out


def _fmt(v, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def report_markdown(rows: list[dict], compare: str | None = None) -> str:
    """Per-set table (mean ROC-AUC over the classes), means, mean ranks, W/T/L of our
    detector against ROCKAD (data-set means more than 0.005 above / within / below), the
    Wilcoxon signed-rank test over data sets and over problems, and times."""
    from scipy.stats import wilcoxon

    brows = as_bench_rows(rows)
    present = {r["method"] for r in brows}
    methods = [m for m in ("ours", "rockad", MEAN5) if m in present]
    if not methods:
        return "no results yet"
    s = summarize(brows, methods, failed="chance", reference="ours")
    per = {}
    for r in brows:
        per.setdefault((r["dataset"], r["method"]), []).append(r)
    lines = [
        "| data set | classes | corpus N | test n | " + " | ".join(methods) + " | "
        + " | ".join(f"{m} fit+score s" for m in methods) + " |",
        "|---" * (4 + 2 * len(methods)) + "|",
    ]  # fmt: skip
    for d in s["datasets"]:
        rs = per.get((d, methods[0]), [])
        ns = sorted({r["n_corpus"] for r in rs})
        vals = [s["cell"].get((d, m)) for m in methods]
        best = max(v for v in vals if v is not None) if all(v is not None for v in vals) else None
        bold = best if len(methods) > 1 else None
        cells = score_cells(methods, vals, bold, lambda m, d=d: s["progress"][(d, m)])
        times = [
            _fmt(sum(r["fit_s"] + r["score_s"] for r in per.get((d, m), []) if r["fit_s"]), ".1f")
            for m in methods
        ]
        n_test = next((r_["n_test"] for r_ in rows if r_["dataset"] == d), None)
        lines.append(
            f"| {d} | {rs[0]['n_classes'] if rs else '?'} | "
            f"{ns[0] if len(ns) == 1 else f'{ns[0]}-{ns[-1]}' if ns else '?'} "
            f"| {n_test} | " + " | ".join(cells) + " | " + " | ".join(times) + " |"
        )
    lines.append(
        "| **mean** | | | | " + " | ".join(_fmt(s["mean"][m], ".3f") for m in methods) + " |"
    )
    lines.append(
        "| **mean rank** | | | | "
        + " | ".join(_fmt(s["mean_rank"][m], ".2f") for m in methods)
        + " |"
    )
    if "ours" in methods:
        lines.append(
            "| **W/T/L of ours vs it** | | | | "
            + " | ".join(
                "-" if m == "ours" else "{2}/{1}/{0}".format(*s["wtl"][m]) for m in methods
            )
            + " |"
        )
    complete = s["complete"]
    lines += ["", f"Means, ranks and W/T/L over the {len(complete)} complete data set(s)."]
    for m in methods[1:] if "ours" in methods else []:
        a = np.array([s["cell"][(d, "ours")] for d in complete])
        b = np.array([s["cell"][(d, m)] for d in complete])
        pa = {(r["dataset"], r["class"]): r["auc"] for r in brows if r["method"] == "ours"}
        pb = {(r["dataset"], r["class"]): r["auc"] for r in brows if r["method"] == m}
        common = [k for k in pa if k in pb and pa[k] is not None and pb[k] is not None]
        x = np.array([pa[k] - pb[k] for k in common])
        p_sets = wilcoxon(a - b).pvalue if len(a) and np.any(a != b) else float("nan")
        p_prob = wilcoxon(x).pvalue if len(x) and np.any(x != 0) else float("nan")
        lines.append(
            f"- ours - {m}: mean difference {np.mean(a - b):+.4f} over {len(a)} data sets "
            f"(Wilcoxon signed-rank p = {p_sets:.3g}); over {len(x)} problems "
            f"{np.mean(x):+.4f}, ours higher on {int((x > 0).sum())}, equal on "
            f"{int((x == 0).sum())}, lower on {int((x < 0).sum())} (p = {p_prob:.3g})."
        )
    lines.append("")
    for m in methods:
        lines.append(
            f"- {m}: median fit {_fmt(s['fit_median'][m], '.2f')} s, median score "
            f"{_fmt(s['score_median'][m], '.2f')} s per problem; failed problems "
            f"{s['n_failed'][m]}."
        )
    notes = sorted({(r["method"], n) for r in rows for n in r.get("notes", [])})
    for m, n in notes:
        sets = sorted({r["dataset"] for r in rows if r["method"] == m and n in r.get("notes", [])})
        lines.append(f"- {m}: {n} on {', '.join(sets)} (its aeon tags refuse the raw input).")
    if compare:
        for m, (n, diff) in sorted(compare_with_store(rows, compare).items()):
            lines.append(
                f"- cross-check: {m} on {n} problems, max |AUC - {Path(compare).name}| = "
                f"{diff:.2e}."
            )
    return "\n".join(lines)


def machine() -> str:
    """The machine in one line: host, processor, cores, load, Python."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (
        f"{platform.node()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}, "
        f"Python {platform.python_version()}"
    )
