"""The published one-class protocol of Mauceri, Sweeney & McDermott (Pattern Recognition 100,
2020, 107122), rerun with our methods beside their table.

Protocol (theirs, :func:`class_problems`): for a UCR data set, every class ``c`` of the TRAIN
split is normal in turn; the corpus is every TRAIN series of class ``c`` (no cap, no
subsample); the test set is the whole TEST split; the figure is the ROC-AUC with the **normal**
class as the positive class, each test series scored by its normality (for a 1-NN: the negated
distance to the nearest corpus series), times 100; a data set's figure is the mean over its
classes. Their table (``mauceri2020_oneclass_1nn.csv``: 26 UCR sets, 12 dissimilarities)
is read by :func:`read_reference`.

Methods (:data:`METHODS`; each a :class:`Method` whose ``build()`` gives an unfitted object
with ``fit(X)`` and ``score_samples(X)``, higher = more normal; ``--method NAME=module:callable``
adds any importable zero-argument callable):

* ``euclid_1nn`` (:class:`Euclidean1NN`): normality = minus the Euclidean distance to the
  nearest corpus series, the distances computed at once by ``scipy.spatial.distance.cdist``.
  It reproduces their ``Euclidean`` column (the check of the protocol).
* ``recipe`` (:class:`RocketRecipe`): ROCKAD's recipe: sktime's ``MiniRocketMultivariate``
  (10,000 kernels, ``random_state=0``) fitted on the corpus, features standardised with the
  corpus's mean and standard deviation (scikit-learn's ``StandardScaler``), normality = minus
  the mean Euclidean distance to the ``min(5, N)`` nearest corpus series.
* ``default``: ``novelty.KernelNoveltyDetector()`` as it is when the run starts (its
  ``score_samples``). Every row records the git commit and a digest of the uncommitted
  changes under ``novelty/`` and ``tskernels/``, so a changed default is seen; ``--rerun
  default`` recomputes it.

Input: our detector gets the series as loaded (NaN and unequal lengths included; it handles
them itself). The other methods ("peer" input) get the series with NaN filled by
``novelty.interpolate_missing`` and, when lengths differ, every series resampled linearly to
the corpus's maximum length, as in ``benchmarks/bench_detector.py``. (The 26 sets of the table
have equal lengths and no NaN.)

Results: one CSV file per (data set, class, method) under ``results/mauceri/`` (git-ignored),
written atomically when the cell finishes; a run skips the cells that have a file, so an
interrupted run resumes. Each row: the AUROC x 100, corpus and test sizes, fit and score
seconds, the commit, the method's spec, or the error (one line) when the method raised.

    python -m experiments mauceri run [--methods euclid_1nn recipe default] [--datasets ...]
    python -m experiments mauceri report [--out docs/results_mauceri.md]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import importlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .detector_bench.inputs import fill_missing, lengths, to_length
from .detector_bench.problems import natural_key, take
from .peers import RocketRecipe

REPO = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = REPO.parent / "shared" / "data" / "mauceri2020_oneclass_1nn.csv"
DEFAULT_DATA = REPO / "data" / "ucr"
DEFAULT_RESULTS = REPO / "results" / "mauceri"
#: Their twelve dissimilarities, in the order of their table.
THEIR_COLUMNS = (
    "Autocorrelation", "Chebyshev", "Cosine", "DTW", "EDR", "Euclidean", "Gaussian Kernel",
    "Kullback Leibler", "Manhattan", "MSM", "Sigmoid Kernel", "Wasserstein",
)  # fmt: skip
FIELDS = (
    "dataset", "class", "method", "auroc", "n_corpus", "n_test", "n_normal_test", "fit_s",
    "score_s", "commit", "local_changes", "spec", "error", "finished",
)  # fmt: skip


class MauceriError(Exception):
    """A bad option, file or data set: printed as one line by the command line (exit 2)."""


# -- the protocol ----------------------------------------------------------------------------
def protocol_auroc(is_normal, normality) -> float:
    """ROC-AUC x 100 with the normal class positive: the probability that a normal test series
    scores a higher ``normality`` than an anomalous one (ties count one half), times 100."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(is_normal, dtype=bool).ravel()
    s = np.asarray(normality, dtype=np.float64).ravel()
    if s.shape != y.shape:
        raise ValueError(f"{s.size} scores for {y.size} test series")
    if y.all() or not y.any():
        raise ValueError("the test set needs both normal and anomalous series for a ROC-AUC")
    if not np.isfinite(s).all():
        raise FloatingPointError(f"{int((~np.isfinite(s)).sum())} non-finite scores")
    return 100.0 * float(roc_auc_score(y, s))


@dataclass
class ClassProblem:
    """Class ``cls`` normal: ``corpus`` = every TRAIN series of the class, ``test`` = the whole
    TEST split, ``is_normal`` = test label == cls."""

    dataset: str
    cls: str
    corpus: object  # (N, T, d) array or list of (T_i, d) arrays
    test: object
    is_normal: np.ndarray


def class_problems(X_train, y_train, X_test, y_test, dataset: str) -> list[ClassProblem]:
    """Their protocol's problems, one per class of the TRAIN split (natural label order)."""
    ytr = np.asarray(y_train).astype(str)
    yte = np.asarray(y_test).astype(str)
    if len(ytr) != len(X_train) or len(yte) != len(X_test):
        raise MauceriError(f"{dataset}: series and labels differ in number")
    out = []
    for c in sorted(set(ytr.tolist()), key=natural_key):
        out.append(
            ClassProblem(dataset, c, take(X_train, np.flatnonzero(ytr == c)), X_test, yte == c)
        )
    return out


def load_dataset(name: str, data_dir=DEFAULT_DATA):
    """``(X_train, y_train, X_test, y_test)`` of ``<data_dir>/<name>/<name>_{TRAIN,TEST}.ts``."""
    from .data import load_uea

    folder = Path(data_dir) / name
    if not (folder / f"{name}_TRAIN.ts").is_file():
        raise MauceriError(
            f"{folder / (name + '_TRAIN.ts')}: no such file (unpack the UCR archive: mkdir -p "
            "data && tar -xJf ../shared/data/ucr.tar.xz -C data)"
        )
    Xtr, ytr = load_uea(name, "train", data_dir=data_dir)
    Xte, yte = load_uea(name, "test", data_dir=data_dir)
    return Xtr, ytr, Xte, yte


# -- the peers' input ------------------------------------------------------------------------
def peer_input(X, length: int) -> np.ndarray:
    """(n, length, d) float64: NaN filled by ``novelty.interpolate_missing`` (linear per
    channel, edges held), series of another length resampled linearly to ``length`` (the
    detector benchmark's peer input, :mod:`experiments.detector_bench.inputs`)."""
    return to_length(fill_missing(X), length)


class PeerInput:
    """Wraps a method that needs equal lengths without NaN: the length is the corpus's
    maximum, fixed at ``fit`` (:func:`peer_input`)."""

    def __init__(self, method):
        self.method = method

    def fit(self, X):
        self.length_ = max(lengths(X))
        self.method.fit(peer_input(X, self.length_))
        return self

    def score_samples(self, X) -> np.ndarray:
        return self.method.score_samples(peer_input(X, self.length_))


# -- methods ---------------------------------------------------------------------------------
class Euclidean1NN:
    """Normality = minus the Euclidean distance to the nearest corpus series, the series
    flattened to vectors: ``-min_j ||x - c_j||_2`` (``cdist``: every pair at once)."""

    def fit(self, X):
        X = np.asarray(X, dtype=np.float64)
        self.corpus_ = X.reshape(len(X), -1)
        return self

    def score_samples(self, X) -> np.ndarray:
        from scipy.spatial.distance import cdist

        X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
        if X.shape[1] != self.corpus_.shape[1]:
            raise ValueError(
                f"test series have {X.shape[1]} values, the corpus's {self.corpus_.shape[1]}"
            )
        return -cdist(X, self.corpus_).min(axis=1)


def _euclid():
    return PeerInput(Euclidean1NN())


def _recipe():
    return PeerInput(RocketRecipe(random_state=0))


def _default():
    from novelty import KernelNoveltyDetector

    return KernelNoveltyDetector()


@dataclass(frozen=True)
class Method:
    """A method of the report: ``build()`` gives an unfitted object with ``fit(X)`` and
    ``score_samples(X)`` (higher = more normal); ``spec`` is what the rows record of it."""

    name: str
    build: Callable[[], object]
    spec: str
    label: str = ""


METHODS: dict[str, Method] = {
    "euclid_1nn": Method("euclid_1nn", _euclid, "experiments.mauceri:_euclid",
                         "our Euclidean 1-NN"),
    "recipe": Method("recipe", _recipe, "experiments.mauceri:_recipe",
                     "ROCKAD's recipe (MiniRocket, standardise, mean 5-NN)"),
    "default": Method("default", _default, "novelty:KernelNoveltyDetector",
                      "our default KernelNoveltyDetector()"),
}  # fmt: skip


def method_from_spec(text: str) -> Method:
    """``NAME=module:callable``: a method built by calling the importable zero-argument
    callable (e.g. ``gak=mypkg.detectors:make_gak``); its objects need ``fit`` and
    ``score_samples`` (higher = more normal)."""
    name, sep, target = text.partition("=")
    module, sep2, attr = target.partition(":")
    if not (sep and sep2 and name.isidentifier() and module and attr):
        raise MauceriError(f"--method {text!r}: expected NAME=module:callable")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise MauceriError(f"--method {text!r}: cannot import {target}: {exc}") from None
    if not callable(fn):
        raise MauceriError(f"--method {text!r}: {target} is not callable")
    return Method(name, fn, target, target)


def resolve_methods(names, extra_specs=()) -> list[Method]:
    out = []
    for n in names:
        if n not in METHODS:
            raise MauceriError(f"unknown method {n!r}; choose from {', '.join(METHODS)}")
        out.append(METHODS[n])
    out += [method_from_spec(s) for s in extra_specs]
    return out


# -- provenance ------------------------------------------------------------------------------
def provenance() -> tuple[str, str]:
    """(commit, local changes): ``git rev-parse HEAD`` and, when ``novelty/`` or
    ``tskernels/`` differ from it (uncommitted edits or untracked files), ``"local:"`` + the
    first 12 hex digits of a SHA-1 over ``git diff HEAD`` and the untracked files' names and
    contents there ("" when clean; "?" when git cannot answer)."""

    def git(*args) -> str | None:
        try:
            r = subprocess.run(["git", *args], cwd=REPO, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.decode(errors="replace") if r.returncode == 0 else None

    commit = (git("rev-parse", "HEAD") or "?").strip()
    diff = git("diff", "HEAD", "--", "novelty", "tskernels")
    others = git("ls-files", "--others", "--exclude-standard", "--", "novelty", "tskernels")
    if diff is None or others is None:
        return commit, "?"
    if not diff and not others.strip():
        return commit, ""
    h = hashlib.sha1(diff.encode())
    for name in sorted(others.split()):
        h.update(name.encode())
        try:
            h.update((REPO / name).read_bytes())
        except OSError:
            pass
    return commit, "local:" + h.hexdigest()[:12]


# -- the results files -----------------------------------------------------------------------
def _safe(name: str) -> str:
    keep = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    return keep + "-" + hashlib.sha1(name.encode()).hexdigest()[:6] if keep != name else keep


def cell_path(results: Path, dataset: str, cls: str, method: str) -> Path:
    """``results/<dataset>/<method>/<class>.csv`` (names with other characters than letters,
    digits, ``-_.`` are made safe and get a digest of the original)."""
    return Path(results) / _safe(dataset) / _safe(method) / f"{_safe(cls)}.csv"


def write_cell(path: Path, row: dict) -> None:
    """One row with a header, written to a temporary file and renamed: a cell's file exists
    only once its row is complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerow({k: row.get(k, "") for k in FIELDS})
    os.replace(tmp, path)


def read_cells(results: Path) -> list[dict]:
    """Every stored row (auroc, times and sizes as numbers; auroc None for an error)."""
    rows = []
    for p in sorted(Path(results).glob("*/*/*.csv")):
        with open(p, newline="") as fh:
            for r in csv.DictReader(fh):
                r["auroc"] = float(r["auroc"]) if r["auroc"] not in ("", None) else None
                for k in ("fit_s", "score_s"):
                    r[k] = float(r[k]) if r[k] not in ("", None) else None
                rows.append(r)
    return rows


def run_cell(method: Method, prob: ClassProblem, commit: str, local: str) -> dict:
    """Fit on the corpus, score the test set; the row (an error is recorded, not raised)."""
    row = dict(
        dataset=prob.dataset, method=method.name, n_corpus=len(prob.corpus),
        n_test=len(prob.is_normal), n_normal_test=int(prob.is_normal.sum()), commit=commit,
        local_changes=local, spec=method.spec, error="",
    )  # fmt: skip
    row["class"] = prob.cls
    try:
        t0 = time.perf_counter()
        det = method.build()
        det.fit(prob.corpus)
        t1 = time.perf_counter()
        s = det.score_samples(prob.test)
        t2 = time.perf_counter()
        row.update(auroc=f"{protocol_auroc(prob.is_normal, s):.10f}", fit_s=f"{t1 - t0:.4f}",
                   score_s=f"{t2 - t1:.4f}")  # fmt: skip
    except Exception as exc:  # recorded, the run goes on
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]
    row["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return row


def dataset_cost(name: str, data_dir=DEFAULT_DATA) -> float:
    """(train + test) x length from the .ts header and the line counts: the run's order."""
    total = 0.0
    length = 1
    for split in ("TRAIN", "TEST"):
        path = Path(data_dir) / name / f"{name}_{split}.ts"
        n, in_data = 0, False
        with open(path, errors="replace") as fh:
            for line in fh:
                s = line.strip()
                if in_data:
                    n += bool(s)
                elif s.lower().startswith("@serieslength"):
                    length = int(s.split()[1])
                elif s.lower().startswith("@data"):
                    in_data = True
        total += n
    return total * length


def run(
    methods: list[Method],
    datasets: list[str],
    data_dir=DEFAULT_DATA,
    results=DEFAULT_RESULTS,
    rerun: tuple[str, ...] = (),
    retry_errors: bool = False,
    log=print,
) -> dict:
    """Every missing (method, data set, class) cell, method by method, each method's data
    sets in order of :func:`dataset_cost` (largest last). Returns counts."""
    results = Path(results)
    for name in rerun:
        for p in results.glob(f"*/{_safe(name)}/*.csv"):
            p.unlink()
    commit, local = provenance()
    order = sorted(datasets, key=lambda n: (dataset_cost(n, data_dir), n))
    cache: dict[str, list[ClassProblem]] = {}
    done = skipped = errors = 0
    for m in methods:
        for name in order:
            if name not in cache:
                cache = {name: class_problems(*load_dataset(name, data_dir), dataset=name)}
            for prob in cache[name]:
                path = cell_path(results, name, prob.cls, m.name)
                if path.exists():
                    if not retry_errors or read_cells_file(path)["error"] == "":
                        skipped += 1
                        continue
                row = run_cell(m, prob, commit, local)
                write_cell(path, row)
                done += 1
                errors += bool(row["error"])
                log(f"{m.name} {name} class {prob.cls}: "
                    + (row["error"] or f"AUROC {float(row['auroc']):.2f} fit {row['fit_s']} s "
                       f"score {row['score_s']} s"), flush=True)  # fmt: skip
    return dict(computed=done, skipped=skipped, errors=errors)


def read_cells_file(path: Path) -> dict:
    with open(path, newline="") as fh:
        return next(csv.DictReader(fh))


# -- the reference and the report ------------------------------------------------------------
def read_reference(path=DEFAULT_REFERENCE):
    """Their table: a DataFrame indexed by data set, the 12 columns of :data:`THEIR_COLUMNS`
    (AUROC x 100)."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise MauceriError(f"--reference {path}: no such file")
    ref = pd.read_csv(path).set_index("Dataset")
    missing = [c for c in THEIR_COLUMNS if c not in ref.columns]
    if missing:
        raise MauceriError(f"{path}: missing column(s) {missing}")
    return ref[list(THEIR_COLUMNS)].astype(float)


def per_set(rows: list[dict], class_counts: dict[str, int] | None = None):
    """DataFrame (data set x method) of the mean AUROC x 100 over classes; a (set, method)
    with an error or with fewer classes than ``class_counts[set]`` is left out (NaN)."""
    import pandas as pd

    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows)
    out = {}
    for (d, m), g in df.groupby(["dataset", "method"]):
        complete = g["auroc"].notna().all()
        if class_counts is not None and d in class_counts:
            complete = complete and len(g) == class_counts[d]
        out[(d, m)] = float(g["auroc"].mean()) if complete else np.nan
    s = pd.Series(out)
    return s.unstack()


def mean_ranks(table) -> dict:
    """Mean rank per column (1 = best, ties share the mean rank) over the rows."""
    from scipy.stats import rankdata

    R = np.vstack([rankdata(-row, method="average") for row in table.to_numpy()])
    return dict(zip(table.columns, R.mean(axis=0)))


def class_count(name: str, data_dir=DEFAULT_DATA) -> int:
    """Number of TRAIN classes, from the ``@classlabel`` line of the .ts header."""
    with open(Path(data_dir) / name / f"{name}_TRAIN.ts", errors="replace") as fh:
        for line in fh:
            if line.strip().lower().startswith("@classlabel"):
                return len(line.split()) - 2
    raise MauceriError(f"{name}: no @classLabel line")


def report_markdown(rows, ref, command: str, data_dir=DEFAULT_DATA, methods=None) -> str:
    """The report: per-set table, means and mean ranks, the protocol check and the target."""
    import pandas as pd

    sets = list(ref.index)
    counts = {}
    for s in sets:
        try:
            counts[s] = class_count(s, data_dir)
        except (OSError, MauceriError):
            pass
    ours = per_set(rows, counts)
    names = list(methods or [m for m in ("default", "recipe", "euclid_1nn") if m in ours.columns])
    names += [m for m in ours.columns if m not in names]
    ours = ours.reindex(index=sets, columns=names)
    best = ref.max(axis=1)
    best_name = ref.idxmax(axis=1)
    commits = sorted({(r["method"], r["commit"][:10], r["local_changes"]) for r in rows})
    lines = [
        "# The published one-class protocol: Mauceri, Sweeney & McDermott (2020)",
        "",
        'Mauceri, Sweeney & McDermott, "Dissimilarity-based representations for one-class '
        'classification on time series", Pattern Recognition 100 (2020) 107122: 1-NN '
        "one-class classification with 12 dissimilarities on the raw series. Their protocol: "
        "each class normal in turn; corpus = every TRAIN series of the class (no cap); test = "
        "the whole TEST split; AUROC with the normal class positive (score = negated 1-NN "
        "distance, or our methods' normality), x 100; the mean over the classes of a set. "
        "Their figures are the 26 rows of `../shared/data/mauceri2020_oneclass_1nn.csv` "
        "(the sets of the shared UCR archive). `best of 12` is an oracle: the best of their 12 "
        "columns per set, chosen with the test labels.",
        "",
        "Produced by:",
        "",
        "```",
        command,
        "```",
        "",
        "Code: `experiments/mauceri.py` (methods `euclid_1nn`, `recipe`, `default`: see its "
        "docstring). Rows computed at (method, commit, uncommitted changes under novelty/ and "
        "tskernels/):",
        "",
    ]
    lines += [f"- {m}: {c}{' + ' + loc if loc else ''}" for m, c, loc in commits]
    # -- the protocol check
    lines += ["", "## The protocol check: our Euclidean 1-NN against their Euclidean column", ""]
    if "euclid_1nn" in ours.columns and ours["euclid_1nn"].notna().any():
        diff = (ours["euclid_1nn"] - ref["Euclidean"]).dropna()
        big = diff[diff.abs() > 0.01]
        lines.append(
            f"{len(diff)} of {len(sets)} sets computed; max |ours - theirs| = "
            f"{diff.abs().max():.4f} (AUROC x 100), mean {diff.mean():+.4f}. "
            + ("Every set within 0.01." if big.empty else
               "Sets differing by more than 0.01: "
               + ", ".join(f"{k} ({v:+.4f})" for k, v in big.items()) + ".")
        )  # fmt: skip
    else:
        lines.append("Not computed yet.")
    # -- the main table
    show = [m for m in names if m != "euclid_1nn"]
    head = ["data set", "classes", *show, "our Eucl. 1-NN", "diff", *THEIR_COLUMNS,
            "best of 12"]  # fmt: skip
    lines += ["", "## Per data set (AUROC x 100)", ""]
    lines += ["Bold: the best of our methods and their 12 columns (the oracle aside).", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def f(v):
        return "n/a" if pd.isna(v) else f"{v:.2f}"

    for s in sets:
        vals = {m: ours.at[s, m] for m in show}
        vals.update({c: ref.at[s, c] for c in THEIR_COLUMNS})
        top = max(v for v in vals.values() if not pd.isna(v))
        cells = [("**" + f(v) + "**") if not pd.isna(v) and v >= top - 1e-9 else f(v)
                 for v in vals.values()]  # fmt: skip
        e = ours.at[s, "euclid_1nn"] if "euclid_1nn" in ours.columns else np.nan
        d = e - ref.at[s, "Euclidean"]
        lines.append("| " + " | ".join(
            [s, str(counts.get(s, "?")), *cells[: len(show)], f(e),
             "n/a" if pd.isna(d) else f"{d:+.4f}", *cells[len(show):],
             f"{best[s]:.2f} ({best_name[s]})"]) + " |")  # fmt: skip
    # -- means and ranks over the sets every shown method finished
    full = ours[show].dropna()
    lines += ["", "## Means and mean ranks", ""]
    done = list(full.index)
    if not done:
        lines.append("No set has every method finished yet.")
    else:
        missing = [s for s in sets if s not in done]
        table = pd.concat([full, ref.loc[done]], axis=1)
        ranks = mean_ranks(table)
        lines.append(
            f"Over the {len(done)} sets where every method of ours finished"
            + (f" (missing: {', '.join(missing)})" if missing else " (all 26)")
            + f". Mean ranks among the {table.shape[1]} methods (ours and their 12; 1 = best, "
            "ties share the mean rank). Their best of 12 is an oracle, not ranked."
        )
        lines += ["", "| method | mean AUROC x 100 | mean rank | sets won or tied |"]
        lines.append("|---|---|---|---|")
        top = table.max(axis=1)
        order = sorted(table.columns, key=lambda c: ranks[c])
        for c in order:
            wins = int((table[c] >= top - 1e-9).sum())
            label = METHODS[c].label if c in METHODS else c
            tag = f"{c} ({label})" if c in show else f"their {c}"
            lines.append(f"| {tag} | {table[c].mean():.2f} | {ranks[c]:.2f} | {wins} |")
        lines.append(f"| their best of 12 (oracle) | {best.loc[done].mean():.2f} | - | - |")
    # -- each method of ours against the oracle, over the sets it finished
    lines += ["", "Each method of ours over every set it finished, against their per-set best "
              "of 12 (the oracle) and their best single column on those sets:", "",
              "| method | sets | mean | oracle's mean | difference | sets >= oracle | "
              "best single column: mean |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for m in show:
        got = ours[m].dropna()
        if got.empty:
            continue
        o = best.loc[got.index]
        col = ref.loc[got.index].mean().idxmax()
        lines.append(
            f"| {m} | {len(got)} | {got.mean():.2f} | {o.mean():.2f} | "
            f"{got.mean() - o.mean():+.2f} | {int((got >= o - 1e-9).sum())} | "
            f"{col} {ref.loc[got.index, col].mean():.2f} |"
        )
    # -- targets
    lines += ["", "## Targets", ""]
    if "default" in ours.columns and ours["default"].notna().any():
        got = ours["default"].dropna()
        dmean, bmean = got.mean(), best.loc[got.index].mean()
        beat = int((got >= best.loc[got.index] - 1e-9).sum())
        part = "" if len(got) == len(sets) else (
            f"; provisional: {len(sets) - len(got)} sets not finished")  # fmt: skip
        lines.append(
            f"- default >= their per-set best of 12 on average: "
            f"**{'met' if dmean >= bmean else 'missed'}** ({dmean:.2f} against {bmean:.2f}, "
            f"{dmean - bmean:+.2f}, over {len(got)} of {len(sets)} sets{part}; the default "
            f"reaches the oracle on {beat} of them)."
        )
        if "recipe" in ours.columns:
            both = ours[["default", "recipe"]].dropna()
            lines.append(
                f"- default >= recipe on average (context, not a target of this protocol): "
                f"{'yes' if both['default'].mean() >= both['recipe'].mean() else 'no'} "
                f"({both['default'].mean():.2f} against {both['recipe'].mean():.2f} over "
                f"{len(both)} sets; the default wins or ties "
                f"{int((both['default'] >= both['recipe']).sum())} of them)."
            )
    else:
        lines.append("- default >= their per-set best of 12 on average: not measured yet.")
    # -- times
    lines += ["", "## Times (seconds, this machine: 2 shared cores)", "",
              "| method | cells | fit: median | fit: total | score: median | score: total |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    df = pd.DataFrame(rows)
    for m in names:
        g = df[(df["method"] == m) & df["auroc"].notna()]
        if g.empty:
            continue
        lines.append(f"| {m} | {len(g)} | {g['fit_s'].median():.3f} | {g['fit_s'].sum():.1f} | "
                     f"{g['score_s'].median():.3f} | {g['score_s'].sum():.1f} |")  # fmt: skip
    errs = df[df["auroc"].isna()]
    if not errs.empty:
        lines += ["", "Errors:", ""]
        lines += [f"- {r['method']} {r['dataset']} class {r['class']}: {r['error']}"
                  for _, r in errs.iterrows()]  # fmt: skip
    return "\n".join(lines) + "\n"


NOTES_MARK = "<!-- hand-written notes below this line: kept when the report is rewritten -->"


def kept_notes(path: Path) -> str:
    """The part of an existing report from :data:`NOTES_MARK` on ("" when none): what
    ``report --out`` keeps of a file it rewrites."""
    if not path.is_file():
        return ""
    text = path.read_text()
    i = text.find(NOTES_MARK)
    return "" if i < 0 else "\n" + text[i:]


# -- command line ----------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m experiments mauceri", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="compute the missing cells (resumable)")
    r.add_argument("--methods", nargs="+", default=list(METHODS), help=", ".join(METHODS))
    r.add_argument("--method", action="append", default=[], metavar="NAME=module:callable",
                   help="an extra method: an importable zero-argument callable")  # fmt: skip
    r.add_argument("--datasets", nargs="+", default=None, help="default: the reference's 26")
    r.add_argument("--rerun", nargs="+", default=[], help="methods whose cells are recomputed")
    r.add_argument("--retry-errors", action="store_true")
    for q in (r, sub.add_parser("report", help="write the markdown report")):
        q.add_argument("--data-dir", default=str(DEFAULT_DATA))
        q.add_argument("--results", default=str(DEFAULT_RESULTS))
        q.add_argument("--reference", default=str(DEFAULT_REFERENCE))
    rep = sub.choices["report"]
    rep.add_argument("--out", default=None, help="markdown file (default: print)")
    rep.add_argument("--methods", nargs="+", default=None, help="columns (default: all)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        ref = read_reference(args.reference)
        if args.command == "run":
            if not Path(args.data_dir).is_dir():
                raise MauceriError(f"--data-dir {args.data_dir}: no such folder")
            methods = resolve_methods(args.methods, args.method)
            datasets = args.datasets or list(ref.index)
            unknown = [d for d in datasets if not (Path(args.data_dir) / d).is_dir()]
            if unknown:
                raise MauceriError(f"no data folder for {', '.join(unknown)} in {args.data_dir}")
            out = run(methods, datasets, args.data_dir, args.results, tuple(args.rerun),
                      args.retry_errors)  # fmt: skip
            print(f"{out['computed']} cells computed ({out['errors']} errors), "
                  f"{out['skipped']} already there; results in {args.results}")  # fmt: skip
            return 0
        command = "python -m experiments mauceri " + shlex.join(argv)
        md = report_markdown(read_cells(Path(args.results)), ref, command, args.data_dir,
                             args.methods)  # fmt: skip
        if args.out:
            md += kept_notes(Path(args.out))
            Path(args.out).write_text(md)
            print(f"report written: {args.out}")
        else:
            sys.stdout.write(md)
        return 0
    except MauceriError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


__all__ = [
    "METHODS", "Euclidean1NN", "Method", "RocketRecipe", "class_problems", "main",
    "method_from_spec", "protocol_auroc", "read_reference", "report_markdown", "run",
]  # fmt: skip

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
