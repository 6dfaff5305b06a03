"""File permissions shared by everything that writes a user's file (the command lines' outputs,
saved models): the process's umask, read without changing it where the system shows it.
Imports only the standard library."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["umask"]


def umask() -> int:
    """The process's umask: read from ``/proc`` where Linux shows it, else set and restored."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0)
    os.umask(mask)
    return mask
