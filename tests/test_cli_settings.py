"""Runs of other grids never mix (issue 14, item 1), and failures are shown with their reason
and can be retried (item 3)."""

from __future__ import annotations

import csv
import math
import sqlite3

from experiment_helpers import _test_table

from experiments.__main__ import main
from experiments._grids import PRESETS, KernelGrid
from experiments._report import summary
from experiments._runner import RunOptions, run_benchmark
from experiments._store import ResultStore

BASE = ["--dataset", "BasicMotions", "--scorers", "mahalanobis", "--folds", "2", "--max-rank",
        "5", "--no-progress"]  # fmt: skip


def _run(store, *extra) -> list[str]:
    return ["run", *BASE, "--store", str(store), *extra]


def _summary(store, setting=None) -> dict:
    with ResultStore(store) as st:
        return summary(st, setting)


def _settings(store) -> list[str]:
    con = sqlite3.connect(str(store))
    rows = [r[0] for r in con.execute("SELECT setting FROM runs ORDER BY id")]
    con.close()
    return rows


def test_runs_with_other_grids_never_mix(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    assert main(_run(store, "--kernels", "flat_rbf", "flat_linear", "--time-channel", "no")) == 0
    first = _summary(store)
    assert not math.isnan(first[("BasicMotions", "flat_rbf", "mahalanobis")]["roc_auc"])
    capsys.readouterr()
    # the issue's reproducer: another flat_rbf grid into the same store
    argv = _run(store, "--kernels", "flat_rbf", "--grid", "flat_rbf.sigma=5,10",
                "--time-channel", "no")  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "failed" not in out and "flat_rbf" in out
    s1, s2 = _settings(store)
    assert s1 != s2
    second = _summary(store, s2)
    assert set(second) == {("BasicMotions", "flat_rbf", "mahalanobis")}
    assert not math.isnan(second[("BasicMotions", "flat_rbf", "mahalanobis")]["roc_auc"])
    assert _summary(store, s1) == first  # the first setting is untouched
    # the time channel and the levels are part of the setting too
    assert main(_run(store, "--kernels", "flat_rbf", "--time-channel", "yes")) == 0
    assert main(_run(store, "--kernels", "trunc_sig_linear", "--time-channel", "no",
                     "--levels", "1")) == 0  # fmt: skip
    assert main(_run(store, "--kernels", "trunc_sig_linear", "--time-channel", "no",
                     "--levels", "2")) == 0  # fmt: skip
    settings = _settings(store)
    assert len(set(settings)) == 5
    for sid in settings:
        res = _summary(store, sid)
        assert res and all(not math.isnan(e["roc_auc"]) for e in res.values())
    # the first command again computes nothing and finds its own results
    capsys.readouterr()
    assert main(_run(store, "--kernels", "flat_rbf", "flat_linear", "--time-channel", "no")) == 0
    assert capsys.readouterr().out.startswith("0 of 0 cells computed")
    assert _summary(store) == first


def test_report_keeps_the_latest_grid_of_a_kernel(tmp_path, monkeypatch):
    """A preset grid changed in the code between two runs: same setting id, but the report
    reads only the rows of the latest grid instead of marking the kernel failed."""
    store = tmp_path / "s.sqlite"
    opts = RunOptions(datasets=["BasicMotions"], kernels=["flat_rbf"], scorers=["mahalanobis"],
                      folds=2, max_rank=5, time_channel=[False], store=str(store),
                      progress=False, verbose=False)  # fmt: skip
    s1 = run_benchmark(opts)
    monkeypatch.setitem(PRESETS["quick"].grids, "flat_rbf", KernelGrid({"sigma": [2.0]}))
    s2 = run_benchmark(opts)
    assert s2["setting"] == s1["setting"] and s2["cells_computed"] == 8
    e = _summary(store)[("BasicMotions", "flat_rbf", "mahalanobis")]
    assert e["n_classes"] == 4 and not e["errors"] and not math.isnan(e["roc_auc"])
    fresh = tmp_path / "fresh.sqlite"
    run_benchmark(RunOptions(**{**opts.__dict__, "store": str(fresh)}))
    assert e == _summary(fresh)[("BasicMotions", "flat_rbf", "mahalanobis")]


def test_failure_reasons_are_shown_and_retry_failed_recomputes(tmp_path, capsys, monkeypatch):
    """The issue's `--device cuda` on a machine without a GPU: every cell of a kernel stored
    as failed. The reason is shown as a footnote; a plain rerun keeps the failures;
    `--retry-failed` computes them again (and only them)."""
    import experiments._protocol as protocol

    real = protocol.build_kernel

    def broken(name, *args, **kwargs):
        if name == "flat_rbf":
            raise ValueError("simulated device failure")
        return real(name, *args, **kwargs)

    store = tmp_path / "s.sqlite"
    argv = _run(store, "--kernels", "flat_rbf", "flat_linear", "--time-channel", "no")
    monkeypatch.setattr(protocol, "build_kernel", broken)
    assert main(argv) == 0
    monkeypatch.undo()
    out = capsys.readouterr().out
    reason = "every candidate failed: ValueError: simulated device failure"
    assert any(ln.startswith("flat_rbf") and "failed [1]" in ln for ln in out.splitlines())
    assert f"[1] {reason}" in out
    # the report: a footnote per distinct reason in report.md and tables.tex, and results.csv
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "rep"),
                 "--no-plots"]) == 0  # fmt: skip
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| BasicMotions | **0.463** | failed [1] |" in md and f"[1] {reason}" in md
    tex = (tmp_path / "rep" / "tables.tex").read_text()
    assert r"failed\textsuperscript{1}" in tex and "[1] every candidate failed" in tex
    with open(tmp_path / "rep" / "results.csv") as f:
        rows = {r["kernel"]: r for r in csv.DictReader(f)}
    assert rows["flat_rbf"]["error"].startswith(reason) and rows["flat_linear"]["error"] == ""
    # a plain rerun computes nothing: the failures stay
    capsys.readouterr()
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("0 of 0 cells computed")
    # --retry-failed: the 4 CV cells and 4 test cells of flat_rbf, nothing else
    assert main([*argv, "--retry-failed"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("8 of 8 cells computed") and "failed" not in out
    assert "--retry-failed: 4 failed CV rows and 4 test rows cleared" in err
    clean = tmp_path / "clean.sqlite"
    assert main(_run(clean, "--kernels", "flat_rbf", "flat_linear", "--time-channel", "no")) == 0
    assert _test_table(store) == _test_table(clean)
