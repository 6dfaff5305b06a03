"""The third round of the window detector's design (issue 32, H2), on the TUNING half only:
window rules, member scales, combinations, scale ladders and a label-free choice of member,
scored offline from the one-member cells cached by :mod:`experiments.window_bench._explore`
(``results/window_bench/h7/cache``). The figures are in docs/windows.md ("Third round").

    python -m experiments.window_bench._third windows
    python -m experiments.window_bench._third ensembles
    python -m experiments.window_bench._third select
    python -m experiments.window_bench._third synthetic

``windows``: per tuning stream, the peers' window (the series length for class streams), the
automatic window, the highest autocorrelation peak, the dominant Fourier period and a
SuSS-like window (the shortest window of a geometric grid whose windows' mean, standard
deviation and range are, on average, close to the whole series'; score threshold 0.89).

``ensembles``: each spec ``(level members, shape members, level weight, scale)``: every
member's test novelty ``s`` on its calibration ``c`` as ``(s - median(c)) / scale(c)``,
averaged within each family (level, shape) and the two families weighted ``w`` and
``1 - w``; "flat" specs weight every member equally. Scales: "iqr", "qNN" (the NN-th
percentile minus the median), "qmax", "logmed" (``log(s / median)``), "logp" (``-log`` of the
member's conformal p-value).

``select``: per stream, the one member with the smallest (or largest) value of a statistic of
its held-out calibration novelties, and the per-stream oracle.

``synthetic``: member weights from the normal data alone by synthetic anomalies: each
one-member detector of the ladder is fitted on the first 70 % of the normal stretch and scores
the last 30 % with six synthetic anomalies of one automatic window each (amplitude x 2,
amplitude x 0.3, time reversal, a level shift of one standard deviation, added noise of half a
standard deviation, a 1.5x time stretch; three seeds); each member's mean AP on them gives its
weight (or picks the member) in the combination of the cached test novelties.
"""

from __future__ import annotations

import sys

import numpy as np

from ._data import half_of, load_stream, stream_names
from ._explore import OUT, PEERS, RANK_PEERS, _file, _windows


def _names() -> list[str]:
    return [n for n in stream_names() if half_of(n) == "tuning"]


def _load(n: str, m: str, agg: str = "mean"):
    return np.load(_file(OUT, n, m, agg))


def _scaled(cell, how: str) -> np.ndarray:
    c, s = cell["cal"], cell["nov"]
    med = np.median(c)
    if how == "iqr":
        q = np.subtract(*np.percentile(c, [75, 25]))
    elif how.startswith("q"):
        q = (np.max(c) if how == "qmax" else np.percentile(c, float(how[1:]))) - med
    elif how == "logmed":
        return np.log(np.maximum(s, 1e-12) / max(med, 1e-12))
    elif how == "logp":
        cs = np.sort(c)
        k = len(cs) - np.searchsorted(cs, s, side="left")
        return -np.log((1 + k) / (len(cs) + 1))
    else:
        raise ValueError(how)
    return (s - med) / (q if q > 0 else 1.0)


def _peer_ap() -> dict:
    from sklearn.metrics import average_precision_score as ap

    out = {}
    for n in _names():
        row = []
        for p in RANK_PEERS:
            z = np.load(PEERS / n.replace("/", "__") / f"{p}.npz")
            row.append(ap(z["labels"], z["scores"]))
        out[n] = row
    return out


def _summary(aps: np.ndarray, P: np.ndarray) -> str:
    from scipy.stats import rankdata

    R = np.vstack([rankdata(-np.r_[a, p]) for a, p in zip(aps, P)]).mean(0)
    return (f"AP {aps.mean():.3f} rank {R[0]:.2f} best peer {R[1:].min():.2f} "
            f"W/L vs sub-knn {(aps > P[:, 0]).sum()}/{(aps < P[:, 0]).sum()}")  # fmt: skip


def ensemble(levels, shapes, w, scale, combine="mean", flat=False) -> str:
    from sklearn.metrics import average_precision_score as ap

    peers = _peer_ap()
    aps = []
    for n in _names():
        zl = [_scaled(_load(n, m), scale) for m in levels]
        zs = [_scaled(_load(n, m), scale) for m in shapes]
        if flat or not zs or combine != "mean":
            Z = np.stack(zl + zs)
            sc = Z.mean(0) if combine == "mean" else Z.max(0)
        else:
            sc = w * np.mean(zl, 0) + (1 - w) * np.mean(zs, 0)
        aps.append(ap(_load(n, levels[0])["labels"], sc))
    return _summary(np.array(aps), np.array([peers[n] for n in _names()]))


def _m(kind: str, *mults: str) -> list[str]:
    seg = {"0.5": 16, "1": 32, "2": 64, "4": 128}
    return [f"{kind}:{m}:{seg[m]}" if m != "u" else f"{kind}:u:32" for m in mults]


SPECS = {  # name: (levels, shapes, level weight, flat)
    "L1,2 Z1 (multiscale)": (_m("raw", "1", "2"), _m("z", "1"), 2 / 3, True),
    "L1,2,4 Z1 flat": (_m("raw", "1", "2", "4"), _m("z", "1"), 2 / 3, True),
    "L.5,1,2 Z1 flat": (_m("raw", "0.5", "1", "2"), _m("z", "1"), 2 / 3, True),
    "L.5,1,2,4 Z1 flat": (_m("raw", "0.5", "1", "2", "4"), _m("z", "1"), 2 / 3, True),
    "L.5,1,2,4 Z1 2/3 (ladder)": (_m("raw", "0.5", "1", "2", "4"), _m("z", "1"), 2 / 3, False),
    "L.5,1,2,4 Z1 1/2": (_m("raw", "0.5", "1", "2", "4"), _m("z", "1"), 1 / 2, False),
    "L.5,1,2,4 Z.5,1,2,4 2/3": (
        _m("raw", "0.5", "1", "2", "4"),
        _m("z", "0.5", "1", "2", "4"),
        2 / 3,
        False,
    ),  # fmt: skip
    "L.5,1,2,4,u Z1 2/3": (_m("raw", "0.5", "1", "2", "4", "u"), _m("z", "1"), 2 / 3, False),
}


def windows_table(log=print) -> None:
    from novelty.windows._period import MAX_WINDOW, MIN_WINDOW

    for n in _names():
        s = load_stream(n)
        x = s.normal
        sd = x.std(0)
        z = (x - x.mean(0)) / np.where(sd > 0, sd, 1)
        period, unit = _windows([z])
        upper = min(MAX_WINDOW, len(z) // 4)
        p = (np.abs(np.fft.rfft(z, axis=0)) ** 2).sum(1)
        f = np.fft.rfftfreq(len(z))
        lag = np.where(f > 0, 1 / np.where(f > 0, f, 1), np.inf)
        ok = (lag >= MIN_WINDOW) & (lag <= upper)
        fft = int(round(lag[ok][np.argmax(p[ok])])) if ok.any() else period
        log(f"{n:55s} peer {s.window:4d} auto {period:4d} highest-peak {unit:4d} "
            f"fft {fft:4d} suss {_suss(z, upper):4d}")  # fmt: skip


def _suss(z: np.ndarray, upper: int, threshold: float = 0.89) -> int:
    from novelty.windows._period import MIN_WINDOW

    span = np.ptp(z, 0)
    x = (z - z.min(0)) / np.where(span > 0, span, 1)
    stats = (x.mean(0), x.std(0), np.ptp(x, 0))

    def dist(w):
        v = np.lib.stride_tricks.sliding_window_view(x, w, axis=0)
        m, s, r = v.mean(-1), v.std(-1), v.max(-1) - v.min(-1)
        d = (m - stats[0]) ** 2 + (s - stats[1]) ** 2 + (r - stats[2]) ** 2
        return float((np.sqrt(d) / np.sqrt(w)).mean())

    hi, lo = dist(1), dist(len(x) - 1)
    for w in np.unique(np.round(np.geomspace(MIN_WINDOW, upper, 24)).astype(int)):
        if 1 - (dist(int(w)) - lo) / (hi - lo) > threshold:
            return int(w)
    return int(upper)


STATS = {
    "tail/median": lambda c: (np.percentile(c, 99) - np.median(c)) / max(np.median(c), 1e-12),
    "iqr/median": lambda c: np.subtract(*np.percentile(c, [75, 25])) / max(np.median(c), 1e-12),
    "cv": lambda c: c.std() / max(c.mean(), 1e-12),
    "tail/iqr": lambda c: (
        (np.percentile(c, 99) - np.median(c)) / max(np.subtract(*np.percentile(c, [75, 25])), 1e-12)
    ),
}


def select(members: list[str], log=print) -> None:
    from sklearn.metrics import average_precision_score as ap

    peers = _peer_ap()
    names = _names()
    P = np.array([peers[n] for n in names])
    A = np.array([[ap(_load(n, m)["labels"], _load(n, m)["nov"]) for m in members]
                  for n in names])  # fmt: skip
    log(f"{members}: each {A.mean(0).round(3)}, oracle {A.max(1).mean():.3f}")
    for name, f in STATS.items():
        S = np.array([[f(_load(n, m)["cal"]) for m in members] for n in names])
        for pick, idx in (("min", S.argmin(1)), ("max", S.argmax(1))):
            log(f"  {name} {pick}: {_summary(A[np.arange(len(names)), idx], P)}")


def _perturbed(x: np.ndarray, w: int, rng, k: int = 6):
    """``x`` with ``k`` synthetic anomalies of ``w`` steps (module docstring), and labels."""
    x, lab = x.copy(), np.zeros(len(x), dtype=int)
    L = max(8, min(w, len(x) // (3 * k)))
    for i, a in enumerate(np.sort(rng.choice(len(x) - L, size=k, replace=False))):
        seg = x[a : a + L]
        mu, sd = seg.mean(0), x.std(0)
        new = [mu + 2.0 * (seg - mu), mu + 0.3 * (seg - mu), seg[::-1], seg + sd,
               seg + 0.5 * sd * rng.normal(size=seg.shape),
               np.stack([np.interp(np.arange(L) / 1.5, np.arange(L), seg[:, c])
                         for c in range(seg.shape[1])], 1)][i % 6]  # fmt: skip
        x[a : a + L], lab[a : a + L] = new, 1
    return x, lab


def synthetic(log=print) -> None:
    from sklearn.metrics import average_precision_score as ap

    from novelty import WindowNoveltyDetector

    members = _m("raw", "0.5", "1", "2", "4") + _m("z", "1")
    names = _names()
    peers = _peer_ap()
    P = np.array([peers[n] for n in names])
    W = []
    for n in names:
        x = load_stream(n).normal
        sd = x.std(0)
        w0, _ = _windows([(x - x.mean(0)) / np.where(sd > 0, sd, 1)])
        cut = int(0.7 * len(x))
        row = []
        for m in members:
            kind, mult, seg = m.split(":")
            w = int(np.clip(round(float(mult) * w0), 16, len(x) // 4))
            w = min(w, cut // 4, (len(x) - cut) // 2)
            det = WindowNoveltyDetector(detector="knn" if kind == "raw" else "znorm-knn",
                                        window=w, n_segments=int(seg)).fit(x[:cut])  # fmt: skip
            row.append(np.mean([ap(lab, -det.score_samples(xp)) for xp, lab in
                                (_perturbed(x[cut:], w0, np.random.default_rng(r))
                                 for r in range(3))]))  # fmt: skip
        W.append(row)
        log(f"{n}: synthetic AP per member {np.round(row, 3)}")
    W = np.array(W)
    ladder = np.array([1, 1, 1, 1, 2]) / 6
    rules = {
        "ladder (fixed weights)": lambda a: ladder,
        "the best member": lambda a: np.eye(5)[np.argmax(a)],
        "the best level member 2/3, shape 1/3": lambda a: np.r_[
            np.eye(4)[np.argmax(a[:4])] * 2 / 3, 1 / 3
        ],
        "weights = AP": lambda a: a,
        "weights = AP^4": lambda a: a**4,
        "ladder x AP": lambda a: ladder * a,
        "weights = AP - min AP": lambda a: a - a.min() + 1e-9,
    }
    for name, rule in rules.items():
        aps = []
        for n, a in zip(names, W):
            Z = np.stack([_scaled(_load(n, m), "q99") for m in members])
            aps.append(ap(_load(n, members[0])["labels"], np.average(Z, 0, weights=rule(a))))
        log(f"{name:40s} {_summary(np.array(aps), P)}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "ensembles"
    if what == "windows":
        windows_table(log=lambda s: print(s, flush=True))
    elif what == "synthetic":
        synthetic(log=lambda s: print(s, flush=True))
    elif what == "select":
        select(_m("raw", "0.5", "1", "2", "4") + _m("z", "1"))
        select(_m("raw", "0.5", "1", "2", "4"))
    else:
        for name, (lv, sh, w, flat) in SPECS.items():
            for scale in ("iqr", "q99"):
                print(f"{name:28s} {scale:4s} {ensemble(lv, sh, w, scale, flat=flat)}",
                      flush=True)  # fmt: skip
