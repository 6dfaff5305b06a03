"""The detection command line (issue 22, items 1 and 5): ``tskernels-detect fit|score|info``,
columns read by header name, one-line errors with exit status 2 and no partial output."""

from __future__ import annotations

import subprocess
import sys

import cli_helpers
import numpy as np
import pandas as pd
import pytest
from import_helpers import loaded

from novelty import KernelNoveltyDetector
from novelty.__main__ import main
from novelty.adapters._io import SeriesFileError, read_series

CHANNELS = cli_helpers.CHANNELS
_series = cli_helpers.series
_write_long = cli_helpers.write_long


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A model fitted by the CLI on 22 normal series (GAK + MiniRocket, the default)."""
    return cli_helpers.fit_model(tmp_path_factory.mktemp("cli"))


def test_fit_and_score_round_trip_equals_the_library(fitted, capsys):
    new = np.concatenate([_series(4, seed=2), _series(2, seed=3, shift=2.0)])
    _write_long(fitted / "new.csv", new, labels=["ok"] * 4 + ["bad"] * 2)
    rc = main(["score", str(fitted / "new.csv"), "--model", str(fitted / "m.model"),
               "--out", str(fitted / "s.csv"), "--quiet"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    out = pd.read_csv(fitted / "s.csv")
    assert list(out.columns) == ["id", "novelty", "p_value", "flagged", "label"]
    # the CLI's model is the library's detector fitted on the same series
    det = KernelNoveltyDetector.load(fitted / "m.model")
    assert det.n_corpus_ == 22 and det.get_params()["kernel"] is None
    ref = KernelNoveltyDetector().fit(_series(22, seed=1))
    np.testing.assert_allclose(det.calibration_scores_, ref.calibration_scores_, rtol=1e-12)
    np.testing.assert_allclose(out["novelty"], -det.score_samples(new), rtol=1e-12)
    np.testing.assert_allclose(out["p_value"], det.p_values(new), rtol=1e-12)
    assert out["flagged"].tolist() == (det.predict(new) == -1).astype(int).tolist()
    assert out["flagged"].tail(2).tolist() == [1, 1]
    # --fdr: Benjamini-Hochberg over the batch
    rc = main(["score", str(fitted / "new.csv"), "--model", str(fitted / "m.model"),
               "--out", str(fitted / "f.csv"), "--fdr", "0.1", "--quiet"])  # fmt: skip
    assert rc == 0
    fdr = pd.read_csv(fitted / "f.csv")
    assert fdr["flagged"].tolist() == (det.predict(new, fdr=0.1) == -1).astype(int).tolist()


def test_columns_are_read_by_name_not_position(fitted, tmp_path):
    new = _series(3, seed=4)
    a = _write_long(tmp_path / "a.csv", new)
    # channels swapped in the header, rows reversed, extra time column name: same series
    b = _write_long(tmp_path / "b.csv", new, header=("flow", "t", "id", "pressure"),
                    order="reversed")  # fmt: skip
    ra, rb = read_series(a), read_series(b, channels=CHANNELS)
    np.testing.assert_array_equal(ra.X, rb.X[::-1])  # series in order of first appearance
    assert ra.ids == ["s0", "s1", "s2"] and rb.ids == ["s2", "s1", "s0"]
    for src, out in ((a, "a_out.csv"), (b, "b_out.csv")):
        assert main(["score", str(src), "--model", str(fitted / "m.model"),
                     "--out", str(tmp_path / out), "--quiet"]) == 0  # fmt: skip
    sa = pd.read_csv(tmp_path / "a_out.csv").set_index("id")
    sb = pd.read_csv(tmp_path / "b_out.csv").set_index("id")
    np.testing.assert_allclose(sa.loc[sb.index, "novelty"], sb["novelty"], rtol=1e-12)


def _error(capsys, argv) -> str:
    try:
        rc = main(argv)
    except SystemExit as exit_:  # argparse's errors
        rc = exit_.code
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_missing_time_column_is_a_one_line_error_naming_the_columns(tmp_path, capsys):
    # the reproducer: a long CSV without its time column was read by position
    _write_long(tmp_path / "nocol.csv", _series(5), header=("id", *CHANNELS))
    line = _error(capsys, ["fit", str(tmp_path / "nocol.csv"), "--model", str(tmp_path / "m")])
    assert "no time column" in line and "columns found: id, pressure, flow" in line
    assert not (tmp_path / "m").exists()
    _write_long(tmp_path / "noid.csv", _series(5), header=("time", *CHANNELS))
    line = _error(capsys, ["fit", str(tmp_path / "noid.csv"), "--model", str(tmp_path / "m")])
    assert "no series id column" in line and "--id-col" in line


def test_scoring_needs_the_fitted_channels_by_name(fitted, tmp_path, capsys):
    new = _series(3, seed=5)
    _write_long(tmp_path / "renamed.csv", new, header=("id", "time", "pressure", "speed"))
    out = tmp_path / "s.csv"
    line = _error(capsys, ["score", str(tmp_path / "renamed.csv"), "--model",
                           str(fitted / "m.model"), "--out", str(out)])  # fmt: skip
    assert "flow not found" in line and "speed" in line
    assert not out.exists()  # no partial output


def test_several_labels_need_normal_label(tmp_path, capsys):
    X = np.concatenate([_series(4, seed=6), _series(4, seed=7, shift=1.0)])
    _write_long(tmp_path / "lab.csv", X, labels=["a"] * 4 + ["b"] * 4)
    line = _error(capsys, ["fit", str(tmp_path / "lab.csv"), "--model", str(tmp_path / "m")])
    assert "2 labels (a, b)" in line and "--normal-label" in line
    line = _error(capsys, ["fit", str(tmp_path / "lab.csv"), "--model", str(tmp_path / "m"),
                           "--normal-label", "c"])  # fmt: skip
    assert "no series has the label" in line and "'c'" in line  # the detector's message


def test_other_errors_are_one_line(fitted, tmp_path, capsys):
    np.savez(tmp_path / "flat.npz", X=np.zeros((50, 3)))
    line = _error(capsys, ["fit", str(tmp_path / "flat.npz"), "--model", str(tmp_path / "m")])
    assert "X[None]" in line and "X[..., None]" in line
    (tmp_path / "junk.model").write_text("not a model")
    _write_long(tmp_path / "x.csv", _series(2))
    line = _error(
        capsys,
        [
            "score",
            str(tmp_path / "x.csv"),
            "--model",
            str(tmp_path / "junk.model"),
            "--out",
            str(tmp_path / "o.csv"),
        ],
    )
    assert "not a saved KernelNoveltyDetector" in line
    line = _error(capsys, ["score", str(tmp_path / "x.csv"), "--model", str(fitted / "m.model"),
                           "--out", str(fitted / "m.model")])  # fmt: skip
    assert "exists: pass --force" in line
    line = _error(capsys, ["score", str(tmp_path / "x.csv"), "--model", str(fitted / "m.model"),
                           "--out", str(tmp_path / "o.csv"), "--fdr", "2"])  # fmt: skip
    assert "--fdr" in line and "(0, 1)" in line
    with open(tmp_path / "text.csv", "w") as f:
        f.write("id,time,pressure,flow\ns1,0,1.0,oops\n")
    line = _error(capsys, ["fit", str(tmp_path / "text.csv"), "--model", str(tmp_path / "m")])
    assert "line 2: column 'flow' holds 'oops', not a number" in line


def test_empty_cells_are_missing_values_interpolated(tmp_path):
    X = _series(3, seed=8)
    path = _write_long(tmp_path / "gaps.csv", X)
    text = path.read_text().splitlines()
    cells = text[5].split(",")
    cells[2] = ""  # series s0, time 4, pressure: missing
    text[5] = ",".join(cells)
    path.write_text("\n".join(text) + "\n")
    r = read_series(path)
    assert np.isnan(r.X[0, 4, 0]) and np.isfinite(np.delete(r.X.ravel(), 4 * 2)).all()
    with open(tmp_path / "badid.csv", "w") as f:
        f.write("id,time,pressure,flow\n,0,1.0,2.0\n")
    with pytest.raises(SeriesFileError, match="line 2: empty series id"):
        read_series(tmp_path / "badid.csv")
    with open(tmp_path / "twice.csv", "w") as f:
        f.write("id,time,pressure,flow\na,0,1.0,2.0\na,0,1.0,2.0\n")
    with pytest.raises(SeriesFileError, match="has the time 0 twice"):
        read_series(tmp_path / "twice.csv")


def test_folder_of_csvs_and_npz(tmp_path):
    X = _series(3, seed=9)
    (tmp_path / "f").mkdir()
    for i, x in enumerate(X):
        pd.DataFrame(
            {"time": np.arange(len(x))[::-1], "pressure": x[::-1, 0], "flow": x[::-1, 1]}
        ).to_csv(tmp_path / "f" / f"r{i}.csv", index=False)
    r = read_series(tmp_path / "f")
    np.testing.assert_allclose(r.X, X, rtol=1e-14)  # decimal text
    assert r.ids == ["r0", "r1", "r2"] and r.channels == CHANNELS
    np.savez(tmp_path / "d.npz", X=X, y=np.array(["a", "a", "b"]))
    z = read_series(tmp_path / "d.npz")
    np.testing.assert_array_equal(z.X, X)
    assert z.labels.tolist() == ["a", "a", "b"]


def test_info(fitted, capsys):
    assert main(["info", "--model", str(fitted / "m.model")]) == 0
    out = capsys.readouterr().out
    assert "22 normal series" in out and "pressure, flow" in out
    members = KernelNoveltyDetector.load(fitted / "m.model").members_  # whatever the default is
    assert f"members: {', '.join(m.spec.label() for m in members)};" in out


def test_argument_errors_import_nothing_heavy():
    # a bad option is answered before numpy's heavy neighbours are imported (fast)
    code = (
        "import sys\nfrom novelty.__main__ import main\n"
        "try:\n    main(['score', 'x.csv'])\nexcept SystemExit as e:\n    assert e.code == 2\n"
    )
    assert loaded(code, ["torch", "sklearn", "pandas", "tskernels"]) == []
    out = subprocess.run([sys.executable, "-m", "novelty", "fit"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr


def test_explain_names_the_channel_and_span(fitted, tmp_path):
    new = _series(2, seed=10)
    new[:, 8:14, 1] += 3.0  # a level shift in "flow", steps 8..13
    _write_long(tmp_path / "odd.csv", new)
    out = tmp_path / "x.csv"
    assert main(["score", str(tmp_path / "odd.csv"), "--model", str(fitted / "m.model"),
                 "--out", str(out), "--explain", "--quiet"]) == 0  # fmt: skip
    x = pd.read_csv(out)
    assert list(x.columns[-3:]) == ["top_channel", "span_start", "span_end"]
    assert x["top_channel"].tolist() == ["flow", "flow"]
    assert (x["span_start"] <= 13).all() and (x["span_end"] >= 8).all()
