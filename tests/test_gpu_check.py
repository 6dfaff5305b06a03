"""benchmarks/gpu_check.py (issue 34, item 4) without a GPU: the one-line skip, and a dry run
on the CPU (tiny sizes) that writes the JSON report, so the script is known to work before a
GPU is lent."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("_bench_gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look modules up by name
    spec.loader.exec_module(module)
    return module


def test_without_cuda_one_line_and_exit_0(gpu_check, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "r.json"
    assert gpu_check.main(["--out", str(out)]) == 0
    assert capsys.readouterr().out == "no CUDA device: gpu-check skipped\n"
    assert not out.exists()


TINY = ["--device", "cpu", "--no-tests", "--n", "6", "--T", "8", "--d", "2", "--repeats", "1"]


@pytest.fixture(scope="module")
def dry_run(gpu_check, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "report.json"
    rc = gpu_check.main([*TINY, "--out", str(out)])
    return rc, json.loads(out.read_text())


def test_dry_run_writes_a_complete_report(dry_run):
    rc, report = dry_run
    assert rc == 0 and report["ok"] is True and report["device"] == "cpu"
    grams = report["sections"]["grams"]
    assert [g["workload"] for g in grams] == [
        "PDE linear, dyadic 0",
        "PDE RBF(1), dyadic 2",
        "truncated linear, level 4",
        "GAK, sigma 2 sqrt(d)",
    ]
    for g in grams:
        assert g["exact"] and g["rel_diff_to_cpu"] == 0.0  # the CPU against itself
        assert g["ours_device_s"] > 0 and g["ours_cpu_s"] > 0
    peers = [g for g in grams if g.get("pysiglib_device_s") is not None]
    assert len(peers) == 3 and all(g["rel_diff_to_pysiglib"] < 1e-10 for g in peers)
    det = report["sections"]["detector"]
    assert det["ok"] and det["same_flags"] and det["max_abs_score_diff"] == 0.0
    devices = [m["kernel_device"] for m in det["members"]]
    assert devices and set(devices) == {"cpu"}  # every member of the default recipe
    assert report["environment"]["torch"] == torch.__version__


def test_a_failed_check_gives_exit_1_and_ok_false(gpu_check, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gpu_check, "rel_diff", lambda a, b: 1.0)  # every Gram "wrong"
    monkeypatch.setattr(gpu_check, "detector_check", lambda *a: {"skipped": "test", "ok": True})
    out = tmp_path / "r.json"
    assert gpu_check.main([*TINY, "--out", str(out)]) == 1
    report = json.loads(out.read_text())
    assert report["ok"] is False
    assert not any(g["exact"] for g in report["sections"]["grams"])
    assert "ok: False" in capsys.readouterr().out


def test_budget_spent_skips_the_rest(gpu_check, tmp_path):
    out = tmp_path / "r.json"
    assert gpu_check.main([*TINY, "--budget", "0", "--out", str(out)]) == 1
    sections = json.loads(out.read_text())["sections"]
    assert all(g["skipped"] == "time budget spent" for g in sections["grams"])
    assert sections["detector"] == {"skipped": "time budget spent", "ok": False}


def test_junit_summary(gpu_check, tmp_path):
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<testsuites><testsuite tests="4" failures="1" errors="0" skipped="1">'
        '<testcase classname="tests.test_gpu" name="test_a"/>'
        '<testcase classname="tests.test_gpu" name="test_b">'
        '<failure message="AssertionError: 1e-9 &gt; 1e-10&#10;more">tb</failure></testcase>'
        '<testcase classname="tests.test_gpu" name="test_c"><skipped/></testcase>'
        '<testcase classname="tests.test_gpu" name="test_d"/>'
        "</testsuite></testsuites>"
    )
    s = gpu_check.junit_summary(xml)
    assert (s["tests"], s["passed"], s["failures"], s["skipped"]) == (4, 2, 1, 1)
    assert s["failed"] == [
        {"test": "tests.test_gpu::test_b", "message": "AssertionError: 1e-9 > 1e-10"}
    ]


def test_bad_sizes_are_one_line_errors(gpu_check, capsys):
    with pytest.raises(SystemExit) as exc:
        gpu_check.main(["--n", "1"])
    assert exc.value.code == 2
    assert "--n 1: too small" in capsys.readouterr().err
