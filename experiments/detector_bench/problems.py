"""The benchmark's data sets, their tuning / confirmation halves and the one-versus-rest
problems (protocol: :mod:`experiments.detector_bench`). Everything here is fixed by the data
sets' names and labels alone, before any result."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import CLIError

REPO = Path(__file__).resolve().parents[2]
MAX_CORPUS = 100
MAX_TEST = 300
MAX_CLASSES = 5
#: Seed of the tuning / confirmation split (:func:`halves`) and of the class choice.
SPLIT_SEED = 21
HALVES = ("tuning", "confirmation")

__all__ = [
    "HALVES", "MAX_CLASSES", "MAX_CORPUS", "MAX_TEST", "SPLIT_SEED", "Problem", "build_problems",
    "choose_classes", "default_data_dirs", "half_of", "halves", "list_collections",
    "list_datasets", "load_problems", "natural_key", "subsample_corpus", "subsample_test", "take",
]  # fmt: skip


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


def half_of(data_dirs) -> dict[str, str]:
    """:func:`halves` of the data sets found in ``data_dirs`` (one collection per folder)."""
    return halves(list_collections(data_dirs))


def choose_classes(labels: list[str], max_classes: int, seed: int = SPLIT_SEED) -> list[str]:
    """All labels when at most ``max_classes``, else a seeded choice of that many (in label
    order): fixed by the labels alone, before any result."""
    if len(labels) <= max_classes:
        return list(labels)
    keep = np.random.default_rng(seed).choice(len(labels), size=max_classes, replace=False)
    return [labels[i] for i in sorted(keep)]


@dataclass
class Problem:
    """One one-versus-rest problem: corpus of class ``cls``, test split, labels 1 = anomaly.
    The series keep the caller's container and layout (an array or a list of series)."""

    dataset: str
    cls: str
    corpus: object  # (N, T, d) array or list of (T_i, d) arrays
    test: object
    y: np.ndarray  # (n_test,), 1 = anomaly
    n_classes: int
    seed: int
    test_classes: np.ndarray = field(repr=False, default=None)


def take(X, idx):
    """The series ``idx`` of a collection (array or list), in the same container."""
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
    n_take = np.floor(quota).astype(int)
    for i in np.argsort(-(quota - n_take), kind="stable")[: size - int(n_take.sum())]:
        n_take[i] += 1
    keep = [
        rng.choice(np.flatnonzero(y == c), size=k, replace=False) for c, k in zip(labels, n_take)
    ]
    return np.sort(np.concatenate(keep))


def subsample_corpus(n: int, max_corpus: int, seed: int) -> np.ndarray:
    """Sorted indices of at most ``max_corpus`` of ``n`` series, without replacement."""
    if n <= max_corpus:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_corpus, replace=False))


def natural_key(label: str):
    """Sort key of a class label: numbers by value first, then the other labels."""
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)


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
    ``max_classes`` of them: :func:`choose_classes`). The series may be in any layout (the
    aeon route passes (n, d, T)): only whole series are picked."""
    y_train, y_test = np.asarray(y_train).astype(str), np.asarray(y_test).astype(str)
    labels = sorted(set(y_train.tolist()), key=natural_key)
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
    test, yt = take(X_test, t_idx), y_test[t_idx]
    out = []
    for c in labels:
        members = np.flatnonzero(y_train == c)
        pick = members[subsample_corpus(len(members), max_corpus, seed)]
        out.append(
            Problem(
                dataset=dataset,
                cls=c,
                corpus=take(X_train, pick),
                test=test,
                y=(yt != c).astype(int),
                n_classes=n_classes,
                seed=seed,
                test_classes=yt,
            )
        )
    return out


def load_problems(dataset: str, data_dir, seed: int = 0, classes=None, **kw) -> list[Problem]:
    """:func:`build_problems` of ``<data_dir>/<dataset>/<dataset>_{TRAIN,TEST}.ts``;
    ``data_dir``: the folder holding ``<dataset>/``, or a list of folders to search."""
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
