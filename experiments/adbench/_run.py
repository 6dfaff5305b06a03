"""Running the ADBench evaluation on the package's executor and recorder.

A cell is (data set, method, seed); :func:`plan` lists the cells not in the store (seeds,
then data sets, then methods), :func:`run_cell` computes one in whichever process runs it
(the split is cached per process, so consecutive methods of a data set and seed read it
once), and :func:`run` executes the plan with :class:`~experiments._executor.Executor`
(this process, ``--workers`` local processes or a Dask scheduler) and commits each cell
with :class:`~experiments._recorder.Recorder`. SIGINT, SIGTERM and SIGHUP stop a run
cleanly; the same command resumes it.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._executor import Executor, RunInterrupted, execute
from .._options import ConfigError, option
from .._recorder import Provenance, Recorder, check_device, device_label
from ._data import check_dataset, data_dir, list_datasets, load_split, resolve_names
from ._limit import CellRunner
from ._methods import ALL_METHODS, PROTOCOLS, expand_methods
from ._store import ADBenchStore

__all__ = [
    "ADBenchCell",
    "ADBenchOptions",
    "ADBenchResult",
    "DEFAULT_CELL_TIMEOUT",
    "plan",
    "run",
    "run_cell",
]

#: The default store, relative to the repository root.
DEFAULT_DB = Path(__file__).resolve().parents[2] / "results" / "adbench.sqlite"
#: Seconds a cell may run before it is stopped and recorded as failed ("timeout"): ten times
#: the slowest density cell measured (SOSREP-SDO, 65 s on 7,000 rows; docs/results_adbench.md).
DEFAULT_CELL_TIMEOUT = 600.0


def _ints(values):
    return None if values is None else [int(v) for v in values]


@dataclass(frozen=True)
class ADBenchOptions:
    """Everything ``python -m experiments adbench run`` accepts; the command line is built
    from these fields."""

    datasets: list[str] | None = option(None, nargs="*", help="names such as cardio or 6_cardio")
    methods: list[str] | None = option(
        None, nargs="*", help='method names, or the groups "main" (default) and "sensitivity"'
    )
    seeds: list[int] = option(default_factory=lambda: [0, 1, 2], nargs="*", type=int)
    data_dir: str | None = option(
        None, help="folder of the .npz files (default: $ADBENCH_DATA, else data/adbench)"
    )
    db: str = option(str(DEFAULT_DB), help="SQLite file of the results")
    device: str | None = option(
        None, help="torch device of SOSREP and KDE (cpu, cuda); PyOD runs on the CPU"
    )
    threads: int = option(1, type=int, help="torch threads (1: the cores are shared)")
    workers: int = option(1, type=int, help="local worker processes")
    scheduler: str = option("local", help="'local' or a Dask scheduler address tcp://HOST:PORT")
    protocol: str = option(
        "inductive", choices=PROTOCOLS,
        help="bandwidth selection of SOSREP/KDE: inductive (held-out 20 %% of the training "
        "part; default) or transductive (the test part's features, no labels: the SOSREP "
        "paper's; methods named with /T)",
    )  # fmt: skip
    cell_timeout: float = option(
        DEFAULT_CELL_TIMEOUT, type=float,
        help="seconds a cell may run (in a child process) before it is killed and recorded "
        f"as failed with reason timeout (default {DEFAULT_CELL_TIMEOUT:g}; 0: no limit, "
        "computed in this process)",
    )  # fmt: skip
    retry_failed: bool = option(False, action="store_true", help="recompute keys that errored")
    verbose: bool = option(False, action="store_true", help="print the traceback of a failure")
    progress: bool = field(default=True)


@dataclass(frozen=True)
class ADBenchCell:
    dataset: str
    method: str
    seed: int


@dataclass(frozen=True)
class ADBenchResult:
    """One ``results`` row (the provenance columns are added when it is committed)."""

    dataset: str
    method: str
    seed: int
    auc: float | None
    fit_score_s: float
    n_train: int
    n_test: int
    d: int
    error: str | None
    info: dict = field(default_factory=dict)
    device: str | None = None


def plan(names: list[str], methods: list[str], seeds: list[int], done: set) -> list[ADBenchCell]:
    """The cells not in ``done`` {(dataset, method, seed)}: seeds, data sets, methods."""
    return [ADBenchCell(n, m, s) for s in seeds for n in names for m in methods
            if (n, m, s) not in done]  # fmt: skip


_SPLIT: dict = {}


def _split(path: Path, seed: int):
    """The split of ``path`` for ``seed``, cached per process (the last one only); the
    file's size and modification time are in the key, so a rewritten file is read again."""
    st = os.stat(path)
    key = (str(path), seed, st.st_size, st.st_mtime_ns)
    if key not in _SPLIT:
        _SPLIT.clear()
        _SPLIT[key] = load_split(path, seed)
    return _SPLIT[key]


def _compute(cell: ADBenchCell, path, config: dict, method, started=None) -> ADBenchResult:
    """Fit and score ``method`` on one split; a failure is recorded in the row. ``started``
    (when given) receives (training rows, test rows, columns) once the split is loaded."""
    import torch
    from sklearn.metrics import roc_auc_score

    torch.set_num_threads(int(config["threads"]))
    Xtr, Xte, ytr, yte = _split(Path(path), cell.seed)
    if method.train_on_normal:
        Xtr = Xtr[ytr == 0]
    if started is not None:
        started((len(Xtr), len(Xte), Xtr.shape[1]))
    device = config["device"] if method.uses_device else None
    t0 = time.perf_counter()
    auc, err, info = None, None, {}
    try:
        score, info = method(Xtr, Xte, cell.seed, device)
        if not np.all(np.isfinite(score)):
            raise FloatingPointError(f"{int((~np.isfinite(score)).sum())} non-finite scores")
        auc = float(roc_auc_score(yte, score))
    except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
        err = f"{type(exc).__name__}: {exc}"
        if config["verbose"]:
            traceback.print_exc()
    elapsed = time.perf_counter() - t0
    return ADBenchResult(cell.dataset, cell.method, cell.seed, auc, elapsed, len(Xtr), len(Xte),
                         Xtr.shape[1], err, info, device_label(device))  # fmt: skip


#: The child process of this process that computes time-limited cells (started on first use).
_RUNNER = CellRunner()


def run_cell(cell: ADBenchCell, path: Path, config: dict) -> tuple[ADBenchResult]:
    """Fit and score one method on one split; a failure is recorded in the row.

    With ``config["cell_timeout"]`` > 0 the cell is computed in a child process
    (:class:`~experiments.adbench._limit.CellRunner`) and a cell past the limit is killed and
    recorded as failed: error "timeout: ...", ``info["failure"] = "timeout"``; a child that
    dies (out of memory, a crash) gives ``info["failure"] = "died"``. The run goes on."""
    method = ALL_METHODS[cell.method]
    limit = float(config.get("cell_timeout") or 0)
    if limit <= 0:
        return (_compute(cell, path, config, method),)
    t0 = time.perf_counter()
    kind, payload = _RUNNER.run(_compute, (cell, str(path), config, method), limit)
    if kind == "ok":
        return (payload,)
    elapsed = time.perf_counter() - t0
    meta = payload[0] if kind == "died" else None if kind == "error" else payload
    n_train, n_test, d = meta if meta is not None else (None, None, None)
    if kind == "timeout":
        err = f"timeout: the cell ran past --cell-timeout {limit:g} s and was stopped"
        info = {"failure": "timeout", "cell_timeout_s": limit}
    elif kind == "died":
        code = payload[1]
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        err = (f"the cell's process ended without a result ({how}"
               f"{'; SIGKILL: often out of memory' if code == -9 else ''})")  # fmt: skip
        info = {"failure": "died", "exit_code": code}
    else:
        err, info = payload, {"failure": "error"}
    device = config["device"] if method.uses_device else None
    return (ADBenchResult(cell.dataset, cell.method, cell.seed, None, elapsed, n_train, n_test,
                          d, err, info, device_label(device)),)  # fmt: skip


def _check(opts: ADBenchOptions) -> tuple[Path, list[str], list[str]]:
    """Every option and data file checked before the store is opened: a ConfigError (one
    line, exit 2) names the first problem."""
    for name, value in (("--threads", opts.threads), ("--workers", opts.workers)):
        if value < 1:
            raise ConfigError(f"{name} must be an integer >= 1, got {value}")
    if not opts.seeds:
        raise ConfigError("--seeds needs at least one seed")
    bad = [s for s in opts.seeds if s < 0 or s > 2**32 - 1]
    if bad:
        raise ConfigError(f"--seeds must be integers in [0, 2^32 - 1], got {bad[0]}")
    if opts.protocol not in PROTOCOLS:
        choices = ", ".join(PROTOCOLS)
        raise ConfigError(f"--protocol must be one of {choices}, got {opts.protocol!r}")
    if not (opts.cell_timeout >= 0 and np.isfinite(opts.cell_timeout)):
        raise ConfigError(
            f"--cell-timeout must be a finite number of seconds >= 0 (0: no limit), got "
            f"{opts.cell_timeout}"
        )
    folder = data_dir(opts.data_dir)
    names = resolve_names(opts.datasets, list_datasets(folder))
    if not names:
        raise ConfigError(f"{folder}: no .npz data files")
    methods = expand_methods(opts.methods, opts.protocol)
    for m in methods:
        if m not in ALL_METHODS:
            raise ConfigError(f"unknown method {m!r}; available: {', '.join(ALL_METHODS)}")
    if opts.device is not None:
        check_device(opts.device)
    seeds = list(dict.fromkeys(opts.seeds))
    for n in names:
        check_dataset(folder / f"{n}.npz", seeds)
    return folder, names, methods


def run(opts: ADBenchOptions) -> dict:
    """Run (or resume) the evaluation; returns a summary (cells total and computed).
    Raises ConfigError or StoreError before any work, RunInterrupted after a signal."""
    from tqdm.auto import tqdm

    t_start = time.perf_counter()
    folder, names, methods = _check(opts)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(opts.threads))
    store = ADBenchStore(opts.db)
    config = {"threads": opts.threads, "device": opts.device, "verbose": opts.verbose,
              "cell_timeout": opts.cell_timeout}  # fmt: skip
    shared = {n: folder / f"{n}.npz" for n in names}
    try:
        seeds = list(dict.fromkeys(opts.seeds))
        cells = plan(names, methods, seeds, store.keys(failed=not opts.retry_failed))
        ex = Executor(opts.scheduler, opts.workers, shared, run_cell, config)
        try:
            recorder = Recorder(store, Provenance.current(opts.device), preset="adbench",
                                workers=opts.workers, scheduler=opts.scheduler,
                                started=t_start)  # fmt: skip
            bar = tqdm(total=len(cells), desc="adbench", unit="run", dynamic_ncols=True,
                       disable=not opts.progress, file=sys.stderr)  # fmt: skip

            def record(cell, rows) -> None:
                recorder.commit(rows)
                bar.set_postfix_str(f"{cell.dataset} {cell.method} s{cell.seed}")
                bar.update(1)

            with recorder:
                try:
                    done = execute(ex, cells, record)
                finally:
                    bar.close()
        finally:
            ex.close()
    finally:
        store.close()
    summary = {"cells_total": len(cells), "cells_computed": done, "db": str(opts.db)}
    if ex.stop.signum is not None:
        raise RunInterrupted(ex.stop.signum, summary)
    return summary
