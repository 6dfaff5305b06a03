"""Our detector against aeon's ROCKAD, both run through aeon's collection anomaly-detection API.

aeon (1.6) ships no harness for collection anomaly detection: ``aeon.benchmarking`` holds
classification/regression result loaders, resampling, statistical tests and point/range
metrics for series anomaly detection. This script is therefore the loop, written in aeon's
terms only:

* data: ``aeon.datasets.load_from_ts_file("<dir>/<Name>/<Name>_{TRAIN,TEST}.ts")``, i.e.
  aeon's layout, a ``(n_cases, n_channels, n_timepoints)`` array or a list of
  ``(n_channels, T_i)`` arrays, and string labels;
* estimators: ``novelty.AeonKernelNoveltyDetector(random_state=r)`` (our
  ``KernelNoveltyDetector()`` with its default recipe, as an aeon
  ``BaseCollectionAnomalyDetector``) and ``aeon.anomaly_detection.collection.ROCKAD(
  random_state=r, n_neighbors=min(5, N))`` (aeon's defaults otherwise; a corpus of N < 5
  series, StandWalkJump's, cannot have 5 neighbours);
* the same calls for both: ``est.fit(X_corpus)`` (no ``y``: every corpus series is normal),
  ``scores = est.predict(X_test)`` (anomaly scores, higher = more anomalous), ROC-AUC by
  aeon's ``aeon.benchmarking.metrics.anomaly_detection.roc_auc_score(y, scores)`` with
  ``y = 1`` for an anomaly (it calls scikit-learn's; it returns 0.0, with a warning, for
  constant scores, which is recorded as is).
* inputs an estimator's aeon tags refuse are adapted before the call and the row says so:
  without ``capability:unequal_length`` (ROCKAD) series of unequal lengths are resampled
  linearly (per channel, ends kept) to the corpus's maximum length, bench_detector's rule;
  without ``capability:missing_values`` NaN are filled by ``novelty.interpolate_missing``
  (the 11 UEA sets hold none). Our adapter declares both capabilities and gets the raw data.

Problems (the protocol of ``benchmarks/bench_detector.py``, its functions imported so the
indices are the same): for each data set at most 5 classes (``bench_detector.choose_classes``,
seeded by its ``SPLIT_SEED``), each normal in turn; the corpus is at most 100 training series
of that class (``subsample_corpus``), the test set at most 300 test series stratified by
class (``subsample_test``), the same for every class of the set; anomaly = any other class.
The subsamples use the problem seed 0; ``--random-states`` are the estimators' seeds (ours
is deterministic at a given seed; ROCKAD's ROCKET kernels and bootstrap vary with it:
``rockad_mean5`` in the report is the mean ROC-AUC of seeds 0-4 on each problem).

Results are appended to a JSONL file (``--store``, default ``results/bench_aeon.jsonl``,
git-ignored), one line per (data set, class, method, random state) with the sizes and the
subsampling limits; a rerun skips what is stored (a line made with other limits is ignored).

    python benchmarks/bench_aeon.py run [--datasets BasicMotions ...] [--methods ours rockad]
        [--random-states 0 1 2 3 4]
    python benchmarks/bench_aeon.py report [--compare results/wide.sqlite]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import platform
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_STORE = REPO / "results" / "bench_aeon.jsonl"
DEFAULT_DATA = REPO / "data" / "uea"
#: The 11 UEA multivariate sets shared by the benchmarks (``data/uea``).
UEA_SETS = (
    "ArticularyWordRecognition",
    "AtrialFibrillation",
    "BasicMotions",
    "ERing",
    "Epilepsy",
    "JapaneseVowels",
    "Libras",
    "NATOPS",
    "RacketSports",
    "StandWalkJump",
    "UWaveGestureLibrary",
)
METHODS = ("ours", "rockad")
MEAN5 = "rockad_mean5"
MEAN5_STATES = (0, 1, 2, 3, 4)


def _load_bench_detector():
    """``benchmarks/bench_detector.py`` as a module (``benchmarks`` is not a package)."""
    if "bench_detector" in sys.modules:
        return sys.modules["bench_detector"]
    path = Path(__file__).resolve().parent / "bench_detector.py"
    spec = importlib.util.spec_from_file_location("bench_detector", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_detector"] = mod
    spec.loader.exec_module(mod)
    return mod


bd = _load_bench_detector()


# -- data and problems -----------------------------------------------------------------------
def load_split(name: str, split: str, data_dir=DEFAULT_DATA):
    """aeon's reading of ``<data_dir>/<name>/<name>_<SPLIT>.ts``: (X in aeon's layout, y)."""
    from aeon.datasets import load_from_ts_file

    path = Path(data_dir) / name / f"{name}_{split.upper()}.ts"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (data sets are in {data_dir})")
    X, y = load_from_ts_file(str(path))
    return X, np.asarray(y).astype(str)


def take(X, idx):
    """The cases ``idx`` of an aeon collection (array or list), in the same container."""
    idx = np.asarray(idx, dtype=int)
    return X[idx] if isinstance(X, np.ndarray) else [X[i] for i in idx]


@dataclass
class Problem:
    """One one-versus-rest problem in aeon's layout; ``y`` 1 = anomaly (class != ``cls``)."""

    dataset: str
    cls: str
    corpus: object
    test: object
    y: np.ndarray
    n_classes: int
    seed: int


def build_problems(
    X_train, y_train, X_test, y_test, dataset: str, seed: int = 0, max_corpus: int = 100,
    max_test: int = 300, max_classes: int = 5,
) -> list[Problem]:  # fmt: skip
    """bench_detector's problems (same classes, same corpus and test indices) on aeon data."""
    y_train, y_test = np.asarray(y_train).astype(str), np.asarray(y_test).astype(str)
    labels = sorted(set(y_train.tolist()), key=bd._natural)
    labels = bd.choose_classes(labels, max_classes)
    t_idx = bd.subsample_test(y_test, max_test, seed)
    test, yt = take(X_test, t_idx), y_test[t_idx]
    out = []
    for c in labels:
        members = np.flatnonzero(y_train == c)
        pick = members[bd.subsample_corpus(len(members), max_corpus, seed)]
        y = (yt != c).astype(int)
        out.append(Problem(dataset, c, take(X_train, pick), test, y, len(labels), seed))
    return out


def lengths(X) -> list[int]:
    return [X.shape[2]] * len(X) if isinstance(X, np.ndarray) else [x.shape[1] for x in X]


def to_length(X, length: int) -> np.ndarray:
    """(n, d, length) array: each series of another length resampled linearly per channel
    on [0, 1] (ends kept), by ``bench_detector.resample_linear``."""
    if isinstance(X, np.ndarray) and X.shape[2] == length:
        return np.asarray(X, dtype=np.float64)
    return np.stack([bd.resample_linear(np.asarray(x).T, length).T for x in X])


def has_nan(X) -> bool:
    return any(np.isnan(np.asarray(x, dtype=np.float64)).any() for x in X)


def fill_missing(X):
    """NaN filled by ``novelty.interpolate_missing`` per series (same container back)."""
    from novelty import interpolate_missing

    filled = [interpolate_missing(np.asarray(x).T, name=f"X[{i}]").T for i, x in enumerate(X)]
    return np.stack(filled) if isinstance(X, np.ndarray) else filled


def adapt(est, corpus, test) -> tuple[object, object, list[str]]:
    """The inputs as ``est``'s aeon tags accept them, and what was changed."""
    notes = []
    if not est.get_tag("capability:missing_values") and (has_nan(corpus) or has_nan(test)):
        corpus, test = fill_missing(corpus), fill_missing(test)
        notes.append("missing values interpolated")
    if (
        not est.get_tag("capability:unequal_length")
        and len(set(lengths(corpus)) | set(lengths(test))) > 1
    ):
        length = max(lengths(corpus))
        corpus, test = to_length(corpus, length), to_length(test, length)
        notes.append("unequal lengths resampled to the corpus's maximum length")
    return corpus, test, notes


# -- methods and evaluation ------------------------------------------------------------------
def make_estimator(method: str, random_state: int, n_corpus: int):
    """An unfitted aeon ``BaseCollectionAnomalyDetector``."""
    if method == "ours":
        from novelty import AeonKernelNoveltyDetector

        return AeonKernelNoveltyDetector(random_state=random_state)
    if method == "rockad":
        from aeon.anomaly_detection.collection import ROCKAD

        return ROCKAD(random_state=random_state, n_neighbors=min(5, n_corpus))
    raise ValueError(f"unknown method {method!r}; methods are {METHODS}")


def evaluate(method: str, random_state: int, prob: Problem) -> dict:
    """Fit on the corpus, score the test set, all through aeon's API: one row's figures."""
    from aeon.benchmarking.metrics.anomaly_detection import roc_auc_score
    from sklearn.metrics import average_precision_score

    est = make_estimator(method, random_state, len(prob.corpus))
    corpus, test, notes = adapt(est, prob.corpus, prob.test)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(corpus)
        t1 = time.perf_counter()
        scores = np.asarray(est.predict(test), dtype=np.float64)
        t2 = time.perf_counter()
    if scores.shape != prob.y.shape:
        raise ValueError(f"{method}: {scores.shape} scores for {prob.y.shape[0]} test series")
    if not np.isfinite(scores).all():
        raise FloatingPointError(f"{method}: {int((~np.isfinite(scores)).sum())} non-finite")
    return dict(
        auc=float(roc_auc_score(prob.y, scores)),
        ap=float(average_precision_score(prob.y, scores)),
        fit_s=t1 - t0,
        score_s=t2 - t1,
        notes=notes,
    )


# -- store -----------------------------------------------------------------------------------
def _key(row: dict) -> tuple:
    return (row["dataset"], row["class"], row["method"], row["random_state"])


def read_store(path, settings: dict | None = None) -> list[dict]:
    """The rows of the JSONL store (those made with ``settings``, when given); a torn last
    line (an interrupted write) is skipped."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if settings is None or row.get("settings") == settings:
            rows.append(row)
    return rows


def run(
    datasets=UEA_SETS, methods=METHODS, random_states=(0,), store=DEFAULT_STORE,
    data_dir=DEFAULT_DATA, max_corpus: int = 100, max_test: int = 300, max_classes: int = 5,
    ours_states=(0,), log=print,
) -> list[dict]:  # fmt: skip
    """Evaluate every (problem, method, random state) not yet in ``store``; returns the new
    rows. Our detector runs at ``ours_states`` only (``random_states`` is ROCKAD's)."""
    settings = dict(max_corpus=max_corpus, max_test=max_test, max_classes=max_classes, seed=0)
    done = {_key(r) for r in read_store(store, settings)}
    Path(store).parent.mkdir(parents=True, exist_ok=True)
    new = []
    for name in datasets:
        Xtr, ytr = load_split(name, "train", data_dir)
        Xte, yte = load_split(name, "test", data_dir)
        probs = build_problems(Xtr, ytr, Xte, yte, name, 0, max_corpus, max_test, max_classes)
        for prob in probs:
            for method in methods:
                for rs in ours_states if method == "ours" else random_states:
                    row = dict(dataset=name, method=method, random_state=int(rs))
                    row["class"] = prob.cls
                    if _key(row) in done:
                        continue
                    try:
                        row.update(evaluate(method, int(rs), prob), error=None)
                    except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                        row.update(auc=None, ap=None, fit_s=None, score_s=None, notes=[])
                        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                    row.update(
                        n_classes=prob.n_classes,
                        n_corpus=len(prob.corpus),
                        n_test=len(prob.y),
                        n_anomalies=int(prob.y.sum()),
                        settings=settings,
                        finished=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    )
                    with open(store, "a") as f:
                        f.write(json.dumps(row) + "\n")
                    new.append(row)
                    auc = "n/a " + row["error"] if row["error"] else f"{row['auc']:.4f}"
                    t = (
                        ""
                        if row["error"]
                        else f" fit {row['fit_s']:.1f}s score {row['score_s']:.1f}s"
                    )
                    log(f"{name} class {prob.cls} {method}[{rs}]: AUC {auc}{t}")
    return new


# -- report ----------------------------------------------------------------------------------
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
    s = bd.summarize(brows, methods, failed="chance", reference="ours")
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
        cells = _load_bench_detector().score_cells(
            methods, vals, bold, lambda m, d=d: s["progress"][(d, m)]
        )
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
    import os

    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (
        f"{platform.node()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}, "
        f"Python {platform.python_version()}"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="evaluate what the store lacks")
    r.add_argument("--datasets", nargs="+", default=list(UEA_SETS))
    r.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    r.add_argument("--random-states", nargs="+", type=int, default=[0], help="ROCKAD's seeds")
    r.add_argument("--data-dir", default=str(DEFAULT_DATA))
    r.add_argument("--store", default=str(DEFAULT_STORE))
    q = sub.add_parser("report", help="markdown tables of the store")
    q.add_argument("--store", default=str(DEFAULT_STORE))
    q.add_argument("--compare", default=None, help="a bench_detector SQLite store to check")
    args = p.parse_args(argv)
    if args.cmd == "run":
        print(f"# {machine()}", flush=True)
        run(
            args.datasets, args.methods, args.random_states, args.store, args.data_dir,
            log=lambda s: print(s, flush=True),
        )  # fmt: skip
        return 0
    print(report_markdown(read_store(args.store), compare=args.compare))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
