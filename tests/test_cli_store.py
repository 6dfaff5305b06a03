"""Damaged, unusable and mistyped stores (issue 14, item 4): a one-line error naming the file
and the cause, exit status 2, and nothing created that was not asked for."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from experiment_helpers import ROOT

from experiments.__main__ import main

RUN = ["run", "--dataset", "BasicMotions", "--kernels", "flat_linear", "--scorers",
       "mahalanobis", "--folds", "2", "--max-rank", "5", "--time-channel", "no",
       "--no-progress"]  # fmt: skip


def _cli(argv, capsys) -> tuple[int, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, err


def _one_line(err: str) -> bool:
    return err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.fixture(scope="module")
def good_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "good.sqlite"
    assert main([*RUN, "--store", str(path)]) == 0
    return path


def _listing(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_report_on_a_mistyped_path_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "typo.sqlite"
    rc, err = _cli(["report", "--store", str(missing), "--out", str(tmp_path / "rep")], capsys)
    assert rc == 2 and _one_line(err)
    assert f"no store at {missing} (file not found)" in err
    assert _listing(tmp_path) == []


def test_report_on_an_unknown_setting_writes_nothing(tmp_path, capsys, good_store):
    with sqlite3.connect(str(good_store)) as con:
        (sid,) = con.execute("SELECT setting FROM settings").fetchone()
    argv = ["report", "--store", str(good_store), "--out", str(tmp_path / "rep"),
            "--setting", "abc"]  # fmt: skip
    rc, err = _cli(argv, capsys)
    assert rc == 2 and _one_line(err)
    assert f"the store {good_store} holds no setting 'abc' (settings there: {sid})" in err
    assert not (tmp_path / "rep").exists()
    # the known setting by name works
    assert main([*argv[:-1], sid, "--no-plots"]) == 0


def test_damaged_store_is_an_error(tmp_path, capsys, good_store):
    """Each page overwritten with zeros in turn: today's code planned "0 cells to compute"
    (exit 0) or raised a raw DatabaseError, depending on the page."""
    n_pages = os.path.getsize(good_store) // 4096
    assert n_pages >= 8
    path = tmp_path / "damaged.sqlite"
    for page in range(n_pages):
        shutil.copy(good_store, path)
        with open(path, "r+b") as f:
            f.seek(4096 * page + (100 if page == 0 else 0))  # page 0: keep the file header
            f.write(b"\0" * (3996 if page == 0 else 4096))
        before = path.read_bytes()
        for argv in ([*RUN, "--store", str(path)],
                     ["report", "--store", str(path), "--out", str(tmp_path / "rep")]):  # fmt: skip
            rc, err = _cli(argv, capsys)
            assert rc == 2 and _one_line(err), (page, err)
            assert f"the store {path} is damaged" in err, (page, err)
        assert path.read_bytes() == before and not (tmp_path / "rep").exists()
        assert _listing(tmp_path) == ["damaged.sqlite"]


def test_files_that_are_not_stores(tmp_path, capsys):
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database " * 100)
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(str(other)) as con:
        con.execute("CREATE TABLE foo (x INTEGER)")
    con.close()
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(str(old)) as con:
        con.execute("CREATE TABLE settings (setting TEXT, json TEXT)")
        con.execute("CREATE TABLE cv (setting TEXT, dataset TEXT)")
        con.execute("CREATE TABLE test (setting TEXT)")
        con.execute("CREATE TABLE runs (id INTEGER)")
    con.close()
    cases = [
        (text, "report", f"{text} is not a SQLite database"),
        (text, "run", f"{text} is not a SQLite database"),
        (empty, "report", f"{empty} holds no results store (an empty database)"),
        (other, "report", f"{other} is not a results store (tables missing: cv, runs, "),
        (other, "run", f"{other} is not a results store"),
        (old, "run", f"the store {old} has an older layout (table cv lacks "),
        (tmp_path, "report", f"the store {tmp_path} is a folder, not a file"),
    ]
    snapshot = {p: p.read_bytes() for p in (text, empty, other, old)}
    for path, cmd, message in cases:
        argv = [*RUN, "--store", str(path)] if cmd == "run" else [
            "report", "--store", str(path), "--out", str(tmp_path / "rep")]  # fmt: skip
        rc, err = _cli(argv, capsys)
        assert rc == 2 and _one_line(err) and message in err, (cmd, err)
    assert {p: p.read_bytes() for p in snapshot} == snapshot  # nothing added to them
    assert _listing(tmp_path) == ["empty.sqlite", "notes.sqlite", "old.sqlite", "other.sqlite"]


def _read_only_mount_works() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    flags = "-m" if os.geteuid() == 0 else "-rm"
    probe = subprocess.run(["unshare", flags, "sh", "-c", "mount -t tmpfs none /mnt"],
                           capture_output=True)  # fmt: skip
    return probe.returncode == 0


@pytest.mark.skipif(not _read_only_mount_works(), reason="needs unshare and a private mount")
def test_store_on_a_read_only_file_system(tmp_path, good_store):
    """`report` reads a store on a read-only file system; `run` there says why it cannot
    write (today: a raw OperationalError for both)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    shutil.copy(good_store, ro / "s.sqlite")
    out = tmp_path / "rep"
    script = (
        "import sys\n"
        "from experiments.__main__ import main\n"
        f"run = {RUN!r}\n"
        f"print('rc', main(['report', '--store', {str(ro / 's.sqlite')!r}, '--out', "
        f"{str(out)!r}, '--no-plots']), flush=True)\n"
        f"print('rc', main([*run, '--store', {str(ro / 's.sqlite')!r}]), flush=True)\n"
        f"print('rc', main([*run, '--store', {str(ro / 'new' / 'x.sqlite')!r}]), flush=True)\n"
    )
    flags = "-m" if os.geteuid() == 0 else "-rm"
    cmd = (f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && "
           f"{sys.executable} -c \"$SCRIPT\"")  # fmt: skip
    proc = subprocess.run(["unshare", flags, "sh", "-c", cmd], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "SCRIPT": script})  # fmt: skip
    rcs = [ln for ln in proc.stdout.splitlines() if ln.startswith("rc ")]
    assert rcs == ["rc 0", "rc 2", "rc 2"], (proc.stdout, proc.stderr)
    errs = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert errs == [
        f"error: cannot write the store {ro / 's.sqlite'}: read-only file system",
        f"error: cannot create the store {ro / 'new' / 'x.sqlite'} in {ro}: read-only file system",
    ], proc.stderr
    assert "Traceback" not in proc.stderr
    assert (out / "report.md").read_text().count("| BasicMotions | **0.") == 2
    assert _listing(ro) == ["s.sqlite"]
