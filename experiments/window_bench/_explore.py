"""The design exploration of the window detector on the TUNING half only (issue 32, second
round): one-member detectors of several window lengths, segment counts, neighbours and step
aggregations, cached, and their ensembles scored offline.

A member is ``kind:multiple:segments[:kK]``: ``kind`` "raw" (channel-standardised windows,
``detector="knn"``) or "z" (z-normalised windows, ``detector="znorm-knn"``); the window is
``multiple`` x the automatic window of the normal data, clipped to [16, T_normal / 4], or,
for ``multiple`` "u", the unit: the highest autocorrelation peak (:func:`_windows`), with
``segments`` scaled by unit / window;
``segments`` the PAA segments (or "full": one per step); ``kK`` K nearest neighbours (default
1). Each cell caches the test novelty and the held-out calibration novelties
(``<out>/<stream>__<member>__<aggregate>.npz``), so an ensemble is scored without a refit: each
member on its robust held-out scale ``(s - median) / IQR`` and the z averaged (or their
maximum), as ``WindowNoveltyDetector`` does. (Inside the detector the members' calibration
blocks share the longest member's gap, so its scales differ slightly from these.)

    python -m experiments.window_bench._explore cache raw:1:32,z:1:32 [mean,max]
    python -m experiments.window_bench._explore table "raw:1:32+z:1:32;raw:1:32|max|mean" [-v]

A table spec is ``members|combine|aggregate`` (combine "mean" or "max", aggregate "mean" or
"max"; both default to "mean"). The peers' APs come from the benchmark's cells (``PEERS``);
each spec's mean rank is among itself and the seven peers of ``RANK_PEERS`` (as the benchmark
ranks one method of ours), with the best peer's mean rank beside it and the streams won and
lost against Sub-kNN.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from ._data import half_of, load_stream, stream_names

OUT = Path("results/window_bench/h7/cache")
PEERS = Path("results/window_bench/h7/tuning")
#: the peers that apply to every stream (the benchmark's ranks)
RANK_PEERS = ("sub-knn", "stumpy", "aeon-kmeans", "aeon-iforest", "aeon-lof", "pyod-pca",
              "pyod-ecod")  # fmt: skip


def _file(out: Path, name: str, member: str, agg: str) -> Path:
    return out / f"{name.replace('/', '__')}__{member.replace(':', '_')}__{agg}.npz"


def cache(members: list[str], aggs: list[str], out: Path = OUT, log=print) -> None:
    """Fill the missing cells of the tuning half (resumable)."""
    from novelty import WindowNoveltyDetector

    out.mkdir(parents=True, exist_ok=True)
    for name in [n for n in stream_names() if half_of(n) == "tuning"]:
        s = None
        for c in members:
            for agg in aggs:
                f = _file(out, name, c, agg)
                if f.exists():
                    continue
                if s is None:
                    s = load_stream(name)
                    x = s.normal
                    sd = x.std(0)
                    w0, u0 = _windows([(x - x.mean(0)) / np.where(sd > 0, sd, 1)])
                kind, mult, seg, *kk = c.split(":")
                # "u": the unit (the highest autocorrelation peak), with segments of the
                # length of the base window's (seg is then the base window's count)
                w = u0 if mult == "u" else int(np.clip(round(float(mult) * w0), 16,
                                                       len(s.normal) // 4))  # fmt: skip
                if mult == "u" and seg != "full":
                    seg = str(max(1, round(int(seg) * u0 / w0)))
                t0 = time.process_time()
                det = WindowNoveltyDetector(
                    detector="knn" if kind == "raw" else "znorm-knn",
                    window=w,
                    n_segments=w if seg == "full" else int(seg),
                    n_neighbors=int(kk[0][1:]) if kk else 1,
                    aggregate=agg,
                ).fit(s.normal)
                nov = -det.score_samples(s.test)
                np.savez(f, nov=nov, cal=det.calibration_scores_, labels=s.labels, w=w,
                         cpu=time.process_time() - t0)  # fmt: skip
                log(f"{name} {c} {agg} window {w}")


def _windows(z: list) -> tuple[int, int]:
    """(period, unit) of standardised recordings: the automatic window, and the lag of the
    highest autocorrelation peak that the automatic rule accepts as a peak (the longest
    strong repeat), clipped as the window is; the period when there is no peak."""
    from novelty.windows._period import MAX_WINDOW, MIN_PEAK, MIN_WINDOW, _acf, auto_window

    period = auto_window(z)
    upper = min(MAX_WINDOW, max(len(r) for r in z) // 4)
    a = _acf(z[0], upper).mean(axis=1)
    inner = a[1:-1]
    minima = np.flatnonzero((inner < a[:-2]) & (inner <= a[2:])) + 1
    if minima.size == 0:
        return period, period
    first = minima[0]
    pk = np.flatnonzero((inner > a[:-2]) & (inner >= a[2:])) + 1
    pk = [
        int(q) for q in pk[(pk > first) & (a[pk] > MIN_PEAK)] if a[q] - a[first:q].min() > MIN_PEAK
    ]
    if not pk:
        return period, period
    return period, int(np.clip(pk[int(np.argmax(a[pk]))], MIN_WINDOW, upper))


def _robust_z(cell) -> np.ndarray:
    """A cached cell's novelty on its calibration's robust scale, as the window detector
    puts its members on one scale."""
    from novelty.windows._detector import _robust_scale

    med, iqr = _robust_scale(cell["cal"])
    return (cell["nov"] - med) / iqr


def ensemble_ap(name: str, spec: str, out: Path = OUT):
    """AP of one ensemble spec on one stream, None when a cell is missing."""
    from sklearn.metrics import average_precision_score

    parts = spec.split("|")
    members = parts[0].split("+")
    combine = parts[1] if len(parts) > 1 else "mean"
    agg = parts[2] if len(parts) > 2 else "mean"
    files = [_file(out, name, m, agg) for m in members]
    if not all(f.exists() for f in files):
        return None
    cells = [np.load(f) for f in files]
    if len(cells) == 1:
        score = cells[0]["nov"]
    else:
        z = np.stack([_robust_z(c) for c in cells])
        score = z.mean(0) if combine == "mean" else z.max(0)
    return float(average_precision_score(cells[0]["labels"], score))


def table(specs: list[str], out: Path = OUT, peers: Path = PEERS, verbose=False) -> str:
    from scipy.stats import rankdata
    from sklearn.metrics import average_precision_score

    names = [n for n in stream_names() if half_of(n) == "tuning"]
    cols = [*specs, *RANK_PEERS]
    per = {}
    for n in names:
        row = [ensemble_ap(n, sp, out) for sp in specs]
        for p in RANK_PEERS:
            f = peers / n.replace("/", "__") / f"{p}.npz"
            z = np.load(f) if f.exists() else None
            row.append(
                float(average_precision_score(z["labels"], z["scores"]))
                if z is not None and "scores" in z
                else None
            )
        per[n] = row
    ok = [n for n in names if all(v is not None for v in per[n])]
    M = np.array([per[n] for n in ok])
    k = len(RANK_PEERS)
    # each spec's rank among the peers alone (as if it were the one method of ours in the run)
    R8 = [np.vstack([rankdata(-np.r_[r[i], r[-k:]]) for r in M]).mean(0) for i in range(len(specs))]
    R = np.array([r[0] for r in R8])
    best_peer = np.array([r[1:].min() for r in R8])  # the best peer's mean rank beside it
    Rp = np.vstack([rankdata(-r) for r in M[:, -k:]]).mean(0)  # the peers among themselves
    sk = M[:, -k]  # sub-knn
    lines = [
        f"{len(ok)} streams of the tuning half; rank: among the {k} peers (1 = best of "
        f"{k + 1}); W/L: streams won/lost against Sub-kNN",
        "| spec | mean AP | mean rank | best peer's rank | W/L vs sub-knn |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {c} | {m:.3f} | {r:.2f} | {b:.2f} | {(M[:, i] > sk).sum()}/{(M[:, i] < sk).sum()} |"
        for i, (c, m, r, b) in enumerate(zip(specs, M.mean(0), R, best_peer))
    ]
    lines += [f"| {c} (peer; rank among the peers) | {m:.3f} | {r:.2f} | | |"
              for c, m, r in zip(RANK_PEERS, M.mean(0)[-k:], Rp)]  # fmt: skip
    if verbose:
        lines += ["", "| stream | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
        lines += [f"| {n} | " + " | ".join(f"{v:.3f}" for v in per[n]) + " |" for n in ok]
    return "\n".join(lines)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "cache":
        cache(a[1].split(","), a[2].split(",") if len(a) > 2 else ["mean"],
              log=lambda s: print(s, flush=True))  # fmt: skip
    else:
        print(table(a[1].split(";"), verbose="-v" in a))
