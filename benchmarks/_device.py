"""``--device {cpu,cuda}`` for the benchmark scripts: the option, its check (a clear one-line
error when CUDA is asked for but torch cannot use it) and the synchronisation that a timing
on the GPU needs (CUDA kernels run asynchronously: without it a timer measures the launch).

Imported by the scripts as ``_device`` (run as ``python benchmarks/bench_x.py``, the folder
is on ``sys.path``) or ``benchmarks._device`` (imported from the repository root).
"""

from __future__ import annotations

import argparse

import torch

DEVICES = ("cpu", "cuda")


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where our kernels (and the peers that can) run; cuda needs a CUDA build of torch "
        "and a GPU",
    )


def check_device(parser: argparse.ArgumentParser, device: str) -> str:
    """``device``, or exit through ``parser.error`` (status 2, one line) when it is "cuda"
    and ``torch.cuda.is_available()`` is False."""
    if device == "cuda" and not torch.cuda.is_available():
        parser.error(
            "--device cuda: torch.cuda.is_available() is False (no GPU, or a CPU-only torch "
            f"build: torch {torch.__version__}); use --device cpu"
        )
    return device


def synchronize(device: str) -> None:
    """Wait for the GPU's queued work when ``device`` is "cuda" (no-op on the CPU)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def synced(fn, device: str):
    """``fn`` followed by :func:`synchronize`, for a timer around it."""

    def call():
        out = fn()
        synchronize(device)
        return out

    return call


def timed(fn, repeats: int, device: str = "cpu", warmup: bool = False):
    """``(seconds, last output)``: ``repeats`` timings of ``fn``, each between two
    :func:`synchronize` calls (after one untimed call when ``warmup``)."""
    import time

    out = fn() if warmup else None
    seconds = []
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        out = fn()
        synchronize(device)
        seconds.append(time.perf_counter() - t0)
    return seconds, out
