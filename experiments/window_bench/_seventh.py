"""The seventh round of the window detector's design (issue 32, session 15), on the TUNING half
only: members put on one scale by what they have seen so far of the stream, not by the
calibration alone.

Why: every ensemble so far puts a member's step novelty ``s`` on the scale of its held-out
calibration ``c``, ``(s - median(c)) / (q99(c) - median(c))``. The rounds' readings show that
scale failing when the stream being scored differs from the held-out normal blocks as a whole:
a level drift puts every test step of one member far above its calibration (occupancy_t4013:
the statistics member's test normal steps at z = 2.8 at their 99th percentile), or the
held-out blocks, scored against less of the normal stretch, sit above every test step
(BasicMotions: all test steps below the calibration median), so in the mean one member's
offset or spread drowns another's separation. A causal fix, usual in streaming detection (as
Numenta's anomaly likelihood rescales raw scores by their recent past): the scale of a member
at step ``t`` is taken from its calibration novelties together with its own step novelties of
the same stream up to ``t - g`` (``g`` the longest member window, so a step's own windows are
not in its scale), recomputed every 64 steps. Streaming keeps it (only the past is used); a
stream of pure normal data keeps about the calibration's scale.

    python -m experiments.window_bench._seventh table

Candidates and rule, written before any of them was scored (all from cached one-member cells
of ``results/window_bench/h7/cache``; members and family weights as :mod:`._fourth` and
:mod:`._sixth` combine them):

- ``ladder, causal scale``: the ladder's five members;
- ``ladder + S.5,1,2,4 (4/9, 2/9, 1/3), causal scale``: the fourth round's ``"ladder+stats"``;
- ``ladder + rocket@w (1/2, 1/2), causal scale``: the sixth round's best ensemble.

A candidate is recommended only if its mean AP >= the offline ladder's (0.539, calibration
scale) + 0.015, it beats that ladder on at least 19 of the 35 streams, and its mean rank among
itself and the seven peers is not worse than the ladder's. If one passes, it is built into the
detector, run inside it on the tuning half, then on the confirmation half ONCE, and becomes
the default only if its confirmation mean AP is at least the shipped default's (0.448) and its
mean rank not worse (3.22), with the per-step flag rate on pure normal data still within its
binomial bounds.

Only tuning-half streams are loaded (an assertion guards every load).
"""

from __future__ import annotations

import numpy as np

from ._fourth import LADDER, LEVEL, SHAPE, _load, _names, _st
from ._rounds import candidate_table
from ._third import _scaled

#: recompute a member's causal scale every so many steps
EVERY = 64
STATS = _st("0.5", "1", "2", "4")

#: name: ((members, family weight), ...), written before any of them was scored
CANDIDATES = {
    "ladder, causal scale": LADDER,
    "ladder + S.5,1,2,4 (4/9, 2/9, 1/3), causal scale": (
        (LEVEL, 4 / 9),
        (SHAPE, 2 / 9),
        (STATS, 1 / 3),
    ),  # fmt: skip
    "ladder + rocket@w (1/2, 1/2), causal scale": (
        (LEVEL, 1 / 3),
        (SHAPE, 1 / 6),
        (["rk:1"], 1 / 2),
    ),  # fmt: skip
}
RULE = (0.015, 19)


def causal_scaled(cell, gap: int, every: int = EVERY) -> np.ndarray:
    """A member's step novelty on the scale of its calibration and its own step novelties up
    to ``gap`` steps back: ``(s_t - median(H_t)) / (q99(H_t) - median(H_t))``, ``H_t`` = the
    calibration novelties and ``s_0 .. s_{t-gap}``, ``H_t`` renewed every ``every`` steps."""
    c, s = np.asarray(cell["cal"], float), np.asarray(cell["nov"], float)
    out = np.empty_like(s)
    for t0 in range(0, len(s), every):
        past = s[: max(0, t0 - gap)]
        h = np.concatenate([c, past])
        med = np.median(h)
        q = np.percentile(h, 99) - med
        out[t0 : t0 + every] = (s[t0 : t0 + every] - med) / (q if q > 0 else 1.0)
    return out


def scores(n: str, spec) -> np.ndarray:
    cells = {m: _load(n, m) for ms, _ in spec for m in ms}
    gap = max(int(c["w"]) for c in cells.values())
    return sum(wt * np.mean([causal_scaled(cells[m], gap) for m in ms], 0) for ms, wt in spec)


def _ladder(n: str) -> np.ndarray:
    return sum(wt * np.mean([_scaled(_load(n, m), "q99") for m in ms], 0) for ms, wt in LADDER)


def table(log=print) -> None:
    names = _names()
    labels = {n: _load(n, LEVEL[0])["labels"] for n in names}
    cands = {name: (lambda n, spec=spec: scores(n, spec)) for name, spec in CANDIDATES.items()}
    candidate_table(names, labels, _ladder, cands, RULE, log)


if __name__ == "__main__":
    table(log=lambda s: print(s, flush=True))
