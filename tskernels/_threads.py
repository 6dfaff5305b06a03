"""The one thread helper of the kernels: ``n_jobs`` (declared by ``tskernels.Kernel``: None, -1
or a positive int, checked there) sets the thread count of the pool a computation runs on,
numba's or torch's, for the duration of a call, and restores it afterwards. ``None`` leaves
the current setting."""

from __future__ import annotations

import os
from contextlib import contextmanager

__all__ = ["threads"]


def resolve_n_jobs(n_jobs: int, cap: int) -> int:
    """Thread count for a checked ``n_jobs`` (-1 or a positive int): -1 is ``cap``, a
    positive integer is capped at ``cap``."""
    return cap if n_jobs == -1 else min(int(n_jobs), cap)


@contextmanager
def threads(n_jobs, pool: str):
    """Run the block with ``n_jobs`` threads in ``pool`` ("numba" or "torch")."""
    if n_jobs is None:
        yield
        return
    if pool == "numba":
        import numba

        n = resolve_n_jobs(n_jobs, numba.config.NUMBA_NUM_THREADS)
        get, set_ = numba.get_num_threads, numba.set_num_threads
    else:
        import torch

        n = resolve_n_jobs(n_jobs, os.cpu_count() or 1)
        get, set_ = torch.get_num_threads, torch.set_num_threads
    old = get()
    if n == old:
        yield
        return
    set_(n)
    try:
        yield
    finally:
        set_(old)
