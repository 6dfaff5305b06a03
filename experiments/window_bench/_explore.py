"""The design exploration of the window detector on the TUNING half only (issue 32, second
round): one-member detectors of several window lengths, segment counts, neighbours and step
aggregations, cached, and their ensembles scored offline.

A member is ``kind:multiple:segments[:kK]``: ``kind`` "raw" (channel-standardised windows,
``detector="knn"``) or "z" (z-normalised windows, ``detector="znorm-knn"``); the window is
``multiple`` x the automatic window of the normal data, clipped to [16, T_normal / 4];
``segments`` the PAA segments (or "full": one per step); ``kK`` K nearest neighbours (default
1). Each cell caches the test novelty and the held-out calibration novelties
(``<out>/<stream>__<member>__<aggregate>.npz``), so an ensemble is scored without a refit: each
member on its robust held-out scale ``(s - median) / IQR`` and the z averaged (or their
maximum), as ``WindowNoveltyDetector`` does. (Inside the detector the members' calibration
blocks share the longest member's gap, so its scales differ slightly from these.)

    python -m experiments.window_bench._explore cache raw:1:32,z:1:32 [mean,max]
    python -m experiments.window_bench._explore table "raw:1:32+z:1:32;raw:1:32|max|mean" [-v]

A table spec is ``members|combine|aggregate`` (combine "mean" or "max", aggregate "mean" or
"max"; both default to "mean"); Sub-kNN's AP comes from ``--peers`` (the benchmark's cells).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from ._data import half_of, load_stream, stream_names

OUT = Path("results/window_bench/h7/cache")
PEERS = Path("results/window_bench/h7/tuning")


def _file(out: Path, name: str, member: str, agg: str) -> Path:
    return out / f"{name.replace('/', '__')}__{member.replace(':', '_')}__{agg}.npz"


def cache(members: list[str], aggs: list[str], out: Path = OUT, log=print) -> None:
    """Fill the missing cells of the tuning half (resumable)."""
    from novelty import WindowNoveltyDetector
    from novelty.windows._period import auto_window

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
                    w0 = auto_window([(x - x.mean(0)) / np.where(sd > 0, sd, 1)])
                kind, mult, seg, *kk = c.split(":")
                w = int(np.clip(round(float(mult) * w0), 16, len(s.normal) // 4))
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
    cols = [*specs, "sub-knn"]
    per = {}
    for n in names:
        row = [ensemble_ap(n, sp, out) for sp in specs]
        f = peers / n.replace("/", "__") / "sub-knn.npz"
        z = np.load(f) if f.exists() else None
        row.append(
            float(average_precision_score(z["labels"], z["scores"]))
            if z is not None and "scores" in z
            else None
        )
        per[n] = row
    ok = [n for n in names if all(v is not None for v in per[n])]
    M = np.array([per[n] for n in ok])
    R = np.vstack([rankdata(-r) for r in M]).mean(0)
    lines = [f"{len(ok)} streams of the tuning half", "| spec | mean AP | mean rank |"]
    lines.append("|---|---|---|")
    lines += [f"| {c} | {m:.3f} | {r:.2f} |" for c, m, r in zip(cols, M.mean(0), R)]
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
