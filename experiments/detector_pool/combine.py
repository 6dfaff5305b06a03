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
#: A member name ending in ``MULTIVARIATE`` counts only on multivariate problems (d > 1).
MULTIVARIATE = "@mv"
#: The shipped default (issue 30): the recipe, MiniRocket power-transformed 1-NN, and GAK
#: 1-NN for multivariate series only.
SHIPPED = (RECIPE, "rcp_knn1", "gak_knn1" + MULTIVARIATE)


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
        p["cal"], p["test"], p["proxy"] = {}, {}, {}
        for c in CANDIDATES:
            if f"{c}__test" in d.files:
                p["cal"][c], p["test"][c] = d[f"{c}__cal"], d[f"{c}__test"]
            if f"{c}__anom" in d.files and f"{c}__cal" in d.files:
                p["proxy"][c] = proxy_value(d[f"{c}__cal"], d[f"{c}__anom"], d["proxy_kind"])
        out.append(p)
    return out


def proxy_value(cal, anom, kinds) -> float:
    """Mean over the kinds of synthetic anomaly of the ROC-AUC of the anomalies against the
    held-out normal scores (the selection's proxy, :mod:`novelty.detector._auto`)."""
    cal = np.asarray(cal, dtype=np.float64)
    if not np.isfinite(cal).all() or not np.isfinite(anom).all() or len(cal) < 2:
        return np.nan
    aucs = []
    for k in np.unique(kinds):
        a = anom[kinds == k]
        y = np.r_[np.zeros(len(cal)), np.ones(len(a))]
        aucs.append(roc_auc_score(y, np.r_[cal, a]))
    return float(np.mean(aucs))


def proxy_ensemble(p, pool, rule: str, fixed=(RECIPE,)):
    """Scores of a per-problem combination chosen by the proxy: ``top1``, ``top2``, ``top3``
    (mean of the k best candidates by proxy), ``soft<tau>`` (weights exp(proxy / tau)),
    ``fixed+top1`` (the fixed ensemble plus the best other candidate), ``fixedw<tau>`` (the
    fixed ensemble's members weighted by exp(proxy / tau)). Falls back to the fixed ensemble
    where no proxy is available."""
    have = {c: p["proxy"][c] for c in pool if np.isfinite(p["proxy"].get(c, np.nan))}
    if len(have) < 2:
        return ensemble_scores(p, list(fixed))
    ranked = sorted(have, key=lambda c: -have[c])
    if rule.startswith("top"):
        return ensemble_scores(p, ranked[: int(rule[3:])])
    if rule.startswith("soft"):
        tau = float(rule[4:])
        v = np.array([have[c] for c in ranked])
        return ensemble_scores(p, ranked, weights=np.exp((v - v.max()) / tau))
    if rule == "fixed+top1":
        extra = [c for c in ranked if c not in fixed][:1]
        return ensemble_scores(p, list(fixed) + extra)
    if rule.startswith("fixedw"):
        tau = float(rule[6:])
        v = np.array([have.get(c, np.nan) for c in fixed])
        v = np.where(np.isfinite(v), v, np.nanmean(v))
        return ensemble_scores(p, list(fixed), weights=np.exp((v - v.max()) / tau))
    raise ValueError(rule)


def _scale(cal):
    from novelty.detector._members import robust_scale

    return robust_scale(np.asarray(cal, dtype=np.float64))


def ensemble_scores(p: dict, members, weights=None, small=True) -> np.ndarray | None:
    """Mean (or weighted mean) of the members' standardised test scores on problem ``p``;
    with ``small``, a corpus of fewer than 3 series is scored by GAK 1-NN alone (the
    detector's rule for tiny corpora)."""
    if small and p["n"] < 3 and "gak_knn1" in p["test"]:
        return p["test"]["gak_knn1"]
    zs, ws = [], []
    members = active(p, members)
    for i, c in enumerate(members):
        if c is None or c not in p["test"]:
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
        if c is not None and c in p["test"] and np.isfinite(p["test"][c]).all():
            return p["test"][c]
    return None


def active(p: dict, members) -> list:
    """The members' candidate names on problem ``p``, in order: a name ending in
    :data:`MULTIVARIATE` is its candidate on a multivariate problem and None (absent) on a
    univariate one (positions kept, so weights stay aligned)."""
    out = []
    for c in members:
        if c.endswith(MULTIVARIATE):
            out.append(c[: -len(MULTIVARIATE)] if p["d"] > 1 else None)
        else:
            out.append(c)
    return out


def complete_sets(problems, cand: str) -> set:
    """Data sets on which candidate ``cand`` is cached for every problem."""
    sets = defaultdict(list)
    for p in problems:
        sets[p["dataset"]].append(cand in p["test"])
    return {k for k, v in sets.items() if all(v)}


def additions(problems, cands, base=SHIPPED) -> list[tuple]:
    """Each candidate added to the ``base`` ensemble (a mean of standardised members), on the
    data sets where it is cached for every problem: (candidate, its figures against the recipe
    alone (:func:`summary`), against ``base``, and ``base``'s own against the recipe on
    those sets)."""
    ref = by_dataset(problems, lambda p: ensemble_scores(p, [RECIPE], small=False))
    b = by_dataset(problems, lambda p: ensemble_scores(p, list(base)))
    out = []
    for c in cands:
        sets = complete_sets(problems, c)
        if not sets:
            continue
        sub = [p for p in problems if p["dataset"] in sets]
        e = by_dataset(sub, lambda p, c=c: ensemble_scores(p, list(base) + [c]))
        r = {k: ref[k] for k in sets}
        bb = {k: b[k] for k in sets}
        out.append((c, summary(e, r), summary(e, bb), summary(bb, r)))
    return out


def _alone(p, c):
    return [c] if c in p["test"] else [RECIPE]


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


def greedy(problems, pool, start=(RECIPE,), max_members=6, weights=(1.0,), verbose=True):
    """Forward selection from ``start``: try every candidate at every weight of ``weights``
    (the recipe's weight is 1), keep the trial with the highest mean ROC-AUC among those that
    raise the mean ROC-AUC *and* lower the mean rank against the recipe alone (the issue's
    rule); stop when no trial qualifies."""
    ref = by_dataset(problems, lambda p: ensemble_scores(p, [RECIPE], small=False))
    current, cw = list(start), [1.0] * len(start)

    def figures(members, ws):
        return summary(by_dataset(problems, lambda p: ensemble_scores(p, members, weights=ws)), ref)

    cur = figures(current, cw)
    log = [(list(current), list(cw), cur, "start")]
    while len(current) < max_members:
        trials = []
        for c in pool:
            if c in current:
                continue
            for w in weights:
                s = figures(current + [c], cw + [w])
                trials.append((s["mean"], c, w, s))
                if verbose:
                    print(f"  try +{c}*{w}: {s['mean']:.4f} rank {s['rank_vs_recipe']:.3f}")
        trials.sort(key=lambda t: -t[0])
        ok = [
            t
            for t in trials
            if t[0] > cur["mean"] and t[3]["rank_vs_recipe"] < cur["rank_vs_recipe"]
        ]
        if not ok:
            log.append((list(current), list(cw), cur, "stop: no candidate raises both"))
            break
        _, c, w, s = ok[0]
        current.append(c)
        cw.append(w)
        cur = s
        log.append((list(current), list(cw), cur, f"added {c} (weight {w})"))
    return current, cw, log


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["table", "greedy", "proxy", "add"])
    ap.add_argument("--cands", default=None, help="add: candidates, comma-separated")
    ap.add_argument("--start", default=RECIPE, help="greedy: the start, names joined by +")
    ap.add_argument("--pool", default=None, help="greedy: restrict the pool, comma-separated")
    ap.add_argument("--fixed", default=RECIPE, help="the fixed ensemble, names joined by +")
    ap.add_argument("--half", default="tuning")
    ap.add_argument("--multivariate", action="store_true")
    ap.add_argument("--univariate", action="store_true")
    ap.add_argument("--weights", default="1", help="greedy: weights tried, e.g. 0.25,0.5,1")
    a = ap.parse_args(argv)
    problems = load(a.half)
    if a.multivariate:
        problems = [p for p in problems if p["d"] > 1]
    if a.univariate:
        problems = [p for p in problems if p["d"] == 1]
    ref = by_dataset(problems, lambda p: ensemble_scores(p, [RECIPE], small=False))
    if a.cmd == "table":
        for c in CANDIDATES:
            have = [p for p in problems if c in p["test"]]
            if not have:
                continue
            sets = {p["dataset"] for p in have}
            sub = [p for p in problems if p["dataset"] in sets]
            alone = by_dataset(sub, lambda p, c=c: ensemble_scores(p, _alone(p, c)))
            s = summary(alone, {k: v for k, v in ref.items() if k in sets})
            print(f"{c:14s} {s['mean']:.4f} rank {s['rank_vs_recipe']:.3f} wtl {s['wtl']}"
                  f" sets {s['n_sets']}")  # fmt: skip
    elif a.cmd == "add":
        cands = a.cands.split(",") if a.cands else [c for c in CANDIDATES if c not in SHIPPED]
        base = summary(by_dataset(problems, lambda p: ensemble_scores(p, list(SHIPPED))), ref)
        print(f"shipped {'+'.join(SHIPPED)}: {base['mean']:.4f} rank {base['rank_vs_recipe']:.3f}"
              f" wtl {base['wtl']} sets {base['n_sets']}")  # fmt: skip
        for c, s, sb, b in additions(problems, cands):
            print(f"+{c:14s} {s['mean']:.4f} (shipped {b['mean']:.4f}) rank vs recipe "
                  f"{s['rank_vs_recipe']:.3f} (shipped {b['rank_vs_recipe']:.3f}) wtl vs recipe "
                  f"{s['wtl']} vs shipped {sb['wtl']} sets {s['n_sets']}")  # fmt: skip
    elif a.cmd == "proxy":
        fixed = a.fixed.split("+")
        pool = sorted({c for p in problems for c in p["proxy"]})
        base = summary(by_dataset(problems, lambda p: ensemble_scores(p, fixed)), ref)
        print(f"fixed {a.fixed}: {base['mean']:.4f} rank {base['rank_vs_recipe']:.3f}")
        rules = ["top1", "top2", "top3", "soft0.01", "soft0.02", "soft0.05", "fixed+top1",
                 "fixedw0.02", "fixedw0.05"]  # fmt: skip
        for rule in rules:
            s = summary(
                by_dataset(problems, lambda p, r=rule: proxy_ensemble(p, pool, r, fixed)), ref
            )
            print(f"{rule:12s} {s['mean']:.4f} rank {s['rank_vs_recipe']:.3f} wtl {s['wtl']}")
        # how well the proxy ranks candidates: Spearman per problem
        from scipy.stats import spearmanr

        rhos = []
        for p in problems:
            cs = [c for c in pool if np.isfinite(p["proxy"].get(c, np.nan)) and c in p["test"]]
            if len(cs) >= 3:
                r = spearmanr([p["proxy"][c] for c in cs], [auc(p, p["test"][c]) for c in cs])
                if np.isfinite(r.statistic):
                    rhos.append(r.statistic)
        if rhos:
            print(f"Spearman proxy vs test ROC-AUC: mean {np.mean(rhos):.2f} over {len(rhos)}")
    else:
        # candidates cached for every problem (chan_knn5: every multivariate one)
        pool = []
        for c in CANDIDATES:
            rel = [p for p in problems if p["n"] >= 3 and (c != "chan_knn5" or p["d"] > 1)]
            if rel and np.mean([c in p["test"] for p in rel]) >= 0.9:
                pool.append(c)
        if a.pool:
            pool = [c for c in pool if c in a.pool.split(",")]
        print("pool:", " ".join(pool))
        ws = tuple(float(w) for w in a.weights.split(","))
        start = tuple(a.start.split("+"))
        members, cw, log = greedy(problems, pool, start=start, weights=ws, verbose=False)
        for m, w, s, why in log:
            text = " + ".join(f"{c}*{x:g}" for c, x in zip(m, w))
            print(text, f"{s['mean']:.4f}", f"{s['rank_vs_recipe']:.3f}", s["wtl"], why)


if __name__ == "__main__":
    main()
