"""Running the benchmark: options checked and resolved, the plan, execution, commits.

:func:`run_benchmark` checks every option before any work (:class:`ConfigError`, a one-line
message): counts, alphas, levels and grid values (each grid point of an overridden grid is
built and run on a tiny toy batch, on ``device`` when one is given), the device itself, the
kernels, scorers and data sets; then the store is opened
(:class:`~experiments._store.StoreError`). It then plans the cells
(:func:`experiments._cells.plan`), runs them (:mod:`experiments._executor`: this process,
local worker processes or Dask) and commits each one as it finishes
(:class:`experiments._recorder.Recorder`).

Every CV cell is independent; a test cell (data set, class, kernel) is submitted as soon as
the CV cells it selects from are all in the store, so both phases overlap. A cell whose rows
are already in the store is never planned, so a run killed at any point and started again
with the same command finishes the rest and ends with the same tables. A signal stops the
run cleanly (:class:`RunInterrupted`; see :mod:`experiments._executor`).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ._cells import CellGroup, CVCell, Done, RunSetup, TestCell, grouped, plan, results_of
from ._executor import Executor, RunError, RunInterrupted, execute
from ._grids import (
    PRESETS,
    REGISTRY_NAME,
    KernelGrid,
    Preset,
    _r,
    build_kernel,
    kernel_grid_points,
)
from ._options import RANK_RULES, ConfigError, RunOptions
from ._protocol import Dataset, fold_grams, run_cv_cell, run_test_cell, select
from ._recorder import Provenance, Recorder, check_device
from ._scorers import expand_scorers
from ._store import ResultStore

__all__ = [
    "ConfigError",
    "RunError",
    "RunInterrupted",
    "RunOptions",
    "own_data",
    "resolve_preset",
    "run_benchmark",
    "resolve_kernels",
    "run_cell",
    "cell_config",
]

DEFAULT_PREPROCESSING = {"max_length": 100, "clip": 5.0, "eps": 1e-4, "basepoint": True}


def cell_config(
    preset: str = "paper",
    *,
    share: str = "class",
    folds: int | None = None,
    repeats: int | None = None,
    seed: int = 0,
    threads: int = 1,
    device=None,
    rank_rule: str = "ours",
) -> dict:
    """The configuration a CV or test cell reads (:func:`experiments._protocol.run_cv_cell`)
    with a preset's defaults, as ``python -m experiments run --preset <preset>`` builds it
    (the preset's folds, repeats, alphas, largest rank and SSE lambdas; the default
    pre-processing): for benchmarks and tests that run cells outside a run. ``folds`` and
    ``repeats`` replace the preset's."""
    p = PRESETS[preset]
    return {
        "folds": p.folds if folds is None else int(folds),
        "repeats": p.repeats if repeats is None else int(repeats),
        "seed": seed,
        "share": share,
        "alphas": [float(a) for a in p.alphas],
        "max_rank": p.max_rank,
        "sse_lams": [float(v) for v in p.sse_lams],
        "threshold": 1e-10,
        "preprocessing": DEFAULT_PREPROCESSING,
        "device": device,
        "threads": int(threads),
        "rank_rule": rank_rule,
    }


def _duplicates(values) -> list:
    """The values that occur more than once (by value: 1 and 1.0 are the same grid value)."""
    seen, dup = set(), []
    for v in values:
        if v in seen and v not in dup:
            dup.append(v)
        seen.add(v)
    return dup


def resolve_kernels(names, grids: dict[str, KernelGrid]) -> tuple[list[str], list[str]]:
    """(the kernels of a run, messages). Without ``names``: every grid marked ``default``
    (the single-level signature variants are opt-in)."""
    if names is not None and len(names) == 0:
        raise ConfigError("--kernels names no kernel")
    names = [n for n, g in grids.items() if g.default] if not names else list(names)
    if _duplicates(names):
        raise ConfigError(f"--kernels names {', '.join(map(str, _duplicates(names)))} twice")
    for n in names:
        if n not in grids:
            raise ConfigError(f"unknown kernel {n!r}; kernels with grids: {', '.join(grids)}")
    return list(names), []


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


def own_data(spec) -> bool:
    """Whether a ``--dataset`` value names the user's own data by path (a .npz, .csv or .ts
    file, or a folder), by the rule :func:`experiments.data.load_data` reads it with; a UEA
    name and ``sktime:NAME`` are not own data."""
    spec = str(spec)
    if spec.startswith("sktime:"):
        return False
    path = Path(spec)
    return path.suffix.lower() in (".npz", ".csv", ".ts") or path.exists() or os.sep in spec


def resolve_preset(opts: RunOptions) -> tuple[str, str]:
    """(the preset of the run, why): ``--preset`` when given; else ``own`` (real grids) when a
    ``--dataset`` names own data by path, else ``quick`` (one value per grid axis)."""
    if opts.preset is not None:
        return str(opts.preset), "given by --preset"
    own = [s for s in (opts.datasets or []) if own_data(s)]
    if own:
        return (
            "own",
            f"the default for own data (--dataset {own[0]}); --preset quick or paper to change",
        )
    return "quick", ("the default for named data sets: one value per grid axis, no tuning; "
                     "--preset own or paper tunes")  # fmt: skip


def _check_fitted_kernels(kernels, share: str) -> None:
    """``--share class`` fits the pre-processing (and a kernel's data-dependent parameters) on
    the whole class, the folds' held-out normal series included: refused for the kernels whose
    features are learned from the corpus (``needs_fit``: MiniRocket), whose fit must see each
    fold's training series only."""
    if share != "class":
        return
    import tskernels

    registry = tskernels.kernel_registry()
    fitted = [k for k in kernels if registry[REGISTRY_NAME.get(k, k)].needs_fit]
    if fitted:
        raise ConfigError(
            f"--share class would fit {', '.join(fitted)} on the held-out series of each fold "
            "(their features are learned from the corpus): use --share fold (the default) or "
            "leave these kernels out"
        )


# ----------------------------------------------------------------------------- planning
@dataclass(frozen=True)
class Effective:
    """The options of a run, every one checked and resolved against its preset
    (:func:`_effective`)."""

    preset: Preset
    #: kernel name -> its grid, with the run's --grid overrides and --levels applied
    grids: dict[str, KernelGrid]
    #: what identifies the run's results in the store (its id is the setting id)
    setting: dict
    #: what every cell receives: the setting's options plus device, threads and rank rule
    config: dict
    time_channels: list[bool]
    kernels: list[str]
    scorers: list[str]
    #: notes for the user (kernels or scorers left out, and why)
    messages: list[str]


def _effective(opts: RunOptions) -> Effective:
    """Every option checked (ConfigError) and resolved against the preset (:class:`Effective`)."""
    if opts.rank_rule not in RANK_RULES:
        raise ConfigError(f"--rank-rule must be {' or '.join(RANK_RULES)}, got {opts.rank_rule!r}")
    if opts.preset is None:  # the default preset of the data (:func:`resolve_preset`)
        opts = replace(opts, preset=resolve_preset(opts)[0])
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
    _int_option("--workers", opts.workers, 1)
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
    check_device(opts.device)
    _check_fitted_kernels(kernels, opts.share)
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
    if opts.rank_rule != "ours":
        # another rank rule is another setting (absent for "ours", so the settings of
        # earlier runs are unchanged)
        setting["rank_rule"] = opts.rank_rule
    # one thread per worker unless --threads says otherwise: measured (docs/results_study_scale.md)
    # two threads per worker cost about twice the wall time of one on 2 cores (thread pools
    # spinning around small per-fold operations), far more on a loaded machine
    threads = threads or 1
    run_config = dict(config, device=opts.device, threads=int(threads), rank_rule=opts.rank_rule)
    return Effective(preset, grids, setting, run_config, tcs, kernels, scorers, messages)


def _load_datasets(opts: RunOptions, names: list[str], folds: int, seed: int = 0):
    """({data set name: Dataset}, {name: fingerprint of data given by path or loader}); every
    problem (unknown name, unreadable or malformed data, --normal-class not a class of a data
    set, too few series for the folds) a ConfigError."""
    from .data import DataError, check_test_classes, load_data

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
        try:  # a class made normal without test series would fail mid-run (issue 25, item 6)
            check_test_classes(n, data.y_train, data.y_test, normal)
        except DataError as exc:
            raise ConfigError(f"--dataset {exc}") from None
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


def _skipped(datasets: dict[str, Dataset], kernels, messages: list[str]) -> frozenset:
    """(data set, kernel) pairs not run: a kernel without unequal-length support (the
    registry's capability) on unequal-length data; a message for each."""
    import tskernels

    registry = tskernels.kernel_registry()
    skip = set()
    for dname, data in datasets.items():
        for kname in kernels:
            spec = registry[REGISTRY_NAME.get(kname, kname)]
            if not data.equal_length and not spec.unequal_length:
                messages.append(f"kernel {kname!r} needs equal lengths, skipped on {dname}")
                skip.add((dname, kname))
    return frozenset(skip)


def _fit_max_rank(opts, preset: str, datasets, normal, config, setting, messages) -> None:
    """The rank axis against the largest normal class. The refit of a selection on the whole
    normal training class of N series has up to N - 1 components; a CV plateau selects
    ``max_rank`` meaning "every component", which the refit truncates to ``max_rank`` when
    N - 1 is larger (a conformance refit on 62 components cut to 50 scored test ROC-AUC 0.11
    where every component scored 1.0). The ``own`` preset without ``--max-rank`` widens the
    axis to N (in ``config`` and ``setting``); any other run gets a message."""
    largest, where = 0, ""
    for name, data in datasets.items():
        for c in normal or data.classes:
            n = int(np.sum(data.y_train == c))
            if n > largest:
                largest, where = n, f"class {c} of {name}"
    if largest - 1 <= config["max_rank"]:
        return
    if preset == "own" and opts.max_rank is None:
        config["max_rank"] = setting["max_rank"] = largest
        messages.append(f"max rank {largest}: the {where} has {largest} training series, so "
                        "the ranks reach every component of its refit")  # fmt: skip
    else:
        messages.append(
            f"--max-rank {config['max_rank']} is below the {largest - 1} components of the "
            f"refit on the {where} ({largest} training series): a selection of every "
            f"component keeps only {config['max_rank']} at the refit; --max-rank {largest} "
            "keeps them all"
        )


def run_cell(cell: CVCell | TestCell | CellGroup, data: Dataset, config: dict):
    """Compute one cell (the executor's entry, in whichever process runs it): its result
    rows as :class:`~experiments._cells.CVResult` / :class:`~experiments._cells.TestResult`;
    a :class:`~experiments._cells.CellGroup`'s cells one after another, the tuple of their
    results."""
    if cell.kind == "group":
        return tuple(run_cell(c, data, config) for c in cell.cells)
    fn = run_cv_cell if cell.kind == "cv" else run_test_cell
    try:
        return results_of(cell, fn(cell, data, config))
    finally:
        release_freed_memory()


_MALLOC_TRIM: list = []  # [glibc's malloc_trim, or None where the C library has none]


def release_freed_memory() -> bool:
    """Give the C heap's free memory back to the system after a cell (glibc's
    ``malloc_trim(0)``; a no-op returning False where the C library has none). A process
    computing cells one after another otherwise grows without bound: after a large block is
    freed glibc raises its mmap threshold (up to 32 MiB), so the many temporaries of a cell
    (torch, numpy, numba) come from the heap, whose free chunks, fragmented, stay mapped.
    Measured: ArticularyWordRecognition's order-1 RBF cells grew a process by about 250 MB
    a group of five (825 MB -> 2.8 GB in ten groups), and a paper-preset worker reached
    16.9 GB and was killed by the kernel's OOM killer; with a trim after each cell the
    process stays at about 610 MB, at no measurable cost in time."""
    if not _MALLOC_TRIM:
        import ctypes
        import ctypes.util

        name = ctypes.util.find_library("c")
        try:
            trim = ctypes.CDLL(name).malloc_trim if name else None
        except (OSError, AttributeError):
            trim = None
        if trim is not None:
            trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        _MALLOC_TRIM.append(trim)
    trim = _MALLOC_TRIM[0]
    if trim is None:
        return False
    trim(0)
    return True


def run_benchmark(opts: RunOptions) -> dict:
    """Run (or resume) a benchmark; returns a summary (setting id, cells computed, wall
    seconds, complete flag, messages).

    Raises :class:`ConfigError` for an unusable option and
    :class:`~experiments._store.StoreError` for an unusable store, both before any work;
    :class:`RunInterrupted` when a signal stopped the run (its results committed)."""
    t_start = time.perf_counter()
    preset_name, why = resolve_preset(opts)
    opts = replace(opts, preset=preset_name)
    eff = _effective(opts)
    preset, grids, setting, config = eff.preset, eff.grids, eff.setting, eff.config
    kernels, scorers, messages = eff.kernels, eff.scorers, eff.messages
    messages.insert(0, f"preset {preset.name}: {why}")
    specs = list(preset.datasets if opts.datasets is None else opts.datasets)
    if not specs:
        raise ConfigError(f"the preset {preset.name} has no data set of its own: give --dataset")
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
    _fit_max_rank(opts, preset.name, datasets, normal, config, setting, messages)
    setup = RunSetup(
        datasets={n: tuple(d.classes) for n, d in datasets.items()},
        kernels=tuple(kernels), scorers=tuple(scorers), grids=grids,
        time_channels=tuple(eff.time_channels),
        skip=_skipped(datasets, kernels, messages),
        normal_classes=None if normal is None else tuple(normal),
    )  # fmt: skip
    workers = int(opts.workers)
    n_total = computed = 0
    sid = None
    ex = Executor(opts.scheduler, workers, datasets, run_cell, config)
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
        cells = plan(setup, Done.from_store(store, sid))
        n_total = len(cells)
        n_cv = sum(c.kind == "cv" for c in cells)
        for m in messages:
            _say(opts, m)
        _say(opts, f"store {opts.store}: setting {sid}, {n_total} cells to compute "
                   f"({n_cv} CV, {n_total - n_cv} test)")  # fmt: skip
        recorder = Recorder(
            store, Provenance.current(opts.device), setting=sid, preset=opts.preset,
            workers=workers, scheduler=opts.scheduler, started=t_start,
        )  # fmt: skip
        with recorder:
            if n_total:
                computed = _execute(ex, store, sid, cells, recorder, opts)
    finally:
        ex.close()
        store.close()
    wall = time.perf_counter() - t_start
    summary = {
        "setting": sid,
        "preset": preset.name,
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
    if ex.stop.signum is not None:
        raise RunInterrupted(ex.stop.signum, summary)
    return summary


def _execute(ex: Executor, store: ResultStore, sid: str, cells: list, recorder: Recorder,
             opts: RunOptions) -> int:  # fmt: skip
    """Run the planned cells: test cells whose CV cells are all stored first, the CV cells in
    plan order, and each test cell as soon as its last CV cell is committed, ahead of the CV
    cells still waiting (:class:`_TestsFirst`). Returns the cells committed."""
    from tqdm.auto import tqdm

    waiting = Counter(c.group for c in cells if c.kind == "cv")
    tests = {c.group: c for c in cells if c.kind == "test"}

    def ready(test: TestCell) -> TestCell:
        selections = []
        for s in test.scorers:
            sel = select(store.cv_rows(sid, *test.group, s), list(test.candidates), opts.rank_rule)
            if sel is None:
                raise RuntimeError(f"CV rows missing for {test.group} {s}")  # a planning bug
            selections.append((s, sel))
        return replace(test, selections=tuple(selections))

    def then(cell) -> list:
        if cell.kind == "group":
            return [t for c in cell.cells for t in then(c)]
        if cell.kind != "cv" or cell.group not in tests:
            return []
        waiting[cell.group] -= 1
        return [ready(tests[cell.group])] if waiting[cell.group] == 0 else []

    bar = tqdm(total=len(cells), unit="cell", disable=not opts.progress, file=sys.stderr)

    def record(cell, rows) -> None:
        if cell.kind == "group":
            for c, r in zip(cell.cells, rows, strict=True):
                record(c, r)
            return
        recorder.commit(rows)
        bar.update(1)

    first = [ready(t) for g, t in tests.items() if waiting[g] == 0]
    cv = [c for c in cells if c.kind == "cv"]
    # cells that share work go to one worker together (CellGroup); not in this process,
    # which keeps every cell's work anyway, nor under --max-cells, which counts cells
    if opts.max_cells is None and (ex.pool is not None or ex.client is not None):
        cv = grouped(cv)
    queue = _TestsFirst(ex, _window(ex, int(opts.workers)))
    try:
        return execute(queue, first + cv, record, then, opts.max_cells)
    finally:
        bar.close()


def _window(ex: Executor, workers: int) -> int:
    """Cells handed to the executor at a time: two per worker (a local pool's workers never
    wait for the parent), one in this process, two per thread of a Dask cluster."""
    if ex.client is not None:
        try:
            return max(2, 2 * sum(ex.client.nthreads().values()))
        except Exception:  # noqa: BLE001 - an unreachable cluster fails later, with its message
            return 2 * max(1, workers)
    return 1 if ex.pool is None else 2 * max(1, workers)


class _TestsFirst:
    """The executor seen by :func:`experiments._executor.execute`, handing it at most
    ``window`` cells at a time from a backlog where a test cell goes ahead of every waiting CV
    cell. The plan lists each (data set, class, kernel)'s CV cells, then its test cell; so a
    test cell runs as soon as its group's CV cells are done, not behind every CV cell of the
    run (issue 25): a run stopped early has the test rows of the groups it finished."""

    def __init__(self, ex: Executor, window: int):
        self.ex, self.window = ex, max(1, int(window))
        self.backlog: deque = deque()
        self.stop = ex.stop

    def submit(self, cell) -> None:
        if cell.kind == "test":
            self.backlog.appendleft(cell)
        else:
            self.backlog.append(cell)

    def __len__(self) -> int:
        return len(self.ex) + len(self.backlog)

    def next_done(self):
        # filled here, not in submit: the test cells unlocked by the last result (``then``)
        # are in the backlog by now and go first
        while self.backlog and len(self.ex) < self.window:
            self.ex.submit(self.backlog.popleft())
        return self.ex.next_done()

    def drain(self):
        return self.ex.drain()
