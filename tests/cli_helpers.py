"""Shared by the command-line test files: two-channel noisy sines, a long CSV writer, and a
model fitted by the command line."""

from __future__ import annotations

import csv

import numpy as np

from novelty.__main__ import main

CHANNELS = ["pressure", "flow"]


def series(n, T=24, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, T)
    base = np.stack([np.sin(t), np.cos(t)], axis=1)
    return base[None] + 0.1 * rng.normal(size=(n, T, 2)) + shift


def write_long(path, X, labels=None, header=("id", "time", *CHANNELS), order=None, ids=None):
    header = list(header) + (["label"] if labels is not None else [])
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        rows = []
        for i, x in enumerate(X):
            for t in range(len(x)):
                row = {"id": (ids or [f"s{k}" for k in range(len(X))])[i], "time": t}
                row.update(dict(zip(CHANNELS, x[t])))
                if labels is not None:
                    row["label"] = labels[i]
                rows.append(row)
        for r in rows[::-1] if order == "reversed" else rows:
            w.writerow([r.get(h, r.get({"t": "time"}.get(h, h))) for h in header])
    return path


def fit_model(folder):
    """A model fitted by the command line on 22 normal series (``folder/normal.csv``,
    ``folder/m.model``); returns ``folder``."""
    write_long(folder / "normal.csv", series(22, seed=1))
    assert (
        main(["fit", str(folder / "normal.csv"), "--model", str(folder / "m.model"), "--quiet"])
        == 0
    )
    return folder
