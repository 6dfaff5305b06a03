"""The file format of a saved :class:`~novelty.KernelNoveltyDetector`.

A saved detector is one file written by :func:`joblib.dump` (joblib ships with scikit-learn)
holding a dict:

=====================  ==========================================================================
key                    value
=====================  ==========================================================================
``"format"``           ``"tskernels-detector"``
``"format_version"``   ``1`` (:data:`FORMAT_VERSION`; a file of a newer version is refused)
``"package_version"``  the ``tskernels`` version that saved it (``"unknown"`` if not installed);
                       another version on load gives a ``UserWarning`` (scores may differ)
``"python"``           :func:`platform.python_version` of the saving interpreter
``"created"``          ISO 8601 time of the save (UTC)
``"contract"``         what the detector accepts: ``{"n_channels": d, "n_corpus": n,
                       "lengths": ...}``; ``"lengths"`` is ``"any"`` when every fitted member
                       accepts series of other lengths than the corpus, else the corpus length
                       (an int), or ``[lo, hi]`` when a pooling pre-processing maps a range of
                       lengths onto the fitted one
``"estimator"``        the fitted detector itself (pickled)
=====================  ==========================================================================

The file is written atomically: to a temporary file in the same folder, then
:func:`os.replace` onto ``path``, so an interrupted save never leaves a partial file there
(an existing file at ``path`` is kept until the new one is complete).

**Security**: like every pickle-based format, loading runs code named in the file: only load
files you trust.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import platform
import sys
import tempfile
import warnings
import zlib
from datetime import datetime, timezone
from pathlib import Path

import joblib
from sklearn.utils.validation import check_is_fitted

__all__ = ["FORMAT", "FORMAT_VERSION", "save_detector", "load_detector", "package_version"]

FORMAT = "tskernels-detector"
#: The newest format version this code reads (and the one it writes).
FORMAT_VERSION = 1


#: Modules of the layout before novelty's subpackages -> where their classes live now. A file
#: saved by that layout names its classes by the former modules; loading it reads them here.
FORMER_MODULES = {
    **{f"novelty.{m}": f"novelty.detector.{m}" for m in (
        "_detector", "_members", "_auto", "_perturbations", "_calibration", "_approximation",
        "_approx_member", "_update", "_explain", "_persistence", "_progress",
    )},
    **{f"novelty.{m}": f"novelty.scorers.{m}" for m in (
        "_gram_scorer", "_baselines", "_variance_norm", "_variance_norm_numba",
        "_spectral_support", "_sosrep", "_feature_scorers", "_scorer_registry", "_validation",
    )},
}  # fmt: skip


@contextlib.contextmanager
def _former_module_names():
    """The former module names of :data:`FORMER_MODULES` resolvable while a file is read
    (aliases in ``sys.modules``, removed afterwards; a name already there is left alone)."""
    added = [old for old in FORMER_MODULES if old not in sys.modules]
    for old in added:
        sys.modules[old] = importlib.import_module(FORMER_MODULES[old])
    try:
        yield
    finally:
        for old in added:
            sys.modules.pop(old, None)


def package_version() -> str:
    """The installed ``tskernels`` version, ``"unknown"`` when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tskernels")
    except PackageNotFoundError:
        return "unknown"


def save_detector(det, path) -> Path:
    """Write the fitted detector ``det`` to ``path`` (the format above); returns the path.

    Raises sklearn's ``NotFittedError`` for an unfitted detector. Only load the file where
    you trust its origin (pickle)."""
    check_is_fitted(det, "members_")
    path = Path(path)
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "package_version": package_version(),
        "python": platform.python_version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "contract": {
            "n_channels": int(det.n_channels_),
            "n_corpus": int(det.n_corpus_),
            "lengths": _lengths_rule(det),
        },
        "estimator": det,
    }
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            joblib.dump(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def load_detector(path, expected: type):
    """The detector saved at ``path`` by :func:`save_detector`, an instance of ``expected``
    (the detector's class, which :meth:`KernelNoveltyDetector.load` passes: this module reads
    the format and never imports the detector).

    ValueError when the file is not a saved detector, is truncated or corrupt, or has a newer
    ``format_version`` than this code reads; a UserWarning when another ``tskernels`` version
    saved it. A missing file, a folder or one without read permission raise their OSError.
    **Only load files you trust**: unpickling runs code named in the file."""
    path = Path(path)
    bad = f"{str(path)!r} is not a saved {expected.__name__} or is corrupt"
    try:
        with _former_module_names():  # a file saved before the subpackages
            payload = joblib.load(path)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        ImportError,
        UnicodeDecodeError,
        OSError,
        zlib.error,
        MemoryError,
        OverflowError,
    ) as exc:
        raise ValueError(f"{bad} ({type(exc).__name__}: {exc})".replace("\n", " ")) from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{bad} (no {FORMAT!r} format marker)")
    version = payload.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"{bad} (format_version {version!r})")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{str(path)!r} has format_version {version}, newer than this code reads "
            f"({FORMAT_VERSION}): upgrade tskernels to load it"
        )
    det = payload.get("estimator")
    if not isinstance(det, expected):
        raise ValueError(f"{bad} (its estimator is {type(det).__name__}, not a detector)")
    saved, current = payload.get("package_version"), package_version()
    if saved != current:
        warnings.warn(
            f"{str(path)!r} was saved by tskernels {saved}, this is tskernels {current}: "
            "its scores may differ from those of the saving version",
            UserWarning,
            stacklevel=3,
        )
    return det


# ------------------------------------------------------------------ the length contract
def _lengths_rule(det):
    """``"any"`` when every fitted member accepts series of other lengths than the corpus,
    else the raw corpus length the fixed-length members need (an int, or ``[lo, hi]``)."""
    fixed = [m for m in det.members_ if not _accepts_other_lengths(m)]
    if not fixed:
        return "any"
    return _raw_length(fixed[0])


def _accepts_other_lengths(member) -> bool:
    """What the fitted member declares: its kernel takes unequal lengths (tag
    ``unequal_length``), was not fitted to one length (a random-convolution kernel fitted on
    equal lengths with ``other_lengths="error"``), and its pre-processing does not z-score
    per time step."""
    kernel = member.kernel_
    if not getattr(kernel, "supports_unequal_length", False):
        return False
    if (
        getattr(kernel, "series_length_", None) is not None
        and getattr(kernel, "other_lengths", "native") != "native"
    ):
        return False
    pre = getattr(member, "preprocessor_", None)
    zscore = getattr(pre, "zscore_", None)
    return not getattr(zscore, "per_step_", False)


def _raw_length(member):
    """The raw series length(s) a fixed-length member accepts: its corpus length, undoing
    its pre-processing (basepoint, pooling window w: raw lengths [L w, L w + w - 1])."""
    corpus = member.corpus_
    if hasattr(corpus, "lengths"):  # SeriesBatch
        lengths = {int(v) for v in corpus.lengths.tolist()}
    elif hasattr(corpus, "shape"):
        lengths = {int(corpus.shape[1])}
    else:
        lengths = {int(x.shape[0]) for x in corpus}
    length = max(lengths)
    pre = getattr(member, "preprocessor_", None)
    if pre is None:
        return length
    length -= 1 if getattr(pre, "basepoint", False) else 0
    window = int(getattr(pre, "window_", 1))
    if window == 1:
        return length
    return [length * window, length * window + window - 1]
