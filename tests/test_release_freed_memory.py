"""A process computing cells one after another gives the C heap's free memory back after each
cell (``experiments._runner.release_freed_memory``): without it a paper-preset worker grew to
16.9 GB on ArticularyWordRecognition's order-1 cells and was killed by the OOM killer."""

import ctypes
import ctypes.util
import subprocess
import sys

import pytest
from experiment_helpers import ROOT, tiny_sines

from experiments import _runner
from experiments._cells import Done, RunSetup, plan
from experiments._grids import PRESETS
from experiments._runner import cell_config, run_cell


def test_every_cell_releases_after_it_ran(monkeypatch):
    calls = []
    monkeypatch.setattr(_runner, "release_freed_memory", lambda: calls.append(1) or True)
    setup = RunSetup(
        datasets={"tiny": ("a",)}, kernels=("flat_rbf",), scorers=("conformance",),
        grids=dict(PRESETS["quick"].grids), time_channels=(False, True),
    )  # fmt: skip
    cells = plan(setup, Done())
    cv = [c for c in cells if c.kind == "cv"]
    assert len(cv) == 2
    data, config = tiny_sines(), cell_config("quick", share="fold")
    for c in cv:
        run_cell(c, data, config)
    assert len(calls) == 2  # one release per cell


def test_a_failing_cell_still_releases(monkeypatch):
    calls = []
    monkeypatch.setattr(_runner, "release_freed_memory", lambda: calls.append(1) or True)

    def boom(*a):
        raise RuntimeError("cell failed")

    monkeypatch.setattr(_runner, "run_cv_cell", boom)
    setup = RunSetup(
        datasets={"tiny": ("a",)}, kernels=("flat_rbf",), scorers=("conformance",),
        grids=dict(PRESETS["quick"].grids), time_channels=(False,),
    )  # fmt: skip
    cell = next(c for c in plan(setup, Done()) if c.kind == "cv")
    with pytest.raises(RuntimeError, match="cell failed"):
        run_cell(cell, tiny_sines(), cell_config("quick", share="fold"))
    assert calls == [1]


_FRAGMENTED_HEAP = """
import ctypes, ctypes.util
from experiments._runner import release_freed_memory

def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD 1 MiB: 64 KiB blocks come from the heap
libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: no automatic trim on free
size, n = 64 * 1024, 3000  # about 190 MB
blocks = [libc.malloc(size) for _ in range(n)]
for b in blocks:
    libc.memset(b, 1, size)  # touch: resident
for b in blocks[:-1]:  # keep the last block: the heap's top cannot shrink by itself
    libc.free(b)
before = rss_mb()
released = release_freed_memory() if TRIM else False
print(before - rss_mb(), released)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None,
    reason="glibc's malloc_trim on Linux",
)
@pytest.mark.parametrize("trim", [True, False])
def test_freed_heap_memory_goes_back_to_the_system(trim):
    """Blocks under the mmap threshold, freed but for the last, stay mapped; the release
    returns them (the mechanism the runner relies on). In a fresh interpreter: the test sets
    the allocator's thresholds."""
    if not hasattr(ctypes.CDLL(ctypes.util.find_library("c")), "malloc_trim"):
        pytest.skip("C library without malloc_trim")
    code = f"TRIM = {trim}\n" + _FRAGMENTED_HEAP
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    given_back, released = float(out[0]), out[1] == "True"
    assert released is trim
    if trim:
        assert given_back > 100, given_back  # about 190 MB
    else:
        assert given_back < 20, given_back  # stays mapped without the release
