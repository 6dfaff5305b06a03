"""Planning and running the benchmark: the cells of a run, their execution in local processes
or on a Dask cluster, and the store commits.

Every CV cell is independent; a test cell (data set, class, kernel) is submitted as soon as
the CV cells it selects from are all in the store, so both phases overlap. Each finished
cell is committed at once; a cell whose rows are already in the store is never submitted,
so a run killed at any point and started again with the same command finishes the rest and
ends with the same tables.

Before any work, every option is checked (:class:`ConfigError`, a one-line message): counts,
alphas, levels and grid values (each grid point of an overridden grid is built and run on a
tiny toy batch, on ``device`` when one is given), the device itself, the kernels, scorers
and data sets; then the store is opened (:class:`~experiments._store.StoreError`).

Stopping. SIGINT, SIGTERM and SIGHUP stop a run cleanly: results that have arrived are
committed, the running cells are abandoned (worker processes killed, nothing half-written),
and :class:`RunInterrupted` is raised; the same command resumes. Worker processes ignore
SIGINT (the parent decides) and end when their parent ends, even after a SIGKILL of it
(``PR_SET_PDEATHSIG`` on Linux, and a thread watching the parent elsewhere).
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ._grids import PRESETS, REGISTRY_NAME, KernelGrid, _r, build_kernel, kernel_grid_points
from ._protocol import (
    Dataset,
    fold_grams,
    params_key,
    run_cv_cell,
    run_test_cell,
    select,
)
from ._scorers import expand_scorers
from ._store import ResultStore, encode_array

__all__ = [
    "ConfigError",
    "RunError",
    "RunInterrupted",
    "RunOptions",
    "run_benchmark",
    "resolve_kernels",
]

DEFAULT_PREPROCESSING = {"max_length": 100, "clip": 5.0, "eps": 1e-4, "basepoint": True}
#: Seconds between checks for a stop request while waiting for workers.
_POLL = 0.2


class ConfigError(ValueError):
    """A run option that cannot work, found before any work (one-line message)."""


class RunError(RuntimeError):
    """A run that could not go on (a worker process died); finished cells are committed."""


class RunInterrupted(KeyboardInterrupt):
    """A signal stopped the run; every result that had arrived is committed.

    ``signum``: the signal; ``summary``: what :func:`run_benchmark` would have returned."""

    def __init__(self, signum: int, summary: dict | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)
        self.summary = summary


@dataclass
class RunOptions:
    """Everything ``python -m experiments run`` accepts (None = the preset's value)."""

    datasets: list[str] | None = None
    kernels: list[str] | None = None
    scorers: list[str] = field(
        default_factory=lambda: ["conformance", "mahalanobis", "sse", "sosrep", "baselines"]
    )
    preset: str = "quick"
    folds: int | None = None
    repeats: int | None = None
    seed: int = 0
    share: str = "fold"
    alphas: list[float] | None = None
    max_rank: int | None = None
    time_channel: list[bool] | None = None
    grid: dict[str, dict[str, list]] = field(default_factory=dict)  # kernel -> axis -> values
    levels: list[int] | None = None
    store: str = "results/experiments.sqlite"
    data_dir: str | None = None
    device: str | None = None
    workers: int = 1
    threads: int | None = None
    scheduler: str = "local"
    progress: bool = True
    max_cells: int | None = None
    retry_failed: bool = False
    normal_classes: list[str] | None = None  # None: every class is made normal in turn
    verbose: bool = True


def _duplicates(values) -> list:
    """The values that occur more than once (by value: 1 and 1.0 are the same grid value)."""
    seen, dup = set(), []
    for v in values:
        if v in seen and v not in dup:
            dup.append(v)
        seen.add(v)
    return dup


def resolve_kernels(names, grids: dict[str, KernelGrid]) -> tuple[list[str], list[str]]:
    """(kernels registered now and with a grid, messages about skipped ones). Without
    ``names``: every grid marked ``default`` (the single-level signature variants are opt-in)."""
    import tskernels

    registry = tskernels.kernel_registry()
    if names is not None and len(names) == 0:
        raise ConfigError("--kernels names no kernel")
    names = [n for n, g in grids.items() if g.default] if not names else list(names)
    if _duplicates(names):
        raise ConfigError(f"--kernels names {', '.join(map(str, _duplicates(names)))} twice")
    usable, messages = [], []
    for n in names:
        if n not in grids:
            raise ConfigError(f"unknown kernel {n!r}; kernels with grids: {', '.join(grids)}")
        if REGISTRY_NAME.get(n, n) not in registry:
            messages.append(f"kernel {n!r} is not in the tskernels registry yet, skipped")
        else:
            usable.append(n)
    return usable, messages


def _revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
            capture_output=True, text=True, timeout=10, check=True,
        )  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _device_label(device) -> str:
    import torch

    dev = str(device or "cpu")
    if dev.startswith("cuda") and torch.cuda.is_available():
        return f"{dev} ({torch.cuda.get_device_name(torch.device(dev))})"
    return f"{dev} ({platform.machine()}, {os.cpu_count()} cpus)"


# ----------------------------------------------------------------------------- execution
_WORKER_DATA: dict[str, Dataset] = {}


def _init_worker(datasets: dict[str, Dataset], parent_pid: int) -> None:
    # Ctrl-C reaches the parent, which stops the workers; SIGINT was blocked since birth
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _exit_with_parent(parent_pid)
    _WORKER_DATA.update(datasets)


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


def _pool_entry(kind: str, cell: dict, config: dict):
    fn = run_cv_cell if kind == "cv" else run_test_cell
    return fn(cell, _WORKER_DATA[cell["dataset"]], config)


def _dask_entry(kind: str, cell: dict, data: Dataset, config: dict):
    fn = run_cv_cell if kind == "cv" else run_test_cell
    return fn(cell, data, config)


class _StopSignals:
    """SIGINT, SIGTERM and SIGHUP turned into a stop request while installed (main thread
    only; a signal ignored at the start, e.g. SIGHUP under nohup, stays ignored). The handler
    only records the signal, except inside :meth:`raising` (a cell computed in this process),
    where it raises :class:`RunInterrupted` so the computation is abandoned."""

    def __init__(self):
        self.signum: int | None = None
        self._raise = False

    def _handler(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum
        if self._raise:
            self._raise = False
            raise RunInterrupted(signum)

    @contextmanager
    def installed(self):
        old = {}
        if threading.current_thread() is threading.main_thread():
            for name in ("SIGINT", "SIGTERM", "SIGHUP"):
                sig = getattr(signal, name, None)
                if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
                    old[sig] = signal.signal(sig, self._handler)
        try:
            yield self
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

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
def _sigint_blocked():
    """SIGINT blocked in this thread for the block: a process started inside inherits the
    mask, so a Ctrl-C sent to the whole process group cannot interrupt a worker that is
    still starting (before its initializer ignores SIGINT). A SIGINT that arrives meanwhile
    is delivered when the block ends, not lost (the stdlib's resource tracker does the same)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _Executor:
    """submit(kind, cell) and next_done() -> (kind, cell, rows), or None once a stop was
    requested, for the three schedulers; drain() the results that have arrived."""

    def __init__(self, scheduler: str, workers: int, datasets: dict[str, Dataset], config,
                 stop: _StopSignals):  # fmt: skip
        self.scheduler, self.workers, self.config = scheduler, workers, config
        self.datasets, self.stop = datasets, stop
        self.pending: dict = {}
        self.queue: deque = deque()
        self.pool = self.client = None
        if scheduler == "local" and workers > 1:
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker, initargs=(datasets, os.getpid()),
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
                n: self.client.scatter(d, broadcast=True) for n, d in datasets.items()
            }
            self.ac = as_completed()

    def submit(self, kind: str, cell: dict) -> None:
        if self.pool is not None:
            with _sigint_blocked():  # a worker started here is born deaf to Ctrl-C
                fut = self.pool.submit(_pool_entry, kind, cell, self.config)
            self.pending[fut] = (kind, cell)
        elif self.client is not None:
            fut = self.client.submit(
                _dask_entry, kind, cell, self.data_futures[cell["dataset"]], self.config,
                pure=False,
            )  # fmt: skip
            self.pending[fut] = (kind, cell)
            self.ac.add(fut)
        else:
            self.queue.append((kind, cell))

    def __len__(self) -> int:
        return len(self.pending) + len(self.queue)

    def _result(self, fut):
        from concurrent.futures.process import BrokenProcessPool

        try:
            return fut.result()
        except BrokenProcessPool as exc:
            for _ in range(25):  # a signal sent to the whole group may still be on its way
                if self.stop.signum is not None:
                    return None
                time.sleep(0.02)
            raise RunError(
                f"a worker process ended unexpectedly ({exc}); every finished cell is "
                "committed: run the same command again to resume"
            ) from None

    def next_done(self):
        if self.pool is not None:
            from concurrent.futures import FIRST_COMPLETED, wait

            done: set = set()
            while not done:
                if self.stop.signum is not None:
                    return None
                done, _ = wait(list(self.pending), timeout=_POLL, return_when=FIRST_COMPLETED)
            fut = min(done, key=lambda f: id(f))
            rows = self._result(fut)
            if rows is None:
                return None
            kind, cell = self.pending.pop(fut)
            return kind, cell, rows
        if self.client is not None:
            while not self.ac.has_ready():
                if self.stop.signum is not None:
                    return None
                time.sleep(_POLL / 4)
            fut = next(self.ac)
            kind, cell = self.pending.pop(fut)
            return kind, cell, fut.result()
        if self.stop.signum is not None:
            return None
        kind, cell = self.queue[0]
        with self.stop.raising():
            rows = _dask_entry(kind, cell, self.datasets[cell["dataset"]], self.config)
        self.queue.popleft()
        return kind, cell, rows

    def drain(self):
        """(kind, cell, rows) of every submitted cell whose result has arrived."""
        for fut, (kind, cell) in list(self.pending.items()):
            if self.pool is not None:
                ok = fut.done() and not fut.cancelled() and fut.exception() is None
            else:
                ok = fut.status == "finished"
            if ok:
                del self.pending[fut]
                yield kind, cell, fut.result()

    def close(self) -> None:
        if self.pool is not None:
            if any(not f.done() for f in self.pending):
                # their results would be dropped: do not wait for them
                for proc in list(getattr(self.pool, "_processes", {}).values()):
                    proc.kill()
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.client is not None:
            for fut in list(self.pending):
                fut.cancel()
            self.client.close()


# ----------------------------------------------------------------------------- checks
def _int_option(name: str, value, low: int, high: int | None = None) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if ok:
        ok = value >= low and (high is None or value <= high)
    if not ok:
        rng = f">= {low}" if high is None else f"in {low}..{high}"
        raise ConfigError(f"{name} must be an integer {rng}, got {value!r}")
    return int(value)


def _positive_floats(name: str, values) -> list[float]:
    values = list(values)
    if not values:
        raise ConfigError(f"{name} needs at least one value")
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            f = float("nan")
        if isinstance(v, bool) or not math.isfinite(f) or f <= 0:
            raise ConfigError(f"{name} values must be positive finite numbers, got {v!r}")
        out.append(f)
    if _duplicates(out):
        raise ConfigError(f"{name} lists {_duplicates(out)[0]!r} twice")
    return out


def _check_device(device) -> None:
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


def _check_grids(kernels, grids, every: set[str], device) -> None:
    """Build the grid points of the kernels (every point of those in ``every``, the first
    of the others when a ``device`` is given) and compute their normalised Grams on a toy
    batch on ``device``: a parameter or device that a kernel rejects is a ConfigError.
    Numerical trouble on the toy batch is left to the cells (it depends on the data)."""
    rng = np.random.default_rng(0)
    C, O = rng.normal(size=(4, 6, 2)), rng.normal(size=(2, 6, 2))
    where = f" on {device}" if device is not None else ""
    for name in kernels:
        if name not in every and device is None:
            continue
        g = grids[name]
        points = kernel_grid_points(g)
        for point in points if name in every else points[:1]:
            try:
                kernel = build_kernel(name, point, 2, 6, g.levels, device)
                fold_grams(kernel, C, O, g.levels)
            except ValueError as exc:
                what = ", ".join(f"{k}={v}" for k, v in point.items())
                levels = f"levels {g.levels}" if g.levels else ""
                at = ", ".join(v for v in (what, levels) if v)
                raise ConfigError(f"kernel {name} ({at}){where}: {exc}") from None
            except ArithmeticError:
                pass


def _check_scheduler(scheduler: str) -> None:
    if scheduler == "local":
        return
    scheme = scheduler.split("://", 1)[0] if "://" in scheduler else ""
    if scheme not in ("tcp", "tls", "ucx", "inproc") or not scheduler.split("://", 1)[1]:
        raise ConfigError(
            f"--scheduler must be 'local' or a Dask address tcp://HOST:PORT, got {scheduler!r}"
        )


# ----------------------------------------------------------------------------- planning
def _grid_hash(points, levels, tcs) -> str:
    blob = json.dumps({"points": points, "levels": levels, "tc": tcs}, sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def _effective(opts: RunOptions):
    """Every option checked (ConfigError) and resolved against the preset: (preset, grids,
    setting, run config, time channels, kernels, scorers, messages)."""
    if opts.preset not in PRESETS:
        raise ConfigError(f"unknown preset {opts.preset!r}; choose from {', '.join(PRESETS)}")
    preset = PRESETS[opts.preset]
    if opts.share not in ("fold", "class"):
        raise ConfigError(f"--share must be 'fold' or 'class', got {opts.share!r}")
    folds = preset.folds if opts.folds is None else _int_option("--folds", opts.folds, 2)
    repeats = preset.repeats if opts.repeats is None else _int_option("--repeats", opts.repeats, 1)
    seed = _int_option("--seed", opts.seed, 0, 2**32 - 1)
    max_rank = (
        preset.max_rank if opts.max_rank is None else _int_option("--max-rank", opts.max_rank, 1)
    )
    alphas = preset.alphas if opts.alphas is None else _positive_floats("--alphas", opts.alphas)
    if opts.max_cells is not None:
        _int_option("--max-cells", opts.max_cells, 1)
    workers = _int_option("--workers", opts.workers, 1)
    threads = None if opts.threads is None else _int_option("--threads", opts.threads, 1)
    _check_scheduler(str(opts.scheduler))
    if opts.time_channel is None:
        tcs = [bool(t) for t in preset.time_channel]
    else:
        tcs = list(opts.time_channel)
        if not tcs or not all(isinstance(t, (bool, np.bool_)) for t in tcs) or _duplicates(tcs):
            raise ConfigError(f"--time-channel must be no, yes or both, got {tcs!r}")
        tcs = [bool(t) for t in tcs]
    levels = None
    if opts.levels is not None:
        levels = [_int_option("--levels", v, 1) for v in opts.levels] if opts.levels else []
        if not levels:
            raise ConfigError("--levels needs at least one level")
        if _duplicates(levels):
            raise ConfigError(f"--levels lists {_duplicates(levels)[0]} twice")
        levels = sorted(levels)

    grids = dict(preset.grids)
    kernels, messages = resolve_kernels(opts.kernels, grids)
    if not kernels:
        raise ConfigError("no usable kernel: " + "; ".join(messages))
    overrides: dict[str, dict[str, list]] = {}
    for kname, axes in opts.grid.items():
        if kname not in grids:
            raise ConfigError(f"--grid names kernel {kname!r}, which has no grid")
        if kname not in kernels:
            raise ConfigError(
                f"--grid names kernel {kname!r}, which this run does not include "
                f"(kernels: {', '.join(kernels)})"
            )
        have = sorted(grids[kname].axes)
        for axis, values in axes.items():
            if axis not in grids[kname].axes:
                has = f"has axes {', '.join(have)}" if have else "has no grid axis"
                raise ConfigError(f"--grid {kname}.{axis}: unknown axis; {kname} {has}")
            values = list(values)
            if not values:
                raise ConfigError(f"--grid {kname}.{axis} needs at least one value")
            for v in values:
                if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                    raise ConfigError(f"--grid {kname}.{axis}: values must be numbers, got {v!r}")
                if not math.isfinite(float(v)):
                    raise ConfigError(f"--grid {kname}.{axis}: values must be finite, got {v!r}")
            values = [_r(float(v)) if isinstance(v, (float, np.floating)) else int(v)
                      for v in values]  # fmt: skip
            if _duplicates(values):
                raise ConfigError(f"--grid {kname}.{axis} lists {_duplicates(values)[0]} twice")
            overrides.setdefault(kname, {})[axis] = values
        grids[kname] = replace(grids[kname], axes={**grids[kname].axes, **overrides[kname]})
    level_kernels = {k for k in kernels if grids[k].levels is not None}
    if levels is not None:
        if not level_kernels:
            raise ConfigError(
                f"--levels: none of the kernels of this run ({', '.join(kernels)}) has levels"
            )
        for kname in level_kernels:
            grids[kname] = replace(grids[kname], levels=levels)
    if _duplicates(list(opts.scorers)):
        raise ConfigError(f"--scorers names {_duplicates(list(opts.scorers))[0]} twice")
    try:
        scorers, msg2 = expand_scorers(opts.scorers)
    except ValueError as exc:  # an unknown scorer name
        raise ConfigError(str(exc)) from None
    messages += msg2
    if not scorers:
        raise ConfigError("no usable scorer: " + ("; ".join(msg2) or "--scorers names none"))
    _check_device(opts.device)
    every = set(overrides) | (level_kernels if levels is not None else set())
    _check_grids(kernels, grids, every, opts.device)

    config = {
        "folds": folds,
        "repeats": repeats,
        "seed": seed,
        "share": opts.share,
        "alphas": [float(a) for a in alphas],
        "max_rank": max_rank,
        "sse_lams": [float(v) for v in preset.sse_lams],
        "threshold": 1e-10,
        "preprocessing": DEFAULT_PREPROCESSING,
    }
    # version 2: the rank plateau rule of ``select`` (test rows of version 1 differ);
    # version 3: the kernel grids are part of the setting (the preset, the time channel, the
    # levels and every --grid override), so runs of other grids never share a setting
    setting = dict(config, version=3, preset=preset.name, time_channel=tcs, levels=levels,
                   grid=overrides)  # fmt: skip
    threads = threads or max(1, (os.cpu_count() or 1) // workers)
    run_config = dict(config, device=opts.device, threads=int(threads))
    return preset, grids, setting, run_config, tcs, kernels, scorers, messages


def _load_datasets(opts: RunOptions, names: list[str], folds: int, seed: int = 0):
    """({data set name: Dataset}, {name: fingerprint of data given by path or loader}); every
    problem (unknown name, unreadable or malformed data, --normal-class not a class of a data
    set, too few series for the folds) a ConfigError."""
    from .data import DataError, load_data

    if not names:
        raise ConfigError("--dataset names no data set")
    if _duplicates(names):
        raise ConfigError(f"--dataset names {_duplicates(names)[0]} twice")
    if opts.data_dir is not None and not Path(opts.data_dir).is_dir():
        raise ConfigError(f"--data-dir {opts.data_dir}: no such folder")
    normal = None
    if opts.normal_classes is not None:
        normal = [str(c) for c in opts.normal_classes]
        if not normal:
            raise ConfigError("--normal-class names no class")
        if _duplicates(normal):
            raise ConfigError(f"--normal-class names {_duplicates(normal)[0]} twice")
    datasets, fingerprints, specs = {}, {}, {}
    for n in names:
        try:
            u = load_data(n, opts.data_dir, seed)
        except DataError as exc:
            raise ConfigError(f"--dataset {exc}") from None
        except FileNotFoundError as exc:
            raise ConfigError(str(exc)) from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"data set {n}: cannot be read ({exc})") from None
        if u.name in datasets:
            raise ConfigError(
                f"--dataset {specs[u.name]} and {n} are both called {u.name!r}; rename one"
            )
        specs[u.name] = n
        data = Dataset(u.name, u.X_train, u.y_train, u.X_test, u.y_test)
        classes = data.classes
        if normal is not None:
            missing = [c for c in normal if c not in classes]
            if missing:
                raise ConfigError(
                    f"--normal-class {missing[0]} is not a class of {u.name} (training classes: "
                    f"{', '.join(classes)})"
                )
        counts = dict(zip(*np.unique(data.y_train, return_counts=True)))
        largest = max(int(counts[c]) for c in (normal or classes))
        if folds > largest:
            which = "the normal classes" if normal else "any class"
            raise ConfigError(
                f"--folds {folds} is more than the series of {which} of {u.name} (at most "
                f"{largest}): no class could be cross-validated"
            )
        datasets[u.name] = data
        if u.fingerprint is not None:
            fingerprints[u.name] = u.fingerprint
    return datasets, fingerprints


def _say(opts: RunOptions, msg: str) -> None:
    if opts.verbose:
        print(msg, file=sys.stderr, flush=True)


def _plan(datasets, kernels, scorers, grids, tcs, done_cv, done_test, messages, normal=None):
    import tskernels

    registry = tskernels.kernel_registry()
    cv_todo, groups = [], {}
    for dname, data in datasets.items():
        for kname in kernels:
            if (
                not data.equal_length
                and not registry[REGISTRY_NAME.get(kname, kname)].unequal_length
            ):
                messages.append(f"kernel {kname!r} needs equal lengths, skipped on {dname}")
                continue
            g = grids[kname]
            points = kernel_grid_points(g)
            lv = list(g.levels) if g.levels is not None else [None]
            candidates = [(params_key(p, lvl), tc) for p in points for lvl in lv for tc in tcs]
            ghash = _grid_hash(points, g.levels, tcs)
            for cls in data.classes:
                if normal is not None and cls not in normal:
                    continue
                missing_test = [
                    s for s in scorers if (dname, cls, kname, s, ghash) not in done_test
                ]
                remaining = 0
                for p in points:
                    for tc in tcs:
                        miss = [
                            s for s in scorers
                            if any((dname, cls, kname, params_key(p, lvl), tc, s) not in done_cv
                                   for lvl in lv)
                        ]  # fmt: skip
                        if miss and missing_test:
                            cv_todo.append(
                                {"kind": "cv", "dataset": dname, "cls": cls, "kernel": kname,
                                 "point": p, "levels": g.levels, "time_channel": tc,
                                 "scorers": miss}
                            )  # fmt: skip
                            remaining += 1
                if missing_test:
                    groups[(dname, cls, kname)] = {
                        "remaining": remaining, "candidates": candidates, "grid": ghash,
                        "levels": g.levels, "scorers": missing_test,
                    }  # fmt: skip
    return cv_todo, groups


def run_benchmark(opts: RunOptions) -> dict:
    """Run (or resume) a benchmark; returns a summary (setting id, cells computed, wall
    seconds, complete flag, messages).

    Raises :class:`ConfigError` for an unusable option and
    :class:`~experiments._store.StoreError` for an unusable store, both before any work;
    :class:`RunInterrupted` when a signal stopped the run (its results committed)."""
    t_start = time.perf_counter()
    preset, grids, setting, config, tcs, kernels, scorers, messages = _effective(opts)
    specs = list(preset.datasets if opts.datasets is None else opts.datasets)
    datasets, fingerprints = _load_datasets(opts, specs, config["folds"], config["seed"])
    names = list(datasets)
    normal = None if opts.normal_classes is None else sorted(map(str, opts.normal_classes))
    # own data (by path or loader) and a chosen normal class are part of the setting: runs
    # of other data or other normal classes never share a setting (absent otherwise, so the
    # settings of earlier UEA runs are unchanged)
    if fingerprints:
        setting["data"] = fingerprints
    if normal is not None:
        setting["normal_classes"] = normal
    stop = _StopSignals()
    workers = int(opts.workers)
    n_total = computed = 0
    run_id = sid = None
    ex = _Executor(opts.scheduler, workers, datasets, config, stop)
    try:
        store = ResultStore(opts.store)
    except BaseException:
        ex.close()
        raise
    try:
        sid = store.add_setting(setting)
        if opts.retry_failed:
            n_cv, n_test = store.delete_failed(sid, names, kernels, scorers)
            messages.append(f"--retry-failed: {n_cv} failed CV rows and {n_test} test rows cleared")
        done_cv = store.cv_keys(sid)
        done_test = store.test_keys(sid)
        cv_todo, groups = _plan(
            datasets, kernels, scorers, grids, tcs, done_cv, done_test, messages, normal
        )
        for m in messages:
            _say(opts, m)
        n_total = len(cv_todo) + len(groups)
        _say(opts, f"store {opts.store}: setting {sid}, {n_total} cells to compute "
                   f"({len(cv_todo)} CV, {len(groups)} test)")  # fmt: skip
        revision, device = _revision(), _device_label(opts.device)
        run_id = store.start_run(
            setting=sid, command=" ".join(sys.argv), preset=opts.preset, revision=revision,
            device=device, workers=workers, scheduler=opts.scheduler,
        )  # fmt: skip
        stamp = {"setting": sid, "revision": revision, "device": device}

        def commit(kind, rows) -> None:
            now = time.time()
            for r in rows:
                r.update(stamp, created=now)
                if kind == "cv":
                    r["roc"] = None if r["roc"] is None else encode_array(r["roc"])
                    r["pr"] = None if r["pr"] is None else encode_array(r["pr"])
            if kind == "cv":
                store.add_cell(cv_rows=rows)
            else:
                store.add_cell(test_rows=rows)

        if n_total:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_total, unit="cell", disable=not opts.progress, file=sys.stderr)

            def submit_test(key):
                grp = groups[key]
                selections = {}
                for s in grp["scorers"]:
                    rows = store.cv_rows(sid, key[0], key[1], key[2], s)
                    sel = select(rows, grp["candidates"])
                    if sel is None:
                        raise RuntimeError(f"CV rows missing for {key} {s}")  # planning bug
                    selections[s] = sel
                ex.submit("test", {"dataset": key[0], "cls": key[1], "kernel": key[2],
                                   "grid": grp["grid"], "levels": grp["levels"],
                                   "selections": selections})  # fmt: skip

            try:
                with stop.installed():
                    try:
                        for key, grp in groups.items():
                            if grp["remaining"] == 0:
                                submit_test(key)
                        for cell in cv_todo:
                            ex.submit("cv", cell)
                        while len(ex) and stop.signum is None:
                            got = ex.next_done()
                            if got is None:
                                break
                            kind, cell, rows = got
                            commit(kind, rows)
                            computed += 1
                            bar.update(1)
                            if opts.max_cells is not None and computed >= opts.max_cells:
                                break
                            if kind == "cv":
                                key = (cell["dataset"], cell["cls"], cell["kernel"])
                                if key in groups:
                                    groups[key]["remaining"] -= 1
                                    if groups[key]["remaining"] == 0:
                                        submit_test(key)
                    except RunInterrupted:
                        pass  # stop.signum holds the signal
                    if stop.signum is not None:
                        for kind, _cell, rows in ex.drain():
                            commit(kind, rows)
                            computed += 1
            finally:
                bar.close()
    finally:
        ex.close()
        wall = time.perf_counter() - t_start
        if run_id is not None:
            store.finish_run(run_id, computed, wall)
        store.close()
    summary = {
        "setting": sid,
        "cells_total": n_total,
        "cells_computed": computed,
        "wall_seconds": wall,
        "complete": computed == n_total,
        "messages": messages,
        "datasets": names,
        "kernels": kernels,
        "scorers": scorers,
        "store": str(opts.store),
    }
    if stop.signum is not None:
        raise RunInterrupted(stop.signum, summary)
    return summary
