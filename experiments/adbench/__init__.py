"""ADBench evaluation of SOSREP and KDE against PyOD detectors (protocol.md section 7).

Unsupervised protocol: subsample to at most 10,000 rows (stratified), stratified 70/30 split,
min-max scaling fitted on the 70 %, every detector trained on the contaminated 70 %, AUC-ROC of
its anomaly score on the 30 %, seeds 0, 1, 2. One row per (data set, method, seed) goes into a
SQLite file as soon as it finishes (with timings, git revision and the device that computed
it); a finished key is never recomputed, so an interrupted run resumes where it stopped.

    python -m experiments adbench run [--datasets cardio wine] [--methods SOSREP-SDO IForest]
    python -m experiments adbench report

The store, provenance and execution are those of the UEA benchmark
(:class:`~experiments._store.SQLiteStore`, :class:`~experiments._recorder.Recorder`,
:class:`~experiments._executor.Executor`: ``--workers`` processes or a Dask ``--scheduler``;
SIGINT, SIGTERM and SIGHUP stop a run cleanly). Data: ``--data-dir``, else $ADBENCH_DATA,
else ``DEFAULT_DATA_DIR`` relative to the repository root. Methods are tables
(``experiments.adbench._methods``: ``PYOD`` name -> constructor, ``METHODS``,
``DIAGNOSTIC_METHODS``); :func:`register_method` adds one.

Bandwidths of SOSREP/KDE are chosen by the Fisher divergence on a held-out 20 % of the training
part (``density.select_bandwidth``: duplicates of fit points left out, SDO scored on the
mollified model) over length scales l in r * {1, 2, 4, 8} (sigma = l; SDO log a = 2 m_SDO log l,
a grid in log space: a = l^(2m) itself leaves the float64 range at large d),
where r is the median nearest-neighbour distance of the training part (distinct points), the
smallest scale the sample resolves, floored at 1/8 of the median pairwise distance (near-ties
of quantised data). Below it the held-out Fisher divergence keeps falling on these data, to
scales that rank anomalies worse (README, bandwidth selection; docs/results_adbench.md,
bandwidth sensitivity), so r is the grid floor. The SDO kernel uses 10,000 float32 random
features (SOSREP tol 1e-4, float32 resolution); SOSREP runs with lr = 1/3 (fastest
linearised contraction, see ``_density_method``).

``--methods sensitivity`` runs the diagnostic methods (``DIAGNOSTIC_METHODS``: fixed length
factors, the Fisher selection on a wide grid, clean-training variants) and
``report --sensitivity`` summarises them.

``--protocol transductive`` selects the bandwidths the SOSREP paper's way instead: fitted on
the training part, scored on the test part's features (no labels), grid r * 2^-3 .. r * 2^4,
rule "first_stable" (``fit_density``); those rows are named with "/T" ("SOSREP-SDO/T"), so
both protocols share a store; PyOD rows are the same under both.

COF and SOD (quadratic, Python loops) are skipped above ``QUADRATIC_MAX_TRAIN`` training rows.
Every cell runs under a wall-clock limit (``--cell-timeout``, default
``DEFAULT_CELL_TIMEOUT`` s; 0: none) in a child process that is killed when the limit passes:
the row records the failure ("timeout", or "died" for a child killed e.g. for memory) and the
run goes on. The scale helpers (``median_distance``, ``nn_spacing``) are blocked over rows
within ``max_memory`` bytes (``sqdist_blocks``).

Options, data folder and every data file (``X`` 2-D and finite, ``y`` 0/1 per row, at least 2
rows of each class in every seed's subsample and both classes in its test part) are checked
before the store is created: a problem is one line ``error: ...`` and exit status 2.

Modules: ``_data`` (files, split, scales), ``_methods`` (the method tables), ``_store``
(the results table), ``_run`` (plan, cell, run), ``_report`` (tables).
"""

from __future__ import annotations

import argparse

from .._options import ConfigError, add_arguments, from_namespace
from ._data import (
    DEFAULT_DATA_DIR,
    MAX_ROWS,
    check_dataset,
    data_dir,
    list_datasets,
    load_split,
    median_distance,
    nn_spacing,
    read_npz,
    resolve_names,
    split_indices,
    sqdist_blocks,
)
from ._methods import (
    ALL_METHODS,
    DIAGNOSTIC_METHODS,
    METHODS,
    PYOD,
    QUADRATIC_MAX_TRAIN,
    SENSITIVITY_FACTORS,
    TABLE_METHODS,
    TRANSDUCTIVE_FACTORS,
    TRANSDUCTIVE_METHODS,
    WIDE_FACTORS,
    Method,
    PyODEntry,
    SkippedError,
    _factor_tag,
    density_anomaly_scores,
    density_estimator,
    expand_methods,
    fit_density,
    length_floor,
    register_method,
    under_protocol,
)
from ._report import ReportOptions, report, sensitivity_table, table
from ._run import DEFAULT_DB, ADBenchOptions, plan, run, run_cell
from ._store import ADBenchStore

__all__ = [
    "ADBenchOptions",
    "ADBenchStore",
    "ALL_METHODS",
    "DEFAULT_DATA_DIR",
    "DEFAULT_DB",
    "DIAGNOSTIC_METHODS",
    "MAX_ROWS",
    "METHODS",
    "Method",
    "PYOD",
    "PyODEntry",
    "QUADRATIC_MAX_TRAIN",
    "ReportOptions",
    "SENSITIVITY_FACTORS",
    "SkippedError",
    "TABLE_METHODS",
    "TRANSDUCTIVE_FACTORS",
    "TRANSDUCTIVE_METHODS",
    "UsageExit",
    "WIDE_FACTORS",
    "build_parser",
    "check_dataset",
    "data_dir",
    "density_anomaly_scores",
    "density_estimator",
    "expand_methods",
    "fit_density",
    "length_floor",
    "list_datasets",
    "load_split",
    "main",
    "median_distance",
    "nn_spacing",
    "plan",
    "read_npz",
    "register_method",
    "report",
    "resolve_names",
    "run",
    "run_cell",
    "sensitivity_table",
    "split_indices",
    "sqdist_blocks",
    "table",
    "under_protocol",
    "_factor_tag",
]


def build_parser() -> argparse.ArgumentParser:
    from .._options import Parser

    p = Parser(
        prog="python -m experiments adbench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="action", parser_class=Parser)
    add_arguments(sub.add_parser("run", help="run (or resume) the evaluation"), ADBenchOptions)
    add_arguments(sub.add_parser("report", help="print the AUC-ROC table"), ReportOptions)
    return p


class UsageExit(SystemExit):
    """Exit status 2 (a bad option, data file or store, found before any work) whose text is
    the one-line message; :func:`main` has printed it on stderr."""

    def __init__(self, message: str):
        super().__init__(message)
        self.code = 2


def main(argv: list[str] | None = None) -> int:
    """The ADBench command line. An unusable option, data folder, data file or store: one
    line ``error: ...`` on stderr and exit status 2 (:class:`UsageExit`), before the store is
    created; a run that cannot go on (a worker process died): exit status 1; a signal stops a
    run cleanly (exit 128 + the signal)."""
    import sys

    from .._executor import RunError, RunInterrupted
    from .._store import StoreError

    args = build_parser().parse_args(argv)
    try:
        if args.action == "run":
            s = run(from_namespace(ADBenchOptions, args))
            print(f"{s['cells_computed']} of {s['cells_total']} runs computed; store {s['db']}")
        elif args.action == "report":
            report(from_namespace(ReportOptions, args))
        else:
            build_parser().print_help()
    except RunInterrupted as exc:
        return exc.report("runs")
    except (ConfigError, StoreError) as exc:
        message = "error: " + " ".join(str(exc).split())
        print(message, file=sys.stderr)
        raise UsageExit(message) from None
    except RunError as exc:
        raise SystemExit("error: " + " ".join(str(exc).split())) from None
    return 0
