"""Outputs of ``tskernels-detect`` that cannot be lost or misread (issue 31, findings 11-15 and
19; build item 4) and one scoring pass per ``score`` (issue 33, item 2).

Each test here failed on the command line before these changes: two fits to one model both
succeeded, a model that appeared during a fit was overwritten, a read-only folder or a full
disk was found after the fit and named a temporary file, files were created mode 0600, id and
label cells were written as spreadsheet formulas, ``--out -`` wrote a file named ``-``, there
was no ``--version``, a missing data file was found only after the model loaded, ``--fdr``
flagged nothing without a word, and ``score`` scored the batch two or three times."""

from __future__ import annotations

import csv
import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import cli_helpers
import numpy as np
import pandas as pd
import pytest
from import_helpers import loaded

from novelty import KernelNoveltyDetector
from novelty import __main__ as cli
from novelty.__main__ import main
from novelty.adapters import _outputs

CHANNELS = cli_helpers.CHANNELS
_series = cli_helpers.series
_write_long = cli_helpers.write_long


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A model fitted by the CLI on 22 normal series, and its data file."""
    return cli_helpers.fit_model(tmp_path_factory.mktemp("outputs"))


@pytest.fixture
def quick_fit(fitted, monkeypatch):
    """``KernelNoveltyDetector.fit`` replaced by a copy of the fitted model's state (fast),
    after ``during()`` runs: what happens while a fit works. Returns the list of hooks."""
    state = KernelNoveltyDetector.load(fitted / "m.model").__dict__
    hooks: list = []

    def fit(self, X, y=None):
        for hook in hooks:
            hook()
        self.__dict__.update(state)
        return self

    monkeypatch.setattr(KernelNoveltyDetector, "fit", fit)
    return hooks


def _run(capsys, argv) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exit_:
        rc = exit_.code
    out, err = capsys.readouterr()
    return rc, out, err


def _one_error(capsys, argv) -> str:
    rc, _, err = _run(capsys, argv)
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


# ---------------------------------------------------------------- finding 11: reservation


def test_a_second_fit_to_the_same_model_is_refused_while_the_first_runs(
    fitted, quick_fit, tmp_path, capsys
):
    model = tmp_path / "m.model"
    second: list = []
    quick_fit.append(
        lambda: second.append(
            _run(capsys, ["fit", str(fitted / "normal.csv"), "--model", str(model), "--quiet"])
        )  # fmt: skip
    )
    rc, _, err = _run(capsys, ["fit", str(fitted / "normal.csv"), "--model", str(model)])
    assert rc == 0, err
    (rc2, _, err2) = second[0]
    assert rc2 == 2 and err2.count("\n") == 1, err2
    assert f"{model} is being written by another tskernels-detect run" in err2
    assert KernelNoveltyDetector.load(model).n_corpus_ == 22
    assert _names(tmp_path) == {"m.model"}  # the lock is gone


def test_a_model_that_appears_during_the_fit_is_not_overwritten(
    fitted, quick_fit, tmp_path, capsys
):
    model = tmp_path / "m.model"
    quick_fit.append(lambda: model.write_text("someone else's model"))
    line = _one_error(capsys, ["fit", str(fitted / "normal.csv"), "--model", str(model)])
    kept = tmp_path / "m-new.model"
    assert f"{model} appeared while this run worked: not overwritten" in line
    assert "--force" in line and str(kept) in line
    assert model.read_text() == "someone else's model"
    assert KernelNoveltyDetector.load(kept).n_corpus_ == 22  # the fit is not lost
    assert _names(tmp_path) == {"m.model", "m-new.model"}
    # with --force it is replaced
    rc, _, err = _run(capsys, ["fit", str(fitted / "normal.csv"), "--model", str(model),
                               "--force"])  # fmt: skip
    assert rc == 0, err
    assert KernelNoveltyDetector.load(model).n_corpus_ == 22


def test_an_output_that_appears_while_scoring_is_not_overwritten(fitted, tmp_path, capsys,
                                                                 monkeypatch):  # fmt: skip
    out = tmp_path / "s.csv"
    real = KernelNoveltyDetector._novelty

    def novelty(self, X):
        out.write_text("mine")
        return real(self, X)

    monkeypatch.setattr(KernelNoveltyDetector, "_novelty", novelty)
    line = _one_error(capsys, ["score", str(fitted / "normal.csv"), "--model",
                               str(fitted / "m.model"), "--out", str(out), "--quiet"])  # fmt: skip
    assert "not overwritten" in line and out.read_text() == "mine"
    assert len(pd.read_csv(tmp_path / "s-new.csv")) == 22


def test_a_lock_left_by_a_dead_run_is_taken_over_one_held_is_not(
    fitted, quick_fit, tmp_path, capsys
):
    import socket

    model = tmp_path / "m.model"
    lock = tmp_path / ".m.model.lock"
    lock.write_text(f"{os.getpid()} {socket.gethostname()}\n")  # a live process
    line = _one_error(capsys, ["fit", str(fitted / "normal.csv"), "--model", str(model)])
    assert "being written by another" in line and str(lock) in line
    assert lock.exists()  # not ours: left alone
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    lock.write_text(f"{gone.stdout.strip()} {socket.gethostname()}\n")  # a finished process
    rc, _, err = _run(capsys, ["fit", str(fitted / "normal.csv"), "--model", str(model)])
    assert rc == 0, err
    assert _names(tmp_path) == {"m.model"}


# ---------------------------------------------------------------- finding 12: disk problems


def test_a_read_only_folder_is_reported_before_the_fit(fitted, quick_fit, tmp_path, capsys,
                                                       monkeypatch):  # fmt: skip
    folder = tmp_path / "ro"
    folder.mkdir()
    fits: list = []
    quick_fit.append(lambda: fits.append(1))
    real_open = os.open

    def no_write(path, flags, *args, **kwargs):  # a read-only folder, even for root
        if Path(os.fsdecode(path)).parent == folder and flags & (os.O_CREAT | os.O_WRONLY):
            raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_write)
    model = folder / "m.model"
    line = _one_error(capsys, ["fit", str(fitted / "normal.csv"), "--model", str(model)])
    assert line == (f"tskernels-detect: error: cannot write the model {model}: its folder "
                    f"{folder} is not writable (Permission denied)")  # fmt: skip
    assert fits == []  # before the fit
    argv = ["--model", str(fitted / "m.model"), "--out", str(folder / "s.csv")]
    line = _one_error(capsys, ["score", str(fitted / "normal.csv"), *argv])
    assert f"cannot write the output file {folder / 's.csv'}" in line
    assert _names(folder) == set()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into read-only folders")  # fmt: skip
def test_a_read_only_folder_for_real(fitted, quick_fit, tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        line = _one_error(capsys, ["fit", str(fitted / "normal.csv"), "--model",
                                   str(folder / "m.model")])  # fmt: skip
        assert "is not writable" in line and str(folder / "m.model") in line
    finally:
        folder.chmod(0o755)


def _enospc(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_names_the_path_and_leaves_no_partial_file(fitted, quick_fit, tmp_path,
                                                               capsys, monkeypatch):  # fmt: skip
    def save(self, path):  # half the model written, then the disk is full
        Path(path).write_bytes(b"half a model")
        _enospc()

    monkeypatch.setattr(KernelNoveltyDetector, "save", save)
    model = tmp_path / "m.model"
    (tmp_path / "normal.csv").write_bytes((fitted / "normal.csv").read_bytes())
    line = _one_error(capsys, ["fit", str(tmp_path / "normal.csv"), "--model", str(model)])
    assert line == (f"tskernels-detect: error: cannot write the model {model}: "
                    f"{os.strerror(errno.ENOSPC)}; nothing written")  # fmt: skip
    assert _names(tmp_path) == {"normal.csv"}  # no model, no temporary file, no lock

    def to_csv(self, f, **kwargs):
        f.write("id,nov")
        _enospc()

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)
    out = tmp_path / "s.csv"
    line = _one_error(capsys, ["score", str(tmp_path / "normal.csv"), "--model",
                               str(fitted / "m.model"), "--out", str(out), "--quiet"])  # fmt: skip
    assert f"cannot write the output file {out}: " in line and ".tmp" not in line
    assert _names(tmp_path) == {"normal.csv"}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_a_full_disk_is_found_before_the_fit(fitted, quick_fit, tmp_path, capsys, monkeypatch):
    # the lock's few bytes go to /dev/full: ENOSPC, from the kernel, before any fitting
    fits: list = []
    quick_fit.append(lambda: fits.append(1))
    real_open = os.open
    model = tmp_path / "m.model"

    def full(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if os.fsdecode(path).endswith(".m.model.lock"):
            os.dup2(real_open("/dev/full", os.O_WRONLY), fd)
        return fd

    monkeypatch.setattr(os, "open", full)
    line = _one_error(capsys, ["fit", str(fitted / "normal.csv"), "--model", str(model)])
    assert line == (f"tskernels-detect: error: cannot write the model {model}: "
                    f"{os.strerror(errno.ENOSPC)}")  # fmt: skip
    assert fits == [] and _names(tmp_path) == set()  # before the fit; the lock removed


def test_ctrl_c_during_the_fit_or_the_save_leaves_nothing(fitted, quick_fit, tmp_path, capsys,
                                                         monkeypatch):  # fmt: skip
    model = tmp_path / "m.model"
    (tmp_path / "normal.csv").write_bytes((fitted / "normal.csv").read_bytes())

    def interrupt():
        raise KeyboardInterrupt

    quick_fit.append(interrupt)
    rc, _, err = _run(capsys, ["fit", str(tmp_path / "normal.csv"), "--model", str(model)])
    assert rc == 130 and "interrupted, nothing written" in err
    assert _names(tmp_path) == {"normal.csv"}
    quick_fit.clear()

    def save(self, path):
        Path(path).write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(KernelNoveltyDetector, "save", save)
    rc, _, err = _run(capsys, ["fit", str(tmp_path / "normal.csv"), "--model", str(model)])
    assert rc == 130
    assert _names(tmp_path) == {"normal.csv"}


# ---------------------------------------------------------------- finding 14: the umask


def test_files_follow_the_umask(fitted, tmp_path):
    code = textwrap.dedent(f"""
        import os
        from novelty import KernelNoveltyDetector
        from novelty.__main__ import main
        state = KernelNoveltyDetector.load({str(fitted / "m.model")!r}).__dict__
        KernelNoveltyDetector.fit = lambda self, X, y=None: (self.__dict__.update(state), self)[1]
        os.umask(0o027)
        assert main(["fit", {str(fitted / "normal.csv")!r}, "--model",
                     {str(tmp_path / "m.model")!r}, "--quiet"]) == 0
        os.umask(0o002)
        assert main(["score", {str(fitted / "normal.csv")!r}, "--model",
                     {str(tmp_path / "m.model")!r}, "--out", {str(tmp_path / "s.csv")!r},
                     "--quiet"]) == 0
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "m.model").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "s.csv").stat().st_mode & 0o777 == 0o664


# ---------------------------------------------------------------- finding 15: formula cells


@pytest.mark.parametrize(
    "cell, written",
    [
        ('=HYPERLINK("http://x.example","click")', '\'=HYPERLINK("http://x.example","click")'),
        ("+1+2", "'+1+2"),
        ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
        ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("-5", "-5"),  # numbers stay numbers
        ("+1.5e3", "+1.5e3"),
        ("-.5", "-.5"),
        ("pump-7", "pump-7"),
        ("", ""),
        (3, 3),
    ],
)
def test_neutralise_formula(cell, written):
    assert cli.neutralise_formula(cell) == written


def test_formula_ids_and_labels_are_neutralised_in_scores_csv(fitted, tmp_path, capsys):
    ids = ['=HYPERLINK("http://x.example","y")', "@SUM(A1)", "-7", "+cmd"]
    labels = ["=1+1", "ok", "-3", "-bad"]
    _write_long(tmp_path / "new.csv", _series(4, seed=2), ids=ids, labels=labels)
    out = tmp_path / "s.csv"
    rc, _, err = _run(capsys, ["score", str(tmp_path / "new.csv"), "--model",
                               str(fitted / "m.model"), "--out", str(out), "--quiet"])  # fmt: skip
    assert rc == 0, err
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == ["'" + ids[0], "'@SUM(A1)", "-7", "'+cmd"]
    assert [r["label"] for r in rows] == ["'=1+1", "ok", "-3", "'-bad"]
    assert all(np.isfinite(float(r["novelty"])) and 0 < float(r["p_value"]) <= 1 for r in rows)


# ---------------------------------------------------------------- finding 19 (part)


def test_out_dash_writes_standard_output(fitted, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = _run(capsys, ["score", str(fitted / "normal.csv"), "--model",
                                 str(fitted / "m.model"), "--out", "-", "--quiet"])  # fmt: skip
    assert rc == 0, err
    assert not (tmp_path / "-").exists() and _names(tmp_path) == set()
    lines = out.splitlines()
    assert lines[0] == "id,novelty,p_value,flagged" and len(lines) == 23  # only the CSV
    assert "scored 22 series" in err and "wrote standard output" in err


def test_version():
    from importlib.metadata import version

    run = subprocess.run([sys.executable, "-m", "novelty", "--version"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"tskernels-detect {version('tskernels')}\n"
    code = (
        "from novelty.__main__ import main\ntry:\n main(['--version'])\nexcept SystemExit:\n pass"
    )
    assert loaded(code, ["torch", "sklearn", "pandas", "tskernels"]) == []


def test_the_data_file_is_checked_before_the_model_loads(fitted, tmp_path, capsys, monkeypatch):
    loads: list = []
    monkeypatch.setattr(KernelNoveltyDetector, "load", classmethod(lambda c, p: loads.append(p)))
    argv = ["--model", str(fitted / "m.model"), "--out", str(tmp_path / "s.csv")]
    line = _one_error(capsys, ["score", str(tmp_path / "nope.csv"), *argv])
    assert line == f"tskernels-detect: error: {tmp_path / 'nope.csv'}: no such file or folder"
    (tmp_path / "data.txt").write_text("id,time,a\n")
    line = _one_error(capsys, ["score", str(tmp_path / "data.txt"), *argv])
    assert "unknown format '.txt'" in line
    (tmp_path / "empty.csv").write_text("")
    line = _one_error(capsys, ["score", str(tmp_path / "empty.csv"), *argv])
    assert "empty.csv: empty file" in line
    assert loads == [] and _names(tmp_path) == {"data.txt", "empty.csv"}


# ---------------------------------------------------------------- finding 13 at the command line


def test_fdr_that_can_flag_nothing_warns_naming_the_corpus_size(fitted, tmp_path, capsys):
    # 22 corpus series: p-values are at least 1/23; BH over 6 series at q = 0.1 flags a series
    # only when its p-value is <= 0.1/6 at best (a lone outlier): 59 corpus series needed. The
    # warning is the detector's (predict(fdr=) gives the same: fdr_shortfall)
    new = np.concatenate([_series(5, seed=2), _series(1, seed=3, shift=5.0)])
    _write_long(tmp_path / "new.csv", new)
    out = tmp_path / "s.csv"
    rc, _, err = _run(capsys, ["score", str(tmp_path / "new.csv"), "--model",
                               str(fitted / "m.model"), "--out", str(out), "--fdr", "0.1",
                               "--quiet"])  # fmt: skip
    assert rc == 0, err
    assert pd.read_csv(out)["flagged"].sum() == 0  # the outlier has p = 1/23 > 0.1/6
    warnings = [ln for ln in err.splitlines() if "warning:" in ln]
    assert len(warnings) == 1 and "needs at least 59 held-out normal series" in warnings[0], err
    assert "fdr=0.1" in warnings[0]
    # a rule that can flag: no warning
    rc, _, err = _run(capsys, ["score", str(tmp_path / "new.csv"), "--model",
                               str(fitted / "m.model"), "--out", str(out), "--force",
                               "--quiet"])  # fmt: skip
    assert rc == 0 and "warning" not in err, err


# ---------------------------------------------------------------- issue 33: one scoring pass


def test_score_scores_once_explain_adds_its_occlusions(fitted, tmp_path, capsys, monkeypatch):
    from novelty.detector import _explain

    calls = {"novelty": 0, "explain": 0}
    real_novelty, real_explain = KernelNoveltyDetector._novelty, _explain.explain

    def novelty(self, X):
        calls["novelty"] += 1
        return real_novelty(self, X)

    def explain(*a, **k):
        calls["explain"] += 1
        return real_explain(*a, **k)

    monkeypatch.setattr(KernelNoveltyDetector, "_novelty", novelty)
    monkeypatch.setattr(_explain, "explain", explain)
    new = np.concatenate([_series(4, seed=2), _series(2, seed=3, shift=2.0)])
    _write_long(tmp_path / "new.csv", new)
    base = ["score", str(tmp_path / "new.csv"), "--model", str(fitted / "m.model"), "--quiet"]
    assert _run(capsys, [*base, "--out", str(tmp_path / "a.csv")])[0] == 0
    assert calls == {"novelty": 1, "explain": 0}
    assert _run(capsys, [*base, "--out", str(tmp_path / "b.csv"), "--explain"])[0] == 0
    assert calls == {"novelty": 2, "explain": 1}  # the same one pass, then the occlusions
    a, b = pd.read_csv(tmp_path / "a.csv"), pd.read_csv(tmp_path / "b.csv")
    for c in ("novelty", "p_value", "flagged"):
        np.testing.assert_array_equal(b[c], a[c])
    # the scoring pass's warnings stay with --explain (here: the corpus scored in-sample)
    rc, _, err = _run(capsys, ["score", str(fitted / "normal.csv"), "--model",
                               str(fitted / "m.model"), "--quiet", "--explain",
                               "--out", str(tmp_path / "c.csv")])  # fmt: skip
    assert rc == 0 and "exact copies of corpus series" in err, err


def test_assess_equals_the_public_calls(fitted):
    det = KernelNoveltyDetector.load(fitted / "m.model")
    X = np.concatenate([_series(6, seed=4), _series(3, seed=5, shift=1.0)])
    for fdr in (None, 0.2):
        novelty, p, flagged = det._assess(X, fdr=fdr)
        np.testing.assert_array_equal(novelty, -det.score_samples(X))
        np.testing.assert_array_equal(p, det.p_values(X))
        np.testing.assert_array_equal(flagged, det.predict(X, fdr=fdr) == -1)
    with pytest.raises(ValueError, match="fdr"):
        det._assess(X, fdr=2.0)


def test_fit_hands_normal_label_to_the_detector(tmp_path, capsys):
    X = np.concatenate([_series(20, seed=6), _series(4, seed=7, shift=3.0)])
    _write_long(tmp_path / "lab.csv", X, labels=["a"] * 20 + ["b"] * 4)
    model = tmp_path / "m.model"
    rc, out, err = _run(capsys, ["fit", str(tmp_path / "lab.csv"), "--model", str(model),
                                 "--normal-label", "a", "--quiet"])  # fmt: skip
    assert rc == 0, err
    det = KernelNoveltyDetector.load(model)
    assert det.normal_label == "a" and det.n_corpus_ == 20
    ref = KernelNoveltyDetector().fit(X[:20])
    np.testing.assert_allclose(det.calibration_scores_, ref.calibration_scores_, rtol=1e-12)


def test_out_dash_into_a_closed_pipe_is_not_an_error(fitted, capsys, monkeypatch):
    read_end, write_end = os.pipe()
    os.close(read_end)  # a reader that stopped early (`| head -1`)
    closed = os.fdopen(write_end, "w")
    monkeypatch.setattr(sys, "stdout", closed)
    rc = main(["score", str(fitted / "normal.csv"), "--model", str(fitted / "m.model"),
               "--out", "-", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    closed.close()  # its fd now points at /dev/null: no error either
    assert rc == 0 and "error" not in err and "scored 22 series" in err, err


def test_one_channel_mismatch_message(fitted, tmp_path, capsys):
    # the detector's check is the only one (the command line no longer has its own copy)
    np.savez(tmp_path / "three.npz", X=np.zeros((3, 24, 3)))
    argv = ["--model", str(fitted / "m.model"), "--out", str(tmp_path / "s.csv")]
    line = _one_error(capsys, ["score", str(tmp_path / "three.npz"), *argv])
    assert "channel mismatch: the detector was fitted on series with d=2 channels, got d=3" in line
    assert _names(tmp_path) == {"three.npz"}


def test_umask_is_read_without_changing_it():
    before = os.umask(0o027)
    try:
        assert _outputs._umask() == 0o027  # read by novelty._files.umask
        assert os.umask(0o027) == 0o027  # unchanged by the read
    finally:
        os.umask(before)
