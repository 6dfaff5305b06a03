"""Cells that share work go to one worker together (``experiments._cells.CellGroup``): the
order-1 signature kernels' amplitudes (scales) of one bandwidth, time channel and class share
their level terms (``_protocol._levels_shared``), so a run with several workers hands them out
as one unit. The plan, the stored rows and the counts are those of the cells one by one."""

from collections import Counter
from dataclasses import replace

import pytest
from experiment_helpers import _cv_table, _opts, _test_table, tiny_sines

from experiments import _runner
from experiments._cells import SHARED_AXES, CellGroup, Done, RunSetup, grouped, plan
from experiments._grids import PRESETS
from experiments._runner import cell_config, run_benchmark, run_cell

SCALES = [0.5, 1.0, 2.0]


def _setup(kernels=("flat_rbf", "trunc_sig_rbf_order1", "trunc_sig_linear_order1")):
    grids = dict(PRESETS["quick"].grids)
    grids["trunc_sig_rbf_order1"] = replace(
        grids["trunc_sig_rbf_order1"], axes={"sigma": [0.5, 1.0], "scale": SCALES}
    )
    grids["trunc_sig_linear_order1"] = replace(
        grids["trunc_sig_linear_order1"], axes={"scale": SCALES}
    )
    return RunSetup(
        datasets={"tiny": ("a", "b")}, kernels=tuple(kernels), scorers=("conformance",),
        grids=grids, time_channels=(False, True),
    )  # fmt: skip


def test_grouped_joins_the_shared_axis_and_keeps_everything_else_in_order():
    cells = plan(_setup(), Done())
    out = grouped(cells)
    flat = [c for u in out for c in (u.cells if u.kind == "group" else (u,))]
    assert Counter(flat) == Counter(cells)  # every cell once
    assert [c for c in out if c.kind != "group" and c.kernel == "flat_rbf"] == [
        c for c in cells if c.kernel == "flat_rbf"
    ]
    assert [c for c in out if c.kind == "test"] == [c for c in cells if c.kind == "test"]
    groups = [u for u in out if u.kind == "group"]
    # rbf: 2 classes x 2 sigmas x 2 time channels; linear: 2 classes x 2 time channels
    assert Counter(g.cells[0].kernel for g in groups) == {
        "trunc_sig_rbf_order1": 8,
        "trunc_sig_linear_order1": 4,
    }
    for g in groups:
        assert g.n_cells == len(SCALES) and g.dataset == "tiny"
        axis = SHARED_AXES[g.cells[0].kernel]
        assert [dict(c.point)[axis] for c in g.cells] == SCALES
        rest = {
            (c.cls, c.kernel, c.time_channel, tuple(kv for kv in c.point if kv[0] != axis))
            for c in g.cells
        }
        assert len(rest) == 1
        # a group sits at its first cell's place, before the test cell of its class
        first = cells.index(g.cells[0])
        test = next(
            i for i, c in enumerate(cells) if c.kind == "test" and c.group == g.cells[0].group
        )
        assert first < test and out.index(g) < [u for u in out].index(cells[test])
    # nothing to group: the list as it is
    plain = plan(_setup(("flat_rbf",)), Done())
    assert grouped(plain) == plain


def test_a_group_of_one_cell_is_the_cell():
    setup = _setup(("trunc_sig_linear_order1",))
    grids = dict(setup.grids)
    grids["trunc_sig_linear_order1"] = replace(
        grids["trunc_sig_linear_order1"], axes={"scale": [1.0]}
    )
    cells = plan(RunSetup(**{**setup.__dict__, "grids": grids}), Done())
    assert grouped(cells) == cells


def test_a_group_computes_its_cells_results_in_order():
    data = tiny_sines()
    cells = [c for c in plan(_setup(("trunc_sig_rbf_order1",)), Done()) if c.kind == "cv"]
    group = next(u for u in grouped(cells) if u.kind == "group")
    config = cell_config("quick", share="fold")
    got = run_cell(group, data, config)
    want = tuple(run_cell(c, data, config) for c in group.cells)
    assert len(got) == group.n_cells
    for g, w in zip(got, want, strict=True):
        assert [r.params for r in g] == [r.params for r in w]
        for a, b in zip(g, w, strict=True):
            assert (a.roc == b.roc).all() and (a.pr == b.pr).all() and a.error == b.error


@pytest.fixture(scope="module")
def one_worker_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("groups") / "one.sqlite"
    s = run_benchmark(_kw(path))
    assert s["complete"]
    return path, s


def _kw(path, **kw):
    return _opts(
        path, kernels=["trunc_sig_rbf_order1"], scorers=["conformance", "mahalanobis"],
        grid={"trunc_sig_rbf_order1": {"sigma": [1.0], "scale": SCALES}}, **kw,
    )  # fmt: skip


def test_two_workers_hand_out_groups_and_store_the_same_rows(
    tmp_path, one_worker_store, monkeypatch
):
    ref, s1 = one_worker_store
    units = []
    submit = _runner.Executor.submit

    def spy(self, cell):
        units.append(cell)
        return submit(self, cell)

    monkeypatch.setattr(_runner.Executor, "submit", spy)
    s2 = run_benchmark(_kw(tmp_path / "two.sqlite", workers=2))
    assert s2["complete"] and s2["cells_computed"] == s2["cells_total"] == s1["cells_total"]
    groups = [u for u in units if isinstance(u, CellGroup)]
    # BasicMotions: 4 classes x 2 time channels, each the three scales
    assert len(groups) == 8 and all(g.n_cells == 3 for g in groups)
    assert not [u for u in units if u.kind == "cv"]
    assert _cv_table(tmp_path / "two.sqlite") == _cv_table(ref)
    assert _test_table(tmp_path / "two.sqlite") == _test_table(ref)


def test_max_cells_counts_cells_not_groups(tmp_path):
    s = run_benchmark(_kw(tmp_path / "max.sqlite", workers=2, max_cells=4))
    assert s["cells_computed"] == 4
    assert len(_cv_table(tmp_path / "max.sqlite")) == 4 * 2 * 2  # two levels, two scorers a cell
