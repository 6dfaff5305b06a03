"""The eighth round of the window detector's design (issue 32, session 16): windows at full
resolution instead of 32 segment means.

Why: every member of the default reduces a window to segment means (PAA: ``n_segments`` = 32
at the base window, so a segment is w/32 steps long). PAA keeps the distance a lower bound of
the Euclidean one but removes every frequency above the segment rate. A novelty that lives in
that band (a tremor, a vibration, a spike train: accelerometers, ECGs, machine sensors) is
invisible to the default, while Sub-kNN, the best peer, compares raw windows. Seen on one
development stream (Epilepsy, 3 accelerometer channels): the ``"knn"`` member at the peers'
window scores AP 0.635 with 32 segments and 0.967 with one segment per step (Sub-kNN 0.974).

    python -m experiments.window_bench._eighth dev     # the 58 development streams
    python -m experiments.window_bench._eighth fresh   # the fresh set, once, only if dev passes

Candidates and rule, written before any candidate was scored on more than that one stream:

- ``exact``: the default detector with segments of one step (``n_segments`` >= every member
  window: the members compare the standardised windows themselves);
- ``seg128``: the default detector with ``n_segments=128`` (segments of w/128 steps).

**Development set:** all 58 streams of the tuning and confirmation halves (the confirmation half
has been looked at three times and no longer judges). A candidate passes if its mean AP >= the
default's + 0.015 and it wins at least as many streams as it loses against the default. The
passing candidate with the higher mean AP goes to the **fresh set** (24 streams never used,
:mod:`._data`), run once; it becomes the default only if there its mean AP >= the default's
and its mean rank among itself and the seven peers of ``RANK_PEERS`` is not worse than the
default's, and fit + score of the 100,000-step, 6-channel recording stays <= 60 s here.

**Result on the development set: no candidate passes** (``docs/windows.md``, "Eighth round").

**The fresh set's one second look** (written after the development result above and before
any result of the fresh set was seen): besides the standing figure of the shipped default, the
fresh set judges the only candidate of eight rounds that passed its development rule, the
seventh round's ``"ladder+stats"`` with ``member_scale="causal"`` (benchmark method
``ours:ladder+stats-causal``; on the confirmation half 0.460 against the default's 0.448, mean
rank 3.35 against 3.22, so not adopted then). It becomes the default only if (a) on the fresh
set its mean AP >= the default's and its mean rank among itself and the seven peers of
``RANK_PEERS`` <= the default's, and (b) over the confirmation half and the fresh set together
(47 streams unseen when it was chosen) the same two conditions hold.

    python -m experiments.window_bench._eighth fresh

**Its result: fails** (fresh: 0.407, rank 3.96, against the default's 0.443, 3.88; confirmation
and fresh: 0.433 against 0.445); the default is unchanged.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from ._explore import RANK_PEERS

OUT = Path("results/window_bench/h16")
CANDIDATES = {"default": {}, "exact": {"n_segments": 10**9}, "seg128": {"n_segments": 128}}
RULE = (0.015,)
#: where the benchmark's peer cells are, per half: ``h7/<half>`` for the two halves (the cells the
#: per-stream tables of docs/windows.md show; the older ``results/window_bench/confirmation``
#: folder holds stale peer cells of ec2_cpu_utilization_fe7f93, scored before that stream's
#: current build: Sub-kNN 0.279 there, 0.264 from the current stream)
PEER_CELLS = {h: Path("results/window_bench/h7") / h for h in ("tuning", "confirmation")}
PEER_CELLS["fresh"] = Path("results/window_bench/fresh")


def _cell(name: str, cand: str, folder: str) -> dict:
    from ._data import load_stream

    f = OUT / folder / f"{name.replace('/', '__')}__{cand}.npz"
    if not f.exists():
        import warnings

        from novelty import WindowNoveltyDetector

        s = load_stream(name)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            det = WindowNoveltyDetector(**CANDIDATES[cand]).fit(s.normal)
            sc = -det.score_samples(s.test)
        f.parent.mkdir(parents=True, exist_ok=True)
        np.savez(f, scores=sc, labels=s.labels, seconds=time.perf_counter() - t0)
        print(f"{name} {cand} {time.perf_counter() - t0:.1f}s", flush=True)
    z = np.load(f)
    return {"scores": z["scores"], "labels": z["labels"], "seconds": float(z["seconds"])}


def _peers(name: str, half: str) -> list:
    from sklearn.metrics import average_precision_score as ap

    row = []
    for p in RANK_PEERS:
        z = np.load(PEER_CELLS[half] / name.replace("/", "__") / f"{p}.npz")
        row.append(ap(z["labels"], z["scores"]))
    return row


def table(names_halves, cands, folder, log=print) -> dict:
    from scipy.stats import rankdata
    from sklearn.metrics import average_precision_score as ap

    A = {c: [] for c in cands}
    P = []
    for n, h in names_halves:
        for c in cands:
            z = _cell(n, c, folder)
            A[c].append(ap(z["labels"], z["scores"]))
        P.append(_peers(n, h))
    P = np.array(P)
    log(f"{len(P)} streams; peers {RANK_PEERS}: mean AP {np.round(P.mean(0), 3)}")
    res = {}
    for c in cands:
        a = np.array(A[c])
        R = np.vstack([rankdata(-np.r_[x, p]) for x, p in zip(a, P)]).mean(0)
        d = np.array(A["default"])
        res[c] = (a.mean(), R[0], (a > d).sum(), (a < d).sum())
        log(f"{c}: mean AP {a.mean():.3f}, rank {R[0]:.2f} (best peer {R[1:].min():.2f}), "
            f"W/L vs default {(a > d).sum()}/{(a < d).sum()}, vs Sub-kNN "
            f"{(a > P[:, 0]).sum()}/{(a < P[:, 0]).sum()}")  # fmt: skip
    log("| stream | " + " | ".join(cands) + " | sub-knn |")
    for i, (n, _) in enumerate(names_halves):
        log(f"| {n} | " + " | ".join(f"{A[c][i]:.3f}" for c in cands) + f" | {P[i, 0]:.3f} |")
    return res


def main(which: str) -> None:
    from ._data import half_of, stream_names

    if which == "dev":
        nh = [(n, half_of(n)) for n in stream_names() if half_of(n) in ("tuning", "confirmation")]
        res = table(nh, list(CANDIDATES), "dev")
        base = res["default"][0]
        ok = [c for c in CANDIDATES if c != "default" and res[c][0] >= base + RULE[0]
              and res[c][2] >= res[c][3]]  # fmt: skip
        print("passing:", ok or "none", "->", max(ok, key=lambda c: res[c][0]) if ok else "-")
    elif which == "fresh":
        second_look()
    else:
        raise SystemExit(f"unknown action {which!r}: dev or fresh")


SECOND = "ours:ladder+stats-causal"
#: where each half's cells of the default ("ours") and of the second look are
#: (the confirmation folder's ``ours.npz`` is the first round's default: the shipped default's
#: cells there are this round's development cells)
CELLS = {
    "confirmation": (lambda f: OUT / "dev" / f"{f}__default.npz",
                     lambda f: Path("results/window_bench/h15/confirmation") / f / f"{SECOND}.npz"),
    "fresh": (lambda f: Path("results/window_bench/fresh") / f / "ours.npz",
              lambda f: Path("results/window_bench/fresh") / f / f"{SECOND}.npz"),
}  # fmt: skip


def second_look(log=print) -> bool:
    """The fresh set's verdict on :data:`SECOND` (module docstring); True when adopted."""
    from scipy.stats import rankdata
    from sklearn.metrics import average_precision_score as ap

    from ._data import fresh_stream_names, half_of, stream_names

    verdict = True
    rows = {}
    for half in ("fresh", "confirmation"):
        own, second = CELLS[half]
        for n in [n for n in stream_names() + fresh_stream_names() if half_of(n) == half]:
            f = n.replace("/", "__")
            a = [np.load(own(f)), np.load(second(f))]
            a += [np.load(PEER_CELLS[half] / f / f"{p}.npz") for p in RANK_PEERS]
            rows[n] = (half, [ap(z["labels"], z["scores"]) for z in a])
    for which, keep in (("fresh", ("fresh",)), ("confirmation + fresh", ("fresh", "confirmation"))):
        A = np.array([r for h, r in rows.values() if h in keep])
        R_def = np.vstack([rankdata(-np.r_[r[0], r[2:]])[0] for r in A]).mean()
        R_sec = np.vstack([rankdata(-np.r_[r[1], r[2:]])[0] for r in A]).mean()
        ok = A[:, 1].mean() >= A[:, 0].mean() and R_sec <= R_def
        verdict &= ok
        log(f"{which} ({len(A)} streams): default AP {A[:, 0].mean():.3f} rank {R_def:.2f}; "
            f"{SECOND} AP {A[:, 1].mean():.3f} rank {R_sec:.2f}; Sub-kNN AP "
            f"{A[:, 2].mean():.3f}; conditions {'hold' if ok else 'FAIL'}")  # fmt: skip
    log(f"verdict: {'adopt' if verdict else 'keep the default'}")
    return verdict


if __name__ == "__main__":
    main(sys.argv[1])
