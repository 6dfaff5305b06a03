"""Does the label-free selection's proxy predict the test ROC-AUC? (issue 21, item 3)

For every problem of the wide benchmark's tuning half (``bench_detector.py``: same data sets,
classes, corpus and test subsamples) this script reads the proxies that ``kernel="auto"``
computed (the ``ours_auto`` rows of the benchmark store keep its selection table) and
computes, for every candidate (kernel, scorer) of the selection, the ROC-AUC of that
candidate alone on the problem's test set: pre-processing and kernel fitted on the whole
corpus, one corpus Gram and one cross Gram per kernel, every scorer of
``novelty.detector._auto.SCORER_CANDIDATES`` on them (anomaly = positive class).

Per problem: Spearman's rank correlation between proxy and test ROC-AUC over the candidates;
the test ROC-AUC of the candidate with the best proxy and of the best candidate (oracle).
``run`` writes the test ROC-AUCs to a JSON-lines file (one line per problem; resumable:
problems done are skipped); ``report`` joins them with the store's selection tables.

    python benchmarks/auto_proxy_study.py run [--out results/auto_proxy_study.jsonl]
    python benchmarks/auto_proxy_study.py report [--store results/wide.sqlite] [--out ...]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

from experiments.detector_bench import problems as bd
from experiments.detector_bench.store import DEFAULT_STORE

OUT = bd.REPO / "results" / "auto_proxy_study.jsonl"


def candidate_test_aucs(corpus, test, y) -> dict[str, float]:
    """Test ROC-AUC of every (kernel, scorer) candidate of the selection, keyed by the
    selection's member name (``<kernel>+<scorer>`` and ``(k=5)`` for the 5-NN mean)."""
    import torch
    from sklearn.metrics import roc_auc_score

    from novelty import as_series_collection
    from novelty.detector._auto import SCORER_CANDIDATES, _spec, candidate_kernels
    from novelty.detector._members import MemberSpec, make_scorer, prepare_kernel, preprocess_mode

    Xs = as_series_collection(corpus, missing="interpolate")
    Xt = as_series_collection(test, missing="interpolate", name="test")
    out = {}
    for kname, kernel, prep, norm in candidate_kernels(Xs):
        mode = preprocess_mode(prep)
        try:
            if mode is not None:
                from tskernels.transforms import Preprocessor

                pre = Preprocessor(zscore=mode).fit(Xs)
                Zc, Zt = pre.transform(Xs), pre.transform(Xt)
            else:
                Zc, Zt = Xs, Xt
            k = prepare_kernel(MemberSpec(kernel=kernel), Zc)
            K = k.gram(Zc, normalize=norm)
            Kt = k.gram(Zt, Zc, normalize=norm)
            diag = torch.ones(Kt.shape[0], dtype=Kt.dtype) if norm else k.diag(Zt)
        except (ValueError, ArithmeticError):
            continue
        for scorer, params in SCORER_CANDIDATES:
            spec = _spec(kernel, scorer, params, prep, norm, kname)
            try:
                s = make_scorer(spec, K.shape[0]).fit(K).score(Kt, diag)
                out[spec.name] = float(roc_auc_score(y, s))
            except (ValueError, ArithmeticError):
                continue
    return out


def selection_proxies(store, dataset: str, cls: str) -> dict | None:
    """The ours_auto selection table of one problem: member name -> (proxy, z), and the
    chosen option; None when the store has no such row."""
    query = (
        "SELECT params, auc FROM results WHERE dataset=? AND class=? AND method=? AND seed=0 "
        "AND error IS NULL"
    )
    con = sqlite3.connect(store)
    try:
        row = con.execute(query, (dataset, cls, "ours_auto")).fetchone()
        default = con.execute(query, (dataset, cls, "ours_default")).fetchone()
    finally:
        con.close()
    if row is None:
        return None
    table = json.loads(row[0]).get("selection")
    if table is None:
        return None
    proxies, chosen = {}, None
    for r in table:
        if r["kernel"] in ("top", "baseline"):
            name = r["kernel"]
        else:
            k = (r.get("params") or {}).get("n_neighbors")
            name = f"{r['kernel']}+{r['scorer']}" + (f"(k={k})" if k else "")
        if r.get("score") is not None and np.isfinite(r["score"]):
            proxies[name] = (float(r["score"]), r.get("z"))
        if r.get("chosen"):
            chosen = name
    default_auc = None if default is None else default[1]
    return {"proxies": proxies, "chosen": chosen, "auto_auc": row[1], "default_auc": default_auc}


def run(out: Path, log=print) -> int:
    """Test ROC-AUC of every candidate on every tuning-half problem (resumable)."""
    dirs = bd.default_data_dirs()
    split = bd.half_of(dirs)
    done = set()
    if out.is_file():
        done = {(r["dataset"], r["class"]) for r in map(json.loads, out.read_text().splitlines())}
    written = 0
    for ds in sorted((d for d, h in split.items() if h == "tuning"), key=str.lower):
        for prob in bd.load_problems(ds, dirs, 0, None, max_classes=bd.MAX_CLASSES):
            if (ds, prob.cls) in done:
                continue
            t0 = time.perf_counter()
            true = candidate_test_aucs(prob.corpus, prob.test, prob.y)
            rec = dict(dataset=ds, test_auc=true, seconds=time.perf_counter() - t0)
            rec["class"] = prob.cls
            with out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            written += 1
            log(f"{ds} [{prob.cls}]: {len(true)} candidates in {rec['seconds']:.1f} s")
    return written


def joined(out: Path, store) -> list[dict]:
    """Per problem with both: the candidates' proxies (from the store's ours_auto selection
    table) beside their test ROC-AUCs, Spearman's rho, and the test ROC-AUC of the best-proxy
    candidate and of the best candidate."""
    from scipy.stats import spearmanr

    recs = []
    for r in map(json.loads, out.read_text().splitlines()):
        sel = selection_proxies(store, r["dataset"], r["class"])
        if sel is None:
            continue
        true = r["test_auc"]
        names = [n for n in true if n in sel["proxies"]]
        if len(names) < 3:
            continue
        proxy = [sel["proxies"][n][0] for n in names]
        best = names[int(np.argmax(proxy))]
        recs.append(
            dict(
                dataset=r["dataset"],
                spearman=float(spearmanr(proxy, [true[n] for n in names])[0]),
                best_proxy_auc=true[best],
                oracle_auc=max(true[n] for n in names),
                default_members=[true.get("minirocket+knn"), true.get("gak+knn")],
                chosen=sel["chosen"],
                auto_auc=sel["auto_auc"],
                default_auc=sel["default_auc"],
            )
        )
    return recs


def members_by_data_set(out: Path, store) -> str:
    """The default recipe against its members alone, by data set (the tuning-half decision to
    keep the average): mean ROC-AUC over a data set's problems, then the mean over data sets,
    the mean rank among the variants and ROCKAD, and W/T/L (0.005) of the default against
    MiniRocket + 1-NN. A member that could not run (a corpus of fewer than 3 series: the
    default is GAK + 1-NN alone there) counts as GAK + 1-NN, as the recipe would."""
    from scipy.stats import rankdata

    con = sqlite3.connect(store)
    q = "SELECT auc FROM results WHERE dataset=? AND class=? AND method=? AND seed=0"
    per_ds: dict = {}
    try:
        for r in map(json.loads, out.read_text().splitlines()):
            t = r["test_auc"]
            rows = {m: con.execute(q, (r["dataset"], r["class"], m)).fetchone()
                    for m in ("ours_default", "rockad")}  # fmt: skip
            if rows["ours_default"] is None or rows["ours_default"][0] is None:
                continue
            gak = t.get("gak+knn")
            rockad = rows["rockad"][0] if rows["rockad"] and rows["rockad"][0] is not None else 0.5
            values = [rows["ours_default"][0], t.get("minirocket+knn", gak),
                      t.get("minirocket+knn(k=5)", gak), gak, rockad]  # fmt: skip
            per_ds.setdefault(r["dataset"], []).append(values)
    finally:
        con.close()
    names = ["default", "minirocket+knn", "minirocket+knn(k=5)", "gak+knn", "rockad"]
    M = np.array([np.nanmean(np.array(v, dtype=float), axis=0) for v in per_ds.values()])
    ranks = np.mean([rankdata(-row) for row in M], axis=0)
    diff = M[:, 0] - M[:, 1]
    wtl = (int((diff > 0.005).sum()), int((abs(diff) <= 0.005).sum()), int((diff < -0.005).sum()))
    cells = [f"{n} {m:.3f} (rank {k:.2f})" for n, m, k in zip(names, M.mean(axis=0), ranks)]
    lines = [f"by data set ({len(M)}): " + ", ".join(cells)]
    lines.append("default vs minirocket+knn alone, W/T/L: {}/{}/{}".format(*wtl))
    return "\n".join(lines)


def report(out: Path, store) -> str:
    recs = joined(out, store)
    if not recs:
        return "no problem has both the study's test ROC-AUCs and an ours_auto selection"
    rho = np.array([r["spearman"] for r in recs], dtype=float)
    ok = np.isfinite(rho)
    by_ds: dict = {}
    for r, v in zip(recs, rho):
        if np.isfinite(v):
            by_ds.setdefault(r["dataset"], []).append(v)
    ds_means = np.array([np.mean(v) for v in by_ds.values()])
    best_proxy = float(np.mean([r["best_proxy_auc"] for r in recs]))
    oracle = float(np.mean([r["oracle_auc"] for r in recs]))
    regret = oracle - best_proxy
    members = np.array([r["default_members"] for r in recs if None not in r["default_members"]])
    chosen = [str(r["chosen"]) for r in recs]
    kinds = sorted(set(c if c in ("baseline", "top") else "single" for c in chosen))
    lines = [
        f"problems: {len(recs)} on {len(by_ds)} data sets of the tuning half",
        f"Spearman(proxy, test ROC-AUC) over the candidates of a problem: mean "
        f"{rho[ok].mean():.3f}, median {np.median(rho[ok]):.3f}, share > 0 "
        f"{np.mean(rho[ok] > 0):.2f}; mean of the data sets' means {ds_means.mean():.3f}",
        f"test ROC-AUC of the best-proxy candidate: mean {best_proxy:.3f}; "
        f"of the best candidate (oracle): {oracle:.3f} "
        f"(regret {regret:.3f})",
        f"default's members alone: minirocket+knn {members[:, 0].mean():.3f}, gak+knn "
        f"{members[:, 1].mean():.3f} (problems: {len(members)})",
        f"the detector: default {np.mean([r['default_auc'] for r in recs]):.3f}, auto "
        f"{np.mean([r['auto_auc'] for r in recs]):.3f}",
        "guarded selection chose: "
        + ", ".join(
            f"{k}: {sum((c if c in ('baseline', 'top') else 'single') == k for c in chosen)}"
            for k in kinds
        ),
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/auto_proxy_study.py")
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", default=str(OUT))
    q = sub.add_parser("report")
    q.add_argument("--store", default=str(DEFAULT_STORE))
    q.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.action == "run":
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"{run(out)} problem(s) written to {out}")
    else:
        if not out.is_file():
            print(f"error: no study at {out}: run it first", file=sys.stderr)
            return 2
        print(report(out, args.store))
        print(members_by_data_set(out, args.store))
    return 0


if __name__ == "__main__":
    sys.exit(main())
