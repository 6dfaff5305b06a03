"""tskernels-detect fit --window / score / info on one long recording (novelty.windows._cli)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from novelty import WindowNoveltyDetector
from novelty.__main__ import main


def _recording(T, seed, start="2024-01-01"):
    rng = np.random.default_rng(seed)
    t = np.arange(T)
    df = pd.DataFrame(
        {
            "time": pd.date_range(start, periods=T, freq="1min").strftime("%Y-%m-%dT%H:%M:%S"),
            "a": np.sin(2 * np.pi * t / 30) + 0.1 * rng.normal(size=T),
            "b": np.cos(2 * np.pi * t / 30) + 0.1 * rng.normal(size=T),
        }
    )
    return df


def test_fit_score_info_one_row_per_step(tmp_path, capsys):
    normal, new = _recording(2000, 0), _recording(800, 1, start="2024-02-01")
    new.loc[400:440, "b"] = 2.0
    normal.to_csv(tmp_path / "normal.csv", index=False)
    new.to_csv(tmp_path / "new.csv", index=False)
    model, out = tmp_path / "m.model", tmp_path / "steps.csv"
    assert main(["fit", str(tmp_path / "normal.csv"), "--window", "auto", "--contamination",
                 "0.01", "--model", str(model), "--quiet"]) == 0  # fmt: skip
    assert "window 30" in capsys.readouterr().out
    assert main(["score", str(tmp_path / "new.csv"), "--model", str(model), "--out", str(out),
                 "--explain", "--quiet"]) == 0  # fmt: skip
    df = pd.read_csv(out)
    assert list(df.columns) == ["time", "novelty", "p_value", "flagged", "channel"]
    assert len(df) == 800 and df["time"].iloc[0].startswith("2024-02-01")
    flagged = np.flatnonzero(df["flagged"].to_numpy() == 1)
    # flags spread at most one longest member window around the anomaly: 4 x 30 steps
    inside = (flagged >= 400 - 120) & (flagged < 441 + 120)
    assert set(range(400, 441)) <= set(flagged) and (~inside).sum() <= 0.06 * 800
    assert (df.loc[400:440, "channel"] == "b").all()
    # the same numbers as the Python API on the same data
    det = WindowNoveltyDetector(window="auto", contamination=0.01).fit(normal[["a", "b"]])
    np.testing.assert_allclose(df["novelty"], -det.score_samples(new[["a", "b"]]), rtol=1e-6)
    assert WindowNoveltyDetector.load(model).window_ == 30
    assert main(["info", "--model", str(model)]) == 0
    info = capsys.readouterr().out
    assert "window model: 2 channel(s) (a, b), window 30" in info
    assert "(members: windows 16, 30, 60, 120, 30; strides 2, 3, 7, 15, 3)" in info  # ladder


def test_fit_window_without_contamination_takes_the_window_detectors_default(tmp_path):
    """--contamination left out: 0.01 of the steps with --window (WindowNoveltyDetector's
    default), not the series detector's 0.05 (which it had been: five times the flags)."""
    normal = _recording(2000, 0)
    normal.to_csv(tmp_path / "normal.csv", index=False)
    model = tmp_path / "m.model"
    assert main(["fit", str(tmp_path / "normal.csv"), "--window", "auto", "--model", str(model),
                 "--quiet"]) == 0  # fmt: skip
    got = WindowNoveltyDetector.load(model).contamination
    assert got == WindowNoveltyDetector().contamination == 0.01


def test_errors_are_one_line_with_status_2(tmp_path, capsys):
    normal = _recording(600, 0)
    normal.to_csv(tmp_path / "normal.csv", index=False)
    model = tmp_path / "m.model"
    assert main(["fit", str(tmp_path / "normal.csv"), "--window", "x", "--model", str(model)]) == 2
    assert "--window must be 'auto' or a whole number" in capsys.readouterr().err
    assert main(["fit", str(tmp_path / "normal.csv"), "--window", "20", "--model", str(model),
                 "--quiet"]) == 0  # fmt: skip
    capsys.readouterr()
    out = tmp_path / "s.csv"
    for extra, message in [
        (["--fdr", "0.1"], "--fdr controls a batch of series"),
        ([], None),
        ([], "exists: pass --force"),
    ]:
        rc = main(["score", str(tmp_path / "normal.csv"), "--model", str(model), "--out",
                   str(out), "--quiet", *extra])  # fmt: skip
        err = capsys.readouterr().err
        if message is None:
            assert rc == 0
        else:
            assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    normal[["time", "a"]].to_csv(tmp_path / "one.csv", index=False)
    assert main(["score", str(tmp_path / "one.csv"), "--model", str(model), "--out",
                 str(tmp_path / "t.csv"), "--quiet"]) == 2  # fmt: skip
    assert "b" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["not a zip", b"PK\x03\x04junk"])
def test_other_files_are_not_window_models(tmp_path, bad):
    from novelty.windows._persist import is_window_model

    p = tmp_path / "m"
    p.write_bytes(bad.encode() if isinstance(bad, str) else bad)
    assert not is_window_model(p)
    with pytest.raises(ValueError, match="not a window model"):
        WindowNoveltyDetector.load(p)


def test_window_outputs_are_reserved_neutralised_and_follow_the_umask(tmp_path, capsys):
    """The recording command line writes through the same Output as the series one: a lock
    refuses a second writer, a formula-like channel name is neutralised in the CSV, and the
    file gets the umask's permissions."""
    import os
    import socket
    import stat

    normal, new = _recording(600, 0), _recording(300, 1)
    normal = normal.rename(columns={"b": "=HYPERLINK(1)"})
    new = new.rename(columns={"b": "=HYPERLINK(1)"})
    new.loc[100:140, "=HYPERLINK(1)"] = 3.0
    normal.to_csv(tmp_path / "normal.csv", index=False)
    new.to_csv(tmp_path / "new.csv", index=False)
    model, out = tmp_path / "m.model", tmp_path / "steps.csv"
    held = f"{os.getppid()} {socket.gethostname()}\n"  # a live process holds the lock
    (tmp_path / ".m.model.lock").write_text(held)
    assert main(["fit", str(tmp_path / "normal.csv"), "--window", "20", "--model", str(model),
                 "--quiet"]) == 2  # fmt: skip
    assert "being written by another" in capsys.readouterr().err and not model.exists()
    (tmp_path / ".m.model.lock").unlink()
    before = os.umask(0o027)
    try:
        assert main(["fit", str(tmp_path / "normal.csv"), "--window", "20", "--model",
                     str(model), "--quiet"]) == 0  # fmt: skip
        assert main(["score", str(tmp_path / "new.csv"), "--model", str(model), "--out",
                     str(out), "--explain", "--quiet"]) == 0  # fmt: skip
    finally:
        os.umask(before)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert stat.S_IMODE(model.stat().st_mode) == 0o640
    channels = set(pd.read_csv(out)["channel"])
    assert "'=HYPERLINK(1)" in channels and "=HYPERLINK(1)" not in channels
    assert not list(tmp_path.glob(".*.lock"))
