"""The aeon-API route of the benchmark: our detector against aeon's ROCKAD, both run through
aeon's collection anomaly-detection API (``fit(X)``, ``predict(X)`` = anomaly scores) on the
benchmark's problems (:func:`.problems.build_problems` on aeon's layout: the same classes,
corpus and test indices), results appended to a JSONL store (resumable).

* data: ``aeon.datasets.load_from_ts_file("<dir>/<Name>/<Name>_{TRAIN,TEST}.ts")``, i.e.
  aeon's layout, a ``(n_cases, n_channels, n_timepoints)`` array or a list of
  ``(n_channels, T_i)`` arrays, and string labels;
* estimators: ``novelty.AeonKernelNoveltyDetector(random_state=r)`` and
  ``aeon.anomaly_detection.collection.ROCKAD(random_state=r, n_neighbors=min(5, N))``;
* ROC-AUC by aeon's ``aeon.benchmarking.metrics.anomaly_detection.roc_auc_score(y, scores)``
  with ``y = 1`` for an anomaly (0.0, with a warning, for constant scores, recorded as is);
* inputs an estimator's aeon tags refuse are adapted before the call and the row says so
  (:func:`adapt`): without ``capability:unequal_length`` series are resampled linearly to the
  corpus's maximum length (:func:`novelty._missing.resample_linear`), without
  ``capability:missing_values`` NaN are filled by ``novelty.interpolate_missing``.
"""

from __future__ import annotations

import datetime
import json
import time
import warnings
from pathlib import Path

import numpy as np

from . import problems
from .problems import REPO, Problem

__all__ = [
    "DEFAULT_DATA", "DEFAULT_STORE", "MEAN5", "MEAN5_STATES", "METHODS", "UEA_SETS", "adapt",
    "build_problems", "evaluate", "fill_missing", "lengths", "load_split", "make_estimator",
    "read_store", "run", "to_length",
]  # fmt: skip

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


def load_split(name: str, split: str, data_dir=DEFAULT_DATA):
    """aeon's reading of ``<data_dir>/<name>/<name>_<SPLIT>.ts``: (X in aeon's layout, y)."""
    from aeon.datasets import load_from_ts_file

    path = Path(data_dir) / name / f"{name}_{split.upper()}.ts"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (data sets are in {data_dir})")
    X, y = load_from_ts_file(str(path))
    return X, np.asarray(y).astype(str)


def build_problems(
    X_train, y_train, X_test, y_test, dataset: str, seed: int = 0, max_corpus: int = 100,
    max_test: int = 300, max_classes: int = 5,
) -> list[Problem]:  # fmt: skip
    """The benchmark's problems (:func:`.problems.build_problems`: the same classes, corpus
    and test indices) on aeon data, at most ``max_classes`` classes."""
    return problems.build_problems(
        X_train, y_train, X_test, y_test, dataset, seed=seed, max_corpus=max_corpus,
        max_test=max_test, max_classes=max_classes,
    )  # fmt: skip


def lengths(X) -> list[int]:
    """The lengths of an aeon collection ((n, d, T) array or list of (d, T_i) arrays)."""
    return [X.shape[2]] * len(X) if isinstance(X, np.ndarray) else [x.shape[1] for x in X]


def to_length(X, length: int) -> np.ndarray:
    """(n, d, length) array: each series of another length resampled linearly per channel
    on [0, 1] (ends kept), by :func:`novelty._missing.resample_collection`."""
    if isinstance(X, np.ndarray) and X.shape[2] == length:
        return np.asarray(X, dtype=np.float64)
    from novelty._missing import resample_collection

    channels_last = [np.asarray(x).T for x in X]
    return np.ascontiguousarray(resample_collection(channels_last, length).transpose(0, 2, 1))


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
