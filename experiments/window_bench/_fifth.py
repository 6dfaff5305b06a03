"""The fifth round of the window detector's design (issue 32, session 15), on the TUNING half
only: the complexity-invariant distance (CID; Batista, Keogh, Tataw and de Souza, "CID: an
efficient complexity-invariant distance for time series", 2014) for the ladder's members.

Why: a raw-window nearest-neighbour distance ranks a LOW-activity window close to every
high-activity normal window (a flat window is at the normal windows' energy from each of them,
while two normal windows out of phase are at about twice that), so a still posture inserted
among running (BasicMotions: the ladder's AP 0.052, Sub-kNN's 0.181) looks normal. The
fourth round's statistics members caught it alone (0.955) but lost shape differences in any
mean with the ladder. CID keeps the shape distance and multiplies it by the ratio of the two
windows' complexities, ``(max(c_q, c_r) + e) / (min(c_q, c_r) + e)`` with ``c`` the
root-mean-square first difference of the (channel-standardised) window at full resolution and
``e`` 5 % of the normal windows' median, at least 0.0025
(:data:`novelty.windows._engine.CID_FLOOR`): windows of equal complexity compare as before, a
window of other activity is pushed away from every normal window. One change, from the
literature, not a new family.

    python -m experiments.window_bench._fifth cache
    python -m experiments.window_bench._fifth table

Members are cached as :mod:`experiments.window_bench._explore` caches them
(``results/window_bench/h7/cache``, same file names): ``cid:multiple:segments`` (a level
member with the correction, ``detector="cid-knn"``) and ``zcid:1:32`` (the shape member with
it, its complexity taken on the z-normalised window, ``detector="cid-znorm-knn"``). Every
member on its held-out calibration's tail scale, family means weighted, as :mod:`._fourth`
scores the ladder (its offline 0.539); the candidates below are such offline ensembles.

Candidates and rule, written before any corrected member was scored:

- ``ladder-cid``: the ladder with its four level members corrected, the shape member as is;
- ``ladder-cid-all``: every member corrected;
- ``cid 1 alone``: one corrected level member at the window (for the reading only: never
  recommended alone).

A candidate is recommended only if its mean AP >= the offline ladder's + 0.015, it beats the
ladder on at least 19 of the 35 streams, and its mean rank among itself and the seven peers
is not worse than the ladder's (the fourth round's rule). If one passes it is run inside the
detector on the tuning half, then on the confirmation half ONCE (that half's third use;
stated in docs/windows.md), and becomes the default only if its confirmation mean AP is at
least the shipped default's there (0.448) and its mean rank not worse (3.22).

Only tuning-half streams are ever loaded or scored here (an assertion guards every load).
"""

from __future__ import annotations

import sys

import numpy as np

from ._fourth import LADDER, LEVEL, SHAPE, _load, _names
from ._rounds import cache_members, candidate_table
from ._third import _scaled

CID_LEVEL = ["cid:0.5:16", "cid:1:32", "cid:2:64", "cid:4:128"]
CID_SHAPE = ["zcid:1:32"]

#: name: ((members, family weight), ...), written before any corrected member was scored
CANDIDATES = {
    "ladder-cid": ((CID_LEVEL, 2 / 3), (SHAPE, 1 / 3)),
    "ladder-cid-all": ((CID_LEVEL, 2 / 3), (CID_SHAPE, 1 / 3)),
    "cid 1 alone (reading only)": ((["cid:1:32"], 1.0),),
}
NOT_ELIGIBLE = {"cid 1 alone (reading only)"}
#: the adoption rule: (AP margin over the ladder, wins against the ladder of 35)
RULE = (0.015, 19)


def _score(s, kind, w, seg):
    from novelty import WindowNoveltyDetector

    det = WindowNoveltyDetector(
        detector="cid-znorm-knn" if kind == "zcid" else "cid-knn",
        window=w,
        n_segments=int(seg),
        aggregate="mean",
    ).fit(s.normal)
    return -det.score_samples(s.test), det.calibration_scores_


def cache(members: list[str], log=print) -> None:
    """Fill the missing corrected cells of the tuning half (resumable)."""
    cache_members(members, _score, log)


def scores(n: str, spec) -> np.ndarray:
    return sum(wt * np.mean([_scaled(_load(n, m), "q99") for m in ms], 0) for ms, wt in spec)


def table(log=print) -> None:
    names = _names()
    labels = {n: _load(n, LEVEL[0])["labels"] for n in names}
    cands = {name: (lambda n, spec=spec: scores(n, spec)) for name, spec in CANDIDATES.items()}
    candidate_table(names, labels, lambda n: scores(n, LADDER), cands, RULE, log, NOT_ELIGIBLE)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "table"
    if what == "cache":
        cache(CID_LEVEL + CID_SHAPE, log=lambda s: print(s, flush=True))
    else:
        table(log=lambda s: print(s, flush=True))
