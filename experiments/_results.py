"""The test results of a store as the report and the figures read them: the rows of a
setting (latest grid only), their per-(data set, kernel, scorer) means over classes, the
tables' axes in a fixed order and the (data sets x kernels) matrix of one metric.
:mod:`experiments._report` and :mod:`experiments._figures` both import from here (and not
from each other)."""

from __future__ import annotations

import numpy as np

from ._grids import scorer_names
from ._store import ResultStore

__all__ = ["summary"]


def _latest_setting(store: ResultStore) -> str | None:
    rows = store.query("SELECT setting FROM runs ORDER BY id DESC LIMIT 1")
    if rows:
        return rows[0]["setting"]
    rows = store.query("SELECT setting FROM test LIMIT 1")
    return rows[0]["setting"] if rows else None


def _test_rows(store: ResultStore, setting: str, where: str = "") -> list[dict]:
    """The test rows of ``setting``; where a (data set, kernel) holds rows of more than one
    grid (the preset's grid changed in the code between runs), only the latest grid's."""
    rows = store.query(f"SELECT * FROM test WHERE setting=? {where}", (setting,))
    latest: dict = {}
    for r in store.query(
        "SELECT dataset, kernel, grid, MAX(created) t FROM test WHERE setting=? "
        "GROUP BY dataset, kernel, grid", (setting,),
    ):  # fmt: skip
        key = (r["dataset"], r["kernel"])
        if key not in latest or (r["t"] or 0.0) > latest[key][1]:
            latest[key] = (r["grid"], r["t"] or 0.0)
    return [r for r in rows if latest[(r["dataset"], r["kernel"])][0] == r["grid"]]


def summary(store: ResultStore, setting: str | None = None, datasets=None, kernels=None,
            scorers=None) -> dict:  # fmt: skip
    """{(dataset, kernel, scorer): {"roc_auc", "pr_auc", "n_classes", "errors"}}: test metrics
    averaged over the classes (NaN if any class failed or is missing); "errors" maps each
    failure reason to the classes it stopped."""
    setting = setting or _latest_setting(store)
    rows = _test_rows(store, setting) if setting is not None else []
    n_cls = {}
    out: dict = {}
    for r in rows:
        if datasets and r["dataset"] not in datasets:
            continue
        if kernels and r["kernel"] not in kernels:
            continue
        if scorers and r["scorer"] not in scorers:
            continue
        key = (r["dataset"], r["kernel"], r["scorer"])
        e = out.setdefault(key, {"roc": [], "pr": [], "errors": {}})
        n_cls.setdefault(r["dataset"], set()).add(r["cls"])
        if r["error"]:
            e["errors"].setdefault(r["error"], []).append(r["cls"])
        else:
            e["roc"].append(r["roc_auc"])
            e["pr"].append(r["pr_auc"])
    res = {}
    for key, e in out.items():
        ok = not e["errors"] and len(e["roc"]) == len(n_cls[key[0]])
        res[key] = {
            "roc_auc": float(np.mean(e["roc"])) if ok else float("nan"),
            "pr_auc": float(np.mean(e["pr"])) if ok else float("nan"),
            "n_classes": len(e["roc"]),
            "classes": len(n_cls[key[0]]),
            "errors": {m: sorted(c) for m, c in sorted(e["errors"].items())},
        }
    return res


def _axes(res: dict):
    datasets = sorted({k[0] for k in res})
    kernels = _order({k[1] for k in res}, _KERNEL_ORDER)
    scorers = _order({k[2] for k in res}, scorer_names(word=False))  # the registry's order
    return datasets, kernels, scorers


_KERNEL_ORDER = [
    "flat_linear", "flat_rbf", "flat_poly", "integral_rbf", "integral_poly", "gak", "reservoir",
    "trunc_sig_linear", "trunc_sig_rbf", "trunc_sig_linear_order1", "trunc_sig_rbf_order1",
    "pde_sig_rbf", "pde_sig_linear", "rand_sig_tanh",
]  # fmt: skip


def _order(names, order):
    return [n for n in order if n in names] + sorted(n for n in names if n not in order)


def _matrix(res, metric, scorer, datasets, kernels) -> np.ndarray:
    return np.array(
        [[res.get((d, k, scorer), {}).get(metric, np.nan) for k in kernels] for d in datasets]
    )
