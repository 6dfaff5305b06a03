"""Shared helpers of the experiments tests: a small BasicMotions run, store readers and a tiny
three-class data set."""

import sqlite3
from pathlib import Path

import numpy as np

from experiments._protocol import Dataset
from experiments._runner import RunOptions

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(
    datasets=["BasicMotions"], preset="quick", folds=2, repeats=1, time_channel=[False, True],
    max_rank=8, progress=False, verbose=False,
)  # fmt: skip
FAST_KERNELS = ["flat_rbf", "integral_poly"]
FAST_SCORERS = ["conformance", "mahalanobis", "sse"]


def _opts(store, **kw) -> RunOptions:
    base = dict(SMALL, kernels=FAST_KERNELS, scorers=FAST_SCORERS, store=str(store))
    base.update(kw)
    return RunOptions(**base)


def _test_table(path) -> list[tuple]:
    con = sqlite3.connect(str(path))
    rows = con.execute(
        "SELECT dataset, cls, kernel, scorer, params, time_channel, alpha, rank, cv_objective,"
        " roc_auc, pr_auc, error FROM test ORDER BY dataset, cls, kernel, scorer"
    ).fetchall()
    con.close()
    return rows


def _cv_table(path) -> list[tuple]:
    con = sqlite3.connect(str(path))
    rows = con.execute(
        "SELECT dataset, cls, kernel, params, time_channel, scorer, roc, pr, error FROM cv "
        "ORDER BY dataset, cls, kernel, params, time_channel, scorer"
    ).fetchall()
    con.close()
    return rows


def run_cli(argv, capsys) -> tuple[int, str, str]:
    """``python -m experiments`` in process: (exit status, stdout, stderr); argparse's own
    errors (SystemExit) give their status too."""
    from experiments.__main__ import main

    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def tiny_sines(seed=5) -> Dataset:
    """Three classes (12, 9, 7 training series; 6 test series each), T = 10, d = 3: noisy
    sines of class-specific frequency (1, 1.6, 2.3) and random phases."""
    rng = np.random.default_rng(seed)

    def draw(sizes):
        y = np.repeat(np.array(["a", "b", "c"]), sizes)
        freq = np.select([y == "a", y == "b"], [1.0, 1.6], 2.3)[:, None, None]
        t = np.linspace(0, 1, 10)[None, :, None]
        X = np.sin(2 * np.pi * freq * t + rng.uniform(0, 6, (len(y), 1, 3)))
        return X + 0.3 * rng.normal(size=X.shape), y

    Xtr, ytr = draw([12, 9, 7])
    Xte, yte = draw([6, 6, 6])
    return Dataset("tiny", Xtr, ytr, Xte, yte)
