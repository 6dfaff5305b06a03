"""SOSREP on ADBench under two bandwidth-selection protocols, against the PyOD peers.

The split, the density methods and both bandwidth-selection protocols are those of
``experiments.adbench`` (``load_split``, ``fit_density``; the harness runs the transductive
protocol with ``--protocol transductive``); the PyOD peers are built here. Protocol:
subsample to at most 10,000 rows (stratified), stratified 70/30 split, min-max scaling
fitted on the 70 %, every method trained on the contaminated 70 %, AUC-ROC of its anomaly
score on the 30 %.

Protocols of ``density.select_bandwidth`` (r = the median nearest-neighbour distance of the
training part, floored at 1/8 of the median pairwise distance, as in the harness):

* inductive (the harness's): Fisher divergence on a held-out 20 % of the training part,
  grid l = r x {1, 2, 4, 8}, ``rule="min"``, refit on the training part. Methods SOSREP-SDO,
  SOSREP-Gauss, SOSREP-Lap, KDE-SDO, KDE-Gauss.
* transductive (the SOSREP paper's): models fitted on the training part, Fisher divergence on
  the test part's features (no labels), grid l = r x 2^-3 .. r x 2^4 (8 values),
  ``rule="first_stable"`` (window 2). Methods SOSREP-SDO/T and SOSREP-Lap/T; each row also
  records the AUC-ROC of ``rule="min"`` on the same curve (``/Tmin``, one extra fit when the
  two rules disagree).

Resumable: one SQLite row per (data set, method, seed) in results/sosrep_protocols.sqlite
(gitignored); a finished key is never recomputed. Several workers may share the file
(``--worker k --workers n`` takes every n-th data set).

    nice -n 10 python benchmarks/bench_sosrep_protocols.py run --seeds 0 1 2
    python benchmarks/bench_sosrep_protocols.py report --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from experiments._recorder import revision as git_rev
from experiments.adbench import (
    data_dir,
    density_anomaly_scores,
    density_estimator,
    fit_density,
    load_split,
)
from experiments.adbench._methods import TRANSDUCTIVE_SUFFIX

ROOT = Path(__file__).resolve().parents[1]
DB = ROOT / "results" / "sosrep_protocols.sqlite"
PYOD = ["IForest", "ECOD", "COPOD", "HBOS", "PCA", "LODA", "KNN", "LOF", "CBLOF", "OCSVM"]
PYOD += ["DeepSVDD"]
INDUCTIVE = ["SOSREP-SDO", "SOSREP-Gauss", "SOSREP-Lap", "KDE-SDO", "KDE-Gauss"]
TRANSDUCTIVE = ["SOSREP-SDO/T", "SOSREP-Lap/T"]
#: Cheapest first within a (seed, data set): a partial run still has whole tables early.
METHODS = PYOD + ["SOSREP-SDO", "SOSREP-SDO/T", "SOSREP-Lap", "SOSREP-Lap/T"]
METHODS += ["KDE-SDO", "KDE-Gauss", "SOSREP-Gauss"]


# -- methods: the harness's (experiments.adbench.fit_density, both protocols) -----------------
def density_method(name: str, Xtr, Xte, yte, seed: int) -> tuple[float, dict]:
    """A density method of the harness ("SOSREP-SDO", "SOSREP-Lap/T", ...): the fit, the
    selection under either protocol and the scores are ``experiments.adbench``'s
    (:func:`~experiments.adbench.fit_density`); transductive rows also record the AUC-ROC of
    rule "min" on the same curve."""
    from sklearn.metrics import roc_auc_score

    import density as dn

    transductive = name.endswith(TRANSDUCTIVE_SUFFIX)
    kind, kernel_name = name.removesuffix(TRANSDUCTIVE_SUFFIX).split("-")
    protocol = "transductive" if transductive else "inductive"
    sel, grid, log_grid, factors, r = fit_density(kind, kernel_name, Xtr, Xte, seed,
                                                  protocol=protocol)  # fmt: skip
    auc = float(roc_auc_score(yte, _finite(density_anomaly_scores(sel, kind, kernel_name, Xte))))
    pick = int(np.flatnonzero(grid == sel.bandwidth_)[0])
    info = {
        "nn_spacing": r,
        "factor": factors[pick],
        "fallback": bool(sel.bandwidth_fallback_),
        "n_duplicates_excluded": int(sel.n_duplicates_excluded_),
        "fisher": [None if not np.isfinite(v) else float(v) for v in sel.bandwidth_scores_],
        "selection_s": sel.selection_time_,
    }
    if kind == "SOSREP":
        info["converged"] = bool(sel.converged_)
    if transductive:  # rule "min" on the same curve
        i_min = int(np.nanargmin(sel.bandwidth_scores_))
        info["min_factor"] = factors[i_min]
        if i_min == pick:
            info["min_auc"] = auc
        else:
            est = density_estimator(kind, kernel_name, seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = dn.bandwidth_setter(est.kernel, log_grid)(est, float(grid[i_min])).fit(Xtr)
            s = _finite(density_anomaly_scores(m, kind, kernel_name, Xte))
            info["min_auc"] = float(roc_auc_score(yte, s))
    return auc, info


def _finite(score: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(score)):
        raise FloatingPointError(f"{int((~np.isfinite(score)).sum())} non-finite scores")
    return score


def pyod_method(name: str, Xtr, Xte, yte, seed: int) -> tuple[float, dict]:
    """The harness's PyOD settings (defaults; PCA on the rank; DeepSVDD 20 epochs)."""
    from sklearn.metrics import roc_auc_score

    if name == "IForest":
        from pyod.models.iforest import IForest

        det = IForest(random_state=seed)
    elif name == "PCA":
        from pyod.models.pca import PCA

        keep = Xtr.std(0) > 0
        Xtr, Xte = Xtr[:, keep], Xte[:, keep]
        Z = (Xtr - Xtr.mean(0)) / Xtr.std(0)
        det = PCA(n_components=int(np.linalg.matrix_rank(Z)), random_state=seed)
    elif name == "CBLOF":
        from pyod.models.cblof import CBLOF

        det = CBLOF(random_state=seed)
    elif name == "LODA":
        from pyod.models.loda import LODA

        det = LODA()
        np.random.seed(seed)  # noqa: NPY002 - LODA draws from the global generator
    elif name == "DeepSVDD":
        import torch
        from pyod.models.deep_svdd import DeepSVDD

        torch.manual_seed(seed)
        det = DeepSVDD(n_features=Xtr.shape[1], epochs=20, random_state=seed, verbose=0)
    else:
        import importlib

        mod = importlib.import_module(f"pyod.models.{name.lower()}")
        det = getattr(mod, name)()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        det.fit(Xtr)
        score = np.asarray(det.decision_function(Xte), dtype=float)
    return float(roc_auc_score(yte, _finite(score))), {}


# -- storage and run -------------------------------------------------------------------------
SCHEMA = """CREATE TABLE IF NOT EXISTS results (
    dataset TEXT, method TEXT, seed INTEGER, auc REAL, seconds REAL, n_train INTEGER,
    d INTEGER, error TEXT, info TEXT, git_rev TEXT, device TEXT, finished REAL,
    PRIMARY KEY (dataset, method, seed))"""


def open_db(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, timeout=60)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(SCHEMA)
    return con


def datasets() -> list[str]:
    files = sorted(data_dir().glob("*.npz"), key=lambda p: p.stat().st_size)
    return [p.stem for p in files]


def run(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    names = args.datasets or datasets()
    names = [n for i, n in enumerate(names) if i % args.workers == args.worker]
    methods = args.methods or METHODS
    con = open_db(Path(args.db))
    rev = git_rev()
    for seed in args.seeds:
        for name in names:
            done = {
                m
                for (m,) in con.execute(
                    "SELECT method FROM results WHERE dataset=? AND seed=?", (name, seed)
                )
            }
            todo = [m for m in methods if m not in done]
            if not todo:
                continue
            Xtr, Xte, _ytr, yte = load_split(data_dir() / f"{name}.npz", seed)
            for m in todo:
                t0 = time.perf_counter()
                auc, err, info = None, None, {}
                try:
                    fn = pyod_method if m in PYOD else density_method
                    auc, info = fn(m, Xtr, Xte, yte, seed)
                except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                    err = f"{type(exc).__name__}: {exc}"
                dt = time.perf_counter() - t0
                con.execute(
                    "INSERT OR REPLACE INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        name,
                        m,
                        seed,
                        auc,
                        dt,
                        len(Xtr),
                        Xtr.shape[1],
                        err,
                        json.dumps(info),
                        rev,
                        "cpu",
                        time.time(),
                    ),
                )
                con.commit()
                print(f"s{seed} {name} {m}: auc={auc} {dt:.1f}s {err or ''}", flush=True)


# -- report ----------------------------------------------------------------------------------
def _load(db: Path, seeds: list[int]):
    con = open_db(db)
    rows = con.execute("SELECT dataset, method, seed, auc, info, seconds FROM results").fetchall()
    acc: dict = {}
    infos: dict = {}
    secs: dict = {}
    for ds, m, s, auc, info, sec in rows:
        if s not in seeds or auc is None:
            continue
        acc.setdefault((ds, m), {})[s] = auc
        infos[(ds, m, s)] = json.loads(info)
        secs.setdefault(m, []).append(sec)
        if m in TRANSDUCTIVE and "min_auc" in infos[(ds, m, s)]:
            acc.setdefault((ds, m + "min"), {})[s] = infos[(ds, m, s)]["min_auc"]
    return acc, infos, secs


def _rank_table(mean: dict, dss: list[str], methods: list[str]):
    from scipy.stats import rankdata

    mean_auc = {m: float(np.mean([mean[(d, m)] for d in dss])) for m in methods}
    ranks = {m: [] for m in methods}
    for d in dss:
        for m, r in zip(methods, rankdata([-mean[(d, m)] for m in methods])):
            ranks[m].append(r)
    mean_rank = {m: float(np.mean(ranks[m])) for m in methods}
    return mean_auc, mean_rank


def _place(values: dict, m: str, higher_better: bool) -> int:
    v = values[m]
    return 1 + sum((o > v) if higher_better else (o < v) for k, o in values.items() if k != m)


def report(args) -> str:
    acc, infos, secs = _load(Path(args.db), args.seeds)
    # a data set counts when every method has every requested seed there
    every = PYOD + INDUCTIVE + TRANSDUCTIVE + [m + "min" for m in TRANSDUCTIVE]
    all_ds = sorted({d for d, _ in acc}, key=lambda s: int(s.split("_")[0]))
    dss = [d for d in all_ds if all(len(acc.get((d, m), {})) == len(args.seeds) for m in every)]
    if not dss:
        return "no data set is complete yet"
    mean = {(d, m): float(np.mean(list(acc[(d, m)].values()))) for d in dss for m in every}
    out = [
        f"{len(dss)} data sets complete for seeds {args.seeds} "
        f"(missing: {', '.join(d for d in all_ds if d not in dss) or 'none'}).",
        "",
    ]
    protocols = {
        "inductive (held-out 20 % of the training part, grid r x {1,2,4,8}, rule min)": {
            "SOSREP-SDO": "SOSREP-SDO",
            "SOSREP-Lap": "SOSREP-Lap",
        },
        "transductive (test features, no labels, grid r x 2^-3..2^4, rule first_stable)": {
            "SOSREP-SDO": "SOSREP-SDO/T",
            "SOSREP-Lap": "SOSREP-Lap/T",
        },
        "transductive, rule min on the same curve": {
            "SOSREP-SDO": "SOSREP-SDO/Tmin",
            "SOSREP-Lap": "SOSREP-Lap/Tmin",
        },
    }
    base = PYOD + INDUCTIVE
    out += [
        "| protocol | SOSREP-SDO AUC | place by AUC | place by rank | SOSREP-Lap AUC "
        "| place by AUC | place by rank | best of the other 14 by AUC |",
        "|---|---|---|---|---|---|---|---|",
    ]
    full_tables = {}
    for label, sub in protocols.items():
        methods = [sub.get(m, m) for m in base]
        local = {(d, m): mean[(d, m)] for d in dss for m in methods}
        mean_auc, mean_rank = _rank_table(local, dss, methods)
        full_tables[label] = (methods, mean_auc, mean_rank, local)
        s, lp = sub["SOSREP-SDO"], sub["SOSREP-Lap"]
        others = {k: v for k, v in mean_auc.items() if k not in (s, lp)}
        top = max(others, key=others.get)
        n = len(methods)
        out.append(
            f"| {label} | {mean_auc[s]:.3f} | {_place(mean_auc, s, True)} of {n} "
            f"| {_place(mean_rank, s, False)} of {n} ({mean_rank[s]:.2f}) | {mean_auc[lp]:.3f} "
            f"| {_place(mean_auc, lp, True)} of {n} | {_place(mean_rank, lp, False)} of {n} "
            f"({mean_rank[lp]:.2f}) | {top} {others[top]:.3f} |"
        )
    for label, (methods, mean_auc, mean_rank, _local) in full_tables.items():
        order = sorted(methods, key=lambda m: -mean_auc[m])
        out += ["", f"Protocol: {label}. Methods by mean AUC-ROC (mean rank):", ""]
        out.append(", ".join(f"{m} {mean_auc[m]:.3f} ({mean_rank[m]:.2f})" for m in order) + ".")
    # per data set: the SOSREP columns under both protocols, and the best peer
    out += [
        "",
        "| data set | SOSREP-SDO ind. | /T first_stable | /T min | SOSREP-Lap ind. "
        "| /T first_stable | /T min | best of the other 14 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in dss:
        rest = [m for m in base if m not in ("SOSREP-SDO", "SOSREP-Lap")]
        best = max(rest, key=lambda m: mean[(d, m)])
        cells = [
            mean[(d, m)]
            for m in (
                "SOSREP-SDO",
                "SOSREP-SDO/T",
                "SOSREP-SDO/Tmin",
                "SOSREP-Lap",
                "SOSREP-Lap/T",
                "SOSREP-Lap/Tmin",
            )
        ]
        out.append(
            f"| {d} | "
            + " | ".join(f"{c:.3f}" for c in cells)
            + f" | {best} {mean[(d, best)]:.3f} |"
        )
    # where the transductive selection landed
    out += ["", "Where the selections landed (runs on the complete data sets):", ""]
    for m in TRANSDUCTIVE + ["SOSREP-SDO", "SOSREP-Lap"]:
        rows = [infos[(d, m, s)] for d in dss for s in args.seeds]
        facs = [i["factor"] for i in rows]
        counts = {f: facs.count(f) for f in sorted(set(facs))}
        fb = sum(i.get("fallback", False) for i in rows)
        out.append(
            f"* {m}: factor l/r chosen {', '.join(f'{f:g}: {c}' for f, c in counts.items())}"
            + (
                f"; first_stable fell back to the minimum in {fb} of {len(rows)}"
                if m in TRANSDUCTIVE
                else ""
            )
            + f"; median {np.median(secs[m]):.1f} s per run."
        )
    text = "\n".join(out)
    print(text)
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run")
    r.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    r.add_argument("--datasets", nargs="*", default=None)
    r.add_argument("--methods", nargs="*", default=None)
    r.add_argument("--db", default=str(DB))
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--worker", type=int, default=0)
    r.add_argument("--workers", type=int, default=1)
    q = sub.add_parser("report")
    q.add_argument("--seeds", nargs="*", type=int, default=[0])
    q.add_argument("--db", default=str(DB))
    q.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.action == "run":
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, str(args.threads))
        run(args)
    else:
        text = report(args)
        if args.out:
            Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
