"""The sixth round of the window detector's design (issue 32, session 15), on the TUNING half
only: ROCKAD's recipe, the package's whole-series default, applied to windows.

Why: every member so far compares window shapes point by point (segment means, raw or
z-normalised), which depends on where a pattern lies in the window, or compares alignment-free
statistics, which miss shape; each family won on some streams and lost on others (fourth and
fifth rounds). MiniRocket's features (Dempster, Schmidt and Webb, 2021: the proportion of
positive values of random dilated convolutions) pool over the window, so they are
alignment-invariant, and their kernels and dilations see shape, frequency and amplitude at
once; on whole series the package's detector chose ROCKAD's recipe (Theissler et al., 2023:
MiniRocket, a Yeo-Johnson power transform and standardisation fitted on the normal data,
mean distance to the 5 nearest normal feature vectors). Here the same recipe on windows.

A rocket member at ``m`` x the automatic window ``w`` (clipped to [16, T_normal / 4] as the
other rounds' members): windows of the channel-standardised data, every ``max(1, w // 32)``
steps in the normal stretch and every ``max(1, w // 8)`` steps in the test stream (plus the
last window of each); sktime's ``MiniRocketMultivariate`` (default 10,000 kernels,
``random_state=0``) fitted on the normal windows; the features standardised by their mean and
standard deviation over the normal windows (the package's ROCKAD recipe; a Yeo-Johnson power
transform per feature took a minute a stream and was dropped before any result); window
novelty the mean Euclidean distance to the 5 nearest normal windows; step novelty the mean
over the windows covering the step (:func:`novelty.windows._engine.aggregate_steps`).
Calibration (for the ensembles): the normal stretch cut into 5 contiguous blocks (fewer when
a block would be shorter than a window, at least 2), each block's windows scored against the
normal windows that do not overlap the block or the ``w`` steps on either side, their step
novelties (within the block) pooled; each member on its tail scale ``(s - median) / (q99 -
median)`` as the ladder's members (:mod:`._fourth`).

    python -m experiments.window_bench._sixth cache
    python -m experiments.window_bench._sixth table

Candidates and rule, written before any rocket member was scored:

- ``rocket@w``: one rocket member at the window;
- ``rocket@2w``: one at twice the window;
- ``ladder + rocket@w (1/2, 1/2)``: the ladder (level 2/3, shape 1/3 within it) and the
  rocket member, half the weight each;
- ``ladder + rocket@w,2w (1/2, 1/2)``: the ladder and the two rocket members (their mean),
  half each.

A candidate is recommended only if its mean AP >= the offline ladder's (0.539) + 0.015, it
beats the ladder on at least 19 of the 35 streams, and its mean rank among itself and the
seven peers is not worse than the ladder's (the fourth and fifth rounds' rule). If one passes
it is built into the detector, run inside it on the tuning half, then on the confirmation half
ONCE (that half's third use; stated in docs/windows.md), and becomes the default only if its
confirmation mean AP is at least the shipped default's there (0.448) and its mean rank not
worse (3.22).

Only tuning-half streams are loaded by ``cache`` and ``table`` (an assertion guards every
load).

**Result on the tuning half: no candidate passes** (docs/windows.md, "Sixth round"). The
per-stream table splits by kind of stream: on the 15 class streams rocket@w's mean AP is
0.631 against the ladder's 0.511, on the 20 NAB files 0.385 against 0.560. **Hypothesis,
stated after that table and before any confirmation cell of a rocket member:** on the
confirmation half's class streams rocket@w's mean AP is above the shipped default's (the
benchmark's cells ``ours:ladder-gapw-bmin4``, confirmation mean 0.448), and on its NAB files
below. ``python -m experiments.window_bench._sixth confirm`` computes rocket@w on the
confirmation half (cells under ``results/window_bench/h15/rocket``) and prints the two means
per kind; it chooses nothing (the default does not depend on it).
"""

from __future__ import annotations

import sys

import numpy as np

from ._data import half_of, load_stream
from ._explore import OUT
from ._fourth import LADDER, LEVEL, _load, _names
from ._rounds import base_window, cache_members, candidate_table, member_window
from ._third import _scaled

ROCKET = {"rocket@w": "rk:1", "rocket@2w": "rk:2"}

#: name: ((members, family weight), ...), written before any rocket member was scored
CANDIDATES = {
    "rocket@w": ((["rk:1"], 1.0),),
    "rocket@2w": ((["rk:2"], 1.0),),
    "ladder + rocket@w (1/2, 1/2)": (("ladder", 1 / 2), (["rk:1"], 1 / 2)),
    "ladder + rocket@w,2w (1/2, 1/2)": (("ladder", 1 / 2), (["rk:1", "rk:2"], 1 / 2)),
}
#: the adoption rule: (AP margin over the ladder, wins against the ladder of 35)
RULE = (0.015, 19)
K = 5
N_BLOCKS = 5


def _starts(n: int, w: int, s: int) -> np.ndarray:
    g = np.arange(0, n - w + 1, s)
    return g if g[-1] == n - w else np.r_[g, n - w]


def _windows_of(x: np.ndarray, starts: np.ndarray, w: int) -> np.ndarray:
    """(n, d, w) float32, sktime's numpy3D layout."""
    idx = starts[:, None] + np.arange(w)[None, :]
    return np.ascontiguousarray(x[idx].transpose(0, 2, 1), dtype=np.float32)


def _knn(Q: np.ndarray, R: np.ndarray, k: int) -> np.ndarray:
    from sklearn.metrics import pairwise_distances

    D = pairwise_distances(Q, R)
    k = min(k, R.shape[0])
    return np.sort(np.partition(D, k - 1, axis=1)[:, :k], axis=1).mean(axis=1)


def _steps(starts, nov, w, n) -> np.ndarray:
    from novelty.windows._engine import aggregate_steps

    vals = np.column_stack([nov, np.zeros_like(nov)])
    return aggregate_steps(starts, vals, w, 0, n, "mean")[:, 0]


def rocket_member(normal: np.ndarray, test: np.ndarray, w: int):
    """(test step novelty, calibration step novelties) of one rocket member."""
    from sklearn.preprocessing import StandardScaler
    from sktime.transformations.panel.rocket import MiniRocketMultivariate

    mu, sd = normal.mean(0), normal.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    xn, xt = (normal - mu) / sd, (test - mu) / sd
    sn, st = _starts(len(xn), w, max(1, w // 32)), _starts(len(xt), w, max(1, w // 8))
    Wn = _windows_of(xn, sn, w)
    mr = MiniRocketMultivariate(random_state=0, n_jobs=1).fit(Wn)
    pt = StandardScaler()
    with np.errstate(all="ignore"):
        Fn = pt.fit_transform(np.asarray(mr.transform(Wn), dtype=np.float64))
        Ft = pt.transform(np.asarray(mr.transform(_windows_of(xt, st, w)), dtype=np.float64))
    Fn, Ft = np.nan_to_num(Fn), np.nan_to_num(Ft)
    test_nov = _steps(st, _knn(Ft, Fn, K), w, len(xt))
    cal = []
    # blocks of at least one window each (a short normal stretch has fewer than N_BLOCKS)
    bounds = np.linspace(0, len(xn), max(2, min(N_BLOCKS, len(xn) // w)) + 1).astype(int)
    for a, b in zip(bounds[:-1], bounds[1:]):
        inside = (sn >= a) & (sn + w <= b)
        away = (sn + w <= a - w) | (sn >= b + w)
        if inside.sum() == 0 or away.sum() == 0:
            continue
        si = sn[inside]
        nov = _knn(Fn[inside], Fn[away], K)
        # step novelties of the block's covered steps, by the same mean over covering windows
        lo, hi = int(si.min()), int(si.max()) + w
        cal.append(_steps(si - lo, nov, w, hi - lo))
    return test_nov, np.concatenate(cal)


def cache(log=print) -> None:
    """Fill the missing rocket cells of the tuning half (resumable)."""
    cache_members(
        list(ROCKET.values()),
        lambda s, kind, w, seg: rocket_member(s.normal, s.test, w),
        log,
    )


def _family(n: str, ms) -> np.ndarray:
    if ms == "ladder":
        return sum(wt * np.mean([_scaled(_load(n, m), "q99") for m in f], 0) for f, wt in LADDER)
    return np.mean([_scaled(_load(n, m), "q99") for m in ms], 0)


def scores(n: str, spec) -> np.ndarray:
    return sum(wt * _family(n, ms) for ms, wt in spec)


def table(log=print) -> None:
    names = _names()
    labels = {n: _load(n, LEVEL[0])["labels"] for n in names}
    cands = {name: (lambda n, spec=spec: scores(n, spec)) for name, spec in CANDIDATES.items()}
    candidate_table(names, labels, lambda n: scores(n, (("ladder", 1.0),)), cands, RULE, log)


CONFIRM_OUT = OUT.parent.parent / "h15" / "rocket"
SHIPPED = "ours:ladder-gapw-bmin4"


def confirm(log=print) -> None:
    """The hypothesis above, on the confirmation half: rocket@w against the shipped default's
    cells, mean AP per kind of stream (class streams, NAB files)."""
    from sklearn.metrics import average_precision_score as ap

    from ._data import stream_names

    CONFIRM_OUT.mkdir(parents=True, exist_ok=True)
    peers = OUT.parent / "confirmation"
    rows = []
    for name in [n for n in stream_names() if half_of(n) == "confirmation"]:
        f = CONFIRM_OUT / f"{name.replace('/', '__')}.npz"
        if not f.exists():
            s = load_stream(name)
            x = s.normal
            w = member_window(x, 1, base_window(x))
            nov, cal = rocket_member(x, s.test, w)
            np.savez(f, nov=nov, cal=cal, labels=s.labels, w=w)
        z = np.load(f)
        cells = {m: np.load(peers / name.replace("/", "__") / f"{m}.npz") for m in
                 (SHIPPED, "sub-knn")}  # fmt: skip
        rows.append((name.startswith("nab/"), ap(z["labels"], z["nov"]),
                     *(ap(c["labels"], c["scores"]) for c in cells.values())))  # fmt: skip
        log(f"{name} rocket@w {rows[-1][1]:.3f} shipped {rows[-1][2]:.3f} "
            f"sub-knn {rows[-1][3]:.3f}")  # fmt: skip
    R = np.array(rows, dtype=float)
    for kind, sel in (("class streams", R[:, 0] == 0), ("NAB files", R[:, 0] == 1)):
        r, d, k = R[sel, 1:].mean(0)
        log(
            f"{kind} ({int(sel.sum())}): rocket@w {r:.3f}, shipped default {d:.3f}, "
            f"sub-knn {k:.3f}; rocket wins {(R[sel, 1] > R[sel, 2]).sum()}/{int(sel.sum())}"
        )
    log(f"all ({len(R)}): rocket@w {R[:, 1].mean():.3f}, shipped {R[:, 2].mean():.3f}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "table"
    if what == "cache":
        cache(log=lambda s: print(s, flush=True))
    elif what == "confirm":
        confirm(log=lambda s: print(s, flush=True))
    else:
        table(log=lambda s: print(s, flush=True))
