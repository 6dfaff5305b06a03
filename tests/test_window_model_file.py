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
