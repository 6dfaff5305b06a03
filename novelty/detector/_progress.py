"""Progress of the detector's long calls: one tqdm bar per public call, advanced from inside.

A public call (``fit``, scoring) opens a bar with :func:`progress`; the code below it plans
its steps (:func:`plan`: members, calibration folds, selection folds, known before they run,
so the bar's ETA is the mean step time times the steps left) and reports each one
(:func:`step`). Without an open bar both are no-ops costing one context-variable read, so the
members and the selection report unconditionally. The bar writes to stderr and disappears
when the call ends.
"""

from __future__ import annotations

import contextlib
import contextvars

__all__ = ["progress", "plan", "step"]

_BAR: contextvars.ContextVar = contextvars.ContextVar("novelty_progress", default=None)


@contextlib.contextmanager
def progress(enabled, desc: str):
    """A tqdm bar named ``desc`` for the calls inside the block when ``enabled`` (a bool or a
    positive int: scikit-learn's ``verbose``); nothing otherwise. A bar already open (a call
    inside a call) is kept."""
    if not enabled or _BAR.get() is not None:
        yield
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=0, desc=desc, unit="step", leave=False, dynamic_ncols=True)
    token = _BAR.set(bar)
    try:
        yield
    finally:
        _BAR.reset(token)
        bar.close()


def plan(n: int) -> None:
    """Add ``n`` steps to the open bar's total."""
    bar = _BAR.get()
    if bar is not None and n > 0:
        bar.total += int(n)
        bar.refresh()


def step(label: str | None = None, n: int = 1) -> None:
    """One step done (``label``: what it was, shown beside the bar)."""
    bar = _BAR.get()
    if bar is None:
        return
    if label:
        bar.set_postfix_str(label, refresh=False)
    bar.update(n)
