"""The report's figures (experiments._figures) on small stores written row by row."""

from __future__ import annotations

import itertools
import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.image as mpimg  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from experiments._figures import (  # noqa: E402
    KERNEL_COLOURS,
    kernel_colour,
    min_datasets,
    write_figures,
)
from experiments._report import summary, write_report  # noqa: E402
from experiments._store import ResultStore  # noqa: E402

KERNELS = ["flat_linear", "flat_rbf", "integral_rbf", "gak", "rand_sig_tanh"]
SCORERS = ["conformance", "mahalanobis"]


def _store(path, n_datasets, kernels=KERNELS, sigmas=(0.5, 1.0, 2.0), alphas=(1e-8, 1e-2),
           seed=0, fail=(), n_rank=3):  # fmt: skip
    """A store with one setting: test rows where kernel i's ROC-AUC grows with i (plus noise),
    and the CV rows of the grid points. ``fail``: (dataset, kernel) pairs that failed."""
    rng = np.random.default_rng(seed)
    with ResultStore(path) as st:
        sid = st.add_setting({"alphas": list(alphas), "preset": "test", "version": 3})
        for di, k, s, c in itertools.product(range(n_datasets), kernels, SCORERS, "AB"):
            d = f"D{di:02d}"
            has_sigma = k in ("flat_rbf", "integral_rbf", "gak")
            points = [{"sigma": v} for v in sigmas] if has_sigma else [{}]
            common = dict(setting=sid, dataset=d, cls=c, kernel=k, scorer=s, created=1.0)
            cv = [dict(common, params=json.dumps(p), time_channel=0, axis=json.dumps(alphas),
                       n_rank=n_rank, n_folds=2) for p in points]  # fmt: skip
            err = "boom" if (d, k) in fail else None
            auc = 0.5 + 0.08 * KERNELS.index(k) + rng.normal(0, 0.01)
            test = dict(common, grid="g", params=json.dumps(points[rng.integers(len(points))]),
                        time_channel=0, alpha=float(rng.choice(alphas)),
                        rank=int(rng.integers(1, n_rank + 1)), roc_auc=None if err else auc,
                        pr_auc=None if err else auc, error=err)  # fmt: skip
            st.add_cell(cv_rows=cv, test_rows=[test])
    return path


def _figures(tmp_path, **kw):
    path = _store(tmp_path / "s.sqlite", **kw)
    out = tmp_path / "fig"
    out.mkdir()
    with ResultStore(path, mode="read") as st:
        res = summary(st)
        setting = st.query("SELECT setting FROM settings")[0]["setting"]
        return write_figures(st, setting, res, out)


def _check_png(path, min_w=300, min_h=150):
    assert path.stat().st_size > 0
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h, (path.name, w, h)
    assert float(np.var(img[..., :3])) > 1e-3, f"{path.name} is blank"


def test_min_datasets_is_where_the_tests_can_first_reject():
    from scipy.stats import chi2, wilcoxon

    for k in (3, 5, 11, 16):
        n = min_datasets(k)
        assert 2.0**-n <= 0.1 / (k - 1) < 2.0 ** -(n - 1)  # the Wilcoxon-Holm bound
        assert chi2.sf(n * (k - 1), k - 1) < 0.1
        # the exact one-sided test on n all-positive differences reaches that bound
        p = wilcoxon(np.arange(1.0, n + 1), np.zeros(n), alternative="greater").pvalue
        assert p == pytest.approx(2.0**-n)
    assert (min_datasets(3), min_datasets(11)) == (5, 7)
    with pytest.raises(ValueError, match="n_methods"):
        min_datasets(1)


def test_every_figure_with_enough_data_sets(tmp_path):
    paths, notes = _figures(tmp_path, n_datasets=min_datasets(len(KERNELS)))
    names = sorted(p.name for p in paths)
    assert names == ["conformance_vs_mahalanobis.png", "critical_difference_conformance.png",
                     "critical_difference_mahalanobis.png",
                     "selected_hyperparameters.png"]  # fmt: skip
    for p in paths:
        _check_png(p)
    assert not any("critical-difference" in n for n in notes)


def test_too_few_data_sets_give_a_note_not_a_diagram(tmp_path):
    need = min_datasets(len(KERNELS))
    paths, notes = _figures(tmp_path, n_datasets=need - 1)
    assert not [p for p in paths if p.name.startswith("critical_difference")]
    (cd,) = [n for n in notes if "critical-difference" in n]
    assert cd.startswith(f"No critical-difference diagram for conformance, mahalanobis: "
                         f"{need - 1} data set(s)")  # fmt: skip
    assert f"conformance, mahalanobis: at least {need} for {len(KERNELS)} kernels" in cd


def test_kernels_without_every_result_are_left_out_of_the_diagram(tmp_path):
    n = min_datasets(4)
    paths, notes = _figures(tmp_path, n_datasets=n, fail=[("D00", "gak")])
    assert "critical_difference_conformance.png" in [p.name for p in paths]
    # gak left out, 4 complete kernels: min_datasets(4) data sets suffice
    fail = [("D00", "gak"), ("D01", "flat_rbf"), ("D02", "flat_linear")]
    paths, notes = _figures(tmp_path / "b", n_datasets=n, fail=fail)
    cd = [m for m in notes if "critical-difference" in m]
    assert cd and "at least 3 needed" in cd[0] and "gak" in cd[0]


def test_single_value_grids_are_not_plotted(tmp_path):
    paths, notes = _figures(tmp_path, n_datasets=2, sigmas=(1.0,), alphas=(1e-2,), n_rank=1)
    assert "selected_hyperparameters.png" not in [p.name for p in paths]
    (single,) = [n for n in notes if "single grid value" in n]
    for name in ("gak: sigma", "log10 alpha", "rank", "time channel"):
        assert name in single
    # a multi-valued grid is plotted even where one value was always chosen
    paths, notes = _figures(tmp_path / "b", n_datasets=2, sigmas=(1.0, 2.0), alphas=(1e-2,))
    assert "selected_hyperparameters.png" in [p.name for p in paths]
    (single,) = [n for n in notes if "single grid value" in n]
    assert "sigma" not in single and "log10 alpha" in single


def test_kernel_colours_are_stable_and_distinct(tmp_path):
    import tskernels

    assert set(tskernels.kernel_registry()) <= set(KERNEL_COLOURS)  # a new kernel needs one
    rgb = np.array([mcolors.to_rgb(c) for c in KERNEL_COLOURS.values()])
    dist = np.linalg.norm(rgb[:, None] - rgb[None], axis=-1)
    assert dist[~np.eye(len(rgb), dtype=bool)].min() > 0.18
    assert kernel_colour("flat_linear") != kernel_colour("rand_sig_tanh")
    assert kernel_colour("my_kernel") == kernel_colour("my_kernel")
    # the scatter draws each kernel in its colour, whatever the other kernels of the store
    import matplotlib.pyplot as plt

    seen = {}
    orig = plt.Axes.scatter

    def spy(self, *a, label=None, color=None, **kw):
        seen[label] = color
        return orig(self, *a, label=label, color=color, **kw)

    plt.Axes.scatter = spy
    try:
        _figures(tmp_path, n_datasets=2, kernels=["gak", "rand_sig_tanh"])
    finally:
        plt.Axes.scatter = orig
    assert seen == {"gak": KERNEL_COLOURS["gak"], "rand_sig_tanh": KERNEL_COLOURS["rand_sig_tanh"]}


def test_report_lists_the_figures_and_notes(tmp_path):
    path = _store(tmp_path / "s.sqlite", n_datasets=3)
    write_report(path, tmp_path / "rep")
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## Figures" in text and "![conformance_vs_mahalanobis]" in text
    assert "No critical-difference diagram for conformance, mahalanobis: 3 data set(s)" in text
    assert not (tmp_path / "rep" / "mean_rank.png").exists()
    assert math.isfinite(min_datasets(5))
