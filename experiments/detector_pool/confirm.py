"""Summary of the issue-30 confirmation run from several bench_detector stores (the three
methods were run into separate stores in parallel: one writer per store): per data set the
mean ROC-AUC over its classes, then the mean and the mean rank (1 = best, ties averaged) over
the data sets where every method has all its problems; the multivariate sets alone; the
false-alarm deviation of ``ours_default`` on corpora of >= 20 series.

    python -m experiments.detector_pool.confirm results/wide30.sqlite results/conf30_*.sqlite
"""

from __future__ import annotations

import sqlite3
import sys
from collections import defaultdict

import numpy as np
from scipy.stats import rankdata

METHODS = ("ours_default", "rockad_recipe", "rockad")
MULTIVARIATE = {"BasicMotions", "ERing", "JapaneseVowels", "StandWalkJump", "UWaveGestureLibrary"}


def rows(paths):
    out = []
    for p in paths:
        con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        q = "select dataset, class, method, auc, far, far_nominal, n_corpus, n_classes, error "
        out += con.execute(q + "from results").fetchall()
    return out


def main(paths):
    by = defaultdict(dict)  # (dataset, method) -> class -> auc
    ncls, fars = {}, []
    for ds, cls, m, auc, far, nominal, n, k, err in rows(paths):
        by[(ds, m)][cls] = 0.5 if err or auc is None else auc
        ncls[ds] = k
        if m == "ours_default" and far is not None and n >= 20:
            fars.append(abs(far - nominal))
    sets = sorted(d for d in ncls if all(len(by[(d, m)]) == ncls[d] for m in METHODS))
    table = np.array([[np.mean(list(by[(d, m)].values())) for m in METHODS] for d in sets])
    for name, keep in (("all", sets), ("multivariate", [d for d in sets if d in MULTIVARIATE])):
        idx = [sets.index(d) for d in keep]
        if not idx:
            continue
        t = table[idx]
        ranks = np.array([rankdata(-r) for r in t]).mean(axis=0)
        print(f"{name}: {len(idx)} sets")
        for j, m in enumerate(METHODS):
            print(f"  {m:14s} mean {t[:, j].mean():.4f}  rank {ranks[j]:.2f}")
    print(f"false alarms |far - 0.05|, corpus >= 20: mean {np.mean(fars):.3f} over {len(fars)}")
    missing = sorted(set(ncls) - set(sets))
    print("data sets not complete:", " ".join(missing) or "none")


if __name__ == "__main__":
    main(sys.argv[1:])
