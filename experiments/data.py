"""Data for the benchmark: the UEA multivariate archive and the user's own data.

``load_uea(name, split)`` returns ``(X, y)``: X a float64 array (n, T, d) when lengths are
equal, else a list of (T_i, d) arrays; y an array of class labels (strings).
Search order for ``<name>_<SPLIT>.ts``: ``data_dir``, the environment variable
``TSKERNELS_DATA``, then the data sets shipped with sktime. In each root the file may sit in
``<root>/<name>/``, directly in ``<root>/``, or in ``<root>/<name>_<SPLIT>/`` (the folder
sktime's ``write_ndarray_to_tsfile`` makes when given ``problem_name="<name>_TRAIN"``).

``load_data(spec, data_dir, seed)`` reads what ``run --dataset`` accepts:

- a UEA name, found as above;
- a folder holding ``<Name>_TRAIN.ts`` and ``<Name>_TEST.ts`` in one of the layouts above
  (``<Name>`` is the folder's name, or the only name there);
- ``file.npz`` with ``X`` (n, T, d) and ``y``, or ``X_train``, ``y_train``, ``X_test``,
  ``y_test``;
- ``file.csv`` in long format, one row per (series, time step), a header line naming the
  columns, read by name (:func:`novelty.adapters._io.read_series`): the series id (``id``,
  ``series`` or ``series_id``), the time (``time``, ``t``, ``timestamp`` or ``step``), the label
  (``label``, ``class`` or ``y``), an optional ``split`` (``train``/``test``); every other
  column is a channel. A missing column is an error naming the columns found;
- ``sktime:NAME``: sktime's loader ``sktime.datasets.load_NAME`` (e.g.
  ``sktime:basic_motions``).

Data without a train/test split (``X``/``y``, or a CSV without ``split``) is split once,
stratified, 70 % train and 30 % test, seeded by ``seed``. A missing class label (an empty
CSV label, a NaN in a numeric ``y``, an empty string or the string ``nan``) is refused,
naming the rows, never turned into a class. Anything else raises :class:`DataError` with a
one-line message; :func:`check_test_classes` says whether every class made normal can be
evaluated on the test part. Data given by path or by sktime loader carries a
fingerprint (SHA-1 of its arrays and labels), so results of other data never mix in a store.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "DataError",
    "UserData",
    "available_datasets",
    "check_test_classes",
    "data_roots",
    "load_data",
    "load_uea",
]

ENV_VAR = "TSKERNELS_DATA"
#: Fraction of the series kept for training when the data come without a split.
TRAIN_FRACTION = 0.7


class DataError(ValueError):
    """Data that cannot be used; the message names the input and the problem (one line)."""


def _sktime_root() -> Path | None:
    # located without importing sktime (seconds)
    try:
        spec = importlib.util.find_spec("sktime")
    except (ImportError, ValueError):  # pragma: no cover
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data"


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


def _candidates(root: Path, name: str, split: str) -> list[Path]:
    fname = f"{name}_{split.upper()}.ts"
    folder = root / f"{name}_{split.upper()}"
    return [root / name / fname, root / fname, folder / fname, folder / f"{name}.ts"]


def _find(name: str, split: str, roots: list[Path]) -> Path | None:
    for root in roots:
        for cand in _candidates(root, name, split):
            if cand.is_file():
                return cand
    return None


def _ts_header(path: Path) -> dict[str, str]:
    """The ``@key value`` lines of a .ts file before ``@data`` (keys lower case)."""
    head = {}
    try:
        with open(path, errors="replace") as f:
            for i, line in enumerate(f):
                line = line.strip()
                if line.lower().startswith("@data") or i > 200:
                    break
                if line.startswith("@"):
                    key, _, value = line[1:].partition(" ")
                    head[key.lower()] = value.strip().lower()
    except OSError:
        return {}
    return head


def _multivariate_classification(path: Path) -> bool:
    h = _ts_header(path)
    return (
        h.get("univariate") == "false"
        and h.get("classlabel", "false").startswith("true")
        and not h.get("targetlabel", "false").startswith("true")
    )


def available_datasets(
    data_dir: str | os.PathLike | None = None, multivariate_classification: bool = False
) -> dict[str, list[str]]:
    """{root: [data set names with a TRAIN and a TEST .ts file]} for every searched root;
    ``multivariate_classification``: only those whose header says multivariate with class
    labels (no regression targets)."""
    out = {}
    for root in data_roots(data_dir):
        names = set()
        if root.is_dir():
            for p in root.rglob("*_TRAIN.ts"):
                nm = p.name[: -len("_TRAIN.ts")]
                test = _find(nm, "test", [p.parent, p.parent.parent])
                if test is None:
                    continue
                if multivariate_classification and not _multivariate_classification(p):
                    continue
                names.add(nm)
        out[str(root)] = sorted(names)
    return out


def _nested_to_series(X) -> list[np.ndarray]:
    return [
        np.stack([np.asarray(X.iloc[i, j], dtype=np.float64) for j in range(X.shape[1])], axis=1)
        for i in range(X.shape[0])
    ]


def _stack(series: list[np.ndarray]):
    if len({s.shape[0] for s in series}) == 1:
        return np.stack(series)
    return series


def _read_ts(path: Path):
    from sktime.datasets import load_from_tsfile

    X, y = load_from_tsfile(str(path), return_data_type="nested_univ")
    return _stack(_nested_to_series(X)), np.asarray(y)


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
            f"sktime's data. Available: {listing}. Own data: give a folder of .ts files, a "
            ".npz, a .csv or sktime:NAME"
        )
    return _read_ts(path)


# ----------------------------------------------------------------------------- own data
@dataclass
class UserData:
    """One data set ready for the benchmark: labels as strings; ``fingerprint`` None for a
    UEA set found by name (the archive), else the SHA-1 of the arrays and labels."""

    name: str
    X_train: object
    y_train: np.ndarray
    X_test: object
    y_test: np.ndarray
    source: str
    fingerprint: str | None = None


def _fingerprint(*parts) -> str:
    h = hashlib.sha1()
    for p in parts:
        if isinstance(p, list):
            for s in p:
                h.update(np.ascontiguousarray(s, dtype=np.float64).tobytes())
                h.update(str(s.shape).encode())
        else:
            a = np.ascontiguousarray(p)
            h.update(str((a.shape, a.dtype.kind)).encode())
            h.update(a.astype(str).tobytes() if a.dtype.kind in "OUS" else a.tobytes())
    return h.hexdigest()[:12]


def _split(X, y: np.ndarray, seed: int, where: str):
    from sklearn.model_selection import train_test_split

    n = len(y)
    classes, counts = np.unique(y, return_counts=True)
    if counts.min() < 2:
        small = classes[counts.argmin()]
        raise DataError(
            f"{where}: class {str(small)!r} has {counts.min()} series; splitting into train and "
            "test needs at least 2 per class (or give X_train/X_test)"
        )
    n_test = max(int(round((1 - TRAIN_FRACTION) * n)), len(classes))
    idx_tr, idx_te = train_test_split(
        np.arange(n), test_size=n_test, stratify=y, random_state=int(seed)
    )
    idx_tr, idx_te = np.sort(idx_tr), np.sort(idx_te)
    if isinstance(X, list):
        return [X[i] for i in idx_tr], y[idx_tr], [X[i] for i in idx_te], y[idx_te]
    return X[idx_tr], y[idx_tr], X[idx_te], y[idx_te]


def _listed(items, most: int = 5) -> str:
    """'a, b, c' of the first ``most`` items, then 'and N more'."""
    items = [str(i) for i in items]
    head = ", ".join(items[:most])
    return head if len(items) <= most else f"{head} and {len(items) - most} more"


def _is_missing_label(label) -> bool:
    """NaN (a float label), or a string that is empty or blank or reads ``nan``."""
    if isinstance(label, (float, np.floating)):
        return bool(np.isnan(label))
    if isinstance(label, (str, np.str_, bytes, np.bytes_)):
        text = label.decode(errors="replace") if isinstance(label, bytes) else str(label)
        return text.strip() == "" or text.strip().lower() == "nan"
    return label is None


def _check_labels(y: np.ndarray, where: str, yname: str) -> None:
    """DataError naming the entries of ``y`` that hold no class label (see
    :func:`_is_missing_label`)."""
    if y.dtype.kind in "iub":
        return
    if y.dtype.kind == "f":
        bad = np.flatnonzero(np.isnan(y))
    else:
        bad = np.flatnonzero([_is_missing_label(v) for v in y])
    if bad.size:
        raise DataError(
            f"{where}: {yname} has {bad.size} missing class label(s) (NaN or empty) at "
            f"index {_listed(bad.tolist())}; give every series a class label, or leave those "
            "series out"
        )


def check_test_classes(where: str, y_train, y_test, normal=None) -> None:
    """Every class made normal in turn (``normal``, default: every class of ``y_train``)
    can be evaluated on the test part: it has test series of its own (the positives) and
    the test part has series of another class (the anomalies); else its test ROC-AUC is
    undefined. DataError naming the classes and what they lack."""
    have = set(np.asarray(y_test).astype(str).tolist())
    classes = sorted(set(np.asarray(y_train).astype(str).tolist())) if normal is None else normal
    absent = [c for c in classes if c not in have]
    if absent:
        raise DataError(
            f"{where}: class(es) {_listed(repr(c) for c in absent)} have no series in the test "
            f"part (test classes: {_listed(sorted(have), 10)}); each class made normal needs "
            "test series (or choose the normal classes with --normal-class)"
        )
    alone = [c for c in classes if have == {c}]
    if alone:
        raise DataError(
            f"{where}: the test part holds only class {alone[0]!r}: no anomalies to score "
            "against it"
        )


def _check_arrays(X, y, where: str, xname: str = "X", yname: str = "y"):
    """(float64 X (n, T, d) or list of (T_i, d), string labels y) or DataError."""
    if isinstance(X, list):
        series = X
    else:
        X = np.asarray(X)
        if X.dtype == object:
            raise DataError(f"{where}: {xname} is an object array; give a float array (n, T, d)")
        if X.ndim != 3:
            raise DataError(
                f"{where}: {xname} must have shape (n, T, d), got shape {X.shape}"
                + (" (one channel: add an axis, X[..., None])" if X.ndim == 2 else "")
            )
        if not np.issubdtype(X.dtype, np.number) or np.iscomplexobj(X):
            raise DataError(f"{where}: {xname} must hold real numbers, got dtype {X.dtype}")
        series = None
    y = np.asarray(y)
    if y.ndim != 1:
        raise DataError(f"{where}: {yname} must be one label per series, got shape {y.shape}")
    n = len(series) if series is not None else X.shape[0]
    if len(y) != n:
        raise DataError(f"{where}: {xname} has {n} series but {yname} has {len(y)} labels")
    _check_labels(y, where, yname)
    if n == 0:
        raise DataError(f"{where}: {xname} holds no series")
    if series is None:
        if min(X.shape[1:]) == 0:
            raise DataError(f"{where}: {xname} has an empty axis, shape {X.shape}")
        X = X.astype(np.float64)
        if not np.isfinite(X).all():
            raise DataError(f"{where}: {xname} contains NaN or infinite values")
    else:
        if not all(np.isfinite(s).all() for s in series):
            raise DataError(f"{where}: {xname} contains NaN or infinite values")
    return X, y.astype(str)


def _finish(name, Xtr, ytr, Xte, yte, source, fingerprinted=True) -> UserData:
    if len(np.unique(ytr)) < 2:
        raise DataError(
            f"{source}: the training data hold one class ({str(ytr[0])!r}); one-versus-rest needs "
            "at least 2 classes"
        )
    d_tr = Xtr[0].shape[-1]
    d_te = Xte[0].shape[-1]
    if d_tr != d_te:
        raise DataError(f"{source}: train has {d_tr} channels, test has {d_te}")
    fp = _fingerprint(Xtr, ytr, Xte, yte) if fingerprinted else None
    return UserData(name, Xtr, ytr, Xte, yte, source, fp)


def _load_npz(path: Path, seed: int) -> UserData:
    where = str(path)
    import zipfile

    if not zipfile.is_zipfile(path):
        raise DataError(f"{where}: not a readable .npz file (not a zip archive)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except ValueError as exc:
        if "Object arrays" in str(exc):
            raise DataError(
                f"{where}: holds object arrays (unequal lengths?); give float arrays (n, T, d)"
            ) from None
        raise DataError(f"{where}: not a readable .npz file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise DataError(f"{where}: not a readable .npz file ({exc})") from None
    split_keys = {"X_train", "y_train", "X_test", "y_test"}
    have = set(arrays)
    if split_keys <= have:
        Xtr, ytr = _check_arrays(arrays["X_train"], arrays["y_train"], where, "X_train", "y_train")
        Xte, yte = _check_arrays(arrays["X_test"], arrays["y_test"], where, "X_test", "y_test")
    elif have & split_keys:
        raise DataError(
            f"{where}: has {', '.join(sorted(have & split_keys))} but not "
            f"{', '.join(sorted(split_keys - have))}; give all four, or X and y"
        )
    elif {"X", "y"} <= have:
        X, y = _check_arrays(arrays["X"], arrays["y"], where)
        Xtr, ytr, Xte, yte = _split(X, y, seed, where)
    else:
        raise DataError(
            f"{where}: needs arrays X and y, or X_train, y_train, X_test and y_test; it holds "
            f"{', '.join(sorted(have)) or 'no arrays'}"
        )
    return _finish(path.stem, Xtr, ytr, Xte, yte, where)


def _benchmark_label_column(path: Path):
    """The label column of a benchmark CSV: ``label``, else ``class``, else ``y`` (the
    benchmark always needs labels, so a ``class`` or ``y`` column cannot be a channel here;
    the detection command line reads those as channels unless told). None: no such column."""
    import csv

    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        header = next(csv.reader(f), [])
    names = {name.strip().lower(): name.strip() for name in header}
    for wanted in ("label", "class", "y"):
        if wanted in names:
            return names[wanted]
    return None


def _load_csv(path: Path, seed: int) -> UserData:
    """A long CSV read by column *names* (:func:`novelty.adapters._io.read_series`: id, time,
    channels, label, optional split), never by position; the benchmark needs labels and finite
    values."""
    from novelty.adapters._io import SeriesFileError, read_series

    where = str(path)
    try:
        data = read_series(path, label_col=_benchmark_label_column(path))
    except SeriesFileError as exc:
        raise DataError(str(exc)) from None
    if data.labels is None:
        raise DataError(
            f"{where}: needs a label column (label, class or y) for the benchmark; columns "
            f"found: id, time, {', '.join(data.channels)}"
        )
    values = data.X if isinstance(data.X, np.ndarray) else np.concatenate(data.X)
    if not np.isfinite(values).all():
        raise DataError(f"{where}: NaN, empty or infinite channel values (the benchmark needs "
                        "complete series)")  # fmt: skip
    X, y = data.X, np.asarray(data.labels)
    if data.split is None:
        Xtr, ytr, Xte, yte = _split(X, y, seed, where)
    else:
        tr = data.split == "train"
        if tr.all() or not tr.any():
            raise DataError(
                f"{where}: the split column names only {'train' if tr.all() else 'test'}"
            )
        Xs = list(X)
        Xtr, ytr = _stack([x for x, k in zip(Xs, tr) if k]), y[tr]
        Xte, yte = _stack([x for x, k in zip(Xs, tr) if not k]), y[~tr]
    return _finish(path.stem, Xtr, ytr, Xte, yte, where)


def _load_ts_folder(path: Path, name: str | None = None) -> UserData:
    where = str(path)
    names = {path.name} if name is None else {name}
    for p in path.rglob("*_TRAIN.ts") if name is None else []:
        names.add(p.name[: -len("_TRAIN.ts")])
    for p in path.glob("*_TRAIN") if name is None else []:
        if p.is_dir():
            names.add(p.name[: -len("_TRAIN")])
    found = {}
    for nm in sorted(names):
        tr = _find(nm, "train", [path, path.parent])
        te = _find(nm, "test", [path, path.parent])
        if tr is not None and te is not None:
            found[nm] = (tr, te)
    if not found:
        raise DataError(
            f"{where}: no <Name>_TRAIN.ts and <Name>_TEST.ts here (layouts "
            "<dir>/<Name>/<Name>_TRAIN.ts, <dir>/<Name>_TRAIN.ts, <dir>/<Name>_TRAIN/...)"
        )
    if len(found) > 1 and path.name not in found:
        raise DataError(f"{where}: holds several data sets ({', '.join(found)}); give one folder "
                        "or use --data-dir with the names")  # fmt: skip
    nm = path.name if path.name in found else next(iter(found))
    tr, te = found[nm]
    try:
        Xtr, ytr = _read_ts(tr)
        Xte, yte = _read_ts(te)
    except (OSError, ValueError, TypeError, IndexError, KeyError) as exc:
        raise DataError(f"{tr.parent}: the .ts files cannot be read ({exc})") from None
    Xtr, ytr = _check_arrays(Xtr, ytr, str(tr))
    Xte, yte = _check_arrays(Xte, yte, str(te))
    return _finish(nm, Xtr, ytr, Xte, yte, where)


def _load_sktime(name: str) -> UserData:
    where = f"sktime:{name}"
    fname = name if name.startswith("load_") else f"load_{name}"
    if importlib.util.find_spec("sktime") is None:
        raise DataError(f"{where}: sktime is not installed")
    import inspect

    import sktime.datasets as skd

    fn = getattr(skd, fname, None)
    params = inspect.signature(fn).parameters if callable(fn) else {}
    if not {"split", "return_type"} <= set(params):
        usable = sorted(
            n[5:] for n in dir(skd)
            if n.startswith("load_") and callable(getattr(skd, n))
            and {"split", "return_type"} <= set(inspect.signature(getattr(skd, n)).parameters)
        )  # fmt: skip
        raise DataError(f"{where}: no sktime loader sktime.datasets.{fname} with a train/test "
                        f"split; loaders: {', '.join(usable)}")  # fmt: skip
    try:
        parts = [fn(split=s, return_X_y=True, return_type="nested_univ") for s in ("train", "test")]
    except Exception as exc:  # noqa: BLE001 - a loader's own failure, reported in one line
        raise DataError(f"{where}: the loader failed ({type(exc).__name__}: {exc})") from None
    (Xtr, ytr), (Xte, yte) = parts
    Xtr, ytr = _check_arrays(_stack(_nested_to_series(Xtr)), ytr, where)
    Xte, yte = _check_arrays(_stack(_nested_to_series(Xte)), yte, where)
    return _finish(fname[5:], Xtr, ytr, Xte, yte, where)


def load_data(spec: str, data_dir: str | os.PathLike | None = None, seed: int = 0) -> UserData:
    """The data set ``spec`` names (see the module docstring); :class:`DataError` (one line)
    for anything that cannot be used, ``FileNotFoundError`` for an unknown UEA name."""
    spec = str(spec)
    if spec.startswith("sktime:"):
        return _load_sktime(spec[len("sktime:") :])
    path = Path(spec)
    suffix = path.suffix.lower()
    if suffix in (".npz", ".csv", ".ts") or path.exists() or os.sep in spec:
        if not path.exists():
            raise DataError(f"{spec}: no such file or folder")
        if path.is_dir():
            return _load_ts_folder(path)
        if suffix == ".npz":
            return _load_npz(path, seed)
        if suffix == ".csv":
            return _load_csv(path, seed)
        if suffix == ".ts":
            stem = path.stem
            for tail in ("_TRAIN", "_TEST"):
                if stem.upper().endswith(tail):
                    stem = stem[: -len(tail)]
            return _load_ts_folder(path.parent, stem)
        raise DataError(
            f"{spec}: unknown kind of data file ({suffix or 'no extension'}); give a .npz, "
            "a .csv (long format), a folder of .ts files, a UEA name or sktime:NAME"
        )
    Xtr, ytr = load_uea(spec, "train", data_dir=data_dir)
    Xte, yte = load_uea(spec, "test", data_dir=data_dir)
    return UserData(spec, Xtr, np.asarray(ytr).astype(str), Xte, np.asarray(yte).astype(str),
                    spec, None)  # fmt: skip
