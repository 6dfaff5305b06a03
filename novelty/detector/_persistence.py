r"""The file format of a saved :class:`~novelty.KernelNoveltyDetector`: loading it runs no code
from the file.

Layout (``format_version`` 2)
-----------------------------
===========================  ==================================================================
bytes                        content
===========================  ==================================================================
24                           :data:`MAGIC`, ``b"\x89tskernels-detector\r\n\x1a\n"`` (a
                             non-ASCII first byte and CR LF catch text-mode transfers)
32                           SHA-256 of everything after it (the checksum)
4                            the length ``h`` of the header, little-endian unsigned
``h``                        the header: UTF-8 JSON, the metadata below
the rest                     the detector's state: a pickle stream (protocol 5) that holds
                             only plain data and the names of the classes on
                             :data:`SAFE_GLOBALS`; every array and tensor is stored as raw
                             bytes with its dtype and shape
===========================  ==================================================================

The header (also :func:`read_metadata`, which never unpickles):

=======================  ======================================================================
key                      value
=======================  ======================================================================
``"format"``             ``"tskernels-detector"``
``"format_version"``     ``2`` (:data:`FORMAT_VERSION`; a file of a newer version is refused)
``"package_version"``    the ``tskernels`` version that saved it (``"unknown"`` if not
                         installed); another version on load gives a ``UserWarning``
``"versions"``           versions of ``tskernels``, ``python``, ``torch``, ``numpy``,
                         ``scikit-learn``, ``sktime``, ``scipy``, ``numba`` and ``pandas``
                         that saved it (``null`` for one not installed)
``"python"``             :func:`platform.python_version` of the saving interpreter
``"created"``            ISO 8601 time of the save (UTC)
``"contract"``           what the detector accepts: ``{"n_channels": d, "n_corpus": n,
                         "lengths": ..., "calibrated_lengths": [lo, hi], "channels": names or
                         null}``; ``"lengths"`` is ``"any"`` when every fitted member accepts
                         series of other lengths than the corpus, else the corpus length (an
                         int), or ``[lo, hi]`` when a pooling pre-processing maps a range of
                         lengths onto the fitted one; ``"calibrated_lengths"``: the raw
                         lengths the conformal calibration holds for
                         (:func:`calibrated_lengths`)
``"globals"``            every class the state names (``"module.Name"``), for auditing
``"trusted_types"``      those outside :data:`SAFE_GLOBALS` (a detector holding a user's own
                         kernel class): loading then needs ``trusted=`` naming them
=======================  ======================================================================

Why this design
---------------
Three ways to store a detector without running code from the file were weighed:

* arrays + JSON: every class (about 40 kernels, scorers, members, pre-processors and sktime's
  transformers) would need its own to-state and from-state code, and each new kernel would
  need more; a missed attribute gives a detector that loads and scores differently;
* skops.io: a second dependency that, for this object graph, needs the same explicit list of
  trusted classes as below, plus converters for torch tensors;
* a restricted unpickler (chosen): the standard pickler writes the object graph, the loader
  resolves only the globals on an explicit list (:data:`SAFE_GLOBALS`: the package's own
  classes, two sktime transformers, two scikit-learn estimators, torch's device and dtypes,
  a few builtin types). Everything else a file names (``os.system``, ``builtins.eval``,
  ``getattr``, ``functools.partial``, ``importlib.import_module``, ...) is refused with a
  ValueError naming it, before it is imported. Arrays and tensors never go through a
  reconstruction function (torch's storage loader would itself run a full unpickler): the
  writer takes them out as raw bytes, dtype, shape (and strides), and the loader rebuilds them
  from data alone, refusing object dtypes. The loader also refuses to call or set the state of
  anything that is not a listed class or an instance of one.

What a loaded file can do is then create instances of the listed classes and set their
attributes to plain data (numbers, strings, lists, dicts, arrays): the package's own code runs
on them, never code the file chooses. The checksum refuses a damaged file (any bit flip)
before any of it is read; it is not a signature: a file crafted on purpose carries a valid
checksum, and what protects against it is the restricted loader.

Files of ``format_version`` 1 (tskernels 0.1) are joblib pickles: loading one runs any code it
names, so :func:`load_detector` refuses them unless ``trust_pickle=True`` (``--trust-pickle``
on the command line). Saving the loaded detector again converts it.

The file is written atomically: to a temporary file in the same folder, then
:func:`os.replace` onto ``path``, so an interrupted save never leaves a partial file there
(an existing file at ``path`` is kept until the new one is complete).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import io
import json
import os
import pickle
import platform
import stat
import struct
import sys
import tempfile
import warnings
import zlib
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._files import umask
from ._member_kinds import member_globals

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAGIC",
    "SAFE_GLOBALS",
    "save_detector",
    "load_detector",
    "read_model",
    "read_metadata",
    "calibrated_lengths",
    "package_version",
]

FORMAT = "tskernels-detector"
#: The newest format version this code reads (and the one it writes).
FORMAT_VERSION = 2
#: The joblib (pickle) format of tskernels 0.1, read only with ``trust_pickle=True``.
LEGACY_FORMAT_VERSION = 1
#: The first bytes of a model file.
MAGIC = b"\x89tskernels-detector\r\n\x1a\n"
_DIGEST = 32  # SHA-256
_PROTOCOL = 5


def _names(module: str, *names: str) -> set[tuple[str, str]]:
    return {(module, name) for name in names}


_TORCH_DTYPES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
    "float64", "complex64", "complex128",
)  # fmt: skip

#: The only globals (module, name) a model file may name. Each is a class whose construction
#: and attribute setting run the package's (or scikit-learn's, sktime's, torch's) own code on
#: plain data: none of them is a function that acts on its arguments.
SAFE_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    {
        # the package's own classes (the detector, its members, pre-processing, kernels,
        # scorers, approximations; density's kernels and estimators a scorer may hold)
        *_names("novelty.detector._detector", "KernelNoveltyDetector"),
        *_names("novelty.detector._members", "MemberSpec"),
        *member_globals(),  # every member kind's class (novelty.detector._member_kinds)
        *_names("novelty.detector._approximation", "NystroemFeatures", "RandomFeatures"),
        *_names("novelty.scorers._baselines", "KNNScorer", "MeanEmbeddingScorer", "OCSVMScorer"),
        *_names(
            "novelty.scorers._variance_norm",
            "ConformanceScorer",
            "MahalanobisScorer",
            "VarianceNorm",
        ),
        *_names("novelty.scorers._spectral_support", "SpectralSupport"),
        *_names("novelty.scorers._sosrep", "SOSREPScorer"),
        *_names(
            "novelty.scorers._feature_scorers",
            "FeatureKNN",
            "FeatureMeanEmbedding",
            "FeatureSpectralSupport",
            "FeatureVarianceNorm",
            "FeatureConformance",
            "FeatureMahalanobis",
        ),
        *_names("tskernels.validation", "SeriesBatch"),
        *_names("tskernels.transforms", "Preprocessor", "ZScore"),
        *_names("tskernels._yeo_johnson", "YeoJohnson"),
        *_names("tskernels._static", "Linear", "Polynomial", "RBF", "Laplacian"),
        *_names("tskernels._elementary", "FlattenedKernel", "IntegralKernel"),
        *_names("tskernels._gak", "GlobalAlignmentKernel"),
        *_names("tskernels._random_convolution", "RandomConvolutionKernel"),
        *_names("tskernels._randomized_signature", "RandomizedSignatureKernel"),
        *_names("tskernels._reservoir", "VolterraReservoirKernel"),
        *_names("tskernels._signature_pde", "SignaturePDEKernel"),
        *_names("tskernels._signature_truncated", "TruncatedSignatureKernel"),
        *_names("density._kernels", "GaussianKernel", "LaplacianKernel", "Expansion"),
        *_names("density._sdo", "SDOKernel"),
        *_names("density._kde", "KDE"),
        *_names("density._sosrep", "SOSREP"),
        # what the random-convolution kernel and the OC-SVM scorer hold
        *_names("sktime.transformations.rocket._minirocket_multivariate", "MiniRocketMultivariate"),
        *_names(
            "sktime.transformations.rocket._minirocket_multivariate_variable",
            "MiniRocketMultivariateVariable",
        ),
        *_names(
            "sktime.transformations.rocket._multirocket_multivariate", "MultiRocketMultivariate"
        ),
        *_names("sklearn.preprocessing._data", "StandardScaler"),
        *_names("sklearn.svm._classes", "OneClassSVM"),
        # plain types
        # (protocol 5 writes sets, frozensets and bytearrays with their own opcodes: their
        # classes are not listed, so a file cannot call set(range(n)) or bytearray(n))
        *_names("builtins", "slice", "complex", "range"),
        *_names("collections", "OrderedDict"),
        *_names("numpy", "float64", "float32", "int64", "int32", "bool_"),
        *_names("torch", "device", *_TORCH_DTYPES),
    }
)

_LEGACY_REFUSED = (
    "{path} is a pickle file: the format of models saved by tskernels 0.1 (format_version 1), "
    "which runs any code the file holds when it is loaded, so it is refused. Load it only if "
    "you trust where it came from, with KernelNoveltyDetector.load(path, trust_pickle=True) "
    "(command line: --trust-pickle), then save it again: the current format loads without "
    "running code"
)


# ------------------------------------------------------------------ versions
def package_version() -> str:
    """The installed ``tskernels`` version, ``"unknown"`` when it is not installed."""
    return _distribution_version("tskernels") or "unknown"


def _distribution_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _versions() -> dict:
    out = {"tskernels": package_version(), "python": platform.python_version()}
    for name in ("torch", "numpy", "scikit-learn", "sktime", "scipy", "numba", "pandas"):
        out[name] = _distribution_version(name)
    return out


# ------------------------------------------------------------------ writing
_PLAIN = frozenset({int, float, str, bytes, bool, type(None), tuple, list, dict, set, frozenset})


class _Pickler(pickle.Pickler):
    """The standard pickler, with arrays, tensors, numpy scalars and dtypes and pandas frames
    taken out of the stream's reconstruction machinery: each is written as a record of plain
    data (a persistent id), ``("kind", index, ...)``, and a repeat of the same object as
    ``("ref", index)`` (shared objects stay shared)."""

    def __init__(self, file):
        super().__init__(file, protocol=_PROTOCOL)
        self._index: dict[int, int] = {}
        self._keep: list = []  # alive while writing: ids are never reused

    def persistent_id(self, obj):
        if type(obj) in _PLAIN:
            return None
        if _record_kind(obj) is None:
            return None
        key = id(obj)
        if key in self._index:
            return ("ref", self._index[key])
        index = len(self._keep)
        self._index[key] = index
        self._keep.append(obj)
        return _record(obj, index)


def _record_kind(obj) -> str | None:
    if isinstance(obj, np.ndarray) and type(obj) in (np.ndarray, np.memmap):
        if obj.dtype.fields is not None or obj.dtype.subdtype is not None:
            return None
        return "objects" if obj.dtype.hasobject else "array"
    if isinstance(obj, np.generic) and not obj.dtype.hasobject and obj.dtype.fields is None:
        return "scalar"
    if isinstance(obj, np.dtype):
        if obj.hasobject or obj.fields is not None or obj.subdtype is not None:
            return None
        return "dtype"
    torch = sys.modules.get("torch")
    if torch is not None and type(obj) is torch.Tensor:
        ok = obj.layout == torch.strided and not obj.is_quantized
        return "tensor" if ok and str(obj.dtype).removeprefix("torch.") in _TORCH_DTYPES else None
    pd = sys.modules.get("pandas")
    if pd is not None and type(obj) is pd.DataFrame:
        return "frame"
    return None


def _record(obj, index: int) -> tuple:
    kind = _record_kind(obj)
    if kind == "array":
        order = (
            "F" if obj.ndim > 1 and obj.flags.f_contiguous and not obj.flags.c_contiguous else "C"
        )
        return ("array", index, obj.dtype.str, tuple(obj.shape), order, obj.tobytes(order=order))
    if kind == "objects":
        return ("objects", index, tuple(obj.shape), list(obj.reshape(-1)))
    if kind == "scalar":
        return ("scalar", index, obj.dtype.str, obj.tobytes())
    if kind == "dtype":
        return ("dtype", index, obj.str)
    if kind == "tensor":
        return _tensor_record(obj, index)
    return _frame_record(obj, index)


def _tensor_record(t, index: int) -> tuple:
    import torch

    device = str(t.device)
    requires_grad = bool(t.requires_grad)
    t = t.detach().cpu().resolve_conj().resolve_neg()
    size = tuple(t.shape)
    if t.is_contiguous():
        flat, stride = t.reshape(-1), None
    else:  # the strided span of storage it reads, so that strides come back exactly
        stride = tuple(t.stride())
        span = _span(size, stride)
        flat = t.as_strided((span,), (1,), t.storage_offset())
    data = flat.contiguous().view(torch.uint8).numpy().tobytes()
    name = str(t.dtype).removeprefix("torch.")
    return ("tensor", index, name, size, stride, device, requires_grad, data)


def _span(size, stride) -> int:
    """Elements of storage a strided tensor of ``size``, ``stride`` reads (0 when empty)."""
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(size, stride))


def _frame_record(frame, index: int) -> tuple:
    import pandas as pd

    columns = list(frame.columns)
    values = [frame.iloc[:, j].to_numpy() for j in range(len(columns))]
    dtypes = [str(dt) for dt in frame.dtypes]
    ix = frame.index
    if type(ix) is pd.RangeIndex:
        index_rec = ("range", int(ix.start), int(ix.stop), int(ix.step), ix.name)
    else:
        index_rec = ("values", ix.to_numpy(), str(ix.dtype), ix.name)
    return ("frame", index, columns, values, dtypes, index_rec)


def _dumps(det) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf).dump(det)
    return buf.getvalue()


def save_detector(det, path) -> Path:
    """Write the fitted detector ``det`` to ``path`` (the format above); returns the path.

    Raises sklearn's ``NotFittedError`` for an unfitted detector. A detector that holds a
    class outside :data:`SAFE_GLOBALS` (a kernel class of your own) is saved with a
    UserWarning naming it: loading the file then needs ``trusted=[...]`` naming it."""
    check_is_fitted(det, "members_")
    path = Path(path)
    state = _dumps(det)
    names = _globals_of(state)
    outside = sorted(f"{m}.{n}" for m, n in names if (m, n) not in SAFE_GLOBALS)
    if outside:
        warnings.warn(
            f"the detector holds {', '.join(outside)}, outside the classes a model file may "
            f"name: loading {str(path)!r} will need KernelNoveltyDetector.load(path, "
            f"trusted={outside!r})",
            UserWarning,
            stacklevel=3,
        )
    names_list = getattr(det, "channel_names_", None)
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "package_version": package_version(),
        "versions": _versions(),
        "python": platform.python_version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "contract": {
            "n_channels": int(det.n_channels_),
            "n_corpus": int(det.n_corpus_),
            "lengths": _lengths_rule(det),
            "calibrated_lengths": list(calibrated_lengths(det)),
            "channels": [str(c) for c in names_list] if names_list is not None else None,
        },
        "globals": sorted(f"{m}.{n}" for m, n in names),
        "trusted_types": outside,
    }
    head = json.dumps(header, sort_keys=True).encode("utf-8")
    parts = [struct.pack("<I", len(head)), head, state]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    _write_atomically(path, [MAGIC, digest.digest(), *parts])
    return path


def _write_atomically(path: Path, parts: list[bytes]) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                _write(f, part)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp's 0600 -> what open() would give
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write(f, data: bytes) -> None:
    f.write(data)


# ------------------------------------------------------------------ reading
class DisallowedGlobal(ValueError):
    """A model file names a global outside :data:`SAFE_GLOBALS` (and ``trusted``)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class _Unpickler(pickle._Unpickler):
    """The pure-Python unpickler, restricted to building data:

    - ``find_class`` resolves only the names on :data:`SAFE_GLOBALS` (and ``trusted``), and
      refuses any other before importing anything;
    - REDUCE, NEWOBJ and the protocol-0 instantiation call only what ``find_class`` gave;
    - BUILD sets the state of instances of those classes only (never of a class itself, an
      array or a tensor);
    - APPEND(S), SETITEM(S) and ADDITEMS add to lists, dicts and sets (or instances of listed
      subclasses of them) only, so that no other object's methods are called;
    - persistent ids rebuild arrays, tensors, numpy scalars and dtypes and pandas frames from
      data (:func:`_rebuild`)."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file, trusted=frozenset()):
        super().__init__(file, fix_imports=False)
        self._trusted = frozenset(trusted)
        self._allowed: dict[int, object] = {}  # id -> what find_class gave
        self._objects: dict[int, object] = {}  # persistent-id index -> object
        # a range (lazy) may not stand for more items than the stream has bytes: nothing a
        # file builds, or a caller later materialises from it, outgrows the file
        size = file.getbuffer().nbytes if isinstance(file, io.BytesIO) else 0
        self._range = functools.partial(_bounded_range, max(size, 1024))

    def find_class(self, module, name):
        if not (isinstance(module, str) and isinstance(name, str)):
            raise pickle.UnpicklingError("a global's module and name must be strings")
        if (module, name) not in SAFE_GLOBALS and f"{module}.{name}" not in self._trusted:
            raise DisallowedGlobal(f"{module}.{name}")
        obj = super().find_class(module, name)
        if obj is range:
            obj = self._range
        self._allowed[id(obj)] = obj
        return obj

    def persistent_load(self, pid):
        return _rebuild(pid, self._objects)

    def _check_callable(self, obj) -> None:
        if id(obj) not in self._allowed:
            raise pickle.UnpicklingError(f"the stream calls a {type(obj).__name__}, not a class")

    def _check_container(self, obj, base: type) -> None:
        if not (type(obj) is base or (isinstance(obj, base) and id(type(obj)) in self._allowed)):
            raise pickle.UnpicklingError(
                f"the stream adds items to a {type(obj).__name__}, not to a {base.__name__}"
            )

    def load_reduce(self):
        self._check_callable(self.stack[-2])
        pickle._Unpickler.load_reduce(self)

    def load_newobj(self):
        self._check_callable(self.stack[-2])
        pickle._Unpickler.load_newobj(self)

    def load_newobj_ex(self):
        self._check_callable(self.stack[-3])
        pickle._Unpickler.load_newobj_ex(self)

    def _instantiate(self, klass, args):
        self._check_callable(klass)
        return super()._instantiate(klass, args)

    def load_build(self):
        inst = self.stack[-2]
        if isinstance(inst, type) or id(type(inst)) not in self._allowed:
            raise pickle.UnpicklingError(
                f"the stream sets the state of a {type(inst).__name__}, not of a listed class"
            )
        pickle._Unpickler.load_build(self)
        check = getattr(type(inst), "_check_loaded_state", None)
        if check is not None:  # a class that validates what native code will index with
            check(inst)

    def load_append(self):
        self._check_container(self.stack[-2], list)
        pickle._Unpickler.load_append(self)

    def load_appends(self):
        items = self.pop_mark()
        self._check_container(self.stack[-1], list)
        self.stack[-1].extend(items)

    def load_setitem(self):
        self._check_container(self.stack[-3], dict)
        pickle._Unpickler.load_setitem(self)

    def load_setitems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        self._check_container(target, dict)
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    def load_additems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        if type(target) is not set:
            raise pickle.UnpicklingError(f"the stream adds items to a {type(target).__name__}")
        target.update(items)

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.BUILD[0]] = load_build
    dispatch[pickle.APPEND[0]] = load_append
    dispatch[pickle.APPENDS[0]] = load_appends
    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.SETITEMS[0]] = load_setitems
    dispatch[pickle.ADDITEMS[0]] = load_additems


def _bounded_range(limit: int, *args) -> range:
    r = range(*args)
    if len(r) > limit:
        raise pickle.UnpicklingError(
            f"a range of {len(r)} items in a stream of {limit} bytes (a file may not describe "
            "more items than it holds)"
        )
    return r


class _Placeholder:
    """What :class:`_Recorder` builds in place of every object: it takes items and does
    nothing, so that recording calls no constructor and no ``__setstate__``."""

    def append(self, item):
        pass

    def extend(self, items):
        pass

    def add(self, item):
        pass

    def __setitem__(self, key, value):
        pass


class _Recorder(pickle._Unpickler):
    """Reads a stream for the globals it names (``seen``), building nothing: every global,
    persistent id, call and instantiation gives a :class:`_Placeholder`, and BUILD drops the
    state. :func:`save_detector` runs it on the stream it just wrote, to list the names (and
    those outside :data:`SAFE_GLOBALS`) in the header."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file):
        super().__init__(file, fix_imports=False)
        self.seen: set[tuple[str, str]] = set()

    def find_class(self, module, name):
        self.seen.add((module, name))
        return _Placeholder()

    def persistent_load(self, pid):
        return _Placeholder()

    def _instantiate(self, klass, args):
        self.append(_Placeholder())

    def load_reduce(self):
        self.stack.pop()
        self.stack[-1] = _Placeholder()

    def load_newobj(self):
        del self.stack[-2:]
        self.append(_Placeholder())

    def load_newobj_ex(self):
        del self.stack[-3:]
        self.append(_Placeholder())

    def load_build(self):
        self.stack.pop()

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.BUILD[0]] = load_build


def _globals_of(state: bytes) -> set[tuple[str, str]]:
    """The globals the pickle stream ``state`` names (building nothing: :class:`_Recorder`)."""
    recorder = _Recorder(io.BytesIO(state))
    recorder.load()
    return recorder.seen


def _ints(value, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple) or not all(type(v) is int and v >= 0 for v in value):
        raise pickle.UnpicklingError(f"bad {what} {value!r}")
    return value


def _plain_dtype(text) -> np.dtype:
    if not isinstance(text, str):
        raise pickle.UnpicklingError(f"bad dtype {text!r}")
    dt = np.dtype(text)
    if dt.hasobject or dt.fields is not None or dt.subdtype is not None:
        raise pickle.UnpicklingError(f"dtype {text!r} is not a plain numeric or text dtype")
    return dt


def _count(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _rebuild(pid, objects: dict):
    """The object a persistent id of :class:`_Pickler` stands for, built from data alone."""
    if not isinstance(pid, tuple) or len(pid) < 2 or type(pid[1]) is not int:
        raise pickle.UnpicklingError(f"bad persistent id {pid!r:.80}")
    kind, index = pid[0], pid[1]
    if kind == "ref":
        if len(pid) != 2 or index not in objects:
            raise pickle.UnpicklingError(f"reference to unknown object {index}")
        return objects[index]
    if index in objects:
        raise pickle.UnpicklingError(f"object {index} defined twice")
    builders = {
        "array": _rebuild_array,
        "objects": _rebuild_objects,
        "scalar": _rebuild_scalar,
        "dtype": _rebuild_dtype,
        "tensor": _rebuild_tensor,
        "frame": _rebuild_frame,
    }
    if kind not in builders:
        raise pickle.UnpicklingError(f"unknown record kind {kind!r:.40}")
    obj = builders[kind](*pid[2:])
    objects[index] = obj
    return obj


def _rebuild_array(dtype, shape, order, data):
    dt = _plain_dtype(dtype)
    shape = _ints(shape, "shape")
    if order not in ("C", "F") or not isinstance(data, bytes):
        raise pickle.UnpicklingError("bad array record")
    n = _count(shape)
    if len(data) != n * dt.itemsize:
        raise pickle.UnpicklingError(f"array of {shape} {dt} holds {len(data)} bytes")
    if n == 0:
        return np.empty(shape, dtype=dt, order=order)
    flat = np.frombuffer(data, dtype=dt, count=n)
    return np.array(flat.reshape(shape, order=order), order=order, copy=True)


def _rebuild_objects(shape, items):
    shape = _ints(shape, "shape")
    if not isinstance(items, list) or len(items) != _count(shape):
        raise pickle.UnpicklingError("bad object-array record")
    out = np.empty(len(items), dtype=object)
    for i, v in enumerate(items):
        out[i] = v
    return out.reshape(shape)


def _rebuild_scalar(dtype, data):
    dt = _plain_dtype(dtype)
    if not isinstance(data, bytes) or len(data) != dt.itemsize:
        raise pickle.UnpicklingError("bad scalar record")
    return np.frombuffer(data, dtype=dt, count=1)[0]


def _rebuild_dtype(dtype):
    return _plain_dtype(dtype)


def _rebuild_tensor(name, size, stride, device, requires_grad, data):
    import torch

    if name not in _TORCH_DTYPES or not isinstance(data, bytes):
        raise pickle.UnpicklingError(f"bad tensor record (dtype {name!r:.40})")
    if not isinstance(device, str) or type(requires_grad) is not bool:
        raise pickle.UnpicklingError("bad tensor record")
    dtype = getattr(torch, name)
    size = _ints(size, "size")
    span = _count(size) if stride is None else _span(size, _ints(stride, "stride"))
    if stride is not None and len(stride) != len(size):
        raise pickle.UnpicklingError("bad tensor record (size and stride)")
    if _count(size) > max(16 * span, 2**16):  # stride 0 on purpose: terabytes when copied
        raise pickle.UnpicklingError(f"tensor view of {_count(size)} elements over {span}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(data) != span * itemsize:
        raise pickle.UnpicklingError(f"tensor of {span} {name} holds {len(data)} bytes")
    base = torch.empty(span, dtype=dtype)  # torch's own (aligned) memory
    if span:
        base.view(torch.uint8).numpy()[:] = np.frombuffer(data, dtype=np.uint8)
    t = base.reshape(size) if stride is None else base.as_strided(size, stride, 0)
    if device != "cpu":
        target = torch.device(device)
        if target.type == "cuda" and torch.cuda.is_available():
            t = t.to(target)
    if requires_grad and (t.is_floating_point() or t.is_complex()):
        t.requires_grad_(True)
    return t


def _rebuild_frame(columns, values, dtypes, index):
    import pandas as pd

    ok = (
        isinstance(columns, list)
        and isinstance(values, list)
        and isinstance(dtypes, list)
        and len(columns) == len(values) == len(dtypes)
        and all(isinstance(v, np.ndarray) and v.ndim == 1 for v in values)
        and all(isinstance(d, str) for d in dtypes)
        and all(isinstance(c, (str, int)) for c in columns)
        and isinstance(index, tuple)
        and len(index) in (4, 5)
    )
    if not ok:
        raise pickle.UnpicklingError("bad data-frame record")
    if index[0] == "range" and len(index) == 5:
        start, stop, step, name = index[1:]
        if not all(type(v) is int for v in (start, stop, step)):
            raise pickle.UnpicklingError("bad data-frame index")
        ix = pd.RangeIndex(start, stop, step, name=name)
    elif index[0] == "values" and len(index) == 4 and isinstance(index[1], np.ndarray):
        ix = pd.Index(index[1], dtype=pd.api.types.pandas_dtype(index[2]), name=index[3])
    else:
        raise pickle.UnpicklingError("bad data-frame index")
    series = {
        j: pd.Series(v, dtype=pd.api.types.pandas_dtype(d), index=ix)
        for j, (v, d) in enumerate(zip(values, dtypes))
    }
    frame = pd.DataFrame(series, index=ix)
    frame.columns = pd.Index(columns)
    return frame


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:  # a missing file, a folder, no permission: their OSError
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # /dev/zero, a pipe: no end
            raise ValueError(f"{str(path)!r} is not a regular file, so not a saved model")
        return f.read()


def _parse(data: bytes, path: Path, expected_name: str) -> tuple[dict, memoryview]:
    """The header and the state of a current-format file, after its checksum is verified."""
    bad = f"{str(path)!r} is not a saved {expected_name} or is corrupt"
    start = len(MAGIC) + _DIGEST
    if len(data) < start + 4:
        raise ValueError(f"{bad} (truncated: {len(data)} bytes)")
    body = memoryview(data)[start:]
    if hashlib.sha256(body).digest() != data[len(MAGIC) : start]:
        raise ValueError(
            f"{str(path)!r} is corrupt: its SHA-256 checksum does not match its content (the "
            "file changed after it was saved: cut short, a disk or transfer error, or an "
            "edit); nothing of it was loaded"
        )
    (size,) = struct.unpack("<I", body[:4])
    if 4 + size > len(body):
        raise ValueError(f"{bad} (header of {size} bytes in a body of {len(body)})")
    try:
        header = json.loads(bytes(body[4 : 4 + size]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # nested past the stack
        raise ValueError(f"{bad} (header: {type(exc).__name__})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{bad} (no {FORMAT!r} format marker)")
    version = header.get("format_version")
    if not isinstance(version, int) or version < FORMAT_VERSION:
        raise ValueError(f"{bad} (format_version {version!r})")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{str(path)!r} has format_version {version}, newer than this code reads "
            f"({FORMAT_VERSION}): upgrade tskernels to load it"
        )
    return header, body[4 + size :]


def read_metadata(path) -> dict:
    """The header of the model file at ``path`` (versions, contract, ...), its checksum
    verified, without reading the state (nothing unpickled). ValueError for a file that is
    not one, is damaged or is of the pickle format of tskernels 0.1 (its metadata lies inside
    the pickle)."""
    path = Path(path)
    data = _read_bytes(path)
    if not data.startswith(MAGIC):
        if data[:1] == b"\x80":
            raise ValueError(_LEGACY_REFUSED.format(path=repr(str(path))))
        raise ValueError(f"{str(path)!r} is not a saved model file (no tskernels model header)")
    header, _ = _parse(data, path, "model")
    return header


def read_model(path, expected: type, *, trust_pickle: bool = False, trusted=()):
    """``(detector, metadata)`` of the model file at ``path``: :func:`load_detector` with the
    file's header (for a file of format 1, read with ``trust_pickle=True``: its dict without
    the estimator, ``"format_version": 1``)."""
    path = Path(path)
    name = expected.__name__
    bad = f"{str(path)!r} is not a saved {name} or is corrupt"
    trusted = _check_trusted(trusted)
    data = _read_bytes(path)
    if data.startswith(MAGIC):
        header, state = _parse(data, path, name)
        del data
        try:
            det = _Unpickler(io.BytesIO(state), trusted=trusted).load()
        except DisallowedGlobal as exc:
            raise ValueError(
                f"{str(path)!r} names {exc.name}, which a model file may not hold (it may "
                "name only tskernels' own classes and plain data, and is loaded without "
                "running code from it): it was not loaded. If you trust this file and that "
                f"class, pass trusted=[{exc.name!r}]"
            ) from None
        except (pickle.UnpicklingError, *_READ_ERRORS) as exc:
            raise ValueError(f"{bad} ({type(exc).__name__}: {exc})".replace("\n", " ")) from exc
        meta = header
        check = getattr(det, "_check_params", None) if isinstance(det, expected) else None
        if check is not None:  # parameters as the constructor's are checked at fit
            try:
                check()
            except ValueError as exc:
                raise ValueError(f"{str(path)!r}: not loaded: {exc}") from None
    elif trust_pickle:
        det, meta = _read_legacy(path, bad)
        if isinstance(det, expected):
            _as_0_1_behaved(det)
    elif data[:1] == b"\x80":
        raise ValueError(_LEGACY_REFUSED.format(path=repr(str(path))))
    else:
        raise ValueError(f"{bad} (no tskernels model header)")
    if not isinstance(det, expected):
        raise ValueError(f"{bad} (its estimator is {type(det).__name__}, not a detector)")
    return det, meta


_READ_ERRORS = (
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
    RuntimeError,
    struct.error,
)


def _check_trusted(trusted) -> frozenset[str]:
    if isinstance(trusted, str):
        trusted = [trusted]
    out = frozenset(trusted)
    for name in out:
        if not isinstance(name, str) or "." not in name:
            raise ValueError(f"trusted names classes as 'module.Class', got {name!r}")
    return out


def load_detector(path, expected: type, *, trust_pickle: bool = False, trusted=()):
    """The detector saved at ``path`` by :func:`save_detector`, an instance of ``expected``
    (the detector's class, which :meth:`KernelNoveltyDetector.load` passes: this module reads
    the format and never imports the detector).

    Loading runs no code from the file: ValueError, before anything is imported, when the
    file names a global outside :data:`SAFE_GLOBALS` and ``trusted`` (``"module.Class"``
    names you vouch for). ValueError when the file is not a saved detector, is damaged (its
    SHA-256 checksum) or truncated, or has a newer ``format_version`` than this code reads;
    a file of tskernels 0.1's pickle format only with ``trust_pickle=True`` (unpickling it
    runs any code it names). A UserWarning when another ``tskernels`` version saved it. A
    missing file, a folder or one without read permission raise their OSError."""
    det, meta = read_model(path, expected, trust_pickle=trust_pickle, trusted=trusted)
    warn_other_version(path, meta, stacklevel=4)
    return det


def warn_other_version(path, meta: dict, stacklevel: int = 2) -> None:
    """A UserWarning when the file's ``package_version`` is not the installed one."""
    saved, current = meta.get("package_version"), package_version()
    if saved != current:
        warnings.warn(
            f"{str(path)!r} was saved by tskernels {saved}, this is tskernels {current}: "
            "its scores may differ from those of the saving version",
            UserWarning,
            stacklevel=stacklevel,
        )


# ------------------------------------------------------------------ the legacy format
#: Modules of the layout before novelty's subpackages -> where their classes live now. A file
#: of format 1 saved by that layout names its classes by the former modules; loading it (with
#: ``trust_pickle=True``) reads them here. The current format never uses these names.
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


def _read_legacy(path: Path, bad: str):
    """A file of format 1 (a joblib pickle): **runs any code the file names**; called only
    with ``trust_pickle=True``."""
    import joblib

    try:
        with _former_module_names():  # a file saved before the subpackages
            payload = joblib.load(path)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (pickle.UnpicklingError, *_READ_ERRORS) as exc:
        raise ValueError(f"{bad} ({type(exc).__name__}: {exc})".replace("\n", " ")) from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{bad} (no {FORMAT!r} format marker)")
    version = payload.get("format_version")
    if version != LEGACY_FORMAT_VERSION:
        raise ValueError(f"{bad} (a pickle of format_version {version!r})")
    meta = {k: v for k, v in payload.items() if k != "estimator"}
    return payload.get("estimator"), meta


def _as_0_1_behaved(det) -> None:
    """What a detector of a 0.1 file may lack, set as 0.1 behaved (the one place that adapts
    0.1's objects): ``layout`` and ``verbose`` (parameters added during 0.1) at their defaults,
    and each member spec's ``adapt_to_corpus`` by the rule it replaced (adapted when the
    member has a name)."""
    for name, default in (("layout", None), ("verbose", False)):
        det.__dict__.setdefault(name, default)
    for member in getattr(det, "members_", None) or []:
        spec = getattr(member, "spec", None)
        if spec is not None and "adapt_to_corpus" not in vars(spec):
            spec.__dict__["adapt_to_corpus"] = spec.name != ""  # a frozen dataclass


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
    per time step. A member kind without a kernel (``kernel_``) says it by its attribute
    ``accepts_other_lengths`` (absent: it needs the corpus's lengths)."""
    kernel = getattr(member, "kernel_", None)
    if kernel is None:
        return bool(getattr(member, "accepts_other_lengths", False))
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


def _corpus_lengths(corpus) -> tuple[int, int]:
    """(shortest, longest) series length of a member's (pre-processed) corpus."""
    if hasattr(corpus, "lengths"):  # SeriesBatch
        lengths = corpus.lengths
        return int(lengths.min()), int(lengths.max())
    if hasattr(corpus, "shape"):
        return int(corpus.shape[1]), int(corpus.shape[1])
    lengths = [int(x.shape[0]) for x in corpus]
    return min(lengths), max(lengths)


def _raw_length(member):
    """The raw series length(s) a fixed-length member accepts: its corpus length, undoing
    its pre-processing (basepoint, pooling window w: raw lengths [L w, L w + w - 1])."""
    length = _corpus_lengths(member.corpus_)[1]
    pre = getattr(member, "preprocessor_", None)
    if pre is None:
        return length
    length -= 1 if getattr(pre, "basepoint", False) else 0
    window = int(getattr(pre, "window_", 1))
    if window == 1:
        return length
    return [length * window, length * window + window - 1]


def _member_raw_range(member) -> tuple[int, int]:
    """The raw lengths whose pre-processed length lies in the member's corpus range: with a
    pooling window w a raw length T becomes ``max(T // w, 1)`` steps (a basepoint adds one),
    so pooled lengths [a, b] are raw lengths [a w, b w + w - 1] (from 1 when a = 1)."""
    lo, hi = _corpus_lengths(member.corpus_)
    pre = getattr(member, "preprocessor_", None)
    if pre is None:
        return lo, hi
    if getattr(pre, "basepoint", False):
        lo, hi = lo - 1, hi - 1
    w = int(getattr(pre, "window_", 1))
    if w == 1:
        return lo, hi
    return (1 if lo <= 1 else lo * w), hi * w + w - 1


def calibrated_lengths(det) -> tuple[int, int]:
    """``(lo, hi)``: the raw series lengths the detector's conformal calibration holds for.

    A series of raw length T is within the calibration when every member sees it at a
    length its corpus had: after the member's pre-processing (pooling window w: T becomes
    ``max(T // w, 1)`` steps) that length lies in the range of the member's corpus lengths.
    The pooling map is monotone, so this is one interval, the intersection of the members'
    intervals; for a corpus of one length T and no pooling, ``(T, T)``. A series of another
    length is scored (when the kernels accept it) but its p-value is not calibrated:
    scoring gives a UserWarning."""
    ranges = [_member_raw_range(m) for m in det.members_]
    return max(r[0] for r in ranges), min(r[1] for r in ranges)
