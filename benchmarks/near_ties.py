"""How sensitive is a selection to near-ties of the CV objective? The test ROC-AUC of the
k best CV candidates of one (kernel, scorer), from a finished store.

A *candidate* is one (grid point, time channel) with its own best (alpha or lambda, rank)
under the run's rank rule (:func:`experiments._protocol.select` over that one candidate).
For every normal class the candidates are ordered by their CV objective (ROC-AUC + PR-AUC,
fold-averaged); the k-th best is refitted on the whole class and scored on the test split
(:func:`experiments._protocol.run_test_cell`, exactly as the run's own test cell). Printed per
k: the test ROC-AUC and the CV-objective gap to the best, each averaged over the classes.
k = 1 is the run's own selection (ties of the objective broken, as in the run, by the
candidate order: grid points, levels, time channels).

    python benchmarks/near_ties.py --kernel reservoir --scorer conformance [--top 5] -- \
        --preset paper --dataset RacketSports --kernels reservoir \
        --scorers conformance mahalanobis --data-dir ../shared/data/uea --share fold \
        --rank-rule reference --store results/reference_fold.sqlite

Everything after ``--`` is the ``python -m experiments run`` command line of the run (the
same options give the same setting: the script stops if the store has no such setting).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from experiments.__main__ import _parser
from experiments._grids import kernel_grid_points
from experiments._options import RunOptions, from_namespace
from experiments._protocol import params_key, run_test_cell, select
from experiments._runner import _effective, _load_datasets
from experiments._store import ResultStore, setting_id


def candidate_order(grid, time_channels) -> list[tuple[str, bool]]:
    """The run's candidates [(params json, time channel)] in its order (the test cell's)."""
    levels = list(grid.levels) if grid.levels is not None else [None]
    points = kernel_grid_points(grid)
    return [(params_key(p, v), bool(tc)) for p in points for v in levels for tc in time_channels]


def candidates_by_objective(cv_rows: dict, order: list, rank_rule: str) -> list[dict]:
    """Each candidate's own selection, best CV objective first (candidate order on ties);
    failed or missing ones left out."""
    out = []
    for key in order:
        sel = select(cv_rows, [key], rank_rule)
        if sel is not None and "error" not in sel:
            out.append(sel)
    return sorted(out, key=lambda s: -s["cv_objective"])  # stable: candidate order on ties


def near_ties(opts: RunOptions, kernel: str, scorer: str, top: int) -> dict[str, np.ndarray]:
    """{data set: array (top, 2) of [mean test ROC-AUC, mean CV-objective gap]} over classes."""
    eff = _effective(opts)
    sid = setting_id(eff.setting)
    store = ResultStore(opts.store)
    if sid not in store.settings():
        raise SystemExit(f"error: store {opts.store} has no setting {sid} for these options")
    names = list(eff.preset.datasets if opts.datasets is None else opts.datasets)
    datasets, _ = _load_datasets(opts, names, eff.config["folds"], eff.config["seed"])
    levels = eff.grids[kernel].levels
    order = candidate_order(eff.grids[kernel], eff.time_channels)
    out = {}
    for dname, data in datasets.items():
        per_class = []
        for cls in data.classes:
            ranked = candidates_by_objective(
                store.cv_rows(sid, dname, str(cls), kernel, scorer), order, opts.rank_rule
            )[:top]
            if len(ranked) < top:
                raise SystemExit(f"error: {dname}/{cls}: fewer than {top} candidates in the store")
            rows = []
            for sel in ranked:
                cell = {"cls": cls, "kernel": kernel, "grid": "", "levels": levels,
                        "selections": {scorer: sel}}  # fmt: skip
                (row,) = run_test_cell(cell, data, eff.config)
                roc = np.nan if row["error"] else row["roc_auc"]
                rows.append([roc, ranked[0]["cv_objective"] - sel["cv_objective"]])
            per_class.append(rows)
        out[dname] = np.mean(np.asarray(per_class, dtype=float), axis=0)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("error: give the run's options after `--` (see the docstring)", file=sys.stderr)
        return 2
    cut = argv.index("--")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", required=True)
    p.add_argument("--scorer", required=True)
    p.add_argument("--top", type=int, default=5)
    args = p.parse_args(argv[:cut])
    opts = from_namespace(RunOptions, _parser().parse_args(["run", *argv[cut + 1 :]]))
    for dname, res in near_ties(opts, args.kernel, args.scorer, args.top).items():
        aucs = ", ".join(f"{v:.3f}" for v in res[:, 0])
        gaps = ", ".join(f"{v:.3f}" for v in res[:, 1])
        print(f"{dname} {args.kernel} {args.scorer}: test ROC-AUC {aucs} (CV gap {gaps})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
