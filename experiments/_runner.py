"""Planning and running the benchmark: the cells of a run, their execution in local processes
or on a Dask cluster, and the store commits.

Every CV cell is independent; a test cell (data set, class, kernel) is submitted as soon as
the CV cells it selects from are all in the store, so both phases overlap. Each finished
cell is committed at once; a cell whose rows are already in the store is never submitted,
so a run killed at any point and started again with the same command finishes the rest and
ends with the same tables.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

from ._grids import PRESETS, REGISTRY_NAME, KernelGrid, kernel_grid_points
from ._protocol import Dataset, load_dataset, params_key, run_cv_cell, run_test_cell, select
from ._scorers import expand_scorers
from ._store import ResultStore, encode_array

__all__ = ["RunOptions", "run_benchmark", "resolve_kernels"]

DEFAULT_PREPROCESSING = {"max_length": 100, "clip": 5.0, "eps": 1e-4, "basepoint": True}


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
    verbose: bool = True


def resolve_kernels(names, grids: dict[str, KernelGrid]) -> tuple[list[str], list[str]]:
    """(kernels registered now and with a grid, messages about skipped ones). Without
    ``names``: every grid marked ``default`` (the single-level signature variants are opt-in)."""
    import tskernels

    registry = tskernels.kernel_registry()
    names = [n for n, g in grids.items() if g.default] if not names else list(names)
    usable, messages = [], []
    for n in names:
        if n not in grids:
            raise ValueError(f"no grid for kernel {n!r}; kernels with grids: {', '.join(grids)}")
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


def _init_worker(datasets: dict[str, Dataset]) -> None:
    _WORKER_DATA.update(datasets)


def _pool_entry(kind: str, cell: dict, config: dict):
    fn = run_cv_cell if kind == "cv" else run_test_cell
    return fn(cell, _WORKER_DATA[cell["dataset"]], config)


def _dask_entry(kind: str, cell: dict, data: Dataset, config: dict):
    fn = run_cv_cell if kind == "cv" else run_test_cell
    return fn(cell, data, config)


class _Executor:
    """submit(kind, cell) and next_done() -> (kind, cell, rows), for the three schedulers."""

    def __init__(self, scheduler: str, workers: int, datasets: dict[str, Dataset], config):
        self.scheduler, self.workers, self.config = scheduler, workers, config
        self.datasets = datasets
        self.pending: dict = {}
        self.queue: deque = deque()
        self.pool = self.client = None
        if scheduler == "local" and workers > 1:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(
                workers, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                initargs=(datasets,),
            )  # fmt: skip
        elif scheduler != "local":
            from distributed import Client, as_completed

            self.client = Client(scheduler)
            self.data_futures = {
                n: self.client.scatter(d, broadcast=True) for n, d in datasets.items()
            }
            self.ac = as_completed()

    def submit(self, kind: str, cell: dict) -> None:
        if self.pool is not None:
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

    def next_done(self):
        if self.pool is not None:
            from concurrent.futures import FIRST_COMPLETED, wait

            done, _ = wait(list(self.pending), return_when=FIRST_COMPLETED)
            fut = min(done, key=lambda f: id(f))
            kind, cell = self.pending.pop(fut)
            return kind, cell, fut.result()
        if self.client is not None:
            fut = next(self.ac)
            kind, cell = self.pending.pop(fut)
            return kind, cell, fut.result()
        kind, cell = self.queue.popleft()
        return kind, cell, _dask_entry(kind, cell, self.datasets[cell["dataset"]], self.config)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.client is not None:
            for fut in list(self.pending):
                fut.cancel()
            self.client.close()


# ----------------------------------------------------------------------------- planning
def _grid_hash(points, levels, tcs) -> str:
    blob = json.dumps({"points": points, "levels": levels, "tc": tcs}, sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def _effective(opts: RunOptions):
    preset = PRESETS[opts.preset]
    grids = dict(preset.grids)
    for kname, axes in opts.grid.items():
        if kname not in grids:
            raise ValueError(f"--grid names kernel {kname!r}, which has no grid")
        for axis in axes:
            if axis not in grids[kname].axes:
                raise ValueError(
                    f"--grid {kname}.{axis}: {kname} has axes {sorted(grids[kname].axes)}"
                )
        grids[kname] = replace(grids[kname], axes={**grids[kname].axes, **axes})
    if opts.levels is not None:
        for kname, g in grids.items():
            if g.levels is not None:
                grids[kname] = replace(g, levels=sorted(opts.levels))
    if opts.share not in ("fold", "class"):
        raise ValueError(f"`share` must be 'fold' or 'class', got {opts.share!r}")
    config = {
        "folds": opts.folds or preset.folds,
        "repeats": opts.repeats or preset.repeats,
        "seed": int(opts.seed),
        "share": opts.share,
        "alphas": [float(a) for a in (opts.alphas or preset.alphas)],
        "max_rank": int(opts.max_rank or preset.max_rank),
        "sse_lams": [float(v) for v in preset.sse_lams],
        "threshold": 1e-10,
        "preprocessing": DEFAULT_PREPROCESSING,
    }
    # version 2: the rank plateau rule of ``select`` (test rows of version 1 differ)
    setting = dict(config, version=2)
    tcs = [bool(t) for t in (opts.time_channel or preset.time_channel)]
    workers = max(1, int(opts.workers))
    threads = opts.threads or max(1, (os.cpu_count() or 1) // workers)
    run_config = dict(config, device=opts.device, threads=int(threads))
    return preset, grids, setting, run_config, tcs


def _say(opts: RunOptions, msg: str) -> None:
    if opts.verbose:
        print(msg, file=sys.stderr, flush=True)


def run_benchmark(opts: RunOptions) -> dict:
    """Run (or resume) a benchmark; returns a summary (setting id, cells computed, wall
    seconds, complete flag, messages)."""
    t_start = time.perf_counter()
    preset, grids, setting, config, tcs = _effective(opts)
    kernels, messages = resolve_kernels(opts.kernels, grids)
    scorers, msg2 = expand_scorers(opts.scorers)
    messages += msg2
    if not scorers:
        raise ValueError("no usable scorer: " + "; ".join(msg2))
    names = list(opts.datasets or preset.datasets)
    datasets = {n: load_dataset(n, opts.data_dir) for n in names}
    import tskernels

    registry = tskernels.kernel_registry()
    store = ResultStore(opts.store)
    sid = store.add_setting(setting)
    done_cv = store.cv_keys(sid)
    done_test = store.test_keys(sid)

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
    for m in messages:
        _say(opts, m)
    n_total = len(cv_todo) + len(groups)
    _say(opts, f"store {opts.store}: setting {sid}, {n_total} cells to compute "
               f"({len(cv_todo)} CV, {len(groups)} test)")  # fmt: skip
    revision, device = _revision(), _device_label(opts.device)
    run_id = store.start_run(
        setting=sid, command=" ".join(sys.argv), preset=opts.preset, revision=revision,
        device=device, workers=opts.workers, scheduler=opts.scheduler,
    )  # fmt: skip
    stamp = {"setting": sid, "revision": revision, "device": device}
    computed = 0
    if n_total:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_total, unit="cell", disable=not opts.progress, file=sys.stderr)
        ex = _Executor(opts.scheduler, max(1, int(opts.workers)), datasets, config)
        try:

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

            for key, grp in groups.items():
                if grp["remaining"] == 0:
                    submit_test(key)
            for cell in cv_todo:
                ex.submit("cv", cell)
            while len(ex):
                kind, cell, rows = ex.next_done()
                now = time.time()
                if kind == "cv":
                    for r in rows:
                        r.update(stamp, created=now)
                        r["roc"] = None if r["roc"] is None else encode_array(r["roc"])
                        r["pr"] = None if r["pr"] is None else encode_array(r["pr"])
                    store.add_cell(cv_rows=rows)
                else:
                    for r in rows:
                        r.update(stamp, created=now)
                    store.add_cell(test_rows=rows)
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
        finally:
            ex.close()
            bar.close()
    complete = computed == n_total
    wall = time.perf_counter() - t_start
    store.finish_run(run_id, computed, wall)
    store.close()
    return {
        "setting": sid,
        "cells_total": n_total,
        "cells_computed": computed,
        "wall_seconds": wall,
        "complete": complete,
        "messages": messages,
        "datasets": names,
        "kernels": kernels,
        "scorers": scorers,
        "store": str(opts.store),
    }
