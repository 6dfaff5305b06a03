"""Detector benchmark on 58 data sets: our KernelNoveltyDetector against ROCKAD and PyOD.

Data sets: the 11 UEA multivariate sets and the 47 UCR univariate sets of ``../shared/data``
(``data/uea`` and ``data/ucr`` inside the checkout, git-ignored; ``--data-dir`` takes one or
more folders of ``<Name>/<Name>_{TRAIN,TEST}.ts``). They are split once into a **tuning half**
and a **confirmation half** (:func:`halves`): within each collection (UEA, UCR) the names,
sorted, are permuted with the fixed seed ``SPLIT_SEED`` and the first ceil(n / 2) go to the
tuning half. The rule never looks at results; every choice of the detector is made on the
tuning half, and the confirmation half is what the docs quote (``report --half``).

Problems: for every data set and at most ``--max-classes`` (5) of its classes (a seeded choice
among the sorted labels when there are more, :func:`choose_classes`; fixed before any result
was seen, so that the wide benchmark runs in about two hours on 2 cores), one class c is normal
(one-versus-rest); the corpus is the training series of class c, subsampled without
replacement to at most ``--max-corpus`` (100) series; the test set is the test split, a
stratified (by class) subsample of at most ``--max-test`` (300) series, the same for every
class of a data set; label 1 = anomaly (class != c). Both subsamples are drawn with the seed
(``--seeds``), which every method also gets as its ``random_state``.

Methods (``METHODS``, selected with ``--methods``; the groups ``ours`` and ``peers`` expand):

* ``ours_default`` = ``KernelNoveltyDetector()``, ``ours_auto`` =
  ``KernelNoveltyDetector(kernel="auto", scorer="auto")`` and every ``--extra NAME=EXPR``: an
  estimator on raw series (arrays (n, T, d) or lists of (T_i, d) arrays; it pre-processes
  itself). EXPR is evaluated afresh for every problem with ``np``, ``novelty``, ``tskernels``,
  ``density`` and every public name of ``tskernels`` and ``novelty`` in scope; a
  ``random_state`` parameter left at None is set to the seed. Anomaly score =
  ``-score_samples(X)``; false alarms = test normals with ``predict(X) == -1``, nominal rate
  ``contamination`` if the detector has it, else ``1 - quantile``.
* ``rockad``: aeon's ROCKAD with its defaults and ``random_state=seed`` on the raw series in
  aeon's layout (n, d, T); its ``predict`` is an anomaly score (mean k-NN distance in the
  power-transformed ROCKET features: higher = more anomalous). It has no threshold, so no
  false-alarm rate. Its k-NN queries only test series against a bootstrap sample of the
  corpus, so ``n_neighbors = min(5, N)`` for a corpus of N < 5 series (StandWalkJump: 4).
  ``rockad_mean5``: the same for seeds 0-4 (ROCKET's draws vary), its ROC-AUC and AP the means
  of the five (each seed's figures in ``params``; a seed whose scores are not finite is left
  out of the mean and counted there); fit and score seconds are the totals.
* ``rockad_recipe``: ROCKAD's recipe written out with sktime's MiniRocket (multivariate,
  ``random_state=seed``; unequal lengths resampled as for ROCKAD): features of the corpus
  standardised (scikit-learn's ``StandardScaler`` fitted on the corpus), anomaly score = mean
  Euclidean distance to the ``min(5, N)`` nearest corpus series (scikit-learn's
  ``NearestNeighbors``).
* ``pyod_knn``, ``pyod_iforest``, ``pyod_lof``, ``pyod_ocsvm``, ``pyod_ecod``: PyOD with its
  defaults (``random_state=seed`` for IForest) on flattened series: average pooling with
  window ``1 + (T - 1) // 100`` when T > 100, z-score per (time step, channel) with the corpus's
  mean and std, ``(x - mean) / (std + 1e-4)``, clipping to +-5, flattening to T * d columns.
  Anomaly score = ``decision_function``; false alarms = test normals with ``predict == 1``,
  nominal rate = ``contamination`` (0.1). PyOD's ECOD recomputes its empirical CDFs on the
  training data *plus the batch it scores*, so a test set made mostly of anomalies (as in
  one-versus-rest) would shift its own tails; ECOD therefore scores (and predicts) each test
  series in a call of its own: training data plus that one series. KNN and LOF fit the k-NN
  of corpus points among the others, so ``n_neighbors = min(default, N - 1)`` (defaults 5
  and 20).
* Unequal lengths, for ROCKAD and PyOD only: every series whose length differs from the
  corpus's maximum length is resampled linearly (``np.interp`` per channel, both ends kept) to
  that length before anything else. Our detectors get the list of series.
* Missing values (NaN inside series: DodgerLoopDay, DodgerLoopWeekend, MelbournePedestrian),
  for the peers only: filled first by ``novelty.interpolate_missing`` (linear per channel,
  edges held), the rule our detector applies itself (``missing="interpolate"``). Our detectors
  get the series with their NaN.
* A method that cannot run on a problem (PyOD's KNN and LOF need two corpus series; a corpus
  of one series occurs in Fungi and DiatomSizeReduction) records the error: "n/a" in the
  tables, and ROC-AUC 0.5 (chance) in the means and ranks of ``report`` (``--failed chance``,
  the default), so every method is averaged over the same problems; ``--failed leave-out``
  drops data sets where any shown method failed instead.

Metrics per (data set, class, method, seed): ROC-AUC and average precision of the anomaly
score with the anomaly as the positive class, the false-alarm rate and its nominal value, fit
seconds (including the peers' flattening of the corpus) and score seconds (score and predict,
including the flattening of the test series), corpus and test sizes. A method's first
problem in a process also pays numba compilation or cache loading (ROCKET, our kernels): the
report gives median fit times. A method that raises records the error (one line) and the run
goes on.

Results go to SQLite (``--store``), one committed row per problem and method, so an
interrupted run resumes and recomputes nothing done; ``--rerun METHOD`` recomputes a method,
``--retry-errors`` the rows that failed. A method is identified by its name and, for
``--extra``, its expression: a changed expression under a stored name is refused unless the
name is given to ``--rerun``, which then deletes the old rows. The store is the experiments
package's (:class:`experiments._store.DetectorBenchStore`, a ``SQLiteStore``): the limits
``--max-corpus``, ``--max-test``, ``--max-classes`` are its one setting (other limits are
refused), each run is logged in its ``runs`` table (revision, device, package versions), and
one run writes at a time (a second is refused at once; ``report`` reads during a run). A store
of the former layout (before issue 24) is converted in place by ``run``, read as is by
``report``.

    python benchmarks/bench_detector.py run [--half tuning] [--datasets BasicMotions ...]
        [--methods peers] [--extra gak_knn='KernelNoveltyDetector(kernel=GAK(), scorer="knn")']
    python benchmarks/bench_detector.py report --half confirmation [--methods ours_default ...]
        [--write-docs docs/results_detector.md] [--cd docs/cd_confirmation.png]
    python benchmarks/bench_detector.py halves     # the split, one line per data set
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_STORE = REPO / "results" / "bench_detector.sqlite"
MAX_CORPUS = 100
MAX_TEST = 300
MAX_CLASSES = 5
#: Seed of the tuning / confirmation split (:func:`halves`) and of the class choice.
SPLIT_SEED = 21
HALVES = ("tuning", "confirmation")
EPS = 1e-4
CLIP = 5.0
MAX_LENGTH = 100  # pooling: window 1 + (T - 1) // 100
BUILTIN = "builtin"  # the stored expression of a built-in method


class CLIError(Exception):
    """A bad command line or store state: printed as one line, no traceback."""


def default_data_dirs() -> list[Path]:
    """``$TSKERNELS_DATA`` (folders separated by the path separator), else ``data/uea`` and
    ``data/ucr`` of the checkout (git-ignored: link or unpack ``../shared/data`` there)."""
    env = os.environ.get("TSKERNELS_DATA")
    if env:
        return [Path(p) for p in env.split(os.pathsep) if p]
    return [REPO / "data" / "uea", REPO / "data" / "ucr"]


def halves(names_by_collection: dict[str, list[str]], seed: int = SPLIT_SEED) -> dict[str, str]:
    """Data set name -> "tuning" or "confirmation": within each collection, the sorted names
    permuted with ``seed``, the first ceil(n / 2) tuning. Depends on the names only."""
    out = {}
    for collection in sorted(names_by_collection):
        names = sorted(names_by_collection[collection])
        order = np.random.default_rng(seed).permutation(len(names))
        cut = (len(names) + 1) // 2
        for rank, i in enumerate(order):
            out[names[i]] = HALVES[0] if rank < cut else HALVES[1]
    return out


def choose_classes(labels: list[str], max_classes: int, seed: int = SPLIT_SEED) -> list[str]:
    """All labels when at most ``max_classes``, else a seeded choice of that many (in label
    order): fixed by the labels alone, before any result."""
    if len(labels) <= max_classes:
        return list(labels)
    keep = np.random.default_rng(seed).choice(len(labels), size=max_classes, replace=False)
    return [labels[i] for i in sorted(keep)]


# -- problems --------------------------------------------------------------------------------
@dataclass
class Problem:
    """One one-versus-rest problem: corpus of class ``cls``, test split, labels 1 = anomaly."""

    dataset: str
    cls: str
    corpus: object  # (N, T, d) array or list of (T_i, d) arrays
    test: object
    y: np.ndarray  # (n_test,), 1 = anomaly
    n_classes: int
    seed: int
    test_classes: np.ndarray = field(repr=False, default=None)


def _take(X, idx):
    idx = np.asarray(idx, dtype=int)
    return X[idx] if isinstance(X, np.ndarray) else [X[i] for i in idx]


def subsample_test(y: np.ndarray, max_test: int, seed: int) -> np.ndarray:
    """Sorted indices of a class-stratified subsample of at most ``max_test`` series."""
    n = len(y)
    if n <= max_test:
        return np.arange(n)
    from sklearn.model_selection import train_test_split

    _, counts = np.unique(y, return_counts=True)
    if counts.min() >= 2:  # scikit-learn's stratified split
        keep, _ = train_test_split(np.arange(n), train_size=max_test, stratify=y, random_state=seed)
        return np.sort(keep)
    return _stratified_quota(y, max_test, seed)


def _stratified_quota(y: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Sorted indices of ``size`` series, each class's share ``floor(size * n_c / n)`` plus one
    for the largest remainders (seeded draw within classes): for test splits holding a class
    of one series, which scikit-learn's stratified split refuses."""
    rng = np.random.default_rng(seed)
    labels, counts = np.unique(y, return_counts=True)
    quota = counts * size / len(y)
    take = np.floor(quota).astype(int)
    for i in np.argsort(-(quota - take), kind="stable")[: size - int(take.sum())]:
        take[i] += 1
    keep = [rng.choice(np.flatnonzero(y == c), size=k, replace=False) for c, k in zip(labels, take)]
    return np.sort(np.concatenate(keep))


def subsample_corpus(n: int, max_corpus: int, seed: int) -> np.ndarray:
    """Sorted indices of at most ``max_corpus`` of ``n`` series, without replacement."""
    if n <= max_corpus:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_corpus, replace=False))


def build_problems(
    X_train,
    y_train,
    X_test,
    y_test,
    dataset: str,
    seed: int = 0,
    classes: list[str] | None = None,
    max_corpus: int = MAX_CORPUS,
    max_test: int = MAX_TEST,
    max_classes: int | None = None,
) -> list[Problem]:
    """The one-versus-rest problems of one data set (every class, or ``classes``, or at most
    ``max_classes`` of them: :func:`choose_classes`)."""
    y_train, y_test = np.asarray(y_train).astype(str), np.asarray(y_test).astype(str)
    labels = sorted(set(y_train.tolist()), key=_natural)
    n_classes = len(labels)
    if classes:
        unknown = [c for c in classes if c not in labels]
        if unknown:
            raise CLIError(f"{dataset}: unknown class(es) {unknown}; classes are {labels}")
        labels = [c for c in labels if c in classes]
    elif max_classes is not None:
        labels = choose_classes(labels, max_classes)
        n_classes = len(labels)  # the problems of the data set
    t_idx = subsample_test(y_test, max_test, seed)
    test, yt = _take(X_test, t_idx), y_test[t_idx]
    out = []
    for c in labels:
        members = np.flatnonzero(y_train == c)
        pick = members[subsample_corpus(len(members), max_corpus, seed)]
        out.append(
            Problem(
                dataset=dataset,
                cls=c,
                corpus=_take(X_train, pick),
                test=test,
                y=(yt != c).astype(int),
                n_classes=n_classes,
                seed=seed,
                test_classes=yt,
            )
        )
    return out


def _natural(label: str):
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)


def load_problems(dataset: str, data_dir, seed: int = 0, classes=None, **kw) -> list[Problem]:
    """``data_dir``: the folder holding ``<dataset>/``, or a list of folders to search."""
    from experiments.data import load_uea

    dirs = data_dir if isinstance(data_dir, (list, tuple)) else [data_dir]
    root = next((Path(d) for d in dirs if (Path(d) / dataset).is_dir()), Path(dirs[0]))
    Xtr, ytr = load_uea(dataset, "train", data_dir=root)
    Xte, yte = load_uea(dataset, "test", data_dir=root)
    return build_problems(Xtr, ytr, Xte, yte, dataset, seed=seed, classes=classes, **kw)


def list_datasets(data_dir) -> list[str]:
    """Folders under ``data_dir`` that hold ``<Name>_TRAIN.ts``."""
    root = Path(data_dir)
    if not root.is_dir():
        raise CLIError(f"data directory {root} does not exist (set --data-dir or $TSKERNELS_DATA)")
    return sorted(p.name for p in root.iterdir() if (p / f"{p.name}_TRAIN.ts").is_file())


def list_collections(data_dirs) -> dict[str, list[str]]:
    """Folder name (the collection, e.g. "uea", "ucr") -> its data sets, for every folder."""
    out: dict[str, list[str]] = {}
    for d in data_dirs:
        out.setdefault(Path(d).name, []).extend(list_datasets(d))
    return out


# -- the peers' input ------------------------------------------------------------------------
def _lengths(X) -> list[int]:
    return [X.shape[1]] * len(X) if isinstance(X, np.ndarray) else [len(x) for x in X]


def resample_linear(x: np.ndarray, length: int) -> np.ndarray:
    """One series (T, d) resampled linearly to ``length`` steps on [0, 1] (ends kept)."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) == length:
        return x.copy()
    if len(x) == 1:
        return np.repeat(x, length, axis=0)
    src, dst = np.linspace(0.0, 1.0, len(x)), np.linspace(0.0, 1.0, length)
    return np.stack([np.interp(dst, src, x[:, j]) for j in range(x.shape[1])], axis=1)


def to_length(X, length: int) -> np.ndarray:
    """(n, length, d) array; series of another length are resampled linearly."""
    if isinstance(X, np.ndarray) and X.shape[1] == length:
        return np.asarray(X, dtype=np.float64)
    return np.stack([resample_linear(x, length) for x in X])


def fill_missing(X):
    """The series with NaN filled by :func:`novelty.interpolate_missing` (the peers' input;
    the same container back, untouched when there is no NaN)."""
    if isinstance(X, np.ndarray):
        if not np.isnan(X).any():
            return X
        from novelty import interpolate_missing

        return np.stack([interpolate_missing(x, name=f"X[{i}]") for i, x in enumerate(X)])
    if not any(np.isnan(x).any() for x in X):
        return X
    from novelty import interpolate_missing

    return [interpolate_missing(x, name=f"X[{i}]") for i, x in enumerate(X)]


class Flattener:
    """The PyOD input: resample to the corpus's maximum length (if lengths differ), average
    pool (window ``1 + (T - 1) // 100``), z-score per (time step, channel) with corpus
    statistics (eps 1e-4), clip to +-5, flatten to (n, T' d)."""

    def fit(self, corpus) -> Flattener:
        from tskernels.transforms import ZScore, pooling_window

        self.length_ = max(_lengths(corpus))
        self.window_ = pooling_window(self.length_, MAX_LENGTH)
        self.zscore_ = ZScore(eps=EPS).fit(self._pooled(corpus))
        return self

    def _pooled(self, X) -> np.ndarray:
        from tskernels.transforms import average_pool

        return average_pool(to_length(X, self.length_), self.window_)

    def transform(self, X) -> np.ndarray:
        from tskernels.transforms import clip

        Z = clip(self.zscore_.transform(self._pooled(X)), CLIP)
        return Z.reshape(len(Z), -1)


def flatten_pair(corpus, test) -> tuple[np.ndarray, np.ndarray]:
    f = Flattener().fit(corpus)
    return f.transform(corpus), f.transform(test)


# -- methods ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Method:
    """A benchmarked method: ``build(seed, n_corpus)`` gives an unfitted detector.

    family: "ours" (raw series, score_samples/predict +-1), "rockad" or "pyod".
    expr: the identity stored with the rows ("builtin", or an --extra expression).
    one_by_one: score (and predict) each test series in a call of its own, for a detector
    whose scores depend on the other series of the batch (PyOD's ECOD)."""

    name: str
    family: str
    build: Callable[[int, int], object]
    expr: str = BUILTIN
    one_by_one: bool = False


def _ours_default(seed: int, n: int):
    from novelty import KernelNoveltyDetector

    return KernelNoveltyDetector()


def _ours_auto(seed: int, n: int):
    from novelty import KernelNoveltyDetector

    return KernelNoveltyDetector(kernel="auto", scorer="auto")


def _rockad(seed: int, n: int):
    from aeon.anomaly_detection.collection import ROCKAD

    return ROCKAD(random_state=seed, n_neighbors=min(5, n))


class RockadMean:
    """aeon's ROCKAD (defaults) for seeds 0-4: ``predict`` returns the five score vectors."""

    SEEDS = (0, 1, 2, 3, 4)

    def __init__(self, n_neighbors: int):
        self.n_neighbors = n_neighbors

    def fit(self, X):
        from aeon.anomaly_detection.collection import ROCKAD

        self.models_ = [
            ROCKAD(random_state=s, n_neighbors=self.n_neighbors).fit(X) for s in self.SEEDS
        ]
        return self

    def predict(self, X) -> list[np.ndarray]:
        return [m.predict(X) for m in self.models_]


def _rockad_mean(seed: int, n: int):
    return RockadMean(n_neighbors=min(5, n))


class RocketKNN:
    """ROCKAD's recipe: sktime MiniRocket features (multivariate; variable-length version for
    unequal lengths), standardised on the corpus, anomaly score = mean Euclidean distance to
    the ``min(5, N)`` nearest corpus series. X: (n, T, d) array or list of (T_i, d)."""

    def __init__(self, random_state: int = 0, n_neighbors: int = 5):
        self.random_state = random_state
        self.n_neighbors = n_neighbors

    def _data(self, X):
        if isinstance(X, np.ndarray):
            return np.ascontiguousarray(X.transpose(0, 2, 1))
        import pandas as pd

        return [pd.DataFrame(x) for x in X]

    def fit(self, X):
        from sklearn.neighbors import NearestNeighbors
        from sklearn.preprocessing import StandardScaler
        from sktime.transformations.panel.rocket import (
            MiniRocketMultivariate,
            MiniRocketMultivariateVariable,
        )

        equal = isinstance(X, np.ndarray)
        cls = MiniRocketMultivariate if equal else MiniRocketMultivariateVariable
        self.rocket_ = cls(random_state=self.random_state, n_jobs=1)
        F = np.asarray(self.rocket_.fit_transform(self._data(X)), dtype=np.float64)
        self.scaler_ = StandardScaler().fit(F)
        k = min(self.n_neighbors, len(F))
        self.nn_ = NearestNeighbors(n_neighbors=k).fit(self.scaler_.transform(F))
        return self

    def predict(self, X) -> np.ndarray:
        F = np.asarray(self.rocket_.transform(self._data(X)), dtype=np.float64)
        dist, _ = self.nn_.kneighbors(self.scaler_.transform(F))
        return dist.mean(axis=1)


def _rockad_recipe(seed: int, n: int):
    return RocketKNN(random_state=seed)


def _pyod(name: str) -> Callable[[int, int], object]:
    def build(seed: int, n: int):
        if name == "knn":
            from pyod.models.knn import KNN

            return KNN(n_neighbors=min(5, n - 1))
        if name == "lof":
            from pyod.models.lof import LOF

            return LOF(n_neighbors=min(20, n - 1))
        if name == "iforest":
            from pyod.models.iforest import IForest

            return IForest(random_state=seed)
        if name == "ocsvm":
            from pyod.models.ocsvm import OCSVM

            return OCSVM()
        from pyod.models.ecod import ECOD

        return ECOD()

    return build


METHODS: dict[str, Method] = {
    "ours_default": Method("ours_default", "ours", _ours_default),
    "ours_auto": Method("ours_auto", "ours", _ours_auto),
    "rockad": Method("rockad", "rockad", _rockad),
    "rockad_mean5": Method("rockad_mean5", "rockad", _rockad_mean),
    "rockad_recipe": Method("rockad_recipe", "recipe", _rockad_recipe),
    **{
        f"pyod_{p}": Method(f"pyod_{p}", "pyod", _pyod(p), one_by_one=p == "ecod")
        for p in ("knn", "iforest", "lof", "ocsvm", "ecod")
    },
}
GROUPS = {
    "ours": ["ours_default", "ours_auto"],
    "peers": ["rockad", "rockad_mean5", "rockad_recipe"]
    + [m for m in METHODS if m.startswith("pyod_")],
}


def expr_namespace() -> dict:
    """Names in scope of an --extra expression."""
    import density
    import novelty
    import tskernels

    ns: dict = {}
    for mod in (tskernels, novelty):
        ns.update({k: getattr(mod, k) for k in mod.__all__})
    ns.update(np=np, novelty=novelty, tskernels=tskernels, density=density)
    return ns


def extra_method(name: str, expr: str) -> Method:
    """An --extra method: ``expr`` evaluated afresh per problem (checked once here)."""
    if not name.isidentifier():
        raise CLIError(f"--extra {name}=...: the name must be an identifier")
    if name in METHODS or name in GROUPS:
        raise CLIError(f"--extra {name}=...: {name!r} is a built-in method or group name")
    try:
        code = compile(expr, f"<--extra {name}>", "eval")
        eval(code, expr_namespace())  # noqa: S307 - the user's own expression, checked early
    except Exception as exc:  # noqa: BLE001 - one-line CLI error
        raise CLIError(f"--extra {name}: {type(exc).__name__}: {exc}") from None

    def build(seed: int, n: int):
        det = eval(code, expr_namespace())  # noqa: S307
        params = det.get_params(deep=False) if hasattr(det, "get_params") else {}
        if "random_state" in params and params["random_state"] is None:
            det.set_params(random_state=seed)
        return det

    return Method(name, "ours", build, expr)


def parse_extra(spec: str) -> Method:
    name, sep, expr = spec.partition("=")
    if not sep or not name.strip() or not expr.strip():
        raise CLIError(f"--extra must be NAME=EXPR, got {spec!r}")
    return extra_method(name.strip(), expr.strip())


# -- evaluation ------------------------------------------------------------------------------
def _auc_ap(y: np.ndarray, score: np.ndarray) -> tuple[float, float]:
    from sklearn.metrics import average_precision_score, roc_auc_score

    score = np.asarray(score, dtype=np.float64).ravel()
    if score.shape != y.shape:
        raise ValueError(f"{score.shape[0]} scores for {y.shape[0]} test series")
    if not np.isfinite(score).all():
        raise FloatingPointError(f"{int((~np.isfinite(score)).sum())} non-finite scores")
    return float(roc_auc_score(y, score)), float(average_precision_score(y, score))


def _nominal_rate(det) -> float | None:
    """``contamination`` if the detector has a numeric one, else ``1 - quantile``, else None."""
    from numbers import Real

    c = getattr(det, "contamination", None)
    if isinstance(c, Real) and not isinstance(c, bool):
        return float(c)
    q = getattr(det, "quantile", None)
    if isinstance(q, Real) and not isinstance(q, bool):
        return 1.0 - float(q)
    return None


def evaluate(method: Method, prob: Problem) -> dict:
    """Fit on the corpus, score the test set: the metrics of one row (raises on failure)."""
    n = len(prob.corpus)
    normal = prob.y == 0
    far = nominal = None
    t0 = time.perf_counter()
    if method.family == "ours":
        det = method.build(prob.seed, n)
        det.fit(prob.corpus)
        t1 = time.perf_counter()
        score = -np.asarray(det.score_samples(prob.test), dtype=np.float64)
        pred = np.asarray(det.predict(prob.test))
        t2 = time.perf_counter()
        far = float(np.mean(pred[normal] == -1))
        nominal = _nominal_rate(det)
    else:
        corpus, test = fill_missing(prob.corpus), fill_missing(prob.test)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            det = method.build(prob.seed, n)
            if method.family == "recipe":  # unequal lengths resampled, as for ROCKAD
                length = max(_lengths(corpus))
                det.fit(to_length(corpus, length))
                t1 = time.perf_counter()
                score = det.predict(to_length(test, length))
                t2 = time.perf_counter()
            elif method.family == "rockad":
                length = max(_lengths(corpus))
                det.fit(to_length(corpus, length).transpose(0, 2, 1))
                t1 = time.perf_counter()
                score = det.predict(to_length(test, length).transpose(0, 2, 1))
                t2 = time.perf_counter()
            else:
                flat = Flattener().fit(corpus)
                det.fit(flat.transform(corpus))
                t1 = time.perf_counter()
                Ft = flat.transform(test)
                if method.one_by_one:
                    rows = [Ft[i : i + 1] for i in range(len(Ft))]
                    score = np.concatenate([det.decision_function(r) for r in rows])
                    pred = np.concatenate([det.predict(r) for r in rows])
                else:
                    score = det.decision_function(Ft)
                    pred = np.asarray(det.predict(Ft))
                t2 = time.perf_counter()
                far, nominal = float(np.mean(pred[normal] == 1)), float(det.contamination)
    if isinstance(score, list):  # several seeds: mean of the figures of those that scored
        finite = [s for s in score if np.isfinite(np.asarray(s, dtype=np.float64)).all()]
        figures = [_auc_ap(prob.y, s) for s in (finite or score[:1])]  # none: raises
        auc, ap = (float(np.mean(v)) for v in zip(*figures))
        params = {
            "auc_per_seed": [round(a, 6) for a, _ in figures],
            "seeds_with_non_finite_scores": len(score) - len(finite),
        }
    else:
        auc, ap = _auc_ap(prob.y, score)
        params = det.get_params(deep=False) if hasattr(det, "get_params") else {}
        table = getattr(det, "selection_", None)
        if table is not None and "score" in table:  # kernel="auto": the candidates' proxies
            keep = [c for c in ("kernel", "scorer", "params", "score", "z", "chosen") if c in table]
            params = {**params, "selection": table[keep].to_dict("records")}
    return dict(
        auc=auc,
        ap=ap,
        far=far,
        far_nominal=None if nominal is None else float(nominal),
        fit_s=t1 - t0,
        score_s=t2 - t1,
        params=json.dumps(
            {k: (v if k == "selection" else repr(v)) for k, v in params.items()}, default=repr
        ),
    )


# -- storage ---------------------------------------------------------------------------------
def store_setting(max_corpus: int, max_test: int, max_classes: int) -> dict:
    """The store's setting: the subsampling limits, part of every row's problem."""
    return {"max_corpus": max_corpus, "max_test": max_test, "max_classes": max_classes}


def open_store(path, mode: str = "write"):
    """The results store (:class:`experiments._store.DetectorBenchStore`) at ``path``; a file
    that cannot be used is a one-line :class:`CLIError`."""
    from experiments._store import DetectorBenchStore, StoreError

    try:
        return DetectorBenchStore(path, mode=mode)
    except StoreError as exc:
        raise CLIError(str(exc)) from None


def check_settings(store, settings: dict) -> str:
    """The subsampling limits are part of every row's problem: refuse to mix them. Returns
    the setting id the rows are stamped with."""
    from experiments._store import StoreError

    for stored in store.settings().values():
        for k, v in settings.items():
            if k in stored and stored[k] != v:
                raise CLIError(
                    f"the store was made with --{k.replace('_', '-')} {stored[k]}, not {v}: "
                    "use the same value or another --store"
                )
    try:
        return store.add_setting(settings)
    except StoreError as exc:  # a setting of other keys
        raise CLIError(str(exc)) from None


def register_methods(store, methods: list[Method], rerun: set[str]) -> None:
    """Record each method's identity; a changed expression is refused unless in ``rerun``,
    which deletes the method's old rows. Rows of a rerun method are replaced as they come."""
    stored = store.methods()
    for m in methods:
        old = stored.get(m.name)
        if old is not None and old != m.expr and m.name not in rerun:
            raise CLIError(
                f"method {m.name!r} is stored with expression {old!r}, now {m.expr!r}: "
                f"use another name, or --rerun {m.name} to replace its rows"
            )
    for m in methods:
        old = stored.get(m.name)
        store.set_method(m.name, m.expr, drop_rows=old is not None and old != m.expr)


def write_row(store, row: dict) -> None:
    """Commit one result row (a hand-made store), stamped with the store's setting (the
    default limits when it has none yet) and the row's ``git_rev`` and ``finished``."""
    sid = next(iter(store.settings()), None)
    if sid is None:
        sid = store.add_setting(store_setting(MAX_CORPUS, MAX_TEST, MAX_CLASSES))
    stamp = {"setting": sid, "revision": row.get("git_rev"), "device": row.get("device"),
             "created": row.get("finished")}  # fmt: skip
    store.add_results([row], stamp)


# -- run -------------------------------------------------------------------------------------
def resolve_methods(names: list[str] | None, extras: list[Method]) -> list[Method]:
    table = {**METHODS, **{m.name: m for m in extras}}
    if len(table) < len(METHODS) + len(extras):
        raise CLIError("--extra names must be distinct")
    if not names:
        return list(table.values())
    out: list[str] = []
    for n in names:
        if n in GROUPS:
            out.extend(GROUPS[n])
        elif n in table:
            out.append(n)
        else:
            raise CLIError(
                f"unknown method {n!r}; available: {', '.join(table)} (groups: {', '.join(GROUPS)})"
            )
    return [table[n] for n in dict.fromkeys(out)]


def run_benchmark(
    datasets: list[str],
    methods: list[Method],
    store,
    data_dir,
    seeds: list[int] = (0,),
    classes: list[str] | None = None,
    rerun: list[str] = (),
    retry_errors: bool = False,
    max_corpus: int = MAX_CORPUS,
    max_test: int = MAX_TEST,
    max_classes: int = MAX_CLASSES,
    loader: Callable | None = None,
    log=print,
) -> int:
    """Run (or resume) every (data set, class, method, seed) not done; returns rows written.

    The rows go to the experiments store (:class:`experiments._store.DetectorBenchStore`)
    through its :class:`~experiments._recorder.Recorder`: each problem's row committed in one
    transaction as it finishes, stamped with the setting, revision and device; the run in
    the ``runs`` table; the file locked against a second writer.

    ``loader(dataset, data_dir, seed, classes, max_corpus=, max_test=, max_classes=)`` ->
    problems (default
    ``load_problems``)."""
    loader = loader or load_problems
    rerun = set(rerun)
    unknown = rerun - {m.name for m in methods}
    if unknown:
        raise CLIError(f"--rerun {', '.join(sorted(unknown))}: not among the methods to run")
    from experiments._recorder import Provenance, Recorder

    db = open_store(store)
    try:
        sid = check_settings(db, store_setting(max_corpus, max_test, max_classes))
        register_methods(db, methods, rerun)
        done = db.keys(sid, failed=not retry_errors)
        written, fresh = 0, set()  # fresh: keys rerun in this call
        with Recorder(db, Provenance.current(), setting=sid) as recorder:
            for seed in seeds:
                for ds in datasets:
                    problems = loader(
                        ds,
                        data_dir,
                        seed,
                        classes,
                        max_corpus=max_corpus,
                        max_test=max_test,
                        max_classes=max_classes,
                    )
                    for prob in problems:
                        for m in methods:
                            key = (ds, prob.cls, m.name, seed)
                            if key in fresh or (key in done and m.name not in rerun):
                                continue
                            row = dict(
                                dataset=ds,
                                **{"class": prob.cls},
                                method=m.name,
                                seed=seed,
                                n_classes=prob.n_classes,
                                n_corpus=len(prob.corpus),
                                n_test=len(prob.test),
                                expr=m.expr,
                            )
                            try:
                                row.update(evaluate(m, prob))
                                msg = (
                                    f"AUC {row['auc']:.3f}  FAR {_fmt(row['far'], '.2f')}"
                                    f"  fit {row['fit_s']:.2f}s  score {row['score_s']:.2f}s"
                                )
                            except Exception as exc:  # noqa: BLE001 - recorded, run goes on
                                first = (str(exc).strip().splitlines() or [""])[0]
                                row["error"] = f"{type(exc).__name__}: {first}"[:500]
                                msg = f"ERROR {row['error']}"
                            recorder.commit([row])
                            fresh.add(key)
                            written += 1
                            log(f"{ds} [{prob.cls}] seed {seed} {m.name}: {msg}")
        return written
    finally:
        db.close()


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


# -- report ----------------------------------------------------------------------------------
def fetch_rows(store, seeds: list[int] | None = None) -> list[dict]:
    """The stored rows (of ``seeds`` only if given), read from the store without locking it."""
    if not Path(store).is_file():
        raise CLIError(f"no store at {Path(store)}: run the benchmark first")
    db = open_store(store, mode="read")
    try:
        return db.rows(seeds)
    finally:
        db.close()


def _method_order(names) -> list[str]:
    builtin = [m for m in METHODS if m in names]
    return builtin + sorted(set(names) - set(builtin))


def summarize(
    rows: list[dict],
    methods: list[str] | None = None,
    failed: str = "leave-out",
    reference: str | None = None,
    tie: float = 0.005,
) -> dict:
    """Per data set and method: mean ROC-AUC over classes (and seeds) where complete.

    A (data set, method) is complete when every (class, seed) of the data set has a row
    (classes counted from ``n_classes``, seeds from the rows of any shown method there) with an
    AUC, or, with ``failed="chance"``, a row at all: a failed problem (error, no AUC) then
    counts as ROC-AUC 0.5. Only data sets complete for every shown method enter the mean, the
    mean rank (rank 1 = highest AUC, ties averaged), the wins/ties/losses of each method
    against ``reference`` (a tie: data-set means within ``tie``) and the second table (mean
    |FAR - nominal| over problems with corpus size >= 20, median fit and score seconds,
    failed problems)."""
    from scipy.stats import rankdata

    if failed not in ("leave-out", "chance"):
        raise CLIError(f"--failed must be leave-out or chance, got {failed!r}")
    methods = methods or _method_order({r["method"] for r in rows})
    rows = [r for r in rows if r["method"] in methods]
    datasets = sorted({r["dataset"] for r in rows})
    auc: dict = {}
    n_classes: dict = {}
    seeds: dict = {}
    n_failed = {m: 0 for m in methods}
    for r in rows:
        n_classes[r["dataset"]] = r["n_classes"]
        seeds.setdefault(r["dataset"], set()).add(r["seed"])
        value = r["auc"]
        if value is None:
            n_failed[r["method"]] += 1
            if failed == "chance":
                value = 0.5
        if value is not None:
            auc.setdefault((r["dataset"], r["method"]), {})[(r["class"], r["seed"])] = value
    cell, progress = {}, {}
    for d in datasets:
        need = n_classes[d] * len(seeds[d])
        for m in methods:
            got = auc.get((d, m), {})
            progress[(d, m)] = (len(got), need)
            if len(got) >= need:
                cell[(d, m)] = float(np.mean(list(got.values())))
    complete = [d for d in datasets if all((d, m) in cell for m in methods)]
    mean = {
        m: float(np.mean([cell[(d, m)] for d in complete])) if complete else None for m in methods
    }
    ranks = {m: [] for m in methods}
    for d in complete:
        for m, r in zip(methods, rankdata([-cell[(d, m)] for m in methods])):
            ranks[m].append(float(r))
    mean_rank = {m: float(np.mean(ranks[m])) if ranks[m] else None for m in methods}
    wtl = {}
    if reference in methods:
        for m in methods:
            diff = [cell[(d, m)] - cell[(d, reference)] for d in complete]
            wtl[m] = (
                sum(x > tie for x in diff),
                sum(abs(x) <= tie for x in diff),
                sum(x < -tie for x in diff),
            )
    in_complete = [r for r in rows if r["dataset"] in complete and r["auc"] is not None]
    far_gap, fit_med, score_med = {}, {}, {}
    for m in methods:
        mine = [r for r in in_complete if r["method"] == m]
        gaps = [
            abs(r["far"] - r["far_nominal"])
            for r in mine
            if r["n_corpus"] >= 20 and r["far"] is not None and r["far_nominal"] is not None
        ]
        far_gap[m] = (float(np.mean(gaps)) if gaps else None, len(gaps))
        fit_med[m] = float(np.median([r["fit_s"] for r in mine])) if mine else None
        score = [r.get("score_s") for r in mine if r.get("score_s") is not None]
        score_med[m] = float(np.median(score)) if score else None
    return dict(
        methods=methods,
        datasets=datasets,
        complete=complete,
        cell=cell,
        progress=progress,
        mean=mean,
        mean_rank=mean_rank,
        wtl=wtl,
        reference=reference,
        far_gap=far_gap,
        fit_median=fit_med,
        score_median=score_med,
        n_failed=n_failed,
    )


def score_cells(methods, values, best, progress) -> list[str]:
    """One table row's cells: each method's score (bold when it equals ``best``; None: no
    bold), or ``got/need`` from ``progress(method)`` for a cell still running."""
    cells = []
    for m, v in zip(methods, values):
        if v is None:
            got, need = progress(m)
            cells.append(f"{got}/{need}")
        else:
            cells.append(f"**{v:.3f}**" if v == best else f"{v:.3f}")
    return cells


def report_markdown(
    rows: list[dict],
    methods: list[str] | None = None,
    failed: str = "leave-out",
    reference: str | None = None,
) -> str:
    s = summarize(rows, methods, failed=failed, reference=reference)
    ms = s["methods"]
    if not ms or not s["datasets"]:
        return "no results yet"
    lines = [
        "Mean ROC-AUC over the classes of each data set (anomaly = any other class); "
        "`k/n`: classes done so far.",
        "",
        "| data set | " + " | ".join(ms) + " |",
        "|---" * (len(ms) + 1) + "|",
    ]
    for d in s["datasets"]:
        vals = [s["cell"].get((d, m)) for m in ms]
        best = max(vals) if d in s["complete"] and len(ms) > 1 else None
        cells = score_cells(ms, vals, best, lambda m, d=d: s["progress"][(d, m)])
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    lines.append("| **mean** | " + " | ".join(_fmt(s["mean"][m], ".3f") for m in ms) + " |")
    lines.append(
        "| **mean rank** | " + " | ".join(_fmt(s["mean_rank"][m], ".2f") for m in ms) + " |"
    )
    if s["wtl"]:
        lines.append(
            f"| **W/T/L vs {s['reference']}** | "
            + " | ".join("{}/{}/{}".format(*s["wtl"][m]) for m in ms)
            + " |"
        )
    left = [d for d in s["datasets"] if d not in s["complete"]]
    failed_note = "; a failed problem (n/a) counts as ROC-AUC 0.5" if failed == "chance" else ""
    lines += [
        "",
        f"Mean and rank over {len(s['complete'])} data set(s)"
        + failed_note
        + (f"; left out (not complete for every method): {', '.join(left)}." if left else ".")
        + (
            " W/T/L: data-set means more than 0.005 above / within 0.005 / below."
            if s["wtl"]
            else ""
        ),
        "",
        "| method | mean abs(false alarm - nominal), corpus >= 20 | problems | median fit s "
        "| median score s | failed problems |",
        "|---|---|---|---|---|---|",
    ]
    for m in ms:
        gap, k = s["far_gap"][m]
        lines.append(
            f"| {m} | {_fmt(gap, '.3f')} | {k} | {_fmt(s['fit_median'][m], '.2f')} "
            f"| {_fmt(s['score_median'][m], '.2f')} | {s['n_failed'][m]} |"
        )
    return "\n".join(lines)


def write_cd_diagram(rows: list[dict], methods: list[str], path, failed: str, title: str) -> str:
    """aeon's critical-difference diagram (Wilcoxon-Holm, alpha 0.05) of the data-set means;
    returns a line for the docs (or why none was drawn)."""
    s = summarize(rows, methods, failed=failed)
    if len(s["complete"]) < 5 or len(methods) < 2:
        return f"no critical-difference diagram: {len(s['complete'])} complete data set(s)"
    import warnings as _w

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from aeon.visualisation import plot_critical_difference

    M = np.array([[s["cell"][(d, m)] for m in methods] for d in s["complete"]])
    with _w.catch_warnings():
        _w.simplefilter("ignore", UserWarning)
        fig, _ = plot_critical_difference(
            M, list(methods), alpha=0.05, test="wilcoxon", correction="holm", width=7
        )
    fig.suptitle(title, fontsize=9, y=1.02)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return f"critical-difference diagram over {len(s['complete'])} data sets: {path}"


def docs_header(argv: list[str], datasets: list[str], settings: dict | None = None) -> str:
    cmd = "python benchmarks/bench_detector.py " + " ".join(shlex.quote(a) for a in argv)
    st = {"max_corpus": MAX_CORPUS, "max_test": MAX_TEST, "max_classes": MAX_CLASSES}
    st.update(settings or {})
    return "\n".join(
        [
            "# Detector benchmark: KernelNoveltyDetector vs ROCKAD vs PyOD",
            "",
            f"Produced by `{cmd}` on {datetime.date.today().isoformat()}, machine: "
            f"{os.cpu_count()} cores ({platform.machine()}, {platform.system()}), from the store "
            "written by `python benchmarks/bench_detector.py run` (protocol in that script's "
            f"docstring: one-versus-rest, at most {st['max_classes']} classes per data set, "
            f"corpus <= {st['max_corpus']} training series of the class, test <= "
            f"{st['max_test']} series of the test split, ROC-AUC with the anomaly as positive).",
            "",
            f"Data sets: {', '.join(datasets)}.",
            "",
        ]
    )


# -- CLI -------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python benchmarks/bench_detector.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="run (or resume) the benchmark")
    r.add_argument("--datasets", nargs="+", default=None)
    r.add_argument("--half", choices=HALVES + ("all",), default="all")
    r.add_argument("--classes", nargs="+", default=None, help="only these classes (labels)")
    r.add_argument("--methods", nargs="+", default=None, help="names or groups (ours, peers)")
    r.add_argument("--extra", action="append", default=[], metavar="NAME=EXPR")
    r.add_argument("--seeds", nargs="+", type=int, default=[0])
    r.add_argument(
        "--data-dir",
        nargs="+",
        default=None,
        help="default $TSKERNELS_DATA, else data/uea data/ucr",
    )
    r.add_argument("--store", default=str(DEFAULT_STORE))
    r.add_argument("--max-corpus", type=int, default=MAX_CORPUS)
    r.add_argument("--max-test", type=int, default=MAX_TEST)
    r.add_argument("--max-classes", type=int, default=MAX_CLASSES)
    r.add_argument("--rerun", nargs="+", default=[], metavar="METHOD")
    r.add_argument("--retry-errors", action="store_true", help="recompute rows that failed")
    r.add_argument("--threads", type=int, default=None, help="torch/numba/BLAS threads")
    q = sub.add_parser("report", help="print the markdown tables")
    q.add_argument("--store", default=str(DEFAULT_STORE))
    q.add_argument("--methods", nargs="+", default=None, help="columns, in this order")
    q.add_argument("--seeds", nargs="+", type=int, default=[0])
    q.add_argument("--half", choices=HALVES + ("all",), default="all")
    q.add_argument("--data-dir", nargs="+", default=None, help="where the halves are read from")
    q.add_argument("--failed", choices=("chance", "leave-out"), default="chance")
    q.add_argument("--reference", default="rockad", help="method of the W/T/L row")
    q.add_argument("--cd", default=None, metavar="PNG", help="critical-difference diagram")
    q.add_argument("--write-docs", default=None, metavar="PATH")
    h = sub.add_parser("halves", help="print the tuning / confirmation split")
    h.add_argument("--data-dir", nargs="+", default=None)
    return p


def _data_dirs(args) -> list[Path]:
    return [Path(d) for d in args.data_dir] if args.data_dir else default_data_dirs()


def half_of(data_dirs) -> dict[str, str]:
    return halves(list_collections(data_dirs))


def _set_threads(n: int) -> None:
    if n < 1:
        raise CLIError(f"--threads must be >= 1, got {n}")
    import numba
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(n)
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    threadpool_limits(n)


def _cli_run(args) -> None:
    for k in ("max_corpus", "max_test"):
        if getattr(args, k) < 1:
            raise CLIError(f"--{k.replace('_', '-')} must be >= 1, got {getattr(args, k)}")
    if args.threads is not None:
        _set_threads(args.threads)
    if args.max_classes < 1:
        raise CLIError(f"--max-classes must be >= 1, got {args.max_classes}")
    data_dirs = _data_dirs(args)
    split = half_of(data_dirs)
    available = sorted(split, key=str.lower)
    datasets = args.datasets or available
    missing = [d for d in datasets if d not in available]
    if missing:
        where = ", ".join(str(d) for d in data_dirs)
        raise CLIError(f"unknown data set(s) {missing} in {where}; available: {available}")
    if args.half != "all":
        datasets = [d for d in datasets if split[d] == args.half]
    if not datasets:
        raise CLIError(f"no data sets in {', '.join(str(d) for d in data_dirs)}")
    extras = [parse_extra(e) for e in args.extra]
    methods = resolve_methods(args.methods, extras)
    n = run_benchmark(
        datasets,
        methods,
        args.store,
        data_dirs,
        seeds=args.seeds,
        classes=args.classes,
        rerun=args.rerun,
        retry_errors=args.retry_errors,
        max_corpus=args.max_corpus,
        max_test=args.max_test,
        max_classes=args.max_classes,
    )
    print(f"{n} row(s) written to {args.store}")


def _cli_report(args, argv: list[str]) -> None:
    rows = fetch_rows(args.store, args.seeds)
    if args.half != "all":
        split = half_of(_data_dirs(args))
        rows = [r for r in rows if split.get(r["dataset"]) == args.half]
    if args.methods:
        stored = {r["method"] for r in rows}
        unknown = [m for m in args.methods if m not in stored]
        if unknown:
            raise CLIError(f"no rows for method(s) {unknown} (seeds {args.seeds}) in {args.store}")
    text = report_markdown(rows, args.methods, failed=args.failed, reference=args.reference)
    if args.cd:
        methods = args.methods or _method_order({r["method"] for r in rows})
        title = f"{args.half} half" if args.half != "all" else "all data sets"
        text += "\n\n" + write_cd_diagram(rows, methods, args.cd, args.failed, title)
    print(text)
    if args.write_docs:
        datasets = sorted({r["dataset"] for r in rows})
        Path(args.write_docs).write_text(docs_header(argv, datasets) + "\n" + text + "\n")
        print(f"written to {args.write_docs}")


def _cli_halves(args) -> None:
    split = half_of(_data_dirs(args))
    for half in HALVES:
        names = sorted((d for d, h in split.items() if h == half), key=str.lower)
        print(f"{half} ({len(names)}): {', '.join(names)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        if args.action == "run":
            _cli_run(args)
        elif args.action == "halves":
            _cli_halves(args)
        else:
            _cli_report(args, argv)
    except (CLIError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
