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
``e`` 5 % of the normal windows' median (:data:`novelty.windows._engine.CID_FLOOR`): windows
of equal complexity compare as before, a window of other activity is pushed away from every
normal window. One change, from the literature, not a new family.

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
import time

import numpy as np

from ._data import half_of, load_stream
from ._explore import OUT, _file, _windows
from ._fourth import LADDER, LEVEL, SHAPE, _load, _names
from ._third import _peer_ap, _scaled

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


def cache(members: list[str], log=print) -> None:
    """Fill the missing corrected cells of the tuning half (resumable)."""
    from novelty import WindowNoveltyDetector

    OUT.mkdir(parents=True, exist_ok=True)
    for name in _names():
        assert half_of(name) == "tuning", name
        s = None
        for c in members:
            f = _file(OUT, name, c, "mean")
            if f.exists():
                continue
            kind, mult, seg = c.split(":")
            if s is None:
                s = load_stream(name)
                x = s.normal
                sd = x.std(0)
                w0, _ = _windows([(x - x.mean(0)) / np.where(sd > 0, sd, 1)])
            w = int(np.clip(round(float(mult) * w0), 16, len(s.normal) // 4))
            t0 = time.process_time()
            det = WindowNoveltyDetector(
                detector="cid-znorm-knn" if kind == "zcid" else "cid-knn",
                window=w,
                n_segments=int(seg),
                aggregate="mean",
            ).fit(s.normal)
            nov = -det.score_samples(s.test)
            np.savez(f, nov=nov, cal=det.calibration_scores_, labels=s.labels, w=w,
                     cpu=time.process_time() - t0)  # fmt: skip
            log(f"{name} {c} window {w}")


def scores(n: str, spec) -> np.ndarray:
    return sum(wt * np.mean([_scaled(_load(n, m), "q99") for m in ms], 0) for ms, wt in spec)


def table(log=print) -> None:
    from scipy.stats import rankdata
    from sklearn.metrics import average_precision_score as ap

    names = _names()
    peers = _peer_ap()
    P = np.array([peers[n] for n in names])
    labels = {n: _load(n, LEVEL[0])["labels"] for n in names}
    lad = np.array([ap(labels[n], scores(n, LADDER)) for n in names])

    def summary(aps):
        R = np.vstack([rankdata(-np.r_[a, p]) for a, p in zip(aps, P)]).mean(0)
        return aps.mean(), R[0], R[1:].min()

    lad_ap, lad_rank, lad_peer = summary(lad)
    log(f"{len(names)} tuning streams; peers' mean AP {np.round(P.mean(0), 3)} (Sub-kNN first)")
    log("| candidate | mean AP | rank | best peer's rank | W/L vs Sub-kNN | W/L vs ladder | "
        "rule |")  # fmt: skip
    log("|---|---|---|---|---|---|---|")
    log(f"| ladder (offline) | {lad_ap:.3f} | {lad_rank:.2f} | {lad_peer:.2f} | "
        f"{(lad > P[:, 0]).sum()}/{(lad < P[:, 0]).sum()} | - | - |")  # fmt: skip
    per, passed = {}, []
    for name, spec in CANDIDATES.items():
        aps = np.array([ap(labels[n], scores(n, spec)) for n in names])
        per[name] = aps
        m, r, b = summary(aps)
        wins = int((aps > lad).sum())
        ok = m >= lad_ap + RULE[0] and wins >= RULE[1] and r <= lad_rank
        ok = ok and name not in NOT_ELIGIBLE
        if ok:
            passed.append((m, name))
        log(f"| {name} | {m:.3f} | {r:.2f} | {b:.2f} | {(aps > P[:, 0]).sum()}/"
            f"{(aps < P[:, 0]).sum()} | {wins}/{(aps < lad).sum()} | "
            f"{'PASS' if ok else 'fail'} |")  # fmt: skip
    log("")
    log(f"recommended: {max(passed)[1] if passed else 'none'}")
    log("")
    cols = list(CANDIDATES)
    log("| stream | ladder | sub-knn | " + " | ".join(cols) + " |")
    log("|---" * (len(cols) + 3) + "|")
    for i, n in enumerate(names):
        log(f"| {n} | {lad[i]:.3f} | {P[i, 0]:.3f} | "
            + " | ".join(f"{per[c][i]:.3f}" for c in cols) + " |")  # fmt: skip


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "table"
    if what == "cache":
        cache(CID_LEVEL + CID_SHAPE, log=lambda s: print(s, flush=True))
    else:
        table(log=lambda s: print(s, flush=True))
