"""Options as dataclasses, the command line built from them.

Every option of a command is one field of a frozen dataclass (:class:`RunOptions` for
``python -m experiments run``; ``experiments.adbench`` declares its own the same way). A
field made with :func:`option` carries its command-line form in its metadata (flags, help,
argparse type, choices, ...); :func:`add_arguments` adds one argument per such field to a
parser and :func:`from_namespace` turns the parsed arguments back into the dataclass, so an
option is written once. Fields without a command-line form (``verbose``) are for callers in
Python.

A ``convert`` in the metadata maps the parsed value to the field's value (``--grid`` given
several times -> {kernel: {axis: values}}); it raises :class:`ConfigError` for values that
argparse cannot judge alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._grids import PRESETS, scorer_names

__all__ = [
    "ConfigError",
    "Parser",
    "RANK_RULES",
    "RunOptions",
    "add_arguments",
    "from_namespace",
    "option",
]

#: How a CV rank beyond a fold's component count is scored, and the refit rank chosen:
#: "ours" pads with the last rank and maps a plateau to every component; "reference" pads
#: the CV ROC-AUC with zeros and refits at exactly the chosen rank (the reference study).
RANK_RULES = ("ours", "reference")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block): ``prog: error: message``; the parser
    class of every command line of the package."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class ConfigError(ValueError):
    """A run option that cannot work, found before any work (one-line message)."""


def option(default: Any = dataclasses.MISSING, *, help: str | None = None,
           flags: tuple[str, ...] | None = None, convert: Callable | None = None,
           default_factory: Callable | Any = dataclasses.MISSING, **argparse_kw):  # fmt: skip
    """A dataclass field with a command-line form: ``flags`` (default ``--field-name``), the
    ``help`` text and any other ``add_argument`` keyword (type, choices, nargs, metavar,
    action); ``convert`` maps the parsed value to the field's value."""
    meta = {"cli": {"flags": flags, "help": help, "convert": convert, "kw": argparse_kw}}
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def _default(f: dataclasses.Field):
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def add_arguments(parser: argparse.ArgumentParser, cls) -> None:
    """One argument of ``parser`` per field of the dataclass ``cls`` made with :func:`option`."""
    for f in dataclasses.fields(cls):
        cli = f.metadata.get("cli")
        if cli is None:
            continue
        flags = cli["flags"] or ("--" + f.name.replace("_", "-"),)
        kw = dict(cli["kw"])
        if kw.get("action") == "append":
            kw.setdefault("default", [])  # the items given; ``convert`` makes the value
        elif kw.get("action") not in ("store_true", "store_false"):
            kw.setdefault("default", _default(f))
        parser.add_argument(*flags, dest=f.name, help=cli["help"], **kw)


def from_namespace(cls, ns: argparse.Namespace, **overrides):
    """The dataclass ``cls`` from parsed arguments (each ``convert`` applied); ``overrides``
    set fields that have no command-line form."""
    values = {}
    for f in dataclasses.fields(cls):
        cli = f.metadata.get("cli")
        if cli is None or not hasattr(ns, f.name):
            continue
        value = getattr(ns, f.name)
        values[f.name] = value if cli["convert"] is None else cli["convert"](value)
    return cls(**values, **overrides)


# ------------------------------------------------------------------ argument types of `run`
def _number(s: str, what: str) -> int | float:
    s = s.strip()
    if not s:
        raise argparse.ArgumentTypeError(f"{what}: empty value")
    try:
        v = int(s) if s.lstrip("+-").isdigit() else float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: {s!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{what}: {s!r} is not a finite number")
    return v


def _floats(s: str) -> list[float]:
    """1e-8,1e-5 -> [1e-8, 1e-5]; empty items and non-finite values are errors."""
    return [float(_number(v, "--alphas")) for v in s.split(",")]


def _ints(s: str) -> list[int]:
    out = []
    for v in s.split(","):
        n = _number(v, "--levels")
        if not isinstance(n, int):
            raise argparse.ArgumentTypeError(f"--levels: {v!r} is not an integer")
        out.append(n)
    return out


def _grid_arg(s: str) -> tuple[str, str, list]:
    """KERNEL.AXIS=v1,v2 -> (kernel, axis, values)."""
    try:
        lhs, rhs = s.split("=", 1)
        kernel, axis = lhs.split(".", 1)
    except ValueError:
        msg = f"--grid expects KERNEL.AXIS=v1,v2,..., got {s!r}"
        raise argparse.ArgumentTypeError(msg) from None
    return kernel, axis, [_number(v, f"--grid {lhs}") for v in rhs.split(",")]


def _grid_dict(items) -> dict[str, dict[str, list]]:
    """[(kernel, axis, values), ...] of repeated ``--grid`` -> {kernel: {axis: values}}."""
    if isinstance(items, dict):
        return items
    grid: dict[str, dict[str, list]] = {}
    for kernel, axis, values in items:
        if axis in grid.get(kernel, {}):
            raise ConfigError(f"--grid {kernel}.{axis} is given twice")
        grid.setdefault(kernel, {})[axis] = values
    return grid


def _tc(s: str) -> list[bool]:
    choices = {"no": [False], "yes": [True], "both": [False, True]}
    if s not in choices:
        raise argparse.ArgumentTypeError(f"--time-channel must be no, yes or both, got {s!r}")
    return choices[s]


@dataclass(frozen=True)
class RunOptions:
    """Everything ``python -m experiments run`` accepts (None = the preset's value); the
    command line is built from these fields (:func:`add_arguments`)."""

    datasets: list[str] | None = option(
        None, flags=("--dataset", "--datasets"), nargs="+", metavar="DATA",
        help="UEA names, or own data: a folder of .ts files, FILE.npz (X, y or X_train, "
        "y_train, X_test, y_test), FILE.csv (long: series id, time, channels..., label) or "
        "sktime:NAME (default: the preset's)",
    )  # fmt: skip
    normal_classes: list[str] | None = option(
        None, flags=("--normal-class",), nargs="+", metavar="CLASS",
        help="the classes made normal in turn (default: every class)",
    )  # fmt: skip
    kernels: list[str] | None = option(
        None, nargs="+",
        help="grid names (default: every kernel with a default grid; the reference's "
        "single-level signature kernels are trunc_sig_linear_single, trunc_sig_rbf_single)",
    )  # fmt: skip
    scorers: list[str] = option(
        default_factory=lambda: scorer_names(word=False), nargs="+",
        help=f"from {', '.join(scorer_names())} (default: all registered)",
    )  # fmt: skip
    preset: str | None = option(
        None, choices=sorted(PRESETS),
        help="grids and CV (default: own when --dataset names a file or folder, else quick; "
        "quick has one value per grid axis, no tuning)",
    )  # fmt: skip
    folds: int | None = option(None, type=int, help="CV folds (quick 3, own 3, paper 4)")
    repeats: int | None = option(None, type=int, help="CV repeats (quick 1, own 1, paper 10)")
    seed: int = option(0, type=int)
    alphas: list[float] | None = option(None, type=_floats, help="e.g. 1e-8,1e-5,1e-2")
    max_rank: int | None = option(None, type=int, help="ranks 1..M (default 50)")
    rank_rule: str = option(
        "ours", choices=RANK_RULES,
        help="ours: a CV rank beyond a fold's components scores with all of them and a "
        "plateau up to --max-rank selects every component; reference: such ranks score "
        "ROC-AUC 0 and the refit keeps exactly the chosen rank (default: ours)",
    )  # fmt: skip
    time_channel: list[bool] | None = option(None, type=_tc, help="no, yes or both")
    levels: list[int] | None = option(
        None, type=_ints, help="truncation levels of the signature kernels, e.g. 1,2,3"
    )
    grid: dict[str, dict[str, list]] = option(
        default_factory=dict, type=_grid_arg, action="append", convert=_grid_dict,
        metavar="KERNEL.AXIS=V1,V2", help="override one grid axis (repeatable)",
    )  # fmt: skip
    share: str = option(
        "fold", choices=["fold", "class"],
        help="fold: pre-processing and Gram per fold (the protocol); class: one "
        "Gram per class shared by all folds (faster)",
    )  # fmt: skip
    store: str = option("results/experiments.sqlite", help="SQLite file")
    data_dir: str | None = option(None, help="folder of UEA .ts files (found by name)")
    device: str | None = option(None, help="torch device of the kernels (cpu, cuda)")
    workers: int = option(1, type=int, help="local worker processes")
    threads: int | None = option(None, type=int, help="threads per worker (default 1)")
    scheduler: str = option("local", help="'local' or a Dask scheduler address tcp://HOST:PORT")
    report: str | None = option(
        None, metavar="DIR", help="write the report to DIR when the run completes"
    )
    reference: str | None = option(None, help="reference CSV to compare against")
    max_cells: int | None = option(
        None, type=int, help="stop after computing this many cells (resume later)"
    )
    retry_failed: bool = option(
        False, action="store_true",
        help="compute the failed cells of this setting again (and the test cells that "
        "selected from them)",
    )  # fmt: skip
    progress: bool = option(
        True, flags=("--no-progress",), action="store_false", help="no progress bar"
    )
    verbose: bool = True  # messages on stderr (Python callers only)
