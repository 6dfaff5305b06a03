"""Files the command lines write: reserved before the work, written atomically, never
overwritten without ``force``, with the umask's permissions, and CSV text cells that a
spreadsheet cannot run (:class:`Output`, :func:`write_csv`, :func:`neutralise_formula`).

Shared by the series command line (:mod:`novelty.__main__`) and the recording one
(:mod:`novelty.windows._cli`); imports only the standard library. Its errors are
:class:`CLIError`: one line for the user, exit status 2.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import socket
from pathlib import Path

from .._files import umask as _umask

__all__ = ["PROG", "CLIError", "Output", "neutralise_formula", "write_csv", "write_frame"]

PROG = "tskernels-detect"


class CLIError(Exception):
    """An error to print as one line (exit status 2)."""


def _one_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


class Output:
    """A file the command will write at ``path`` (``what`` names it in messages), checked and
    reserved before any work, written at the end by :meth:`write`.

    Use as a context manager: on entry the path is checked (not a folder, its folder exists,
    an existing file needs ``force``) and reserved by creating the lock file ``.<name>.lock``
    beside it exclusively (``O_CREAT | O_EXCL``; it holds ``pid host``), which also proves the
    folder writable. A lock held by a live process refuses the run; one left by a process that
    no longer runs on this host is taken over. On exit (error and Ctrl-C included) the lock is
    removed."""

    def __init__(self, path: str, force: bool, what: str):
        self.path = Path(path)
        self.force = force
        self.what = what
        self.lock = self.path.parent / f".{self.path.name}.lock"
        self._held = False

    def __enter__(self) -> Output:
        p = self.path
        if p.is_dir():
            raise CLIError(f"{p} is a folder, not a file")
        if not p.parent.is_dir():
            raise CLIError(f"{p.parent}: no such folder for the {self.what}")
        if p.exists() and not self.force:
            raise CLIError(f"{p} exists: pass --force to overwrite the {self.what}")
        self._reserve()
        return self

    def __exit__(self, *exc) -> None:
        if self._held:
            with contextlib.suppress(OSError):
                os.unlink(self.lock)
            self._held = False

    def _reserve(self) -> None:
        for attempt in (0, 1):
            try:
                fd = os.open(self.lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                if attempt == 0 and _stale(self.lock):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.lock)
                    continue
                raise CLIError(
                    f"{self.path} is being written by another {PROG} run (lock file "
                    f"{self.lock}; delete it if no such run is active)"
                ) from None
            except OSError as err:
                raise CLIError(self._cannot(err)) from None
            self._held = True
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(f"{os.getpid()} {socket.gethostname()}\n")
            except BaseException as err:  # __exit__ does not run when __enter__ fails
                self.__exit__()
                if isinstance(err, OSError):  # a full disk: not even the lock's few bytes
                    raise CLIError(self._cannot(err)) from None
                raise
            return

    def _cannot(self, err: OSError) -> str:
        reason = err.strerror or _one_line(err)
        if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            reason = f"its folder {self.path.parent} is not writable ({reason})"
        return f"cannot write the {self.what} {self.path}: {reason}"

    def write(self, write_to) -> None:
        """``write_to(tmp)`` writes the content to ``tmp`` (a new path in the same folder);
        the file then gets the umask's permissions and is moved onto the path. Without
        ``force``, a file that appeared at the path meanwhile is kept: the new one stays
        beside it and a CLIError names both. Any failure removes the temporary file; an
        ``OSError`` becomes a one-line CLIError naming the path."""
        p = self.path
        tmp = p.parent / f".{p.stem}.{secrets.token_hex(4)}.tmp{p.suffix}"
        try:
            write_to(tmp)
            os.chmod(tmp, 0o666 & ~_umask())
            if self.force:
                os.replace(tmp, p)
            elif not _link_new(tmp, p):
                kept = _keep_beside(tmp, p)
                raise CLIError(
                    f"{p} appeared while this run worked: not overwritten (pass --force to "
                    f"overwrite); the new {self.what} is at {kept}"
                )
        except OSError as err:
            raise CLIError(f"{self._cannot(err)}; nothing written") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _stale(lock: Path) -> bool:
    """Whether ``lock`` was left by a process that no longer runs (on this host)."""
    try:
        pid, host = lock.read_text().split()
        pid = int(pid)
    except (OSError, ValueError):
        return False  # unreadable, or being written: taken as held
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's live process
        return False
    return False


def _link_new(tmp: Path, path: Path) -> bool:
    """Put ``tmp`` at ``path`` if nothing is there (atomically: a hard link, which never
    replaces); False if a file is there. Where hard links are not supported, a check then a
    rename."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError:  # no hard links on this file system
        if os.path.lexists(path):
            return False
        os.replace(tmp, path)
    return True


def _keep_beside(tmp: Path, path: Path) -> Path:
    """A new, unused name beside ``path`` (``name-new<k>.suffix``) holding ``tmp``'s file."""
    for k in range(1, 1000):
        kept = path.parent / f"{path.stem}-new{k if k > 1 else ''}{path.suffix}"
        if _link_new(tmp, kept):
            return kept
    raise CLIError(f"{path} appeared while this run worked, and no free name beside it")


#: a number as text (kept as it is: ``-1.5`` is a value, not a formula)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def neutralise_formula(value):
    """``value`` with a leading ``'`` if it is text a spreadsheet would read as a formula: it
    starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return and is not a number
    (OWASP, "CSV injection"). Other values are returned unchanged."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        if not _NUMBER.fullmatch(value):
            return "'" + value
    return value


def write_csv(frame, path: Path) -> None:
    """``frame`` as CSV into the new file ``path`` (flushed to disk: a full disk fails here)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with os.fdopen(fd, "w", newline="") as f:
        frame.to_csv(f, index=False)
        f.flush()
        os.fsync(f.fileno())


def write_frame(frame, out: Output | None, stdout) -> None:
    """``frame`` as CSV: with text cells neutralised (:func:`neutralise_formula`), to ``out``
    (an entered :class:`Output`) or, when ``out`` is None, to the stream ``stdout`` (a reader
    that stops early, as ``| head`` does, is not an error)."""
    import pandas as pd

    frame = frame.copy()
    for c in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[c]):  # text: ids, labels, channels
            frame[c] = frame[c].map(neutralise_formula)
    if out is not None:
        out.write(lambda tmp: write_csv(frame, tmp))
        return
    try:
        frame.to_csv(stdout, index=False)
        stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
