"""Provenance and store commits, shared by the UEA benchmark and the ADBench harness.

:class:`Provenance` is what every result row and every run carries: the git revision of
the code, the device that computed (the torch device the run asked for, named as the
machine sees it: the GPU's name, or the CPU architecture and core count) and the versions
of the packages that shape the numbers. :class:`Recorder` owns a run's writes: it opens a
``runs`` row, commits each finished cell's rows stamped with the provenance (one
transaction per cell, so an interrupted run loses nothing that had arrived) and closes the
run row with the cells computed and the wall time, however the run ends.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ._options import ConfigError

__all__ = [
    "Provenance",
    "Recorder",
    "check_device",
    "device_label",
    "package_versions",
    "revision",
]

#: Packages whose versions are recorded with every run.
VERSIONED = ("tskernels", "torch", "numpy", "scipy", "scikit-learn", "numba", "pyod")


def revision() -> str:
    """The short git revision of the code (``unknown`` outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
            capture_output=True, text=True, timeout=10, check=True,
        )  # fmt: skip
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_label(device=None) -> str:
    """The torch device ``device`` (None: the CPU) as this machine names it, e.g.
    ``cuda:0 (NVIDIA H100 80GB HBM3)`` or ``cpu (x86_64, 16 cpus)``."""
    import torch

    dev = torch.device("cpu" if device is None else device)
    if dev.type == "cuda" and torch.cuda.is_available():
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return f"{dev} ({torch.cuda.get_device_name(index)})"
    return f"{dev} ({platform.machine()}, {os.cpu_count()} cpus)"


def check_device(device) -> None:
    """A device that cannot run anything fails here, before any cell is stored."""
    if device is None:
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ConfigError(f"--device {device!r}: {exc}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {device}: CUDA is not available on this machine")
        n = torch.cuda.device_count()
        if dev.index is not None and dev.index >= n:
            raise ConfigError(f"--device {device}: this machine has {n} CUDA device(s)")
    try:
        torch.zeros(1, device=dev) + 1
    except (RuntimeError, AssertionError, ValueError) as exc:
        raise ConfigError(f"--device {device}: {exc}") from None


def package_versions() -> dict[str, str]:
    """{package: version} of :data:`VERSIONED` (installed ones) and Python."""
    out = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


@dataclass(frozen=True)
class Provenance:
    """Revision, device label and package versions of a run."""

    revision: str
    device: str
    versions: dict

    @classmethod
    def current(cls, device=None) -> Provenance:
        return cls(revision(), device_label(device), package_versions())


class Recorder:
    """A run's writes to ``store`` (a :class:`~experiments._store.SQLiteStore` with
    ``add_results``): use as a context manager around the run.

    ``commit(rows)`` writes one finished cell's result rows, each stamped with ``setting``
    (when given), the revision, the device and the time; on exit the run row gets the
    cells committed and the wall seconds since ``started`` (a ``time.perf_counter()``
    value; default: when the recorder was made), also when the run was stopped or failed."""

    def __init__(self, store, provenance: Provenance, *, setting: str | None = None,
                 preset: str | None = None, workers: int = 1, scheduler: str = "local",
                 command: str | None = None, started: float | None = None):  # fmt: skip
        self.store, self.provenance, self.setting = store, provenance, setting
        self._run = dict(
            setting=setting, preset=preset, workers=workers, scheduler=scheduler,
            command=" ".join(sys.argv) if command is None else command,
        )  # fmt: skip
        self.run_id: int | None = None
        self.committed = 0
        self._t0 = time.perf_counter() if started is None else started

    def __enter__(self) -> Recorder:
        p = self.provenance
        self.run_id = self.store.start_run(
            **self._run, revision=p.revision, device=p.device,
            versions=json.dumps(p.versions, sort_keys=True),
        )  # fmt: skip
        return self

    def stamp(self) -> dict:
        out = {"revision": self.provenance.revision, "device": self.provenance.device,
               "created": time.time()}  # fmt: skip
        if self.setting is not None:
            out["setting"] = self.setting
        return out

    def commit(self, rows) -> None:
        """Write one finished cell's rows in one transaction."""
        self.store.add_results(rows, self.stamp())
        self.committed += 1

    @property
    def wall_seconds(self) -> float:
        return time.perf_counter() - self._t0

    def __exit__(self, *exc) -> None:
        if self.run_id is not None:
            self.store.finish_run(self.run_id, self.committed, self.wall_seconds)
