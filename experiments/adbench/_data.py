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
    "median_distance",
    "nn_spacing",
    "resolve_names",
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


def load_split(path: Path, seed: int):
    """(X_train, X_test, y_train, y_test), min-max scaled on train, <= MAX_ROWS rows in all."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MinMaxScaler

    with np.load(path) as z:
        X, y = np.asarray(z["X"], dtype=np.float64), np.asarray(z["y"]).astype(int).ravel()
    if len(X) > MAX_ROWS:
        X, _, y, _ = train_test_split(X, y, train_size=MAX_ROWS, stratify=y, random_state=seed)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    scaler = MinMaxScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


def median_distance(X: np.ndarray, seed: int, n: int = 1000) -> float:
    """Median pairwise Euclidean distance on (at most) n rows; > 0 unless all rows are equal."""
    rng = np.random.default_rng(seed)
    S = X[rng.choice(len(X), size=min(n, len(X)), replace=False)]
    d2 = ((S[:, None, :] - S[None, :, :]) ** 2).sum(-1)
    d = np.sqrt(d2[np.triu_indices(len(S), 1)])
    return float(np.median(d[d > 0])) if (d > 0).any() else 1.0


def nn_spacing(X: np.ndarray, seed: int, n: int = 1000) -> float:
    """Median distance from (at most) n rows to their nearest distinct row of X (> 0)."""
    rng = np.random.default_rng(seed)
    S = X[rng.choice(len(X), size=min(n, len(X)), replace=False)]
    best = np.full(len(S), np.inf)
    for s in range(0, len(X), 2000):
        d2 = ((S[:, None, :] - X[None, s : s + 2000, :]) ** 2).sum(-1)
        d2[d2 <= 0] = np.inf  # the row itself and exact duplicates
        best = np.minimum(best, d2.min(1))
    best = best[np.isfinite(best)]
    return float(np.sqrt(np.median(best))) if len(best) else 1.0
