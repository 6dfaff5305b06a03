"""Running cells: in this process, in local worker processes, or on a Dask cluster; and
stopping cleanly on a signal.

:class:`Executor` runs ``entry(cell, data, config)`` for each submitted cell, ``data`` being
the shared object named by ``cell.dataset`` (sent once to each worker: the initializer of a
local pool, ``scatter`` on Dask); :func:`execute` submits cells, hands each finished one to
a callback (which commits it) and submits the cells it unlocks. Used by the UEA benchmark
and the ADBench harness alike.

Stopping. SIGINT, SIGTERM and SIGHUP stop a run cleanly from the moment the
:class:`Executor` is made until it is closed, whenever they arrive (while worker processes
start included): results that have arrived are handed over, the running cells are abandoned
(worker processes killed, nothing half-written), and the caller raises
:class:`RunInterrupted`. Worker processes ignore SIGINT (the parent decides) and end when
their parent ends, even after a SIGKILL of it (``PR_SET_PDEATHSIG`` on Linux, and a thread
watching the parent elsewhere).

Start-up data. A local pool never sends the shared data through the pipe that starts a
worker: the multiprocessing start-up keeps the pipe's read end open in the parent, so a
worker killed while the parent writes more than the pipe holds (64 KiB on Linux) would block
the parent for ever. The data are written once to a private temporary file, which each
worker reads; what goes through the pipe is a few KiB.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import contextmanager

from ._options import ConfigError

__all__ = ["Executor", "RunError", "RunInterrupted", "StopSignals", "execute"]

#: Seconds between checks for a stop request while waiting for workers.
_POLL = 0.2


class RunError(RuntimeError):
    """A run that could not go on (a worker process died); finished cells are committed."""


class RunInterrupted(KeyboardInterrupt):
    """A signal stopped the run; every result that had arrived is committed.

    ``signum``: the signal; ``summary``: what the run would have returned."""

    def __init__(self, signum: int, summary: dict | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)
        self.summary = summary

    def report(self, unit: str = "cells") -> int:
        """Print the one-line stop message (how much was committed, how to resume) on stderr;
        returns the exit status 128 + signal."""
        s = self.summary or {}
        print(f"run stopped by {signal.Signals(self.signum).name}: "
              f"{s.get('cells_computed', 0)} of {s.get('cells_total', '?')} {unit} computed and "
              "committed; start the same command again to resume", file=sys.stderr)  # fmt: skip
        return 128 + self.signum


# ----------------------------------------------------------------------------- workers
_WORKER_DATA: dict[str, object] = {}


def _init_worker(shared_file: str, parent_pid: int) -> None:
    # Ctrl-C reaches the parent, which stops the workers; SIGINT was blocked since birth
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _exit_with_parent(parent_pid)
    with open(shared_file, "rb") as f:  # written by the parent (a private folder)
        _WORKER_DATA.update(pickle.load(f))


def _write_shared(shared: dict) -> str:
    """``shared`` pickled into a new private temporary folder (mode 0700); returns the file."""
    folder = tempfile.mkdtemp(prefix="experiments-shared-")
    path = os.path.join(folder, "shared.pickle")
    try:
        with open(path, "wb") as f:
            pickle.dump(shared, f, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return path


def _exit_with_parent(parent_pid: int) -> None:
    """End this worker process when its parent ends, however the parent ends (a SIGKILL
    included): the kernel sends SIGKILL on Linux (``PR_SET_PDEATHSIG``; it cannot be held
    up by a compiled loop holding the GIL); elsewhere a thread waits on the parent."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
            pass
    if os.getppid() != parent_pid:  # the parent ended before the line above took effect
        os._exit(1)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_wait_for_parent, args=(parent,), daemon=True).start()


def _wait_for_parent(parent) -> None:
    parent.join()  # returns when the parent process has ended
    os._exit(1)


def _pool_entry(entry: Callable, cell, config: dict):
    return entry(cell, _WORKER_DATA[cell.dataset], config)


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP turned into a stop request while installed (main thread
    only; a signal ignored at the start, e.g. SIGHUP under nohup, stays ignored). The handler
    only records the signal, except inside :meth:`raising` (a cell computed in this process),
    where it raises :class:`RunInterrupted` so the computation is abandoned."""

    def __init__(self):
        self.signum: int | None = None
        self._raise = False
        self._depth = 0

    def _handler(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum
        if self._raise:
            self._raise = False
            raise RunInterrupted(signum)

    def install(self) -> dict:
        """Install the handlers (a second call while installed changes nothing); returns
        what :meth:`restore` needs."""
        old = {}
        self._depth += 1
        if self._depth == 1 and threading.current_thread() is threading.main_thread():
            for name in ("SIGINT", "SIGTERM", "SIGHUP"):
                sig = getattr(signal, name, None)
                if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
                    old[sig] = signal.signal(sig, self._handler)
        return old

    def restore(self, old: dict) -> None:
        self._depth -= 1
        for sig, handler in old.items():
            signal.signal(sig, handler)

    @contextmanager
    def installed(self):
        old = self.install()
        try:
            yield self
        finally:
            self.restore(old)

    @contextmanager
    def raising(self):
        if self.signum is not None:
            raise RunInterrupted(self.signum)
        self._raise = True
        try:
            yield
        finally:
            self._raise = False


@contextmanager
def _blocked(*names: str):
    """The signals ``names`` blocked in this thread for the block: a process started inside
    inherits the mask. A signal that arrives meanwhile is delivered when the block ends,
    not lost (the stdlib's resource tracker does the same)."""
    sigs = {getattr(signal, n) for n in names if hasattr(signal, n)}
    if not hasattr(signal, "pthread_sigmask") or not sigs:
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _sigint_blocked():
    """SIGINT blocked for the block: a Ctrl-C sent to the whole process group cannot
    interrupt a worker that is still starting (before its initializer ignores SIGINT)."""
    return _blocked("SIGINT")


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (if not running) with SIGHUP blocked. It
    ignores SIGINT and SIGTERM but not SIGHUP, so a closed terminal killed it, and the pool
    then printed a relaunch warning and the new tracker a traceback; it still ends when
    this process ends (its pipe closes)."""
    from multiprocessing import resource_tracker

    with _blocked("SIGHUP"):
        resource_tracker.ensure_running()


class Executor:
    """submit(cell) and next_done() -> (cell, result), or None once a stop was requested,
    for the three schedulers (``"local"`` with ``workers`` 1: this process; ``"local"``
    with more: a pool of spawned processes; a Dask scheduler address); drain() the results
    that have arrived. ``entry(cell, shared[cell.dataset], config)`` computes a cell; in a
    pool or on Dask it must be a module-level function (pickled by reference).

    The stop signals are handled from construction to :meth:`close` (a signal that arrives
    meanwhile, before :func:`execute` or while a worker starts, is a stop request); call
    :meth:`close` in a ``finally``."""

    def __init__(self, scheduler: str, workers: int, shared: dict, entry: Callable,
                 config: dict):  # fmt: skip
        self.scheduler, self.workers, self.config = scheduler, workers, config
        self.shared, self.entry, self.stop = shared, entry, StopSignals()
        self.pending: dict = {}
        self.queue: deque = deque()
        self.pool = self.client = None
        self._cleanup = None
        self._signals = self.stop.install()
        try:
            self._start(scheduler, workers, shared)
        except BaseException:
            self.close()
            raise

    def _start(self, scheduler: str, workers: int, shared: dict) -> None:
        if scheduler == "local" and workers > 1:
            from concurrent.futures import ProcessPoolExecutor

            _start_resource_tracker()
            shared_file = _write_shared(shared)
            self._cleanup = weakref.finalize(
                self, shutil.rmtree, os.path.dirname(shared_file), ignore_errors=True
            )
            self.pool = ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker, initargs=(shared_file, os.getpid()),
            )  # fmt: skip
        elif scheduler != "local":
            try:
                from distributed import Client, as_completed
            except ImportError:
                raise ConfigError(
                    f"--scheduler {scheduler} needs the `distributed` package (Dask)"
                ) from None
            try:
                self.client = Client(scheduler)
            except (OSError, TimeoutError) as exc:
                msg = f"cannot reach the Dask scheduler {scheduler}: {exc}"
                raise ConfigError(msg) from None
            self.data_futures = {
                n: self.client.scatter(d, broadcast=True) for n, d in shared.items()
            }
            self.ac = as_completed()

    def submit(self, cell) -> None:
        if self.pool is not None:
            from concurrent.futures.process import BrokenProcessPool

            try:
                with _sigint_blocked():  # a worker started here is born deaf to Ctrl-C
                    fut = self.pool.submit(_pool_entry, self.entry, cell, self.config)
            except (BrokenProcessPool, OSError) as exc:  # a worker died (a signal to the
                # group?), or the pool's pipe was closed under a worker being spawned
                self._broken(exc)
                return
            self.pending[fut] = cell
        elif self.client is not None:
            fut = self.client.submit(
                self.entry, cell, self.data_futures[cell.dataset], self.config, pure=False
            )
            self.pending[fut] = cell
            self.ac.add(fut)
        else:
            self.queue.append(cell)

    def __len__(self) -> int:
        return len(self.pending) + len(self.queue)

    def _broken(self, exc: BaseException) -> None:
        """A worker process died: a stop request when a signal explains it (one sent to the
        whole group may still be on its way to this process), else :class:`RunError`."""
        for _ in range(25):
            if self.stop.signum is not None:
                return
            time.sleep(0.02)
        raise RunError(
            f"a worker process ended unexpectedly ({exc}); every finished cell is "
            "committed: run the same command again to resume"
        ) from None

    def _result(self, fut):
        from concurrent.futures.process import BrokenProcessPool

        try:
            return fut.result()
        except BrokenProcessPool as exc:
            self._broken(exc)
            return None

    def next_done(self):
        if self.pool is not None:
            from concurrent.futures import FIRST_COMPLETED, wait

            done: set = set()
            while not done:
                if self.stop.signum is not None:
                    return None
                done, _ = wait(list(self.pending), timeout=_POLL, return_when=FIRST_COMPLETED)
            fut = min(done, key=lambda f: id(f))
            result = self._result(fut)
            if result is None:
                return None
            return self.pending.pop(fut), result
        if self.client is not None:
            while not self.ac.has_ready():
                if self.stop.signum is not None:
                    return None
                time.sleep(_POLL / 4)
            fut = next(self.ac)
            return self.pending.pop(fut), fut.result()
        if self.stop.signum is not None:
            return None
        cell = self.queue[0]
        with self.stop.raising():
            result = self.entry(cell, self.shared[cell.dataset], self.config)
        self.queue.popleft()
        return cell, result

    def drain(self):
        """(cell, result) of every submitted cell whose result has arrived."""
        for fut, cell in list(self.pending.items()):
            if self.pool is not None:
                ok = fut.done() and not fut.cancelled() and fut.exception() is None
            else:
                ok = fut.status == "finished"
            if ok:
                del self.pending[fut]
                yield cell, fut.result()

    def close(self) -> None:
        """Stop the workers (those still computing are killed), remove the start-up file and
        put the signal handlers back; a second call does nothing."""
        try:
            if self.pool is not None:
                if any(not f.done() for f in self.pending) or self.stop.signum is not None:
                    # their results would be dropped: do not wait for them
                    for proc in list((getattr(self.pool, "_processes", None) or {}).values()):
                        proc.kill()
                self.pool.shutdown(wait=True, cancel_futures=True)
                self.pool = None
            if self.client is not None:
                for fut in list(self.pending):
                    fut.cancel()
                self.client.close()
                self.client = None
        finally:
            if self._cleanup is not None:
                self._cleanup()
            if self._signals is not None:
                self.stop.restore(self._signals)
                self._signals = None


def execute(ex: Executor, cells: Iterable, record: Callable, then: Callable | None = None,
            limit: int | None = None) -> int:  # fmt: skip
    """Submit ``cells`` to ``ex`` and wait: each finished cell goes to ``record(cell,
    result)`` (which commits it), then ``then(cell)`` names the cells it unlocks, which are
    submitted. Stops when every cell is done, after ``limit`` results, or on a stop signal
    (SIGINT, SIGTERM, SIGHUP while this runs): the results that have arrived are recorded
    and ``ex.stop.signum`` holds the signal. Returns the number of cells recorded (a unit of
    several cells, one with ``n_cells``, counts its cells; ``limit`` counts units)."""
    n = units = 0
    with ex.stop.installed():
        try:
            for cell in cells:
                if ex.stop.signum is not None:
                    break
                ex.submit(cell)
            while len(ex) and ex.stop.signum is None:
                got = ex.next_done()
                if got is None:
                    break
                cell, result = got
                record(cell, result)
                n += _cells_in(cell)
                units += 1
                if limit is not None and units >= limit:
                    break
                for nxt in then(cell) if then is not None else ():
                    ex.submit(nxt)
        except RunInterrupted:
            pass  # ex.stop.signum holds the signal
        if ex.stop.signum is not None:
            for cell, result in ex.drain():
                record(cell, result)
                n += _cells_in(cell)
    return n


def _cells_in(unit) -> int:
    """The cells a unit of work holds: its ``n_cells`` (a group of cells), else one."""
    return int(getattr(unit, "n_cells", 1))
