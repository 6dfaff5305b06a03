"""Shared fixtures: the shared data folder, the `slow` marker (skipped unless --runslow) and
the `gpu` marker (skipped without a CUDA device).

A test is marked `gpu` explicitly, or implicitly when one of its parameters is a CUDA device
name (``@pytest.mark.parametrize("device", ["cpu", "cuda"])`` gives ``test_x[cuda]`` the
marker). ``pytest -m gpu`` runs them (``make gpu-check``). ``TSKERNELS_GPU_TESTS_DEVICE=cpu``
runs the explicitly marked ones on the CPU instead (a dry run of their code, through the
``gpu_device`` fixture), the others still skipped.

Threads: the suite is thousands of tiny workloads, where a pool of several threads only waits
at its barriers (OpenMP threads spin there) and, on a shared 2-core machine, steals the cores
of the other process; the test process therefore runs torch and numba on one thread by
default (``TSKERNELS_TEST_THREADS``, default 1; 0 leaves the libraries' defaults). The tests of
``n_jobs`` and of the thread settings set their thread counts themselves (``n_jobs=-1`` runs
every kernel's parallel path on all cores against the default), and ``OMP_NUM_THREADS`` is
only defaulted, never overridden."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run slow tests")


#: Threads per pool in the test process (see the module docstring); "0": library defaults.
TEST_THREADS = int(os.environ.get("TSKERNELS_TEST_THREADS", "1"))
if TEST_THREADS > 0:  # before torch is imported: its pool size is read at start-up
    os.environ.setdefault("OMP_NUM_THREADS", str(TEST_THREADS))


def pytest_configure(config):
    if TEST_THREADS > 0:
        import numba
        import torch

        torch.set_num_threads(TEST_THREADS)
        numba.set_num_threads(min(TEST_THREADS, numba.config.NUMBA_NUM_THREADS))


#: "cpu": run the explicitly `gpu`-marked tests on the CPU (a dry run); unset: on "cuda".
GPU_TESTS_DEVICE = os.environ.get("TSKERNELS_GPU_TESTS_DEVICE")


def _on_cuda(item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(str(v).startswith("cuda") for v in callspec.params.values())


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _on_cuda(item):
            item.add_marker(pytest.mark.gpu)
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items:
        import torch

        if not torch.cuda.is_available():
            skip_gpu = pytest.mark.skip(reason="gpu: no CUDA device")
            for item in gpu_items:
                if GPU_TESTS_DEVICE != "cpu" or _on_cuda(item):
                    item.add_marker(skip_gpu)
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def count_calls(monkeypatch):
    """``count_calls(cls, name, what)``: wraps the method ``cls.name`` (undone after the test)
    so that each call appends ``what(self, *args)`` to the returned list, then runs it."""

    def patch(cls, name, what):
        calls = []
        original = getattr(cls, name)

        def counted(self, *args, **kwargs):
            calls.append(what(self, *args))
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, counted)
        return calls

    return patch


@pytest.fixture(scope="session")
def gpu_device() -> str:
    """The device of the `gpu` tests: "cuda", or TSKERNELS_GPU_TESTS_DEVICE (the dry run)."""
    return GPU_TESTS_DEVICE or "cuda"


@pytest.fixture(scope="session")
def uea_dir() -> Path:
    path = SHARED_DATA / "uea"
    if not path.is_dir():
        pytest.skip(f"shared UEA data not found at {path}")
    return path


@pytest.fixture(scope="session")
def adbench_dir() -> Path:
    path = SHARED_DATA / "adbench"
    if not path.is_dir():
        pytest.skip(f"shared ADBench data not found at {path}")
    return path
