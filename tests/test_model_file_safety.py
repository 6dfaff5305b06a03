"""A model file runs no code (issue 31, findings 1, 3 and 5; build items 1, 2 and 4).

- A file that names any callable outside the format's list (``os.system``, ``eval``,
  ``getattr``, ``functools.partial``, ...) is refused with a ValueError naming it, before it is
  imported, by ``KernelNoveltyDetector.load`` and by ``tskernels-detect info`` / ``score``:
  the issue's reproducer creates no file.
- A file saved by tskernels 0.1 (a joblib pickle) loads only with ``trust_pickle=True`` /
  ``--trust-pickle``.
- Any single-bit flip is refused (SHA-256) before anything is unpickled.
- Every member kind round-trips bit for bit; the metadata records the versions; ``info`` reads
  the file once and says which lengths are calibrated.
- Scoring series of a length outside the calibrated ones warns, naming the lengths.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
import struct
import sys
import warnings
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
import torch

import tskernels as tk
from novelty import KernelNoveltyDetector
from novelty.__main__ import build_parser, main
from novelty.detector import _persistence as persistence

ROOT = Path(__file__).resolve().parents[1]


def _walks(n, T=30, d=2, seed=0):
    return np.random.default_rng(seed).normal(size=(n, T, d)).cumsum(1)


def _quiet_fit(det, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return det.fit(X)


@pytest.fixture(scope="module")
def corpus():
    return _walks(25)


@pytest.fixture(scope="module")
def new():
    X = _walks(8, seed=1)
    X[:3] += 4.0
    return X


@pytest.fixture(scope="module")
def small(corpus):
    """A cheap fitted detector (flattened RBF, 1-NN), channels named as the CLI names them."""
    det = _quiet_fit(KernelNoveltyDetector(tk.FlattenedKernel(tk.RBF(3.0)), scorer="knn"), corpus)
    det.channel_names_ = ["a", "b"]
    return det


@pytest.fixture(scope="module")
def default(corpus):
    """The default recipe (MiniRocket + GAK), channels named as the CLI names them."""
    det = _quiet_fit(KernelNoveltyDetector(), corpus)
    det.channel_names_ = ["a", "b"]
    return det


# ------------------------------------------------------------------ helpers
def _text(s: str) -> bytes:
    b = s.encode()
    return pickle.SHORT_BINUNICODE + bytes([len(b)]) + b


def _call_stream(module: str, name: str, *args: str) -> bytes:
    """A pickle stream (protocol 4) that calls ``module.name(*args)``."""
    tuples = [pickle.EMPTY_TUPLE, pickle.TUPLE1, pickle.TUPLE2, pickle.TUPLE3]
    return (
        pickle.PROTO
        + b"\x04"
        + _text(module)
        + _text(name)
        + pickle.STACK_GLOBAL
        + b"".join(_text(a) for a in args)
        + tuples[len(args)]
        + pickle.REDUCE
        + pickle.STOP
    )


def _container(state: bytes, **header) -> bytes:
    """A file of the current format around the pickle stream ``state``, with a valid checksum
    (what someone crafting a file would write)."""
    head = {"format": "tskernels-detector", "format_version": persistence.FORMAT_VERSION}
    head.update(header)
    raw = json.dumps(head).encode()
    body = struct.pack("<I", len(raw)) + raw + state
    return persistence.MAGIC + hashlib.sha256(body).digest() + body


class _System:
    """The issue's payload: unpickling it runs ``touch <marker>``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _evil_legacy(path: Path, marker: Path) -> Path:
    """The issue's reproducer: a 0.1-format file (joblib) whose unpickling runs a command."""
    joblib.dump({"format": "tskernels-detector", "format_version": 1, "x": _System(marker)}, path)
    return path


def _legacy_save(det, path):
    """``det`` saved as tskernels 0.1 saved it (format_version 1, joblib)."""
    joblib.dump(
        {
            "format": "tskernels-detector",
            "format_version": 1,
            "package_version": persistence.package_version(),
            "python": "3.11.0",
            "created": "2026-01-01T00:00:00+00:00",
            "contract": {"n_channels": 2, "n_corpus": det.n_corpus_, "lengths": "any"},
            "estimator": det,
        },
        path,
    )
    return path


def _write_csv(path, X, channels=("a", "b")):
    rows = [
        {"id": f"s{i}", "time": t, **dict(zip(channels, x[t]))}
        for i, x in enumerate(X)
        for t in range(len(x))
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _cli(capsys, argv):
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


# ------------------------------------------------------------------ the reproducer, library
def test_the_issue_reproducer_runs_nothing_on_load(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    path = _evil_legacy(tmp_path / "evil.model", marker)
    with pytest.raises(ValueError, match="pickle file") as e:
        KernelNoveltyDetector.load(path)
    message = str(e.value)
    assert "runs any code" in message and "trust_pickle=True" in message
    assert "--trust-pickle" in message and "\n" not in message
    assert not marker.exists()


def test_trust_pickle_is_what_it_says(tmp_path):
    """The opt-in loads 0.1's pickles, which run their code: the documented risk."""
    marker = tmp_path / "PWNED"
    path = _evil_legacy(tmp_path / "evil.model", marker)
    with pytest.raises(ValueError, match="not a saved KernelNoveltyDetector"):
        KernelNoveltyDetector.load(path, trust_pickle=True)
    assert marker.exists()


def test_the_payload_in_the_current_format_is_refused(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil.model"
    path.write_bytes(_container(pickle.dumps(_System(marker), protocol=4)))
    with pytest.raises(ValueError, match=r"names posix\.system, which a model file may not hold"):
        KernelNoveltyDetector.load(path)
    assert not marker.exists()


EVIL = [
    ("posix", "system", "touch {marker}"),
    ("os", "system", "touch {marker}"),
    ("builtins", "eval", "__import__('os').system('touch {marker}')"),
    ("builtins", "exec", "open('{marker}', 'w').close()"),
    ("builtins", "getattr", "x"),
    ("builtins", "__import__", "os"),
    ("builtins", "open", "{marker}"),
    ("operator", "attrgetter", "system"),
    ("operator", "methodcaller", "system"),
    ("importlib", "import_module", "os"),
    ("functools", "partial", "x"),
    ("subprocess", "Popen", "touch {marker}"),
    ("pickle", "loads", "x"),
    ("joblib", "load", "{marker}"),
    ("torch", "load", "{marker}"),
    ("torch.storage", "_load_from_bytes", "x"),
    ("torch._utils", "_rebuild_tensor_v2", "x"),
    ("numpy._core.multiarray", "_reconstruct", "x"),
    ("numpy", "load", "{marker}"),
    ("copyreg", "_reconstructor", "x"),
    ("pathlib", "Path", "{marker}"),
    ("tskernels._static", "RBF.__init__.__globals__", "x"),  # a dotted name (protocol 4)
    ("novelty.detector._persistence", "_read_legacy", "{marker}"),
]


@pytest.mark.parametrize(("module", "name", "arg"), EVIL, ids=[f"{m}.{n}" for m, n, _ in EVIL])
def test_every_other_callable_is_refused_by_name(module, name, arg, tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil.model"
    path.write_bytes(_container(_call_stream(module, name, arg.format(marker=marker))))
    with pytest.raises(ValueError) as e:
        KernelNoveltyDetector.load(path)
    message = str(e.value)
    assert f"names {module}.{name}, which a model file may not hold" in message
    assert f"trusted=['{module}.{name}']" in message and "\n" not in message
    assert not marker.exists()


def test_a_refused_module_is_not_even_imported(tmp_path):
    path = tmp_path / "evil.model"
    path.write_bytes(_container(_call_stream("antigravity", "fly")))
    assert "antigravity" not in sys.modules
    with pytest.raises(ValueError, match="names antigravity.fly"):
        KernelNoveltyDetector.load(path)
    assert "antigravity" not in sys.modules  # importing it would open a web browser


def test_a_listed_class_cannot_be_changed_or_called(tmp_path):
    """BUILD on a class object (setting its attributes), and REDUCE on an instance, are
    refused: a file creates instances of listed classes with data, nothing else."""
    klass = pickle.PROTO + b"\x04" + _text("tskernels._static") + _text("RBF") + pickle.STACK_GLOBAL
    set_attr = (
        klass
        + pickle.NONE
        + pickle.EMPTY_DICT
        + _text("injected")
        + _text("yes")
        + pickle.SETITEM
        + pickle.TUPLE2
        + pickle.BUILD
        + pickle.STOP
    )
    call_instance = (
        klass
        + pickle.EMPTY_TUPLE
        + pickle.NEWOBJ
        + pickle.EMPTY_TUPLE
        + pickle.REDUCE
        + pickle.STOP
    )
    for i, stream in enumerate([set_attr, call_instance]):
        path = tmp_path / f"f{i}.model"
        path.write_bytes(_container(stream))
        with pytest.raises(ValueError, match="is corrupt"):
            KernelNoveltyDetector.load(path)
    assert not hasattr(tk.RBF, "injected")


def _long(n: int) -> bytes:
    raw = n.to_bytes(8, "little")
    return pickle.LONG1 + bytes([len(raw)]) + raw


def _global(module: str, name: str) -> bytes:
    return _text(module) + _text(name) + pickle.STACK_GLOBAL


@pytest.mark.parametrize(
    "stream, refusal",
    [
        # bytearray(n): n zero bytes from a file of about 150 bytes
        (_global("builtins", "bytearray") + _long(10**7) + pickle.TUPLE1 + pickle.REDUCE,
         "names builtins.bytearray"),
        # set(range(n)): n items built from a file of about 160 bytes
        (_global("builtins", "set") + _global("builtins", "range") + _long(10**7)
         + pickle.TUPLE1 + pickle.REDUCE + pickle.TUPLE1 + pickle.REDUCE, "names builtins.set"),
        # numpy.float64(range(n)): an array of n floats
        (_global("numpy", "float64") + _global("builtins", "range") + _long(10**7)
         + pickle.TUPLE1 + pickle.REDUCE + pickle.TUPLE1 + pickle.REDUCE,
         "a range of 10000000 items"),
        # a lazy range as a stored value: whoever reads it later materialises n items
        (_global("builtins", "range") + _long(10**12) + pickle.TUPLE1 + pickle.REDUCE,
         "a range of 1000000000000 items"),
    ],
)  # fmt: skip
def test_a_small_file_cannot_make_the_loader_build_more_than_it_holds(stream, refusal, tmp_path):
    """Nothing a file builds holds more items than the file has bytes: the builtins a
    protocol-5 stream never names (bytearray, set, frozenset: it writes them with their own
    opcodes) are refused, and a range longer than the file is refused before anything
    consumes it."""
    path = tmp_path / "bomb.model"
    path.write_bytes(_container(pickle.PROTO + b"\x04" + stream + pickle.STOP))
    assert path.stat().st_size < 300
    with pytest.raises(ValueError, match=refusal):
        KernelNoveltyDetector.load(path)


def test_sets_frozensets_bytearrays_and_short_ranges_still_round_trip():
    state = {"s": {1, 2}, "f": frozenset({3}), "b": bytearray(b"xy"), "r": range(2, 9, 3)}
    out = persistence._Unpickler(io.BytesIO(persistence._dumps(state))).load()
    assert out == state and type(out["f"]) is frozenset and type(out["b"]) is bytearray


def test_items_go_into_lists_dicts_and_sets_only(tmp_path):
    """SETITEM on a rebuilt tensor (which has ``__setitem__``) is refused: a stream adds items
    to containers, it never calls another object's methods."""

    class Marker:
        pass

    class Writer(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Marker):
                return ("tensor", 0, "float64", (2,), None, "cpu", False, bytes(16))
            return None

    buf = io.BytesIO()
    Writer(buf, protocol=3).dump(Marker())  # no frames: items can be appended
    path = tmp_path / "m.model"
    path.write_bytes(_container(buf.getvalue()))
    assert torch.equal(persistence._Unpickler(io.BytesIO(buf.getvalue())).load(), torch.zeros(2))
    stream = buf.getvalue()[:-1] + pickle.BININT1 + b"\x00" + pickle.BININT1 + b"\x05"
    path.write_bytes(_container(stream + pickle.SETITEM + pickle.STOP))
    with pytest.raises(ValueError, match="adds items to a Tensor"):
        KernelNoveltyDetector.load(path)
    mark = stream[: -2 * 2] + pickle.MARK + stream[-4:]
    path.write_bytes(_container(mark + pickle.SETITEMS + pickle.STOP))
    with pytest.raises(ValueError, match="adds items to a Tensor"):
        KernelNoveltyDetector.load(path)


@pytest.mark.parametrize(
    "record",
    [
        ("array", 0, "|O", (1,), "C", b"\x00" * 8),  # an object dtype
        ("array", 0, "<f8,<i4", (1,), "C", b"\x00" * 12),  # a structured dtype
        ("array", 0, "<f8", (3,), "C", b"\x00" * 8),  # too few bytes
        ("array", 0, "<f8", (-1,), "C", b""),
        ("tensor", 0, "float64", (4,), None, "cpu", False, b"\x00" * 8),
        ("tensor", 0, "float64", (2, 2), (100, 1), "cpu", False, b"\x00" * 32),  # out of bounds
        ("tensor", 0, "qint8", (1,), None, "cpu", False, b"\x00"),
        # stride 0: 8 bytes viewed as 10^12 elements (terabytes when copied)
        ("tensor", 0, "float64", (10**6, 10**6), (0, 0), "cpu", False, b"\x00" * 8),
        ("scalar", 0, "|O", b"\x00" * 8),
        ("dtype", 0, "O"),
        ("ref", 7),
        ("eval", 0, "x"),
        "not a tuple",
    ],
    ids=lambda r: str(r[0]) if isinstance(r, tuple) else "str",
)
def test_malformed_array_records_are_refused(record, tmp_path):
    class Marker:
        pass

    class Writer(pickle.Pickler):
        def persistent_id(self, obj):
            return record if isinstance(obj, Marker) else None

    buf = io.BytesIO()
    Writer(buf, protocol=5).dump({"x": Marker()})
    path = tmp_path / "bad.model"
    path.write_bytes(_container(buf.getvalue()))
    with pytest.raises(ValueError, match="is corrupt"):
        KernelNoveltyDetector.load(path)


# ------------------------------------------------------------------ the reproducer, CLI
def test_cli_info_and_score_refuse_the_reproducer(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    legacy = _evil_legacy(tmp_path / "evil.model", marker)
    current = tmp_path / "evil2.model"
    current.write_bytes(_container(pickle.dumps(_System(marker), protocol=4)))
    data = _write_csv(tmp_path / "new.csv", _walks(2))
    for model, expected in ((legacy, "--trust-pickle"), (current, "posix.system")):
        rc, out, err = _cli(capsys, ["info", "--model", str(model)])
        assert rc == 2 and expected in err and err.count("\n") == 1, err
        out_csv = tmp_path / "scores.csv"
        argv = ["score", str(data), "--model", str(model), "--out", str(out_csv), "--quiet"]
        rc, out, err = _cli(capsys, argv)
        assert rc == 2 and expected in err and err.count("\n") == 1, err
        assert not out_csv.exists()
    assert not marker.exists()


def test_cli_trust_pickle_loads_a_file_of_0_1(small, new, tmp_path, capsys):
    path = _legacy_save(small, tmp_path / "old.model")
    rc, out, err = _cli(capsys, ["info", "--model", str(path)])
    assert rc == 2 and "--trust-pickle" in err
    rc, out, err = _cli(capsys, ["info", "--model", str(path), "--trust-pickle"])
    assert rc == 0, err
    assert "versions: not recorded" in out and "25 normal series" in out
    data = _write_csv(tmp_path / "new.csv", new)
    out_csv = tmp_path / "scores.csv"
    argv = ["score", str(data), "--model", str(path), "--out", str(out_csv), "--quiet"]
    rc, out, err = _cli(capsys, argv)
    assert rc == 2 and not out_csv.exists()
    rc, out, err = _cli(capsys, [*argv, "--trust-pickle"])
    assert rc == 0, err
    scores = pd.read_csv(out_csv)
    np.testing.assert_allclose(scores["novelty"], -small.score_samples(new), rtol=1e-12)


# ------------------------------------------------------------------ the 0.1 format
def test_a_file_of_0_1_needs_the_opt_in(small, new, tmp_path):
    path = _legacy_save(small, tmp_path / "old.model")
    with pytest.raises(ValueError, match=r"tskernels 0\.1 \(format_version 1\)"):
        KernelNoveltyDetector.load(path)
    with pytest.raises(ValueError, match="format_version 1"):
        persistence.read_metadata(path)
    loaded = KernelNoveltyDetector.load(path, trust_pickle=True)
    np.testing.assert_array_equal(loaded.score_samples(new), small.score_samples(new))
    again = loaded.save(tmp_path / "converted.model")  # saving again converts it
    np.testing.assert_array_equal(
        KernelNoveltyDetector.load(again).score_samples(new), small.score_samples(new)
    )


# ------------------------------------------------------------------ damage
def test_every_single_bit_flip_is_refused(small, tmp_path):
    path = small.save(tmp_path / "m.model")
    data = path.read_bytes()
    KernelNoveltyDetector.load(path)  # the intact file loads
    bits = np.linspace(0, 8 * len(data) - 1, 40).astype(int)
    damaged = tmp_path / "flipped.model"
    for bit in bits:
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        damaged.write_bytes(bytes(flipped))
        with pytest.raises(ValueError, match="corrupt") as e:
            KernelNoveltyDetector.load(damaged)
        assert str(damaged) in str(e.value), bit


def test_a_damaged_file_is_refused_before_unpickling(small, tmp_path, monkeypatch):
    path = small.save(tmp_path / "m.model")
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x10
    path.write_bytes(bytes(data))

    def no_unpickling(*args, **kwargs):
        raise AssertionError("unpickled a damaged file")

    monkeypatch.setattr(persistence._Unpickler, "load", no_unpickling)
    with pytest.raises(ValueError, match="SHA-256 checksum does not match"):
        KernelNoveltyDetector.load(path)
    with pytest.raises(ValueError, match="SHA-256"):
        persistence.read_metadata(path)


# ------------------------------------------------------------------ every member kind
KINDS = {
    **{
        f"kernel={name}": (lambda name=name: KernelNoveltyDetector(tk.make_kernel(name)))
        for name in sorted(tk.kernel_registry())
    },
    **{
        f"scorer={s}": (
            lambda s=s: KernelNoveltyDetector(tk.FlattenedKernel(tk.RBF(3.0)), scorer=s)
        )
        for s in ("knn", "conformance", "mahalanobis", "sse", "sosrep", "mean_embedding", "ocsvm")
    },
    **{
        f"{a}+{s}+{lm}": (
            lambda a=a, s=s, lm=lm: KernelNoveltyDetector(
                tk.FlattenedKernel(tk.RBF(3.0)),
                scorer=s,
                approximation=a,
                n_components=8,
                landmarks=lm,
            )
        )
        for a in ("nystroem", "features")
        for s, lm in (
            ("knn", "uniform"),
            ("conformance", "kmeans++"),
            ("mahalanobis", "leverage"),
            ("sse", "uniform"),
            ("mean_embedding", "uniform"),
        )
    },
    "scorer=auto": lambda: KernelNoveltyDetector(tk.FlattenedKernel(tk.RBF(3.0)), scorer="auto"),
    "preprocess=step": lambda: KernelNoveltyDetector(tk.make_kernel("flat_rbf"), preprocess="step"),
    "preprocess=False": lambda: KernelNoveltyDetector(tk.make_kernel("gak"), preprocess=False),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_member_kind_round_trips_bit_for_bit(kind, tmp_path):
    X = _walks(20, T=16, seed=4)
    new = _walks(5, T=16, seed=5)
    new[:2] += 3.0
    det = _quiet_fit(KINDS[kind](), X)
    path = det.save(tmp_path / "m.model")
    meta = persistence.read_metadata(path)
    assert meta["trusted_types"] == []  # every class it holds is on the list
    assert {tuple(g.rsplit(".", 1)) for g in meta["globals"]} <= persistence.SAFE_GLOBALS
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = KernelNoveltyDetector.load(path)
    np.testing.assert_array_equal(loaded.score_samples(new), det.score_samples(new))
    np.testing.assert_array_equal(loaded.p_values(new), det.p_values(new))
    np.testing.assert_array_equal(loaded.calibration_scores_, det.calibration_scores_)
    assert repr(loaded) == repr(det)


def test_the_default_detector_round_trips_and_keeps_its_channels(default, new, tmp_path):
    path = default.save(tmp_path / "m.model")
    loaded = KernelNoveltyDetector.load(path)
    np.testing.assert_array_equal(loaded.score_samples(new), default.score_samples(new))
    assert loaded.channel_names_ == ["a", "b"]
    assert persistence.read_metadata(path)["contract"]["channels"] == ["a", "b"]


def test_a_class_of_your_own_needs_trusted(corpus, new, tmp_path):
    det = _quiet_fit(KernelNoveltyDetector(MyKernel(tk.RBF(3.0)), scorer="knn"), corpus)
    name = f"{MyKernel.__module__}.MyKernel"
    with pytest.warns(UserWarning, match=re.escape(name)):
        path = det.save(tmp_path / "m.model")
    assert persistence.read_metadata(path)["trusted_types"] == [name]
    with pytest.raises(ValueError, match=re.escape(f"trusted=[{name!r}]")):
        KernelNoveltyDetector.load(path)
    loaded = KernelNoveltyDetector.load(path, trusted=[name])
    np.testing.assert_array_equal(loaded.score_samples(new), det.score_samples(new))


class MyKernel(tk.FlattenedKernel):
    """A user's own kernel class (not on the format's list)."""


# ------------------------------------------------------------------ the records themselves
def test_arrays_tensors_and_frames_come_back_exactly():
    shared = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    frame = pd.DataFrame(
        {
            "name": pd.Series(["a", "b"], dtype="str"),
            "params": [{"k": 1}, None],
            "score": [0.5, np.nan],
            "chosen": [True, False],
        }
    )
    state = {
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "view": np.arange(10)[::3],
        "empty": np.zeros((0, 3), dtype=np.float32),
        "objects": np.array(["x", None, 3], dtype=object),
        "text": np.array(["ab", "c"]),
        "dates": np.array(["2024-01-01"], dtype="datetime64[ns]"),
        "f32": np.float32(1.5),
        "i64": np.int64(-3),
        "dtype": np.dtype("<f4"),
        "t": shared,
        "same": shared,
        "transposed": shared.T,
        "slice": shared[1:, 2:],
        "bool": torch.tensor([True, False]),
        "bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
        "half": torch.tensor([0.1], dtype=torch.float16),
        "long": torch.tensor([[1, 2]], dtype=torch.int64),
        "none": torch.zeros(0, 5),
        "grad": torch.ones(2, requires_grad=True),
        "device": torch.device("cpu"),
        "dtype_t": torch.float32,
        "frame": frame,
    }
    out = persistence._Unpickler(io.BytesIO(persistence._dumps(state))).load()
    for key in ("fortran", "view", "empty", "text", "dates"):
        np.testing.assert_array_equal(out[key], state[key])
        assert out[key].dtype == state[key].dtype and out[key].flags.writeable
    assert out["fortran"].flags.f_contiguous and not out["fortran"].flags.c_contiguous
    assert out["objects"].tolist() == ["x", None, 3] and out["objects"].dtype == object
    assert type(out["f32"]) is np.float32 and out["f32"] == 1.5
    assert type(out["i64"]) is np.int64 and out["i64"] == -3
    assert out["dtype"] == np.dtype("<f4")
    for key in ("t", "transposed", "slice", "bool", "bf16", "half", "long", "none", "grad"):
        assert out[key].dtype == state[key].dtype and out[key].shape == state[key].shape
        assert out[key].stride() == state[key].stride(), key
        assert torch.equal(out[key].detach(), state[key].detach()), key
    assert out["same"] is out["t"]  # shared stays shared
    assert out["grad"].requires_grad and not out["t"].requires_grad
    assert out["device"] == torch.device("cpu") and out["dtype_t"] is torch.float32
    pd.testing.assert_frame_equal(out["frame"], frame)


# ------------------------------------------------------------------ metadata and info
def test_cli_info_prints_versions_and_lengths_and_reads_the_file_once(
    default, tmp_path, capsys, monkeypatch
):
    path = default.save(tmp_path / "m.model")
    reads = []
    read = persistence._read_bytes
    monkeypatch.setattr(persistence, "_read_bytes", lambda p: reads.append(p) or read(p))
    monkeypatch.setattr(joblib, "load", None)  # the current format never goes through joblib
    rc, out, err = _cli(capsys, ["info", "--model", str(path)])
    assert rc == 0, err
    assert len(reads) == 1
    import sklearn
    import sktime

    for text in (
        f"numpy {np.__version__}",
        f"scikit-learn {sklearn.__version__}",
        f"sktime {sktime.__version__}",
        "torch ",
        "python ",
        f"tskernels {persistence.package_version()}",
    ):
        assert text in out, text
    assert "lengths calibrated: 30 steps" in out
    assert "other lengths are scored, with a warning" in out
    assert "lengths accepted: any" not in out


def test_help_states_the_trust_model(capsys):
    texts = [build_parser().format_help()]
    for command in ("fit", "score", "info"):
        with pytest.raises(SystemExit) as e:
            main([command, "--help"])
        assert e.value.code == 0
        texts.append(capsys.readouterr().out)
    for text in texts:
        flat = " ".join(text.split())
        assert "loaded without running any code from it" in flat
        assert "--trust-pickle" in flat
    assert "--trust-pickle" in texts[2] and "--trust-pickle" in texts[3]


# ------------------------------------------------------------------ lengths (finding 5)
def test_scoring_another_length_warns_naming_the_lengths(default, corpus):
    """The issue's finding: the first half of each series, against a full-length corpus."""
    with pytest.warns(UserWarning, match=r"3 of 3 scored series have length 15") as record:
        default.p_values(_walks(3, seed=7)[:, :15])
    message = str(record[0].message)
    assert "calibrated on (30 steps)" in message and "not calibrated" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the corpus's length: no warning
        default.p_values(_walks(3, seed=7))
    mixed = [_walks(1, T=T, seed=8)[0] for T in (30, 12, 45, 30)]
    with pytest.warns(UserWarning, match=r"2 of 4 scored series have length 12, 45"):
        default.score_samples(mixed)


def test_calibrated_lengths_follow_the_pooling_rule():
    """Pooling window w = 3 at 230 steps: raw lengths 228..230 pool to the corpus's 76 steps
    (oracle: the fitted pre-processing itself), and only lengths outside warn."""
    X = _walks(12, T=230, d=1, seed=9)
    det = _quiet_fit(KernelNoveltyDetector(tk.IntegralKernel(tk.RBF(1.0))), X)
    pre, corpus_length = det.members_[0].preprocessor_, det.members_[0].corpus_.length
    same = [
        T for T in range(200, 260) if pre.transform(_walks(1, T=T, d=1)).shape[1] == corpus_length
    ]
    assert persistence.calibrated_lengths(det) == (min(same), max(same)) == (228, 230)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        det.score_samples([_walks(1, T=T, d=1, seed=T)[0] for T in (228, 229, 230)])
    with pytest.warns(UserWarning, match=r"2 of 2 scored series have length 227, 231.*228 to 230"):
        det.score_samples([_walks(1, T=T, d=1, seed=T)[0] for T in (227, 231)])


def test_a_corpus_of_several_lengths_is_calibrated_on_its_range():
    X = [_walks(1, T=T, seed=T)[0] for T in range(20, 31)]
    det = _quiet_fit(KernelNoveltyDetector(tk.IntegralKernel(tk.RBF(1.0)), scorer="knn"), X)
    assert persistence.calibrated_lengths(det) == (20, 30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        det.score_samples([_walks(1, T=25, seed=1)[0]])
    with pytest.warns(UserWarning, match=r"1 of 2 scored series have length 31.*20 to 30"):
        det.score_samples([_walks(1, T=25, seed=1)[0], _walks(1, T=31, seed=2)[0]])


# ------------------------------------------------------------------ data files
def test_the_package_reads_arrays_without_pickle():
    """No ``np.load`` in the package allows pickles (``allow_pickle=False``, numpy's default
    since 1.16.3), ``torch.load`` is not used, and pickle/joblib load only what the package
    itself wrote (the 0.1 opt-in, and the experiment runner's own worker data)."""
    own_pickles = {
        "novelty/detector/_persistence.py",  # joblib.load: the trust_pickle opt-in only
        "experiments/_executor.py",  # the worker data it wrote itself
        "experiments/adbench/_limit.py",  # its own child process's pipe
    }
    problems = []
    for package in ("tskernels", "novelty", "density", "experiments"):
        for file in sorted((ROOT / package).rglob("*.py")):
            rel = file.relative_to(ROOT).as_posix()
            text = file.read_text()
            for m in re.finditer(r"allow_pickle\s*=\s*(\w+)", text):
                if m.group(1) != "False":
                    problems.append(f"{rel}: {m.group(0)}")
            if "torch.load(" in text:
                problems.append(f"{rel}: torch.load")
            if re.search(r"(pickle|joblib)\.loads?\(", text) and rel not in own_pickles:
                problems.append(f"{rel}: pickle/joblib load")
    assert problems == []


def _rocket_kernels(det):
    """The fitted RandomConvolutionKernels of a detector's members."""
    found = []
    for m in det.members_:
        for obj in vars(m).values():
            kernel = getattr(obj, "kernel", obj)
            if isinstance(kernel, tk.RandomConvolutionKernel) and kernel._is_fitted():
                found.append(kernel)
    return found


@pytest.mark.parametrize("position", [1, 2])
def test_a_transform_whose_arrays_no_fit_gives_is_refused(position, corpus, tmp_path):
    """A checksum-valid file whose MiniRocket channel indices (or dilations) point outside the
    series: sktime's compiled transform would index with them unchecked (a crash or worse),
    so the loader refuses them, naming the transform."""
    det = _quiet_fit(
        KernelNoveltyDetector(tk.RandomConvolutionKernel(seed=0), scorer="knn"), corpus
    )
    (kernel,) = _rocket_kernels(det)
    good = tmp_path / "good.model"
    det.save(good)
    assert _rocket_kernels(KernelNoveltyDetector.load(good))  # a real fit loads
    params = list(kernel.transformer_.parameters)
    params[position] = params[position] + np.int32(10**8)
    kernel.transformer_.parameters = tuple(params)
    bad = tmp_path / "bad.model"
    det.save(bad)
    with pytest.raises(ValueError, match="MiniRocketMultivariate.parameters is not a fitted"):
        KernelNoveltyDetector.load(bad)


def test_save_follows_the_umask(small, tmp_path):
    """``det.save`` writes through a temporary file (mkstemp: 0600) but the model gets what
    ``open`` would give under the umask, as the command line's outputs do."""
    import os
    import stat

    before = os.umask(0o022)
    try:
        small.save(tmp_path / "a.model")
        os.umask(0o077)
        small.save(tmp_path / "b.model")
    finally:
        os.umask(before)
    assert stat.S_IMODE((tmp_path / "a.model").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.model").stat().st_mode) == 0o600


def test_a_header_nested_past_the_stack_and_a_device_file_are_one_line_errors(tmp_path):
    """A checksum-valid header of 100,000 nested lists (json raises RecursionError) and a
    path that is not a regular file (``/dev/zero`` would be read until memory runs out) are
    refused with ValueError, so the command line prints one line."""
    raw = b"[" * 100_000 + b"]" * 100_000
    body = struct.pack("<I", len(raw)) + raw + b"."
    path = tmp_path / "deep.model"
    path.write_bytes(persistence.MAGIC + hashlib.sha256(body).digest() + body)
    with pytest.raises(ValueError, match="header: RecursionError"):
        KernelNoveltyDetector.load(path)
    with pytest.raises(ValueError, match="header: RecursionError"):
        persistence.read_metadata(path)
    if os.path.exists("/dev/zero"):
        with pytest.raises(ValueError, match="not a regular file"):
            KernelNoveltyDetector.load("/dev/zero")


@pytest.mark.parametrize(
    "name, value",
    [("contamination", 3.0), ("normalize", "yes"), ("missing", "guess")],
)
def test_a_saved_parameter_outside_its_constraints_is_refused_at_load(tmp_path, name, value):
    """A file whose detector holds a parameter no constructor call could pass (written here
    by setting the attribute after fit, as an edited file with a recomputed checksum would
    hold it) is refused at load, naming the file and the parameter; as saved, it loads."""
    rng = np.random.default_rng(0)
    det = KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.RBF()), scorer="knn")
    det.fit(rng.normal(size=(12, 20, 1)).cumsum(1))
    KernelNoveltyDetector.load(det.save(tmp_path / "ok.model"))
    setattr(det, name, value)
    path = det.save(tmp_path / "edited.model")
    with pytest.raises(ValueError, match=rf"edited\.model'?: not loaded: .*'{name}'"):
        KernelNoveltyDetector.load(path)
