"""Saving and loading a fitted detector (issue 22, item 2; issue 31's file format):
novelty.detector._persistence. The safety of the format (no code run from a file, checksum,
the 0.1 pickle opt-in): tests/test_model_file_safety.py."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import warnings

import joblib
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import tskernels
from novelty import KernelNoveltyDetector
from novelty.detector import _persistence as persistence


def _walks(n, T=30, d=2, seed=0):
    return np.random.default_rng(seed).normal(size=(n, T, d)).cumsum(1)


DETECTORS = {
    "default": lambda: KernelNoveltyDetector(),
    # the selection table (selection_), a pandas frame, travels with the file
    "scorer_auto": lambda: KernelNoveltyDetector(
        kernel=tskernels.GAK(), scorer="auto", random_state=0
    ),
    "flattened_knn": lambda: KernelNoveltyDetector(
        kernel=tskernels.FlattenedKernel(tskernels.RBF(3.0)), scorer="knn"
    ),
}


def rewrite_header(path, **changes):
    """Change header fields of a saved model and recompute its checksum (a valid file)."""
    data = path.read_bytes()
    start = len(persistence.MAGIC) + 32
    (size,) = struct.unpack("<I", data[start : start + 4])
    header = json.loads(data[start + 4 : start + 4 + size])
    header.update(changes)
    head = json.dumps(header).encode()
    body = struct.pack("<I", len(head)) + head + data[start + 4 + size :]
    path.write_bytes(persistence.MAGIC + hashlib.sha256(body).digest() + body)


def legacy_save(det, path):
    """Write ``det`` as tskernels 0.1 did (format_version 1: a joblib pickle)."""
    joblib.dump(
        {
            "format": "tskernels-detector",
            "format_version": 1,
            "package_version": persistence.package_version(),
            "python": "3.11.0",
            "created": "2026-01-01T00:00:00+00:00",
            "contract": {"n_channels": det.n_channels_, "n_corpus": det.n_corpus_},
            "estimator": det,
        },
        path,
    )
    return path


@pytest.fixture(scope="module")
def corpus():
    return _walks(25)


@pytest.fixture(scope="module")
def new():
    X = _walks(8, seed=1)
    X[:3] += 4.0
    return X


@pytest.fixture(scope="module")
def fitted(corpus):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KernelNoveltyDetector(
            kernel=tskernels.FlattenedKernel(tskernels.RBF(3.0)), scorer="knn"
        ).fit(corpus)


@pytest.fixture
def saved(fitted, tmp_path):
    return fitted.save(tmp_path / "det.joblib")


@pytest.mark.parametrize("name", list(DETECTORS))
def test_round_trip_gives_identical_scores(name, corpus, new, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        det = DETECTORS[name]().fit(corpus)
    path = tmp_path / "det.joblib"
    assert det.save(path) == path
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same package version: no warning
        loaded = KernelNoveltyDetector.load(path)
    assert isinstance(loaded, KernelNoveltyDetector)
    assert loaded is not det
    np.testing.assert_array_equal(loaded.score_samples(new), det.score_samples(new))
    np.testing.assert_array_equal(loaded.p_values(new), det.p_values(new))
    np.testing.assert_array_equal(loaded.predict(new), det.predict(new))
    np.testing.assert_array_equal(loaded.calibration_scores_, det.calibration_scores_)
    assert loaded.get_params().keys() == det.get_params().keys()
    assert hasattr(det, "selection_") == (name == "scorer_auto")
    if hasattr(det, "selection_"):  # a pandas frame, stored as columns of data
        import pandas as pd

        pd.testing.assert_frame_equal(loaded.selection_, det.selection_)


def test_file_metadata_and_contract(fitted, saved):
    assert saved.read_bytes().startswith(persistence.MAGIC)
    meta = persistence.read_metadata(saved)
    assert meta["format"] == "tskernels-detector"
    assert meta["format_version"] == 2
    assert meta["package_version"] == persistence.package_version()
    assert isinstance(meta["python"], str) and isinstance(meta["created"], str)
    # a flattened kernel needs the corpus length, and is calibrated on it
    assert meta["contract"] == {
        "n_channels": 2,
        "n_corpus": 25,
        "lengths": 30,
        "calibrated_lengths": [30, 30],
        "channels": None,
    }
    assert "novelty.detector._detector.KernelNoveltyDetector" in meta["globals"]
    assert meta["trusted_types"] == []


def test_metadata_records_the_versions(saved):
    from importlib.metadata import version

    import sklearn
    import sktime
    import torch

    versions = persistence.read_metadata(saved)["versions"]
    assert versions["numpy"] == np.__version__ == version("numpy")
    assert versions["torch"] == torch.__version__.split("+")[0] or versions["torch"] == version(
        "torch"
    )
    assert versions["scikit-learn"] == sklearn.__version__
    assert versions["sktime"] == sktime.__version__
    assert versions["tskernels"] == persistence.package_version()
    import platform

    assert versions["python"] == platform.python_version()


def test_default_detector_accepts_any_length(corpus, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        det = KernelNoveltyDetector().fit(corpus)
    meta = persistence.read_metadata(det.save(tmp_path / "d.joblib"))
    assert meta["contract"]["lengths"] == "any"
    assert meta["contract"]["calibrated_lengths"] == [30, 30]
    with pytest.warns(UserWarning, match="length 17"):
        det.score_samples(_walks(2, T=17, seed=3))  # what "any" promises, with a warning


def test_corrupt_file(tmp_path):
    path = tmp_path / "garbage.joblib"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ValueError, match="not a saved KernelNoveltyDetector or is corrupt") as e:
        KernelNoveltyDetector.load(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_truncated_file(saved, tmp_path):
    data = saved.read_bytes()
    path = tmp_path / "half.joblib"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="is corrupt: its SHA-256 checksum") as e:
        KernelNoveltyDetector.load(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.joblib"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="is corrupt"):
        KernelNoveltyDetector.load(path)


@pytest.mark.parametrize(
    "obj",
    [{"a": 1}, [1, 2, 3], {"format": "tskernels-detector", "format_version": 1, "estimator": 3}],
    ids=["plain_dict", "list", "no_detector"],
)
def test_file_of_another_format(obj, tmp_path):
    path = tmp_path / "other.joblib"
    joblib.dump(obj, path)
    with pytest.raises(ValueError, match="pickle file.*trust_pickle=True") as e:
        KernelNoveltyDetector.load(path)  # never unpickled
    assert str(path) in str(e.value)
    with pytest.raises(ValueError, match="not a saved KernelNoveltyDetector") as e:
        KernelNoveltyDetector.load(path, trust_pickle=True)
    assert str(path) in str(e.value)


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        KernelNoveltyDetector.load(tmp_path / "nope.joblib")


def test_version_mismatch_warns(saved, new, fitted):
    rewrite_header(saved, package_version="0.0.0-old")
    with pytest.warns(UserWarning, match="0.0.0-old") as record:
        loaded = KernelNoveltyDetector.load(saved)
    message = str(record[0].message)
    assert persistence.package_version() in message and "may differ" in message
    np.testing.assert_array_equal(loaded.score_samples(new), fitted.score_samples(new))


def test_newer_format_version_is_refused(saved):
    rewrite_header(saved, format_version=3)
    with pytest.raises(ValueError, match="format_version 3, newer"):
        KernelNoveltyDetector.load(saved)


def test_unfitted_save_raises_not_fitted(tmp_path):
    path = tmp_path / "unfitted.joblib"
    with pytest.raises(NotFittedError):
        KernelNoveltyDetector().save(path)
    assert os.listdir(tmp_path) == []


def test_interrupted_save_leaves_no_file(fitted, tmp_path, monkeypatch):
    path = tmp_path / "det.joblib"

    def broken_write(f, data):
        f.write(b"partial")
        raise KeyboardInterrupt("interrupted")

    monkeypatch.setattr(persistence, "_write", broken_write)
    with pytest.raises(KeyboardInterrupt):
        fitted.save(path)
    assert os.listdir(tmp_path) == []  # neither path nor a temporary file


def test_interrupted_save_keeps_the_previous_file(fitted, saved, new, monkeypatch):
    before = saved.read_bytes()

    def broken_write(f, data):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(persistence, "_write", broken_write)
    with pytest.raises(OSError, match="disk full"):
        fitted.save(saved)
    assert saved.read_bytes() == before
    assert os.listdir(saved.parent) == [saved.name]
    monkeypatch.undo()
    np.testing.assert_array_equal(
        KernelNoveltyDetector.load(saved).score_samples(new), fitted.score_samples(new)
    )


def test_save_accepts_a_string_path_in_the_current_folder(fitted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fitted.save("det.joblib")
    assert os.listdir(tmp_path) == ["det.joblib"]
    assert isinstance(KernelNoveltyDetector.load("det.joblib"), KernelNoveltyDetector)


def test_a_file_saved_before_the_subpackages_loads(fitted, new, tmp_path, monkeypatch):
    """A detector saved (format 1, a pickle) when its modules were ``novelty._members`` etc.
    (before the ``novelty.scorers`` / ``novelty.detector`` folders) loads with
    ``trust_pickle=True``, and scores as before."""
    import importlib
    import sys

    path = tmp_path / "former.joblib"
    with monkeypatch.context() as m:  # write it as the former layout named its classes
        for old, new_name in persistence.FORMER_MODULES.items():
            module = importlib.import_module(new_name)
            m.setitem(sys.modules, old, module)
            for obj in list(vars(module).values()):
                if isinstance(obj, type) and obj.__module__ == new_name:
                    m.setattr(obj, "__module__", old)
        legacy_save(fitted, path)
    assert not any(old in sys.modules for old in persistence.FORMER_MODULES)
    raw = path.read_bytes()
    assert b"novelty._members" in raw and b"novelty.detector._members" not in raw
    with pytest.raises(ValueError, match="trust_pickle=True"):
        KernelNoveltyDetector.load(path)
    loaded = KernelNoveltyDetector.load(path, trust_pickle=True)
    np.testing.assert_array_equal(loaded.score_samples(new), fitted.score_samples(new))
    assert not any(old in sys.modules for old in persistence.FORMER_MODULES)  # cleaned up
