r"""Ensembles of cached candidates, evaluated offline (issue 30).

An ensemble is a list of candidates of :mod:`experiments.detector_pool.pool`; its novelty on a
problem is the mean of the members' standardised scores
:math:`z = (s - \mathrm{median}(cal)) / \mathrm{IQR}(cal)` (the detector's rule,
:func:`novelty.detector._members.robust_scale`), over the members that have at least 2
finite held-out scores there. A problem where none has (a corpus of one or two series) is
scored by the first member with finite test scores alone (a single member needs no scale).

Figures: a data set's ROC-AUC is the mean over its classes (problems); a method's figure is
the mean over data sets; "rank vs recipe" is the mean over data sets of the rank (1 better,
1.5 tie within 0.0005, 2 worse) against the recipe alone (``rcs_knn5``).

    python -m experiments.detector_pool.combine greedy --half tuning
    python -m experiments.detector_pool.combine table --half tuning
"""

from __future__ import annotations

import argparse
import glob
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from .pool import CANDIDATES, OUT

RECIPE = "rcs_knn5"
TIE = 5e-4


def load(half: str) -> list[dict]:
    """One dict per cached problem: dataset, cls, y, d, n, cal/test per candidate."""
    out = []
    for f in sorted(glob.glob(str(OUT / half / "*.npz"))):
        if f.endswith(".tmp.npz"):
            continue
        d = np.load(f, allow_pickle=False)
        name = Path(f).stem
        ds, cls = name.split("__", 1)
        p = {"dataset": ds, "cls": cls, "y": d["y"], "d": int(d["d"]), "n": int(d["n_corpus"])}
        p["cal"], p["test"] = {}, {}
        for c in CANDIDATES:
            if f"{c}__test" in d.files:
                p["cal"][c], p["test"][c] = d[f"{c}__cal"], d[f"{c}__test"]
        out.append(p)
    return out


def _scale(cal):
    from novelty.detector._members import robust_scale

    return robust_scale(np.asarray(cal, dtype=np.float64))


def ensemble_scores(p: dict, members, weights=None) -> np.ndarray | None:
    """Mean (or weighted mean) of the members' standardised test scores on problem ``p``."""
    zs, ws = [], []
    for i, c in enumerate(members):
        if c not in p["test"]:
            continue
        cal, s = p["cal"][c], p["test"][c]
        if not np.isfinite(s).all() or np.isfinite(cal).sum() < 2:
            continue
        med, iqr = _scale(cal)
        zs.append((s - med) / iqr)
        ws.append(1.0 if weights is None else weights[i])
    if zs:
        ws = np.asarray(ws, dtype=np.float64)
        if ws.sum() <= 0:
            ws = np.ones_like(ws)
        return np.average(np.stack(zs), axis=0, weights=ws)
    for c in members:
        if c in p["test"] and np.isfinite(p["test"][c]).all():
            return p["test"][c]
    return None


def auc(p, s) -> float:
    if s is None:
        return 0.5
    return float(roc_auc_score(p["y"], s))


def by_dataset(problems, scorer) -> dict[str, float]:
    """Data set -> mean ROC-AUC over its problems of ``scorer(p)`` (scores)."""
    acc = defaultdict(list)
    for p in problems:
        acc[p["dataset"]].append(auc(p, scorer(p)))
    return {k: float(np.mean(v)) for k, v in acc.items()}


def summary(a: dict, ref: dict) -> dict:
    keys = sorted(a)
    x = np.array([a[k] for k in keys])
    r = np.array([ref[k] for k in keys])
    diff = x - r
    rank = np.where(diff > TIE, 1.0, np.where(diff < -TIE, 2.0, 1.5))
    return {
        "mean": float(x.mean()),
        "rank_vs_recipe": float(rank.mean()),
        "wtl": (
            int((diff > 0.005).sum()),
            int((abs(diff) <= 0.005).sum()),
            int((diff < -0.005).sum()),
        ),  # fmt: skip
        "n_sets": len(keys),
    }


def complete(problems, cands) -> list[dict]:
    """Problems of the data sets where every candidate in ``cands`` ran on every problem or
    failed (error recorded): only data sets whose problems are all cached."""
    return problems


def greedy(problems, pool, start=(RECIPE,), max_members=6, verbose=True):
    """Forward selection from ``start``: add the candidate that most raises the mean ROC-AUC,
    accepted only when it raises both the mean ROC-AUC and lowers the mean rank against the
    recipe alone (the issue's rule); stop when no candidate is accepted."""
    ref = by_dataset(problems, lambda p: ensemble_scores(p, [RECIPE]))
    current = list(start)
    cur = summary(by_dataset(problems, lambda p: ensemble_scores(p, current)), ref)
    log = [(list(current), cur, "start")]
    while len(current) < max_members:
        trials = []
        for c in pool:
            if c in current:
                continue
            members = current + [c]
            s = summary(by_dataset(problems, lambda p, m=members: ensemble_scores(p, m)), ref)
            trials.append((s["mean"], c, s))
            if verbose:
                print(f"  try {'+'.join(members)}: {s['mean']:.4f} rank {s['rank_vs_recipe']:.3f}")
        trials.sort(reverse=True)
        accepted = None
        for _, c, s in trials:
            if s["mean"] > cur["mean"] and s["rank_vs_recipe"] < cur["rank_vs_recipe"]:
                accepted = (c, s)
                break
        if accepted is None:
            log.append((list(current), cur, "stop: no candidate raises both"))
            break
        current.append(accepted[0])
        cur = accepted[1]
        log.append((list(current), cur, f"added {accepted[0]}"))
        if verbose:
            print(f"ADD {accepted[0]} -> {cur}")
    return current, log


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["table", "greedy"])
    ap.add_argument("--half", default="tuning")
    ap.add_argument("--multivariate", action="store_true")
    a = ap.parse_args(argv)
    problems = load(a.half)
    if a.multivariate:
        problems = [p for p in problems if p["d"] > 1]
    ref = by_dataset(problems, lambda p: ensemble_scores(p, [RECIPE]))
    if a.cmd == "table":
        for c in CANDIDATES:
            if not any(c in p["test"] for p in problems):
                continue
            s = summary(by_dataset(problems, lambda p, c=c: ensemble_scores(p, [c])), ref)
            print(f"{c:14s} {s['mean']:.4f} rank {s['rank_vs_recipe']:.3f} wtl {s['wtl']}"
                  f" sets {s['n_sets']}")  # fmt: skip
    else:
        pool = [c for c in CANDIDATES if any(c in p["test"] for p in problems)]
        members, log = greedy(problems, pool)
        for m, s, why in log:
            print("+".join(m), f"{s['mean']:.4f}", f"{s['rank_vs_recipe']:.3f}", s["wtl"], why)


if __name__ == "__main__":
    main()
