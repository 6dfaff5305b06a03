"""Loading the UEA multivariate archive from `.ts` files with sktime's loader.

``load_uea(name, split)`` returns ``(X, y)``: X a float64 array (n, T, d) when lengths are
equal, else a list of (T_i, d) arrays; y an array of class labels (strings).
Search order for ``<name>_<SPLIT>.ts``: ``data_dir``, the environment variable
``TSKERNELS_DATA``, then the data sets shipped with sktime. In each root the file may sit in
``<root>/<name>/`` or directly in ``<root>/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["load_uea", "available_datasets", "data_roots"]

ENV_VAR = "TSKERNELS_DATA"


def _sktime_root() -> Path | None:
    try:
        import sktime.datasets
    except ImportError:  # pragma: no cover - sktime is a dependency
        return None
    return Path(sktime.datasets.__file__).parent / "data"


def data_roots(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The folders searched, in order: ``data_dir``, $TSKERNELS_DATA, sktime's data."""
    roots = []
    if data_dir is not None:
        roots.append(Path(data_dir))
    if os.environ.get(ENV_VAR):
        roots.append(Path(os.environ[ENV_VAR]))
    sk = _sktime_root()
    if sk is not None:
        roots.append(sk)
    return roots


def _find(name: str, split: str, roots: list[Path]) -> Path | None:
    fname = f"{name}_{split.upper()}.ts"
    for root in roots:
        for cand in (root / name / fname, root / fname):
            if cand.is_file():
                return cand
    return None


def available_datasets(data_dir: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """{root: [data set names with a TRAIN and a TEST .ts file]} for every searched root."""
    out = {}
    for root in data_roots(data_dir):
        names = set()
        if root.is_dir():
            for p in root.rglob("*_TRAIN.ts"):
                nm = p.name[: -len("_TRAIN.ts")]
                if (p.parent / f"{nm}_TEST.ts").is_file():
                    names.add(nm)
        out[str(root)] = sorted(names)
    return out


def load_uea(name: str, split: str = "train", data_dir: str | os.PathLike | None = None):
    """Load one split of a UEA data set.

    Returns ``(X, y)``: X float64 (n, T, d), or a list of (T_i, d) arrays for unequal
    lengths; y an ndarray of class labels.
    """
    if split.lower() not in ("train", "test"):
        raise ValueError(f"`split` must be 'train' or 'test', got {split!r}")
    roots = data_roots(data_dir)
    path = _find(name, split, roots)
    if path is None:
        listing = "; ".join(
            f"{root}: {', '.join(names) if names else '(none)'}"
            for root, names in available_datasets(data_dir).items()
        )
        raise FileNotFoundError(
            f"UEA data set {name!r} ({split}) not found. Searched data_dir, ${ENV_VAR} and "
            f"sktime's data. Available: {listing}"
        )
    from sktime.datasets import load_from_tsfile

    X, y = load_from_tsfile(str(path), return_data_type="nested_univ")
    series = [
        np.stack([np.asarray(X.iloc[i, j], dtype=np.float64) for j in range(X.shape[1])], axis=1)
        for i in range(X.shape[0])
    ]
    y = np.asarray(y)
    if len({s.shape[0] for s in series}) == 1:
        return np.stack(series), y
    return series, y
