"""Where the time of one CV cell of the paper preset goes (issue 15, item 3).

Runs one CV cell (data set, normal class, kernel grid point, time channel; 4 x 10 folds by
default) under cProfile and prints the per-phase totals (Gram, scorer fit, scoring, metrics)
and the functions with the largest cumulative time, after one warm-up cell (numba
compilation, imports) outside the timing. Repeats the cell and prints median and
quartiles (the repeats take the pre-processed folds from the process's fold memo, as every
cell of a class but the first does in a run). ``--points`` times the cells of several grid
points of the class one after another instead (CPU seconds).

    python benchmarks/profile_cell.py --dataset NATOPS --kernel flat_rbf --cls 1.0 \
        [--scorers conformance mahalanobis] [--repeats 3] [--profile] [--points 0 1 2]

Record ``uptime`` beside the numbers: on a shared machine wall times are upper bounds.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import time
from pathlib import Path

import numpy as np

from experiments._cells import SHARED_AXES
from experiments._grids import PRESETS, kernel_grid_points
from experiments._protocol import Dataset, load_dataset, run_cv_cell
from experiments._runner import cell_config

UEA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "uea"


def _config(args) -> dict:
    return cell_config(
        "paper", share=args.share, folds=args.folds, repeats=args.repeats_cv,
        threads=args.threads, rank_rule=args.rank_rule,
    )  # fmt: skip


def _synthetic(spec: str) -> Dataset:
    """Two classes of random walks (the second with a drift), seeded."""
    n, T, d = (int(v) for v in spec.split(","))
    rng = np.random.default_rng(0)

    def draw(m):
        y = np.array(["a", "b"] * (m // 2) + ["a"] * (m % 2))
        X = np.cumsum(rng.normal(size=(m, T, d)), axis=1) * 0.1
        X[y == "b"] += np.linspace(0, 1, T)[None, :, None]
        return X, y

    Xtr, ytr = draw(n)
    Xte, yte = draw(n)
    return Dataset(f"synthetic{n}x{T}x{d}", Xtr, ytr, Xte, yte)


def _load(spec: str, data_dir) -> Dataset:
    """A UEA name (under ``data_dir``) or own data by path (an npz, a .ts folder: the CLI's
    reader, e.g. the LSST-sized set of ``benchmarks/make_lsst_like.py``)."""
    from experiments._runner import own_data
    from experiments.data import load_data

    if not own_data(spec):
        return load_dataset(spec, data_dir)
    u = load_data(spec)
    return Dataset(u.name, u.X_train, u.y_train, u.X_test, u.y_test)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="NATOPS", help="a UEA name or a path (npz, .ts folder)")
    p.add_argument("--data-dir", default=str(UEA))
    p.add_argument(
        "--synthetic",
        default=None,
        metavar="N,T,D",
        help="a seeded random data set of N training series (two classes), T steps, D channels "
        "instead of --dataset (e.g. 316,50,28: the held-out set of issue 15)",
    )
    p.add_argument("--kernel", default="flat_rbf")
    p.add_argument("--cls", default=None, help="normal class (default: the first)")
    p.add_argument("--point", type=int, default=0, help="index of the paper grid point")
    p.add_argument(
        "--points",
        type=int,
        nargs="+",
        default=None,
        help="instead of repeats: the cells of these grid points one after another (the plan's "
        "order: the first computes the pre-processed folds, the next take them from the "
        "process's fold memo), after a warm-up cell of another class; prints CPU s of each",
    )
    p.add_argument("--time-channel", action="store_true")
    p.add_argument("--scorers", nargs="+", default=["conformance", "mahalanobis"])
    p.add_argument("--folds", type=int, default=4)
    p.add_argument("--repeats-cv", type=int, default=10)
    p.add_argument("--share", default="fold")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rank-rule", default="ours")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats of the cell")
    p.add_argument("--profile", action="store_true", help="print the cProfile table")
    p.add_argument("--top", type=int, default=25)
    p.add_argument(
        "--estimate",
        nargs="*",
        default=None,
        metavar="DATASET",
        help="time one CV cell (middle grid point, time channel on) per default kernel of the "
        "paper preset on each data set (none named: every set under --data-dir) and "
        "extrapolate the preset's CV time as cells x CPU s/cell (a feature axis: every "
        "feature count timed)",
    )
    p.add_argument(
        "--estimate-kernels",
        nargs="+",
        default=None,
        metavar="KERNEL",
        help="with --estimate: these kernels only (default: the paper preset's default zoo)",
    )
    args = p.parse_args()
    if args.estimate is not None:
        return estimate(args)

    data = _synthetic(args.synthetic) if args.synthetic else _load(args.dataset, args.data_dir)
    grid = PRESETS["paper"].grids[args.kernel]
    cell = {
        "cls": args.cls or data.classes[0],
        "kernel": args.kernel,
        "point": kernel_grid_points(grid)[args.point],
        "levels": grid.levels,
        "time_channel": args.time_channel,
        "scorers": args.scorers,
    }
    config = _config(args)
    if args.points is not None:
        return sequence(args, data, grid, cell, config)
    n, T, d = np.shape(data.X_train) if data.equal_length else (len(data.X_train), "var", "?")
    print(f"{data.name}: {n} training series, T = {T}, d = {d}; cell {cell}")
    print(f"config: {args.folds} x {args.repeats_cv} CV, share={args.share}, "
          f"threads={args.threads}, rank_rule={args.rank_rule}")  # fmt: skip
    print(f"load average before: {os.getloadavg()}")

    run_cv_cell(cell, data, config)  # warm-up: numba compilation, imports
    times, rows = [], None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        rows = run_cv_cell(cell, data, config)
        times.append(time.perf_counter() - t0)
    q = np.percentile(times, [25, 50, 75])
    print(f"cell wall s: median {q[1]:.3f} (quartiles {q[0]:.3f} .. {q[2]:.3f}), "
          f"{args.repeats} repeats")  # fmt: skip
    g = sum(r["gram_seconds"] for r in rows)
    s = sum(r["score_seconds"] for r in rows)
    print(f"last repeat: Gram {g:.3f} s, scoring + metrics {s:.3f} s (as recorded in the rows)")

    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        run_cv_cell(cell, data, config)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(args.top)
        print(buf.getvalue())
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(args.top)
        print(buf.getvalue())
    print(f"load average after: {os.getloadavg()}")


def sequence(args, data, grid, cell, config) -> None:
    """CPU seconds of the cells of ``--points`` of one class, one after another."""
    points = kernel_grid_points(grid)
    other = next(c for c in data.classes if c != cell["cls"])
    warm = dict(config, folds=2, repeats=1)
    run_cv_cell(dict(cell, cls=other, point=points[args.points[0]]), data, warm)
    cpu = []
    for i in args.points:
        t0 = time.process_time()
        run_cv_cell(dict(cell, point=points[i]), data, config)
        cpu.append(time.process_time() - t0)
    print(f"{data.name} {args.kernel} class {cell['cls']} points {args.points}: CPU s "
          f"{' '.join(f'{c:.3f}' for c in cpu)}; load {os.getloadavg()[0]:.1f}")  # fmt: skip


def _cost_points(grid) -> list[tuple[dict, float]]:
    """The grid points timed for the estimate, each with the fraction of the grid's points it
    stands for: the middle point; for a grid with a ``features`` axis (the randomized
    signature, whose cost grows with the square of the feature count) the middle of the
    other axes at every feature count."""
    points = kernel_grid_points(grid)
    if "features" not in grid.axes:
        return [(points[len(points) // 2], 1.0)]
    feats = list(grid.axes["features"])
    out = []
    for f in feats:
        mine = [p for p in points if p["features"] == f]
        out.append((mine[len(mine) // 2], 1.0 / len(feats)))
    return out


def _amplitude_axis(kernel: str, grid) -> bool:
    """Whether the cells of a grid's shared axis share their level terms in a run (the
    order-1 signature kernels' amplitudes and linear scales, powers of two apart:
    ``_protocol._levels_shared``; a run hands them to one worker together,
    ``experiments._cells.CellGroup``)."""
    return SHARED_AXES.get(kernel) in grid.axes


def _amplitude_sequence(cell, grid, data, config):
    """CPU s of a cell of a shared-amplitude grid as a run sees it: the cells of every
    amplitude at the cell's other values one after another in one process (a
    :class:`~experiments._cells.CellGroup`: the first computes the level terms, the others
    scale them), so a cell costs the group's mean. Printed with each cell."""
    axis = SHARED_AXES[cell["kernel"]]
    cpu, wall = [], []
    for a in grid.axes[axis]:
        t0, c0 = time.perf_counter(), time.process_time()
        rows = run_cv_cell(dict(cell, point=dict(cell["point"], **{axis: a})), data, config)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    mean = float(np.mean(cpu))
    print(f"  amplitudes {list(grid.axes[axis])}: CPU s {' '.join(f'{c:.3f}' for c in cpu)}; "
          f"as a group in one process: {mean:.3f} a cell", flush=True)  # fmt: skip
    return mean, float(np.mean(wall)), rows


def _reference(args, config):
    """The load reference: one CV cell of NATOPS, flat_rbf (middle point, time channel),
    CPU seconds; timed before each data set to show how the load inflates CPU seconds."""
    if not (Path(args.data_dir) / "NATOPS").is_dir():
        return None
    data = load_dataset("NATOPS", args.data_dir)
    grid = PRESETS["paper"].grids["flat_rbf"]
    points = kernel_grid_points(grid)
    cell = {"cls": data.classes[0], "kernel": "flat_rbf", "point": points[len(points) // 2],
            "levels": grid.levels, "time_channel": True, "scorers": args.scorers}  # fmt: skip
    run_cv_cell(cell, data, config)

    def timed() -> float:
        t0 = time.process_time()
        run_cv_cell(cell, data, config)
        return time.process_time() - t0

    return timed


def estimate(args) -> None:
    """One timed CV cell per (data set, default kernel) (per feature count for the randomized
    signature); the paper preset's CV time extrapolated as sum over (data set, kernel) of
    n_classes x n_points x 2 x CPU s/cell (``time.process_time``: CPU seconds of the process,
    one thread), with a per-kernel summary table."""
    import tskernels
    from experiments._grids import REGISTRY_NAME

    names = args.estimate or sorted(q.name for q in Path(args.data_dir).iterdir() if q.is_dir())
    grids = PRESETS["paper"].grids
    kernels = args.estimate_kernels or [k for k, g in grids.items() if g.default]
    registry = tskernels.kernel_registry()
    config = _config(args)
    warm = dict(config, folds=2, repeats=1)
    ref = _reference(args, config)
    print(f"load average before: {os.getloadavg()}; config {args.folds} x {args.repeats_cv} CV, "
          f"share={args.share}, scorers {' '.join(args.scorers)}, "
          f"threads {args.threads}")  # fmt: skip
    print("| data set | kernel | point | CPU s / cell | wall s / cell | cells | estimated CPU s |")
    print("|---|---|---|---|---|---|---|")
    total, n_total = 0.0, 0
    per_kernel: dict[str, list[float]] = {}
    refs = []
    for name in names:
        if ref is not None:
            refs.append(ref())
            print(f"reference cell (NATOPS flat_rbf) before {name}: {refs[-1]:.3f} CPU s; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        data = load_dataset(name, args.data_dir)
        for k in kernels:
            if not data.equal_length and not registry[REGISTRY_NAME.get(k, k)].unequal_length:
                continue
            n_cells = len(data.classes) * len(kernel_grid_points(grids[k])) * 2
            for point, weight in _cost_points(grids[k]):
                cell = {"cls": data.classes[0], "kernel": k, "point": point,
                        "levels": grids[k].levels, "time_channel": True,
                        "scorers": args.scorers}  # fmt: skip
                run_cv_cell(cell, data, warm)  # compilation and caches outside the timing
                if _amplitude_axis(k, grids[k]):
                    cpu, dt, rows = _amplitude_sequence(cell, grids[k], data, config)
                else:
                    t0, c0 = time.perf_counter(), time.process_time()
                    rows = run_cv_cell(cell, data, config)
                    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
                errors = {r["error"] for r in rows if r["error"]}
                cells = n_cells * weight
                total += cpu * cells
                n_total += cells
                acc = per_kernel.setdefault(k, [0.0, 0.0])
                acc[0] += cells
                acc[1] += cpu * cells
                note = f" (error: {sorted(errors)[0][:60]})" if errors else ""
                short = json.dumps(point, sort_keys=True)
                print(f"| {name} | {k} | {short} | {cpu:.3f} | {dt:.3f} | {cells:.0f} | "
                      f"{cpu * cells:.0f} |{note}", flush=True)  # fmt: skip
    if ref is not None:
        refs.append(ref())
        print(f"reference cell (NATOPS flat_rbf) at the end: {refs[-1]:.3f} CPU s; reference "
              f"cells: median {np.median(refs):.3f}, min {min(refs):.3f}, "
              f"max {max(refs):.3f}")  # fmt: skip
    print("\n| kernel | CV cells | mean CPU s / cell | core-hours | share |")
    print("|---|---|---|---|---|")
    for k, (cells, cpu) in sorted(per_kernel.items(), key=lambda kv: -kv[1][1]):
        print(f"| {k} | {cells:.0f} | {cpu / cells:.3f} | {cpu / 3600:.2f} | "
              f"{100 * cpu / total:.1f} % |")  # fmt: skip
    print(f"| **all** | {n_total:.0f} | {total / n_total:.3f} | {total / 3600:.2f} | 100 % |")
    print(f"total: {n_total:.0f} CV cells, {total:.0f} CPU s = {total / 3600:.2f} core-hours; "
          f"{total / 7200:.2f} h on 2 cores (2 workers, at the load measured)")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
