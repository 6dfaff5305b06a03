"""Faithful reading of the user's files (issue 31, items 2, 3, 6, 7 and findings 2, 4, 6, 10,
16-20): time-aware reading on the corpus's grid (numbers or ISO 8601 dates, missing rows as
gaps, off-grid rows resampled or refused), column roles by name in files and folders, errors
that name the series and channel (``on_error="skip"``), files that run no code, truncated and
semicolon-separated files, values beyond the float64 range, and the memory of a large file."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pandas as pd
import pytest

from novelty.__main__ import main
from novelty.adapters._io import SeriesFileError, TimeGrid, read_series

CH = ["pressure", "flow"]


def _series(n, T=24, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, T)
    base = np.stack([np.sin(t), np.cos(t)], axis=1)
    return base[None] + 0.1 * rng.normal(size=(n, T, 2)) + shift


def _write(path, X, times=None, drop=(), blank=(), extra=None, header=("id", "time", *CH)):
    """A long CSV of X; ``times[t]`` is the time text of step t (default t); rows (i, t) in
    ``drop`` are left out, those in ``blank`` written with empty channel cells."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(header) + ([] if extra is None else list(extra)))
        for i, x in enumerate(X):
            for t in range(len(x)):
                if (i, t) in drop:
                    continue
                cells = ["", ""] if (i, t) in blank else [repr(float(v)) for v in x[t]]
                row = [f"s{i}", t if times is None else times[t], *cells]
                w.writerow(row + ([] if extra is None else [extra[k][i] for k in extra]))
    return path


def _gaps(n, T, rng, share=0.1):
    """Interior (series, step) pairs, about ``share`` of the rows (never the first/last)."""
    return {(i, t) for i in range(n) for t in range(1, T - 1) if rng.random() < share}


# ----------------------------------------------------------------- finding 4: missing rows
def test_dropped_rows_read_as_the_same_gaps_as_empty_cells(tmp_path):
    X = _series(6, seed=1)
    gaps = _gaps(6, 24, np.random.default_rng(0))
    m = len({i for i, _ in gaps})
    with pytest.warns(
        UserWarning,
        match=rf"{m} of 6 series miss time steps \(step 1\): "
        rf"{len(gaps)} of their {24 * m} grid times .* read as missing values",
    ):
        a = read_series(_write(tmp_path / "drop.csv", X, drop=gaps))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # empty cells: no warning
        b = read_series(_write(tmp_path / "blank.csv", X, blank=gaps))
    assert isinstance(a.X, np.ndarray) and a.X.shape == (6, 24, 2)
    np.testing.assert_array_equal(a.X, b.X)  # NaN in the same places, the rest bit for bit
    assert np.isnan(a.X).any() and a.grid == TimeGrid("number", 1.0)
    for i, t in gaps:
        assert np.isnan(a.X[i, t]).all()


def test_missing_rows_on_a_fractional_and_a_date_grid(tmp_path):
    X = _series(3, T=10, seed=2)
    gaps = {(0, 3), (1, 5), (1, 6), (2, 8)}
    half = [f"{0.5 * t + 100}" for t in range(10)]  # step 0.5 from 100
    a = read_series(_write(tmp_path / "h.csv", X, times=half, drop=gaps))
    assert a.grid == TimeGrid("number", 0.5) and a.X.shape == (3, 10, 2)
    np.testing.assert_array_equal(a.X, read_series(_write(tmp_path / "hb.csv", X, blank=gaps)).X)
    np.testing.assert_array_equal(a.time_values(1), 100 + 0.5 * np.arange(10))
    dates = [f"2024-03-31T00:{t:02d}:00+01:00" for t in range(10)]  # one minute, offset
    d = read_series(_write(tmp_path / "d.csv", X, times=dates, drop=gaps))
    assert d.grid == TimeGrid("datetime", 60.0) and d.X.shape == (3, 10, 2)
    np.testing.assert_array_equal(d.X, a.X)
    assert str(d.time_values(2)[8]) == "2024-03-30T23:08:00.000000000"  # UTC


def test_a_given_grid_wins_and_must_match_the_kind(tmp_path):
    X = _series(2, T=6, seed=3)
    p = _write(tmp_path / "x.csv", X, drop={(0, 2), (1, 2), (1, 3)})
    r = read_series(p, grid={"kind": "number", "step": 0.5})  # the corpus was sampled twice as
    assert r.grid.step == 0.5 and len(r.X[0]) == 11  # fast: every other grid time is empty
    with pytest.raises(SeriesFileError, match="holds numbers, the model's corpus had dates"):
        read_series(p, grid=TimeGrid("datetime", 1.0))


def test_a_step_that_leaves_most_of_a_series_empty_is_refused(tmp_path):
    X = _series(2, T=4, seed=4)
    p = _write(tmp_path / "x.csv", X, times=["0", "1", "2", "1000"])
    with pytest.raises(SeriesFileError, match=r"series 's0': its 4 rows spread over 1001 grid"):
        read_series(p)


def test_two_rows_on_the_same_grid_time_are_refused_not_dropped(tmp_path):
    """Times 2 and 2.0000000001 are distinct rows but one grid time (within the grid's
    tolerance): placing both there would drop one silently, so the series is refused."""
    X = _series(1, T=5, seed=5)
    p = _write(tmp_path / "x.csv", X, times=["0", "1", "2", "2.0000000001", "3"])
    with pytest.raises(SeriesFileError, match=r"series 's0': two of its rows fall on the same"):
        read_series(p)


# ----------------------------------------------------------------- irregular sampling
def test_off_grid_rows_are_resampled_linearly_with_a_warning(tmp_path):
    # a channel linear in time is reproduced exactly by linear resampling (the oracle)
    T = 12
    jitter = np.zeros(T)
    jitter[[3, 7]] = [0.25, -0.4]
    t = np.arange(T) + jitter
    with open(tmp_path / "j.csv", "w") as f:
        f.write("id,time,a,b\n")
        for k in range(T):
            f.write(f"j,{float(t[k])!r},{float(2 * t[k] + 1)!r},{float(-t[k])!r}\n")
        for k in range(T):
            f.write(f"r,{k},{k},{k}\n")
    with pytest.warns(UserWarning, match=r"1 of 2 series .* 2 of 24 rows \(8.3%\)"):
        r = read_series(tmp_path / "j.csv")
    g = np.arange(T, dtype=float)
    np.testing.assert_allclose(r.X[0, :, 0], 2 * g + 1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.X[0, :, 1], -g, rtol=0, atol=1e-12)
    with pytest.raises(SeriesFileError, match=r"series 'j': time 3.25 is off the grid"):
        read_series(tmp_path / "j.csv", irregular="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused, so nothing resampled: no warning
        s = read_series(tmp_path / "j.csv", irregular="error", on_error="skip")
    assert s.ids == ["r"] and s.skipped[0][0] == "j"


def test_resampling_leaves_a_gap_of_two_steps_empty():
    from novelty.adapters._io import _resample

    x = np.array([[0.0], [1.0], [4.0], [5.0]])
    out = _resample(x, np.array([0.0, 1.0, 3.5, 4.5]), 5)  # nothing in (1, 3.5)
    assert out[0, 0] == 0 and out[1, 0] == 1  # on the grid: kept
    assert np.isnan(out[2:4, 0]).all()  # between 1 and 3.5 (2.5 steps apart): a gap
    assert out[4, 0] == 4.5  # between 3.5 and 4.5: interpolated


# ----------------------------------------------------------------- finding 16: ISO times
def test_iso_times_are_read_and_mixes_are_errors_naming_the_line(tmp_path):
    X = _series(2, T=5, seed=5)
    iso = [f"2024-01-01T00:00:{10 * t:02d}" for t in range(5)]
    r = read_series(_write(tmp_path / "iso.csv", X, times=iso))
    np.testing.assert_array_equal(r.X, X)
    assert r.grid == TimeGrid("datetime", 10.0) and r.grid.describe() == "step 10 s"
    bad = {
        "mix.csv": (
            ["0", "1", "2024-01-01", "3", "4"],
            "line 4: column 'time' holds '2024-01-01', not a number",
        ),
        "junk.csv": (
            iso[:3] + ["01/02/2024", iso[4]],
            "line 5: column 'time' holds '01/02/2024', neither a number nor an ISO 8601",
        ),
        "tz.csv": (
            iso[:2] + ["2024-01-01T00:00:20Z"] + iso[3:],
            "line 4: time '2024-01-01T00:00:20Z' has a UTC offset, unlike",
        ),
    }
    for name, (times, message) in bad.items():
        with pytest.raises(SeriesFileError, match=message):
            read_series(_write(tmp_path / name, X, times=times))


# ----------------------------------------------------------------- findings 6 and 17: roles
def test_class_and_y_are_channels_unless_named_as_the_label(tmp_path):
    X = _series(2, T=4, seed=6)
    p = _write(tmp_path / "y.csv", X, header=("id", "time", "y", "class"))
    r = read_series(p)
    assert r.channels == ["y", "class"] and r.labels is None
    np.testing.assert_array_equal(r.X, X)
    with pytest.raises(SeriesFileError, match="series 's0' has two labels"):
        read_series(p, label_col="class")  # named: the label (one per series), not a channel
    lab = _write(tmp_path / "l.csv", X, extra={"label": [1.5, 2.5]})
    assert read_series(lab).labels.tolist() == ["1.5", "2.5"]
    nolab = read_series(lab, label_col=False)  # a column named label is then a channel
    assert nolab.channels == [*CH, "label"] and nolab.labels is None
    assert nolab.X[1, 3, 2] == 2.5
    text = _write(tmp_path / "t.csv", X, extra={"class": ["a", "b"]})
    with pytest.raises(SeriesFileError, match="holds 'a', not a number; if it is the label, "
                       "name it with --label-col class"):  # fmt: skip
        read_series(text)
    assert read_series(text, label_col="class").labels.tolist() == ["a", "b"]


def test_a_folder_honours_id_label_and_time_columns(tmp_path):
    X = _series(3, T=6, seed=7)
    (tmp_path / "f").mkdir()
    for i, x in enumerate(X):
        pd.DataFrame({"id": f"pump{i}", "stamp": np.arange(6)[::-1], "a": x[::-1, 0],
                      "b": x[::-1, 1], "label": "ok" if i else "bad", "kind": f"k{i}"}
                     ).to_csv(tmp_path / "f" / f"r{i}.csv", index=False)  # fmt: skip
    r = read_series(tmp_path / "f", time_col="stamp", channels=["a", "b"])
    assert r.ids == ["pump0", "pump1", "pump2"] and r.labels.tolist() == ["bad", "ok", "ok"]
    np.testing.assert_array_equal(r.X, X)  # rows ordered by the named time column
    with pytest.raises(SeriesFileError, match="column 'kind' holds 'k0', not a number"):
        read_series(tmp_path / "f", time_col="stamp")  # every other column is a channel
    # an explicit label column is honoured; the id column gives the ids
    r = read_series(tmp_path / "f", time_col="stamp", label_col="kind", channels=["a", "b"])
    assert r.labels.tolist() == ["k0", "k1", "k2"] and r.channels == ["a", "b"]
    np.testing.assert_array_equal(r.X, X)


def test_a_folder_without_id_column_uses_the_file_names_and_refuses_an_id_twice(tmp_path):
    X = _series(2, T=5, seed=8)
    (tmp_path / "f").mkdir()
    for i, x in enumerate(X):
        pd.DataFrame({"time": np.arange(5), "a": x[:, 0], "b": x[:, 1], "label": "n"}).to_csv(
            tmp_path / "f" / f"r{i}.csv", index=False
        )
    r = read_series(tmp_path / "f")
    assert r.ids == ["r0", "r1"] and r.channels == ["a", "b"] and r.labels.tolist() == ["n", "n"]
    np.testing.assert_array_equal(r.X, X)
    (tmp_path / "g").mkdir()
    for k in range(2):
        pd.DataFrame({"id": "same", "time": np.arange(5) + 5 * k, "a": 1.0, "b": 2.0}).to_csv(
            tmp_path / "g" / f"p{k}.csv", index=False
        )
    with pytest.raises(SeriesFileError, match="series 'same' is also in"):
        read_series(tmp_path / "g")


# ----------------------------------------------------------------- findings 10, 18, 19
def test_a_file_cut_off_mid_line_is_refused(tmp_path):
    p = _write(tmp_path / "cut.csv", _series(2, T=4, seed=9))
    text = p.read_bytes()
    p.write_bytes(text[: text.rindex(b",")])  # the last line loses its last cell
    with pytest.raises(SeriesFileError, match="line 9 has 3 of 4 cells and the file does not "
                       "end with a newline: the file looks cut off"):  # fmt: skip
        read_series(p)
    p.write_bytes(b"id,time,a,b\ns,0,1,2\ns,1,2\ns,2,3,4\n")
    with pytest.raises(SeriesFileError, match="line 3 has 3 cells, the header 4"):
        read_series(p)


def test_a_semicolon_separated_file_gets_a_hint(tmp_path):
    (tmp_path / "semi.csv").write_text("id;time;a\ns;0;1,5\n")
    with pytest.raises(SeriesFileError, match="holds semicolons: the file seems separated by ';'"):
        read_series(tmp_path / "semi.csv")


def test_errors_name_the_series_and_channel_and_skip_reads_the_others(tmp_path):
    X = _series(20, T=6, seed=10)
    blank = {(17, t) for t in range(6)}  # series s17 has no flow at all
    p = _write(tmp_path / "e.csv", X)
    lines = p.read_text().splitlines()
    for k, line in enumerate(lines):
        if line.startswith("s17,"):
            lines[k] = line.rsplit(",", 1)[0] + ","
        if line.startswith("s4,3,"):
            lines[k] = "s4,3,oops," + line.rsplit(",", 1)[1]
    p.write_text("\n".join(lines) + "\n")
    del blank
    with pytest.raises(SeriesFileError, match="line 29: column 'pressure' holds 'oops'"):
        read_series(p)
    r = read_series(p, on_error="skip")
    assert [s for s, _ in r.skipped] == ["s4", "s17"] and len(r) == 18 and "s17" not in r.ids
    assert "channel 'flow' has no value" in r.skipped[1][1]
    np.testing.assert_array_equal(r.X, np.delete(X, [4, 17], axis=0))
    lines[29 - 1] = lines[29 - 1].replace("oops", "0.5")
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(SeriesFileError, match=r"series 's17': channel 'flow' has no value"):
        read_series(p)


def test_values_beyond_the_float64_range_get_a_range_message(tmp_path):
    p = _write(tmp_path / "big.csv", _series(3, T=5, seed=11) * 1e154)
    with pytest.raises(SeriesFileError, match=r"series 's0': channel 'pressure' holds .*e\+15"
                       r"\d at row 0, beyond \+-1e\+150: the detector's squared distances "
                       r"overflow float64 there; rescale"):  # fmt: skip
        read_series(p)
    (tmp_path / "inf.csv").write_text("id,time,a\ns,0,1e400\ns,1,1\n")
    with pytest.raises(SeriesFileError, match="holds inf at row 0, beyond"):
        read_series(tmp_path / "inf.csv")


# ----------------------------------------------------------------- finding 2: npz runs no code
class _Payload:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_an_npz_with_an_object_array_runs_no_code(tmp_path):
    marker = str(tmp_path / "PWNED")
    X = np.empty(2, dtype=object)
    X[0], X[1] = np.zeros((3, 1)), _Payload(marker)
    np.savez(tmp_path / "evil.npz", X=X)
    with pytest.raises(SeriesFileError, match="X is an object array .* never loaded"):
        read_series(tmp_path / "evil.npz")
    assert not os.path.exists(marker)


def test_an_npz_padded_with_nan_rows_gives_unequal_lengths(tmp_path):
    X = np.full((2, 5, 2), np.nan)
    X[0], X[1, :3] = 1.0, 2.0
    np.savez(tmp_path / "pad.npz", X=X, ids=np.array(["a", "b"]))
    r = read_series(tmp_path / "pad.npz")
    assert [len(x) for x in r.X] == [5, 3] and r.ids == ["a", "b"]


# ----------------------------------------------------------------- finding 20: exact, lean
def test_numbers_are_parsed_exactly_as_python_parses_them(tmp_path):
    rng = np.random.default_rng(12)
    v = np.concatenate([rng.normal(size=300), rng.normal(size=100) * 1e-300,
                        rng.normal(size=100) * 1e140, [5e-324, -0.0, 1e-310]])  # fmt: skip
    texts = [repr(float(x)) for x in v] + [f"{x:.6g}" for x in v[:200]] + [" 1.5 ", "1E3"]
    with open(tmp_path / "n.csv", "w") as f:
        f.write("id,time,a\n" + "".join(f"s,{k},{c}\n" for k, c in enumerate(texts)))
    got = read_series(tmp_path / "n.csv").X[0, :, 0]
    want = np.array([float(c) for c in texts])
    assert got.tobytes() == want.tobytes()  # bit for bit, signs of zero included


def test_reading_a_large_file_takes_under_twice_its_size_in_memory(tmp_path):
    """Peak memory (max RSS) of reading a ~75 MB long CSV, above that of reading a small one
    first (imports, arrow's pools and threads): at most 2x the file's size (the pandas reader
    of 0.1 took about 7x)."""
    path = tmp_path / "big.csv"
    code = textwrap.dedent(
        f"""
        import resource, sys
        import numpy as np, pandas, pyarrow, pyarrow.csv, pyarrow.compute
        from novelty.adapters._io import read_series
        rng = np.random.default_rng(0)
        n, T = 400, 5000
        opts = pyarrow.csv.WriteOptions(quoting_style="none")
        with pyarrow.csv.CSVWriter({str(path)!r}, pyarrow.schema(
                [("id", pyarrow.string()), ("time", pyarrow.int64())]
                + [(c, pyarrow.float64()) for c in "abc"]), write_options=opts) as w:
            for i in range(0, n, 50):
                v = np.round(rng.normal(size=(50 * T, 3)), 6)
                ids = np.repeat([f"s{{k}}" for k in range(i, i + 50)], T)
                w.write(pyarrow.record_batch([pyarrow.array(ids), np.tile(np.arange(T), 50),
                                              *v.T], names=["id", "time", "a", "b", "c"]))
        with open({str(path)!r} + ".small.csv", "w") as f:
            f.write("id,time,a,b,c\\n" + "".join(f"s,{{t}},1,2,3\\n" for t in range(1000)))
        read_series({str(path)!r} + ".small.csv")
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        r = read_series({str(path)!r})
        assert r.X.shape == (n, T, 3)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(base, peak)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    base, peak = map(int, out.stdout.split())
    size_kb = path.stat().st_size / 1024
    assert size_kb > 60_000
    assert peak - base <= 2 * size_kb, (peak - base, size_kb)


# ----------------------------------------------------------------- the command line
@pytest.fixture(scope="module")
def half_step_model(tmp_path_factory):
    """A model fitted by the CLI on 22 normal series sampled every 0.5 from time 100, with
    about 10 % of their rows dropped (the default recipe)."""
    d = tmp_path_factory.mktemp("grid")
    times = [f"{100 + 0.5 * t}" for t in range(24)]
    gaps = _gaps(22, 24, np.random.default_rng(1))
    _write(d / "normal.csv", _series(22, seed=1), times=times, drop=gaps)
    rc = main(["fit", str(d / "normal.csv"), "--model", str(d / "m.model"), "--quiet"])
    assert rc == 0
    return d, times


def _score(d, data, *extra):
    out = d / f"{data.stem}{len(extra)}.out.csv"
    rc = main(["score", str(data), "--model", str(d / "m.model"), "--out", str(out), "--quiet",
               "--force", *extra])  # fmt: skip
    return rc, (pd.read_csv(out) if rc == 0 else None)


def test_cli_dropped_rows_and_empty_cells_score_the_same(half_step_model, capsys):
    d, times = half_step_model
    new = np.concatenate([_series(6, seed=2), _series(2, seed=3, shift=1.5)])
    gaps = _gaps(8, 24, np.random.default_rng(2))
    _, a = _score(d, _write(d / "drop.csv", new, times=times, drop=gaps))
    _, b = _score(d, _write(d / "blank.csv", new, times=times, blank=gaps))
    _, full = _score(d, _write(d / "full.csv", new, times=times))
    np.testing.assert_allclose(a["novelty"], b["novelty"], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(a["p_value"], b["p_value"])
    # the gaps cost little: normal series stay normal, the shifted ones stand out
    assert (a["p_value"][:6] > 0.1).all() and (a["novelty"][6:].min() > a["novelty"][:6].max())
    assert np.corrcoef(a["novelty"], full["novelty"])[0, 1] > 0.9
    assert main(["info", "--model", str(d / "m.model")]) == 0
    assert "time grid: step 0.5 (numbers)" in capsys.readouterr().out


def test_cli_explain_spans_are_in_time_column_units(half_step_model):
    d, times = half_step_model
    new = _series(2, seed=10)
    new[:, 8:14, 1] += 3.0  # a level shift in "flow", steps 8..13: times 104 .. 106.5
    rc, x = _score(d, _write(d / "odd.csv", new, times=times), "--explain")
    assert rc == 0 and x["top_channel"].tolist() == ["flow", "flow"]
    np.savez(d / "odd.npz", X=new, ids=np.array(["s0", "s1"]))  # no time column: step numbers
    rc, steps = _score(d, d / "odd.npz", "--explain")
    assert rc == 0 and (steps["span_start"] >= 0).all()
    np.testing.assert_array_equal(x["span_start"], 100 + 0.5 * steps["span_start"])
    np.testing.assert_array_equal(x["span_end"], 100 + 0.5 * steps["span_end"])


def test_cli_on_error_skip_scores_the_others_and_lists_the_failing(half_step_model, capsys):
    d, times = half_step_model
    p = _write(d / "bad.csv", _series(5, seed=4), times=times)
    lines = p.read_text().splitlines()
    lines = [ln.rsplit(",", 1)[0] + "," if ln.startswith("s3,") else ln for ln in lines]
    p.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    rc, _ = _score(d, p)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "series 's3': channel 'flow' has no value" in err and "X[" not in err
    rc, x = _score(d, p, "--on-error", "skip")
    err = capsys.readouterr().err
    assert rc == 0 and x["id"].tolist() == ["s0", "s1", "s2", "s4"]
    assert "skipped (--on-error skip) series 's3': channel 'flow' has no value" in err


def test_cli_irregular_error_refuses_off_grid_series(half_step_model, capsys):
    d, times = half_step_model
    jittered = list(times)
    jittered[5] = "102.7"  # off the 0.5 grid
    p = _write(d / "jit.csv", _series(3, seed=5), times=jittered)
    capsys.readouterr()
    rc, x = _score(d, p)
    err = capsys.readouterr().err
    assert rc == 0 and len(x) == 3 and "3 of 3 series have time values off the grid" in err
    assert "3 of 72 rows (4.2%)" in err
    rc, _ = _score(d, p, "--irregular", "error")
    err = capsys.readouterr().err
    assert rc == 2 and "series 's0': time 102.7 is off the grid (step 0.5" in err


def test_cli_no_label_and_label_col_and_range(tmp_path, capsys):
    X = _series(4, T=6, seed=6)
    p = _write(tmp_path / "l.csv", X, extra={"label": ["a", "b", "a", "b"]})
    rc = main(["fit", str(p), "--model", str(tmp_path / "m"), "--no-label", "--label-col",
               "label", "--quiet"])  # fmt: skip
    assert rc == 2 and "contradict" in capsys.readouterr().err
    big = _write(tmp_path / "big.csv", _series(12, T=8, seed=7) * 1e154)
    rc = main(["fit", str(big), "--model", str(tmp_path / "m"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "beyond +-1e+150" in err and "identical" not in err


def test_cli_dates_against_a_numbers_model_and_time_text(half_step_model, capsys):
    from novelty.__main__ import _time_text

    d, _ = half_step_model
    iso = [f"2024-01-01T00:00:{t:02d}" for t in range(24)]
    rc, _ = _score(d, _write(d / "iso.csv", _series(2, seed=8), times=iso))
    assert rc == 2 and "holds dates, the model's corpus had numbers" in capsys.readouterr().err
    assert _time_text(np.datetime64("2024-01-01T00:00:30", "ns")) == "2024-01-01T00:00:30"
    assert _time_text(np.float64(104.0)) == 104 and _time_text(np.float64(104.5)) == 104.5


def test_a_folder_without_time_column_and_with_other_channels(tmp_path):
    X = _series(2, T=5, seed=13)
    (tmp_path / "f").mkdir()
    for i, x in enumerate(X):  # no time column: the rows are in time order
        pd.DataFrame({"a": x[:, 0], "b": x[:, 1]}).to_csv(tmp_path / "f" / f"r{i}.csv", index=False)
    r = read_series(tmp_path / "f")
    np.testing.assert_array_equal(r.X, X)
    assert r.grid is None and r.starts is None and r.time_values(0).tolist() == [0, 1, 2, 3, 4]
    pd.DataFrame({"a": [1.0], "c": [2.0]}).to_csv(tmp_path / "f" / "r9.csv", index=False)
    with pytest.raises(SeriesFileError, match=r"r9.csv: channel column\(s\) b not found"):
        read_series(tmp_path / "f")
    pd.DataFrame({"a": [1.0], "b": [1.0], "c": [2.0]}).to_csv(
        tmp_path / "f" / "r9.csv", index=False
    )
    with pytest.raises(SeriesFileError, match=r"r9.csv: channels .*c differ from r0.csv's"):
        read_series(tmp_path / "f")


def test_skip_with_every_series_failing_is_an_error(tmp_path):
    (tmp_path / "x.csv").write_text("id,time,a,b\ns,0,1,\ns,1,2,\nt,0,,1\n")
    with pytest.raises(SeriesFileError, match="no series can be read; the first: series 's'"):
        read_series(tmp_path / "x.csv", on_error="skip")


def test_encodings_blank_lines_and_a_byte_order_mark(tmp_path):
    (tmp_path / "lat.csv").write_bytes(b"id,time,a\ncaf\xe9,0,1\ncaf\xe9,1,2\n")
    with pytest.raises(SeriesFileError, match="not UTF-8 text .* save the file as UTF-8"):
        read_series(tmp_path / "lat.csv")
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfid,time,a\r\ns,0,1\r\n\r\ns,1,2\r\n")
    r = read_series(tmp_path / "bom.csv")
    assert r.ids == ["s"] and r.X.ravel().tolist() == [1.0, 2.0]


def test_rows_in_any_order_give_the_same_series(tmp_path):
    X = _series(5, T=9, seed=14)
    p = _write(tmp_path / "sorted.csv", X, drop={(1, 4), (3, 2)})
    header, *body = p.read_text().splitlines()
    order = np.random.default_rng(0).permutation(len(body))
    (tmp_path / "shuffled.csv").write_text("\n".join([header] + [body[k] for k in order]) + "\n")
    a, b = read_series(p), read_series(tmp_path / "shuffled.csv")
    assert sorted(a.ids) == sorted(b.ids)  # ids in order of first appearance in each file
    np.testing.assert_array_equal(a.X, b.X[[b.ids.index(i) for i in a.ids]])
    assert np.isnan(b.X[b.ids.index("s1"), 4]).all()


def test_old_mac_line_ends_grow_the_row_store(tmp_path):
    # no "\n" at all: the line count preallocates one row, the store grows as rows come
    (tmp_path / "cr.csv").write_bytes(b"id,time,a\rs,0,1\rs,1,2\rs,2,3\rt,0,5\rt,1,6\rt,2,7\r")
    r = read_series(tmp_path / "cr.csv")
    assert r.ids == ["s", "t"] and r.X[..., 0].tolist() == [[1, 2, 3], [5, 6, 7]]
