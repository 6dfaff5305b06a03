"""The cells of a run, their results, and the plan.

A :class:`CVCell` is (data set, normal class, kernel, grid point, time channel) with the
scorers still missing there; a :class:`TestCell` is (data set, normal class, kernel) and is
ready once every CV cell of its group is in the store (its ``selections`` are then filled
from the CV rows). Both are frozen and pickle, so they travel to worker processes and Dask
workers. The protocol functions read a cell as a mapping (``cell["cls"]``), so cells also
offer a read-only item view of their fields.

:func:`plan` is pure: from the resolved run (:class:`RunSetup`) and the keys already in
the store (:class:`Done`) it lists the cells to compute in a fixed order; it reads no file,
store or registry.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from ._grids import kernel_grid_points
from ._protocol import params_key

__all__ = [
    "SHARED_AXES",
    "CVCell",
    "CellGroup",
    "CVResult",
    "Cell",
    "Done",
    "RunSetup",
    "TestCell",
    "TestResult",
    "grid_hash",
    "grouped",
    "plan",
    "results_of",
]


def grid_hash(points: list[dict], levels, time_channels) -> str:
    """The id of a kernel's candidate grid (points, levels, time channels): the ``grid``
    column of the test table, so a test row belongs to the grid it was selected from."""
    blob = json.dumps({"points": points, "levels": levels, "tc": time_channels}, sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


class _ItemView:
    """Read-only ``cell[name]`` access to the fields (lists for tuples, dicts for pairs)."""

    _AS_DICT: ClassVar[tuple[str, ...]] = ()

    def __getitem__(self, name: str):
        if name not in self.keys():
            raise KeyError(name)
        value = getattr(self, name)
        if name in self._AS_DICT:
            return dict(value) if value is not None else None
        if isinstance(value, tuple):
            return list(value)
        return value

    def keys(self) -> list[str]:
        return [f.name for f in fields(self)]


@dataclass(frozen=True)
class CVCell(_ItemView):
    """One CV cell: ``point`` as sorted (axis, value) pairs, ``levels`` the pass levels of
    the kernel (None for a kernel without), ``scorers`` those still missing."""

    kind: ClassVar[str] = "cv"
    _AS_DICT: ClassVar[tuple[str, ...]] = ("point",)

    dataset: str
    cls: str
    kernel: str
    point: tuple[tuple[str, Any], ...]
    levels: tuple[int, ...] | None
    time_channel: bool
    scorers: tuple[str, ...]

    @property
    def group(self) -> tuple[str, str, str]:
        """(data set, class, kernel): the test cell this CV cell feeds."""
        return (self.dataset, self.cls, self.kernel)


@dataclass(frozen=True)
class TestCell(_ItemView):
    """One test cell: the candidates [(params json, time channel)] the selection is made
    over, ``grid`` their id, and the selections {scorer: dict} once the CV rows are in."""

    __test__: ClassVar[bool] = False  # not a pytest test class
    kind: ClassVar[str] = "test"
    _AS_DICT: ClassVar[tuple[str, ...]] = ("selections",)

    dataset: str
    cls: str
    kernel: str
    grid: str
    levels: tuple[int, ...] | None
    scorers: tuple[str, ...]
    candidates: tuple[tuple[str, bool], ...]
    selections: tuple[tuple[str, dict], ...] | None = None

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.dataset, self.cls, self.kernel)


Cell = CVCell | TestCell

#: Grid axes whose points share work computed in one process: the order-1 signature
#: kernels' amplitude (RBF lift) and scale (Linear), whose level terms
#: :func:`experiments._protocol._levels_shared` computes once per batch pair and scales
#: exactly to each point of the axis.
SHARED_AXES: dict[str, str] = {"trunc_sig_rbf_order1": "scale", "trunc_sig_linear_order1": "scale"}


@dataclass(frozen=True)
class CellGroup:
    """CV cells that differ only in their kernel's shared axis (:data:`SHARED_AXES`), given
    to an executor as one unit of work so that one process computes them one after another
    and their shared terms once (cells handed out one by one land on whichever worker is
    free, and each worker that sees one of them computes the terms again). Its result is
    the tuple of its cells' results, in order."""

    kind: ClassVar[str] = "group"

    cells: tuple[CVCell, ...]

    @property
    def dataset(self) -> str:
        return self.cells[0].dataset

    @property
    def n_cells(self) -> int:
        return len(self.cells)


def grouped(cells: list[Cell]) -> list[Cell | CellGroup]:
    """``cells`` in order, with the CV cells of one (data set, class, kernel, levels, time
    channel, grid point but the shared axis) as one :class:`CellGroup` at the place of the
    first of them (a group of one cell is the cell)."""
    groups: dict[tuple, list[CVCell]] = {}
    order: list = []
    for c in cells:
        axis = SHARED_AXES.get(c.kernel) if c.kind == "cv" else None
        if axis is None:
            order.append(c)
            continue
        rest = tuple(kv for kv in c.point if kv[0] != axis)
        key = (c.dataset, c.cls, c.kernel, rest, c.levels, c.time_channel)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(c)
    out: list[Cell | CellGroup] = []
    for item in order:
        if isinstance(item, tuple):
            members = groups[item]
            out.append(CellGroup(tuple(members)) if len(members) > 1 else members[0])
        else:
            out.append(item)
    return out


@dataclass(frozen=True)
class CVResult:
    """One ``cv`` row: a scorer's fold-averaged ROC-AUC and PR-AUC arrays (n_axis, n_rank)
    at one grid point, level and time channel of a CV cell."""

    table: ClassVar[str] = "cv"

    dataset: str
    cls: str
    kernel: str
    params: str
    time_channel: int
    scorer: str
    axis: str | None = None
    n_rank: int | None = None
    roc: Any = None
    pr: Any = None
    n_folds: int | None = None
    gram_seconds: float | None = None
    score_seconds: float | None = None
    error: str | None = None

    def as_row(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TestResult:
    """One ``test`` row: a scorer's selection refitted on the class and its test metrics."""

    __test__: ClassVar[bool] = False
    table: ClassVar[str] = "test"

    dataset: str
    cls: str
    kernel: str
    scorer: str
    grid: str
    params: str | None = None
    time_channel: int | None = None
    alpha: float | None = None
    rank: int | None = None
    cv_objective: float | None = None
    roc_auc: float | None = None
    pr_auc: float | None = None
    seconds: float | None = None
    error: str | None = None

    def as_row(self) -> dict:
        return asdict(self)


def results_of(cell: Cell, rows: list[dict]) -> tuple[CVResult | TestResult, ...]:
    """The protocol's row dicts of ``cell`` as result dataclasses (an unknown column is a
    TypeError: the protocol and the store disagree)."""
    cls = CVResult if cell.kind == "cv" else TestResult
    return tuple(cls(**r) for r in rows)


@dataclass(frozen=True)
class RunSetup:
    """A run resolved against its preset and data: what :func:`plan` needs.

    ``datasets``: data set -> its classes (sorted); ``grids``: kernel -> KernelGrid (the
    preset's, with the run's overrides); ``skip``: the (data set, kernel) pairs not run
    (a kernel that needs equal lengths on unequal-length data); ``normal_classes``: the
    classes made normal (None: every class)."""

    datasets: dict[str, tuple[str, ...]]
    kernels: tuple[str, ...]
    scorers: tuple[str, ...]
    grids: dict[str, Any]
    time_channels: tuple[bool, ...]
    skip: frozenset[tuple[str, str]] = frozenset()
    normal_classes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Done:
    """The keys already in the store under the run's setting: ``cv`` (dataset, cls, kernel,
    params, time channel, scorer) and ``test`` (dataset, cls, kernel, scorer, grid)."""

    cv: frozenset = frozenset()
    test: frozenset = frozenset()

    @classmethod
    def from_store(cls, store, setting: str) -> Done:
        return cls(frozenset(store.cv_keys(setting)), frozenset(store.test_keys(setting)))


def plan(setup: RunSetup, done: Done) -> list[Cell]:
    """The cells still to compute, in a fixed order: for each data set, kernel and normal
    class (in the setup's order), the CV cells (grid points, then time channels) missing a
    scorer, then the test cell. A test cell is listed when one of its scorers has no test
    row; its CV cells are listed only then (a finished test row needs no CV)."""
    cells: list[Cell] = []
    for dname, classes in setup.datasets.items():
        for kname in setup.kernels:
            if (dname, kname) in setup.skip:
                continue
            g = setup.grids[kname]
            points = kernel_grid_points(g)
            lv = list(g.levels) if g.levels is not None else [None]
            levels = tuple(g.levels) if g.levels is not None else None
            tcs = list(setup.time_channels)
            candidates = tuple((params_key(p, v), tc) for p in points for v in lv for tc in tcs)
            ghash = grid_hash(points, g.levels, tcs)
            for cls in classes:
                if setup.normal_classes is not None and cls not in setup.normal_classes:
                    continue
                missing_test = tuple(
                    s for s in setup.scorers if (dname, cls, kname, s, ghash) not in done.test
                )
                if not missing_test:
                    continue
                for p in points:
                    for tc in tcs:
                        miss = tuple(
                            s for s in setup.scorers
                            if any((dname, cls, kname, params_key(p, v), tc, s) not in done.cv
                                   for v in lv)
                        )  # fmt: skip
                        if miss:
                            cells.append(
                                CVCell(
                                    dname,
                                    cls,
                                    kname,
                                    tuple(sorted(p.items())),
                                    levels,
                                    bool(tc),
                                    miss,
                                )  # fmt: skip
                            )
                cells.append(TestCell(dname, cls, kname, ghash, levels, missing_test, candidates))
    return cells
