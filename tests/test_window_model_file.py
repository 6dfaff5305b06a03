"""A damaged or crafted window model file (novelty.windows._persist) is refused with a
ValueError naming it (the command line: one line, exit status 2), never a KeyError traceback,
and a compressed member (which np.savez never writes) cannot inflate beyond the file."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from novelty import WindowNoveltyDetector
from novelty.__main__ import main
from novelty.windows._persist import FORMAT


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _model(path, meta: dict, compression=zipfile.ZIP_STORED, **arrays):
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        z.writestr("window_meta.npy", _npy(np.array(json.dumps(meta))))
        for name, a in arrays.items():
            z.writestr(f"{name}.npy", _npy(a))
    return path


@pytest.mark.parametrize(
    "meta",
    [
        {"format": FORMAT},  # no parameters
        {"format": FORMAT, "params": {"no_such_parameter": 1}},
        {"format": FORMAT, "params": {}, "n_members": 1},  # scalars and arrays missing
    ],
)
def test_a_damaged_window_model_is_one_value_error(meta, tmp_path, capsys):
    path = _model(tmp_path / "w.model", meta)
    with pytest.raises(ValueError, match="window model .* is damaged"):
        WindowNoveltyDetector.load(path)
    assert main(["info", "--model", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is damaged" in err


def test_a_compressed_member_is_refused_before_it_is_inflated(tmp_path):
    path = _model(
        tmp_path / "w.model",
        {"format": FORMAT},
        compression=zipfile.ZIP_DEFLATED,
        mean=np.zeros(10**6),  # 8 MB of zeros in a few kB
    )
    assert path.stat().st_size < 50_000
    with pytest.raises(ValueError, match="compressed"):
        WindowNoveltyDetector.load(path)


def _rewritten(src, dst, edit):
    """A copy of the saved model ``src`` at ``dst`` with its metadata changed by ``edit``."""
    with zipfile.ZipFile(src) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    meta = json.loads(str(np.load(io.BytesIO(members["window_meta.npy"]))))
    edit(meta)
    members["window_meta.npy"] = _npy(np.array(json.dumps(meta)))
    with zipfile.ZipFile(dst, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return dst


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda m: m["params"].update(member_scale="xyz"), "member_scale"),
        (lambda m: m["params"].update(contamination=3.0), "contamination"),
        (lambda m: m.update(member_scale_="xyz"), "member_scale_"),
    ],
)
def test_a_model_with_parameters_outside_their_constraints_is_refused(edit, problem, tmp_path):
    """Parameters read from a file are checked as those given to the constructor: a file
    edited to hold a value no detector could have is refused at load, naming the value."""
    rng = np.random.default_rng(0)
    x = np.sin(np.arange(1200) / 5)[:, None] + 0.1 * rng.normal(size=(1200, 1))
    src = WindowNoveltyDetector(window=20).fit(x).save(tmp_path / "m.model")
    WindowNoveltyDetector.load(src)  # the file as saved loads
    bad = _rewritten(src, tmp_path / "bad.model", edit)
    with pytest.raises(ValueError, match=f"bad.model: not loaded: .*{problem}"):
        WindowNoveltyDetector.load(bad)
