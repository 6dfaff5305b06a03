"""One ADBench cell under a wall-clock limit, in a child process that can be killed.

A method can run far longer than planned (PyOD's COF took over 12 minutes on 1,376 rows) or
exhaust the memory; a Python thread cannot be stopped, a process can. :class:`CellRunner`
keeps one child process per process that computes cells (a fresh interpreter started with
``subprocess``: no inherited threads or CUDA state, and, unlike multiprocessing's ``spawn``,
the caller's main script is not imported again, so a script without an
``if __name__ == "__main__"`` guard works), sends it each cell (the method pickled by value
with ``cloudpickle``, so methods registered at run time travel too) and waits at most the
limit:

* the result arrives: returned;
* the limit passes: the child is killed (SIGKILL) and reaped, ``("timeout", meta)`` is
  returned, and the next cell starts a fresh child;
* the child ends without a result (killed for memory, a crash): ``("died", meta)``.

``meta`` = (training rows, test rows, columns) as the child reported them once the split was
loaded (None before). The child outlives a run (the next run in this process reuses it: one
interpreter start per process, not per run). No orphans: the child runs in its own session
(a Ctrl-C or a signal to the terminal's process group reaches the parent, which decides),
dies with its parent (``PR_SET_PDEATHSIG`` on Linux; elsewhere it ends when the connection to
the parent closes), is killed when anything interrupts the wait (a stop signal raising in the
parent) and when this process exits (``atexit``).
"""

from __future__ import annotations

import atexit
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection

from .._executor import _exit_with_parent

__all__ = ["CellRunner"]

#: Seconds between checks of the child while waiting (a stop signal is handled at once).
_POLL = 0.2


def _child_main(fd: int, parent_pid: int) -> None:
    """The child's loop on the connection ``fd``: first the parent's ``sys.path``, then
    pickled (function, args) tasks: ``function(*args, started=...)`` is called and ("ok",
    result) or ("error", message) sent back; an empty message or a closed connection ends
    it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent(parent_pid)
    conn = Connection(fd)
    sys.path[:] = pickle.loads(conn.recv_bytes())
    import importlib

    for name in _PRELOAD:  # before "ready": the limit counts the cells' work, not start-up
        importlib.import_module(name)
    conn.send(("ready", None))
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not data:
            return
        try:
            fn, args = pickle.loads(data)
            out = ("ok", fn(*args, started=lambda meta: conn.send(("started", meta))))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which records it
            out = ("error", f"{type(exc).__name__}: {exc}")
        conn.send(out)


#: Modules the child imports before it reports ready.
_PRELOAD = ("numpy", "torch", "sklearn.metrics", "sklearn.model_selection",
            "sklearn.preprocessing", "experiments.adbench._run")  # fmt: skip
#: Seconds a new child may take to start and import :data:`_PRELOAD`.
_START_TIMEOUT = 300.0

_CHILD = (
    "import sys; from experiments.adbench._limit import _child_main; "
    "_child_main(int(sys.argv[1]), int(sys.argv[2]))"
)


class CellRunner:
    """A persistent child process computing one cell at a time under a time limit."""

    def __init__(self):
        self.proc = None
        self.conn = None
        self._registered = False

    @property
    def pid(self) -> int | None:
        """The child's process id (None when none runs)."""
        return None if self.proc is None else self.proc.pid

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        fd = theirs.fileno()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(fd), str(os.getpid())],
                pass_fds=(fd,), env=env, start_new_session=True,
            )  # fmt: skip
        finally:
            theirs.close()
        self.proc, self.conn = proc, Connection(ours.detach())
        try:
            self.conn.send_bytes(pickle.dumps(list(sys.path)))
            if not self.conn.poll(_START_TIMEOUT) or self.conn.recv()[0] != "ready":
                raise OSError(f"no answer within {_START_TIMEOUT:g} s")
        except BaseException as exc:
            code = self.proc.poll()
            self.kill()
            if isinstance(exc, (OSError, EOFError)):
                raise RuntimeError(
                    f"the process computing cells did not start ({exc}; exit code {code})"
                ) from None
            raise
        if not self._registered:
            atexit.register(self.close)
            self._registered = True

    def run(self, fn, args: tuple, timeout: float):
        """``fn(*args, started=callback)`` in the child, waiting at most ``timeout`` seconds:
        ("ok", result), ("error", message: the task could not be sent or unpickled),
        ("timeout", meta) or ("died", (meta, exit code)); ``fn`` and ``args`` are pickled
        with cloudpickle (functions defined anywhere travel by value)."""
        import cloudpickle

        try:
            data = cloudpickle.dumps((fn, args))
        except Exception as exc:  # noqa: BLE001 - a method that cannot travel is recorded
            return "error", (
                f"the method cannot be sent to the cell's process ({type(exc).__name__}: "
                f"{exc}); --cell-timeout 0 computes cells in this process, without a limit"
            )
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            try:
                self._start()
            except RuntimeError as exc:
                return "error", str(exc)
        meta = None
        deadline = time.monotonic() + timeout
        try:
            self.conn.send_bytes(data)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    return "timeout", meta
                if self.conn.poll(min(remaining, _POLL)):
                    try:
                        kind, payload = self.conn.recv()
                    except (EOFError, OSError):
                        return "died", (meta, self._reap())
                    if kind == "started":
                        meta = payload
                        continue
                    return kind, payload
                if self.proc.poll() is not None and not self.conn.poll():
                    return "died", (meta, self._reap())
        except BaseException:  # a stop signal raising here, or anything else: no orphan
            self.kill()
            raise

    def _reap(self) -> int | None:
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        return code

    def kill(self) -> None:
        """Kill and reap the child (if any)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def close(self) -> None:
        """Stop the child: asked to end, killed if it has not within 5 s."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.conn.send_bytes(b"")
                self.proc.wait(5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        self.kill()
