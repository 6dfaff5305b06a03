"""The fourth round of the window detector's design (issue 32, session 14, H1), on the TUNING
half only: alignment-invariant window statistics as members
(:class:`novelty.windows._engine.StatsFeaturizer`: per channel the window's mean, standard
deviation and roughness, standardised by the normal windows'), alone and added to the
``"ladder"``, scored offline from one-member cells cached as
:mod:`experiments.window_bench._explore` caches them (``results/window_bench/h7/cache``, the
same file names). The figures are in docs/windows.md ("Fourth round").

    python -m experiments.window_bench._fourth cache
    python -m experiments.window_bench._fourth table
    python -m experiments.window_bench._fourth detector

A statistics member is ``st:multiple:1`` (``detector="stats-knn"``: the statistics of the
whole window) or ``st2:multiple:2`` (``"stats2-knn"``: of its two halves), its window
``multiple`` x the automatic window of the normal data, clipped to [16, T_normal / 4], as
``_explore`` clips the level and shape members. Every member's test novelty ``s`` is put on
its held-out calibration ``c`` as ``(s - median(c)) / (q99(c) - median(c))`` (the detector's
"tail" scale), averaged within each family (level, shape, statistics) and the families
weighted; the ladder computed so is the offline 0.539 of the third round.

The candidates (``CANDIDATES``, at most 8) and the adoption rule (``RULE``) were written
before any statistics member was scored. A candidate is recommended only if its mean AP is at
least the offline ladder's + 0.015, it beats the ladder on at least 19 of the 35 streams, and
its mean rank among itself and the seven peers is not worse than the ladder's (computed the
same way); of those that pass, the one with the largest mean AP.

Only tuning-half streams are ever loaded or scored here (an assertion guards every load).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ._data import half_of, stream_names
from ._explore import OUT, _file
from ._rounds import cache_members, candidate_table
from ._third import _peer_ap, _scaled

LEVEL = ["raw:0.5:16", "raw:1:32", "raw:2:64", "raw:4:128"]
SHAPE = ["z:1:32"]


def _st(*mults: str, halves: bool = False) -> list[str]:
    return [f"st2:{m}:2" if halves else f"st:{m}:1" for m in mults]


#: name: ((members, family weight), ...), written before any statistics member was scored
CANDIDATES = {
    "S1 alone": ((_st("1"), 1.0),),
    "S2 alone": ((_st("2"), 1.0),),
    "S4 alone": ((_st("4"), 1.0),),
    "ladder + S1 (1/2, 1/4, 1/4)": ((LEVEL, 1 / 2), (SHAPE, 1 / 4), (_st("1"), 1 / 4)),
    "ladder + S1 (thirds)": ((LEVEL, 1 / 3), (SHAPE, 1 / 3), (_st("1"), 1 / 3)),
    "ladder + S1,2,4 (4/9, 2/9, 1/3)": (
        (LEVEL, 4 / 9),
        (SHAPE, 2 / 9),
        (_st("1", "2", "4"), 1 / 3),
    ),  # fmt: skip
    "ladder + halves S1 (1/2, 1/4, 1/4)": (
        (LEVEL, 1 / 2),
        (SHAPE, 1 / 4),
        (_st("1", halves=True), 1 / 4),
    ),  # fmt: skip
    "ladder + S.5,1,2,4 (4/9, 2/9, 1/3)": (
        (LEVEL, 4 / 9),
        (SHAPE, 2 / 9),
        (_st("0.5", "1", "2", "4"), 1 / 3),
    ),  # fmt: skip
}
LADDER = ((LEVEL, 2 / 3), (SHAPE, 1 / 3))
#: the adoption rule: (AP margin over the ladder, wins against the ladder of 35)
RULE = (0.015, 19)


def _names() -> list[str]:
    names = [n for n in stream_names() if half_of(n) == "tuning"]
    assert all(half_of(n) == "tuning" for n in names)
    return names


def _load(n: str, m: str):
    assert half_of(n) == "tuning", n  # never a confirmation stream
    return np.load(_file(OUT, n, m, "mean"))


def _score(s, kind, w, seg):
    from novelty import WindowNoveltyDetector

    if kind not in ("st", "st2"):
        raise ValueError(f"{kind}: cache level and shape members with _explore cache")
    det = WindowNoveltyDetector(
        detector="stats-knn" if kind == "st" else "stats2-knn", window=w, aggregate="mean"
    ).fit(s.normal)
    return -det.score_samples(s.test), det.calibration_scores_


def cache(members: list[str], log=print) -> None:
    """Fill the missing statistics cells of the tuning half (resumable)."""
    cache_members(members, _score, log)


def scores(n: str, spec) -> np.ndarray:
    """The ensemble's step novelty on stream ``n``: family means of tail-scaled members,
    weighted."""
    return sum(wt * np.mean([_scaled(_load(n, m), "q99") for m in ms], 0) for ms, wt in spec)


def table(log=print) -> None:
    names = _names()
    labels = {n: _load(n, LEVEL[0])["labels"] for n in names}
    cands = {name: (lambda n, spec=spec: scores(n, spec)) for name, spec in CANDIDATES.items()}
    candidate_table(names, labels, lambda n: scores(n, LADDER), cands, RULE, log)


def detector_table(out: Path = Path("results/window_bench/h14/tuning"), log=print) -> None:
    """The benchmark's cells of ``ours`` (the default ladder) and ``ours:ladder+stats``
    written under ``out`` by ``bench_windows.py run --half tuning``, against the peers' cells
    of the tuning half (``_explore.PEERS``): mean AP, mean rank among itself and the seven
    peers, W/L against Sub-kNN and against ``ours``."""
    from scipy.stats import rankdata
    from sklearn.metrics import average_precision_score as ap

    names = _names()
    peers = _peer_ap()
    P = np.array([peers[n] for n in names])

    def cell(n, m):
        assert half_of(n) == "tuning", n
        z = np.load(out / n.replace("/", "__") / f"{m}.npz")
        return ap(z["labels"].astype(int), z["scores"].astype(np.float64))

    base = np.array([cell(n, "ours") for n in names])
    log("| method (inside the detector) | mean AP | rank | best peer's rank | W/L vs Sub-kNN | "
        "W/L vs ours |")  # fmt: skip
    log("|---|---|---|---|---|---|")
    for m in ("ours", "ours:ladder+stats"):
        aps = base if m == "ours" else np.array([cell(n, m) for n in names])
        R = np.vstack([rankdata(-np.r_[a, p]) for a, p in zip(aps, P)]).mean(0)
        log(f"| {m} | {aps.mean():.3f} | {R[0]:.2f} | {R[1:].min():.2f} | "
            f"{(aps > P[:, 0]).sum()}/{(aps < P[:, 0]).sum()} | "
            f"{(aps > base).sum()}/{(aps < base).sum()} |")  # fmt: skip


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "table"
    if what == "detector":
        detector_table(log=lambda s: print(s, flush=True))
    elif what == "cache":
        cache(_st("0.5", "1", "2", "4") + _st("1", halves=True), log=lambda s: print(s, flush=True))
    else:
        table(log=lambda s: print(s, flush=True))
