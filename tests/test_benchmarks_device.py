"""``--device {cpu,cuda}`` of the benchmark scripts (issue 15, item 4): parsed by each script,
a one-line error when CUDA is asked for but torch cannot use it, and the GPU synchronised
around the timed calls. CUDA itself is exercised only where a GPU is present (skipped here
otherwise); the CPU wiring is run on tiny workloads."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = ["bench_gram", "bench_signature", "bench_alignment", "bench_novelty"]


def load(name: str):
    if str(BENCH) not in sys.path:  # as when run as a script: `_device` is importable
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("name", SCRIPTS)
def test_cuda_without_a_gpu_is_a_one_line_error(name, no_cuda, capsys):
    module = load(name)
    with pytest.raises(SystemExit) as exc:
        module.main(["--device", "cuda"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--device cuda: torch.cuda.is_available() is False" in err[-1]
    assert "use --device cpu" in err[-1]


@pytest.mark.parametrize("name", SCRIPTS)
def test_unknown_device_is_rejected(name, capsys):
    with pytest.raises(SystemExit) as exc:
        load(name).main(["--device", "gpu"])
    assert exc.value.code == 2
    assert "invalid choice: 'gpu'" in capsys.readouterr().err


def test_device_helpers(monkeypatch):
    import argparse

    device = load("bench_gram").check_device.__module__
    helpers = sys.modules[device]
    parser = argparse.ArgumentParser()
    helpers.add_device_argument(parser)
    assert parser.parse_args([]).device == "cpu"
    assert parser.parse_args(["--device", "cuda"]).device == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert helpers.check_device(parser, "cuda") == "cuda"
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append(1))
    helpers.synchronize("cpu")
    assert calls == []
    assert helpers.synced(lambda: 7, "cuda")() == 7
    assert calls == [1]


def test_bench_gram_runs_on_the_cpu(capsys):
    load("bench_gram").main(
        ["--n", "6", "--T", "5", "--d", "2", "--repeats", "1", "--kernels", "flat_rbf", "gak"]
    )
    out = capsys.readouterr().out
    assert "device=cpu" in out
    assert "flat_rbf" in out and "gak" in out


def test_bench_novelty_runs_on_the_cpu(capsys):
    load("bench_novelty").main(["--n", "80", "--n-test", "10", "--dim", "10", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "device=cpu" in out
    assert "max relative difference to peer" in out


@pytest.mark.gpu
def test_bench_gram_runs_on_cuda(capsys, gpu_device):
    load("bench_gram").main(
        ["--n", "6", "--T", "5", "--d", "2", "--repeats", "1", "--kernels", "flat_rbf", "gak"]
        + ["--device", gpu_device]
    )
    assert f"device={gpu_device}" in capsys.readouterr().out
