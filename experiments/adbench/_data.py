"""ADBench data: the ``.npz`` files (``X``, ``y``; 1 = anomaly), the split and the scales.

The data folder is ``--data-dir`` when given, else the environment variable
``ADBENCH_DATA``, else :data:`DEFAULT_DATA_DIR` relative to the repository root.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .._options import ConfigError

__all__ = [
    "DEFAULT_DATA_DIR",
    "ENV_VAR",
    "MAX_ROWS",
    "data_dir",
    "list_datasets",
    "load_split",
    "check_dataset",
    "median_distance",
    "nn_spacing",
    "read_npz",
    "resolve_names",
    "split_indices",
    "sqdist_blocks",
]

#: The repository root (the folder holding ``experiments/``).
ROOT = Path(__file__).resolve().parents[2]
ENV_VAR = "ADBENCH_DATA"
#: The default data folder, inside the repository root and ignored by git (copy or link the
#: ``.npz`` files there); ``ADBENCH_DATA`` or ``--data-dir`` name another.
DEFAULT_DATA_DIR = "data/adbench"
MAX_ROWS = 10_000


def data_dir(given: str | os.PathLike | None = None) -> Path:
    """The data folder: ``given``, else $ADBENCH_DATA, else the default; a ConfigError
    when it is not a folder."""
    if given is not None:
        path, how = Path(given), "--data-dir"
    elif os.environ.get(ENV_VAR):
        path, how = Path(os.environ[ENV_VAR]), f"${ENV_VAR}"
    else:
        path, how = ROOT / DEFAULT_DATA_DIR, "the default data folder"
    if not path.is_dir():
        raise ConfigError(f"{how} {path}: no such folder (name one with --data-dir or ${ENV_VAR})")
    return path


def list_datasets(folder: Path) -> list[str]:
    """Data set names (file stems such as '6_cardio'), smallest file first."""
    files = sorted(Path(folder).glob("*.npz"), key=lambda p: p.stat().st_size)
    return [p.stem for p in files]


def resolve_names(requested: list[str] | None, available: list[str]) -> list[str]:
    """Match '6_cardio', 'cardio' or 'Cardio' against the available stems."""
    if not requested:
        return available
    out = []
    for r in requested:
        hits = [a for a in available if a == r or a.split("_", 1)[-1].lower() == r.lower()]
        if not hits:
            raise ConfigError(f"unknown data set {r!r}; available: {', '.join(available)}")
        out.extend(hits)
    return list(dict.fromkeys(out))


def read_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(X float64 (n, d), y int (n,) in {0, 1}) of one data file; a ConfigError naming the
    file and the problem for anything else: not an ``.npz``, no ``X`` or ``y``, X not 2-D or
    not finite real numbers, y not 1-D of n labels 0/1."""
    name = Path(path).name
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{name}: not a readable .npz file ({exc})") from None
    with z:
        missing = [k for k in ("X", "y") if k not in z.files]
        if missing:
            raise ConfigError(
                f"{name} has no array {' or '.join(map(repr, missing))} (it holds "
                f"{', '.join(map(repr, z.files)) or 'nothing'}); ADBench files hold X (n, d) "
                "and y (n,), 1 = anomaly"
            )
        X, y = z["X"], z["y"]
    if X.ndim != 2 or X.shape[1] < 1:
        raise ConfigError(f"{name}: X must be 2-D (rows, columns), got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise ConfigError(f"{name}: X must hold real numbers, got dtype {X.dtype}")
    X = X.astype(np.float64)
    if not np.isfinite(X).all():
        raise ConfigError(f"{name}: X holds {int((~np.isfinite(X)).sum())} NaN or inf values")
    y = np.asarray(y)
    if y.ndim == 2 and 1 in y.shape:
        y = y.ravel()
    if y.ndim != 1 or len(y) != len(X):
        raise ConfigError(f"{name}: y must hold one label per row of X ({len(X)}), got shape "
                          f"{y.shape}")  # fmt: skip
    if y.dtype.kind not in "biuf" or not np.isin(y, (0, 1)).all():
        raise ConfigError(f"{name}: y must hold labels 0 (normal) and 1 (anomaly), got values "
                          f"{np.unique(y)[:5].tolist()}")  # fmt: skip
    return X, y.astype(int)


def _subsample(y: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    if len(y) > MAX_ROWS:
        idx = train_test_split(idx, train_size=MAX_ROWS, stratify=y, random_state=seed)[0]
    return idx


def split_indices(y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train, test) of the protocol's split of labels y: a stratified
    subsample of at most :data:`MAX_ROWS` rows, then a stratified 70/30 split (seeded)."""
    from sklearn.model_selection import train_test_split

    idx = _subsample(y, seed)
    tr, te = train_test_split(idx, test_size=0.3, stratify=y[idx], random_state=seed)
    return tr, te


def check_dataset(path: Path, seeds: list[int]) -> None:
    """A ConfigError naming the file and the problem unless every seed's split of it can be
    evaluated: the file reads (:func:`read_npz`), each class has at least 2 rows in the file
    and in each seed's subsample (a stratified split needs them), and each seed's test part
    holds both classes (AUC-ROC needs them). Works on the labels; no split of X is formed."""
    name = Path(path).name
    X, y = read_npz(path)
    counts = np.bincount(y, minlength=2)
    if counts.min() < 2:
        raise ConfigError(
            f"{name}: {counts[1]} anomalies and {counts[0]} normal rows; the stratified split "
            "needs at least 2 of each"
        )
    for seed in seeds:
        sub = np.bincount(y[_subsample(y, seed)], minlength=2)
        if sub.min() < 2:
            raise ConfigError(
                f"{name}: the {MAX_ROWS}-row subsample of seed {seed} keeps {sub[1]} anomalies "
                f"and {sub[0]} normal rows; the stratified split needs at least 2 of each"
            )
        _, te = split_indices(y, seed)
        if len(np.unique(y[te])) < 2:
            raise ConfigError(f"{name}: the test part of seed {seed} holds one class only")


def load_split(path: Path, seed: int):
    """(X_train, X_test, y_train, y_test), min-max scaled on train, <= MAX_ROWS rows in all."""
    from sklearn.preprocessing import MinMaxScaler

    X, y = read_npz(path)
    tr, te = split_indices(y, seed)
    scaler = MinMaxScaler().fit(X[tr])
    return scaler.transform(X[tr]), scaler.transform(X[te]), y[tr], y[te]


#: Working memory of the pairwise helpers, bytes (as the kernels' default budget).
DEFAULT_MAX_MEMORY = 512 * 2**20


def _rows_per_block(n_cols: int, max_memory: int | None) -> int:
    """Rows of a (rows, n_cols) float64 distance block within ``max_memory`` bytes (at least
    one row); ``max_memory`` None: :data:`DEFAULT_MAX_MEMORY`."""
    if max_memory is None:
        max_memory = DEFAULT_MAX_MEMORY
    if (
        isinstance(max_memory, bool)
        or not isinstance(max_memory, (int, np.integer))
        or (max_memory < 1)
    ):
        raise ValueError(
            f"`max_memory` must be None or a positive integer number of bytes, got {max_memory!r}"
        )
    return max(1, int(max_memory) // (8 * max(1, n_cols)))


def sqdist_blocks(A: np.ndarray, B: np.ndarray, max_memory: int | None = None):
    r"""Squared Euclidean distances :math:`D_{ij} = \sum_c (a_{ic} - b_{jc})^2` of the rows of
    A (n_A, d) and B (n_B, d), yielded as (first row, block) over blocks of rows of A: each
    block (k, n_B) float64 with k chosen so the block fits in ``max_memory`` bytes (default
    :data:`DEFAULT_MAX_MEMORY`; at least one row). Exact differences (scipy's ``cdist``, no
    (n_A, n_B, d) array and no :math:`|a|^2 + |b|^2 - 2a\cdot b` cancellation): equal rows
    give exactly 0."""
    from scipy.spatial.distance import cdist

    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    k = _rows_per_block(len(B), max_memory)
    for s in range(0, len(A), k):
        yield s, cdist(A[s : s + k], B, "sqeuclidean")


def _sample(X: np.ndarray, seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return X[rng.choice(len(X), size=min(n, len(X)), replace=False)]


def median_distance(
    X: np.ndarray, seed: int, n: int = 1000, *, max_memory: int | None = None
) -> float:
    """Median pairwise Euclidean distance on (at most) n rows (sampled with ``seed``), over
    the pairs of distinct points; 1.0 when all rows are equal. Blocked over rows
    (:func:`sqdist_blocks`): working memory within ``max_memory`` bytes besides the
    n (n - 1) / 2 distances themselves."""
    S = _sample(X, seed, n)
    parts = []
    for s, d2 in sqdist_blocks(S, S, max_memory):
        rows = np.arange(s, s + len(d2))
        upper = np.arange(len(S))[None, :] > rows[:, None]  # pairs i < j
        parts.append(d2[upper])
    d2 = np.concatenate(parts) if parts else np.empty(0)
    d = np.sqrt(d2[d2 > 0])
    return float(np.median(d)) if len(d) else 1.0


def nn_spacing(X: np.ndarray, seed: int, n: int = 1000, *, max_memory: int | None = None) -> float:
    """Median distance from (at most) n rows (sampled with ``seed``) to their nearest
    distinct row of X (the row itself and exact duplicates skipped); 1.0 when no row has a
    distinct neighbour. Blocked over the sampled rows (:func:`sqdist_blocks`): working memory
    within ``max_memory`` bytes."""
    S = _sample(X, seed, n)
    best = np.full(len(S), np.inf)
    for s, d2 in sqdist_blocks(S, X, max_memory):
        d2[d2 <= 0] = np.inf  # the row itself and exact duplicates
        best[s : s + len(d2)] = d2.min(1)
    best = best[np.isfinite(best)]
    return float(np.sqrt(np.median(best))) if len(best) else 1.0
