"""Bridge to the TSB-AD package's Sub-PCA and Sub-KNN (issue 32's "missing peers").

TSB-AD 1.5 pins ``numpy<2`` and pulls torch and transformers, so it cannot live in the
project's ``.venv``; it runs in a side environment, and this file talks to it through plain
``.npz`` files. Reproduce (from the repository root)::

    python3 -m venv /work/tsbvenv
    /work/tsbvenv/bin/pip install "numpy<2" torch==2.13.0    # the CPU build, numpy 1.26.4
    /work/tsbvenv/bin/pip install tsb-ad==1.5 "numpy<2" torch==2.13.0
    /work/tsbvenv/bin/pip install scikit-learn==1.5.2   # 1.9 breaks TSB-AD's check_is_fitted
    .venv/bin/python experiments/window_bench/_tsbad.py export
    /work/tsbvenv/bin/python experiments/window_bench/_tsbad.py score [--half tuning] [--only s]
    .venv/bin/python experiments/window_bench/_tsbad.py report   # both halves, with MERLIN

- ``export`` (the project's ``.venv``): every stream of the benchmark
  (:func:`experiments.window_bench._data.load_stream`) to
  ``results/window_bench/h15/streams/<stream, / -> __>.npz`` with ``normal``, ``test``,
  ``labels``, ``window`` (the peers' window) and ``half``.
- ``score`` (the side environment: numpy, scipy and TSB_AD only, never the project's
  packages) writes one cell per (stream, method) in the benchmark's format,
  ``results/window_bench/h7/<half>/<stream>/<method>.npz`` with ``scores`` (float32, length
  T, higher = more anomalous; non-finite scores set to the largest finite one, as the runner
  does), ``seconds`` and ``labels``; a failure is a cell with ``error``. Finished cells are
  never recomputed (resumable).
- ``report`` (the project's ``.venv``): ``bench_windows.py report`` of each half for the
  shipped default's cells, the eight peers, ``aeon-merlin`` and the four new cells, then
  the mean AP and rank on the streams where MERLIN applies, and TSB-AD's own window against
  the peers' window.

The methods (channels standardised by the normal stretch's mean and standard deviation, as
for every peer of the benchmark; window ``w`` = the stream's peers' window; TSB-AD's own
step mapping: the score of the window starting at ``i`` goes to step ``i + ceil((w-1)/2)``,
the ends padded with the first and last window's score):

- ``tsbad-subpca``: ``TSB_AD.models.PCA.PCA(slidingWindow=w, n_components=None)`` (the
  univariate board's hyper-parameters) fitted on the normal stretch's windows, scoring the
  test windows (weighted distance to the eigenvectors, PyOD's rule). TSB-AD's
  ``decision_function`` drops the all-zero (constant) standardised columns that ``fit``
  pruned only at fit time, so a constant stretch of the normal data breaks it (shape
  mismatch); the bridge applies the fit's column mask to the test windows in that case
  (``patched=True`` in the cell), and otherwise calls ``decision_function`` itself.
- ``tsbad-subpca-unsup``: TSB-AD's ``run_PCA(test, slidingWindow=w, n_components=None)``,
  fitted on the test stream itself (the board's unsupervised protocol).
- ``tsbad-subknn``: ``TSB_AD.models.KNN.KNN(slidingWindow=w, n_neighbors=50)`` (board:
  ``n_neighbors=50``, ``method="largest"``: the distance to the 50th nearest window, each
  window z-normalised) fitted on the normal windows; the test windows are z-normalised as
  ``fit`` does (TSB-AD's ``decision_function`` omits that step, which would compare raw
  test windows with z-normalised normal ones, and loops in Python per window) and queried
  against the fitted neighbour index in one batch. ``k = min(50, normal windows - 1)``.
- ``tsbad-subknn-unsup``: TSB-AD's ``run_KNN(test, slidingWindow=w, n_neighbors=50)``.
- ``tsbad-subpca-board``, ``tsbad-subknn-board``: TSB-AD's board protocol verbatim, its own
  window included: ``run_Sub_PCA(test, periodicity=1, n_components=None)`` and
  ``run_Sub_KNN(test, periodicity=2, n_neighbors=50)`` (the univariate board's
  hyper-parameters, ``Optimal_Uni_algo_HP_dict``); one channel only (skipped cells
  otherwise), a diagnostic of the window choice, not a peer on the shared window.

Several channels: TSB-AD's window features flatten the ``w x d`` window into one vector
(``TSB_AD.models.feature.Window``), which is its multivariate handling for these models;
its automatic window (``find_length_rank``) is defined for one channel only. The cell keeps
TSB-AD's own window choice for the test stream (``tsb_window_rank1``, ``tsb_window_rank2``:
``find_length_rank`` with periodicity 1 and 2, 0 for several channels) for comparison.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
STREAMS = ROOT / "results" / "window_bench" / "h15" / "streams"
CELLS = ROOT / "results" / "window_bench" / "h7"
METHODS = ("tsbad-subpca", "tsbad-subknn", "tsbad-subpca-unsup", "tsbad-subknn-unsup")
#: TSB-AD's board protocol verbatim (its own window): one channel only
BOARD = ("tsbad-subpca-board", "tsbad-subknn-board")
K = 50


def export(out: Path = STREAMS) -> int:
    """Write every stream's arrays (runs in the project's environment)."""
    sys.path.insert(0, str(ROOT))
    from experiments.window_bench._data import half_of, load_stream, stream_names

    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for name in stream_names():
        f = out / (name.replace("/", "__") + ".npz")
        if f.exists():
            continue
        s = load_stream(name)
        np.savez(f, name=name, half=half_of(name), normal=s.normal, test=s.test,
                 labels=s.labels, window=s.window)  # fmt: skip
        n += 1
    return n


def _standardise(normal, test):
    mu, sd = normal.mean(axis=0), normal.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (normal - mu) / sd, (test - mu) / sd


def _pad(ws: np.ndarray, w: int, T: int) -> np.ndarray:
    """TSB-AD's step mapping of window scores (centred, ends repeated)."""
    if len(ws) >= T:
        return ws
    return np.concatenate([np.full(math.ceil((w - 1) / 2), ws[0]), ws,
                           np.full((w - 1) // 2, ws[-1])])  # fmt: skip


def subpca(nz, tz, w):
    from scipy.spatial.distance import cdist
    from TSB_AD.models.feature import Window
    from TSB_AD.models.PCA import PCA

    clf = PCA(slidingWindow=w, n_components=None).fit(nz)
    keep = np.any(clf.scaler_.transform(Window(window=w).convert(nz)) != 0, axis=0)
    if keep.all():
        return np.asarray(clf.decision_function(tz), dtype=float), {"patched": False}
    X = clf.scaler_.transform(Window(window=w).convert(tz))[:, keep]
    ws = (cdist(X, clf.selected_components_) / clf.selected_w_components_).sum(axis=1)
    return _pad(ws, w, len(tz)), {"patched": True}


def subknn(nz, tz, w):
    from TSB_AD.models.feature import Window
    from TSB_AD.models.KNN import KNN
    from TSB_AD.utils.utility import zscore

    k = min(K, len(nz) - w)  # normal windows - 1
    clf = KNN(slidingWindow=w, n_neighbors=k).fit(nz)
    Q = zscore(Window(window=w).convert(tz), axis=1, ddof=1)
    dist, _ = clf.neigh_.kneighbors(Q, n_neighbors=k)
    return _pad(clf._get_dist_by_method(dist), w, len(tz)), {"k": k}


def subpca_unsup(nz, tz, w):
    from TSB_AD.model_wrapper import run_PCA

    return np.asarray(run_PCA(tz, slidingWindow=w, n_components=None), dtype=float), {}


def subknn_unsup(nz, tz, w):
    from TSB_AD.model_wrapper import run_KNN

    return np.asarray(run_KNN(tz, slidingWindow=w, n_neighbors=K), dtype=float), {}


def board_subpca(nz, tz, w):
    from TSB_AD.model_wrapper import run_Sub_PCA

    return np.asarray(run_Sub_PCA(tz, periodicity=1, n_components=None), dtype=float), {}


def board_subknn(nz, tz, w):
    from TSB_AD.model_wrapper import run_Sub_KNN

    return np.asarray(run_Sub_KNN(tz, periodicity=2, n_neighbors=K), dtype=float), {}


RUN = {"tsbad-subpca": subpca, "tsbad-subknn": subknn, "tsbad-subpca-unsup": subpca_unsup,
       "tsbad-subknn-unsup": subknn_unsup, "tsbad-subpca-board": board_subpca,
       "tsbad-subknn-board": board_subknn}  # fmt: skip


def _tsb_windows(test) -> dict:
    from TSB_AD.utils.slidingWindows import find_length_rank

    return {f"tsb_window_rank{r}": int(find_length_rank(test, rank=r)) for r in (1, 2)}


def score(streams: Path = STREAMS, cells: Path = CELLS, which=METHODS + BOARD, half=None, only=None,
          log=print) -> None:  # fmt: skip
    """Fill the missing cells (runs in the side environment)."""
    for f in sorted(streams.glob("*.npz")):
        z = np.load(f)
        h, safe = str(z["half"]), f.stem
        if (half and h != half) or (only and not any(o in str(z["name"]) for o in only)):
            continue
        folder = cells / h / safe
        todo = [m for m in which if not (folder / f"{m}.npz").exists()]
        if not todo:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        nz, tz = _standardise(z["normal"], z["test"])
        w, labels, T = int(z["window"]), z["labels"], len(z["test"])
        extra = _tsb_windows(tz)
        for m in todo:
            if m in BOARD and tz.shape[1] > 1:
                np.savez(folder / f"{m}.npz", skipped=True)
                continue
            t0 = time.perf_counter()
            try:
                with np.errstate(all="ignore"):
                    sc, info = RUN[m](nz, tz, w)
                sc = np.asarray(sc, dtype=np.float64).ravel()
                if sc.shape != (T,):
                    raise ValueError(f"{m} returned shape {sc.shape}, expected ({T},)")
                fin = np.isfinite(sc)
                if not fin.any():
                    raise ValueError(f"{m} returned no finite score")
                sc = np.where(fin, sc, sc[fin].max())
                dt = time.perf_counter() - t0
                np.savez(folder / f"{m}.npz", scores=sc.astype(np.float32), seconds=dt,
                         labels=labels, window=w, **extra, **info)  # fmt: skip
                log(f"{z['name']} {m} {dt:.1f}s", flush=True)
            except Exception as err:  # a failing peer is a recorded cell, not a crash
                np.savez(folder / f"{m}.npz", error=f"{type(err).__name__}: {err}")
                log(f"{z['name']} {m} FAILED {err}\n{traceback.format_exc(limit=3)}",
                    flush=True)  # fmt: skip


#: the shipped default's cells (docs/windows.md, "Short normal data": the ladder with the
#: calibration gap) and the peers the new ones are set beside
DEFAULT = "ours:ladder-gapw-bmin4"
PEERS = ("sub-knn", "stumpy", "aeon-kmeans", "aeon-iforest", "aeon-lof", "aeon-stomp",
         "pyod-pca", "pyod-ecod")  # fmt: skip


def report(cells: Path = CELLS) -> str:
    """The benchmark's report of each half with the new peers (the project's environment),
    then the ranks on the streams where MERLIN applies (univariate, <= 6,000 steps) and
    TSB-AD's own window choice against the peers' window."""
    sys.path.insert(0, str(ROOT))
    from experiments.window_bench._data import half_of, stream_names
    from experiments.window_bench._run import _ranks
    from experiments.window_bench._run import cells as read_cells
    from experiments.window_bench._run import report as bench

    which = [DEFAULT, *PEERS, "aeon-merlin", *METHODS, *BOARD]
    out = []
    for half in ("tuning", "confirmation"):
        out += [bench(half, which, cells / half), ""]
        res = read_cells(half, which, cells / half)
        names = [n for n in stream_names() if half_of(n) == half]
        sub = [n for n in names if "ap" in res.get((n, "aeon-merlin"), {})]
        ms = [m for m in which if all("ap" in res.get((n, m), {}) for n in sub)]
        if len(sub) > 1:
            M = np.array([[res[(n, m)]["ap"] for m in ms] for n in sub])
            R = _ranks(M).mean(axis=0)
            out += [f"{half}: the {len(sub)} streams where aeon-merlin applies, mean AP / mean "
                    "rank (AP) over these methods:", ""]  # fmt: skip
            out += [f"- {m}: {M[:, i].mean():.3f} / {R[i]:.2f}" for i, m in enumerate(ms)]
            out.append("")
        ratio = []
        for n in names:
            f = cells / half / (n.replace("/", "__")) / "tsbad-subpca.npz"
            z = np.load(f) if f.exists() else {}
            if "tsb_window_rank1" in z and int(z["tsb_window_rank1"]) > 0:
                ratio.append(int(z["tsb_window_rank1"]) / int(z["window"]))
        if ratio:
            r = np.array(ratio)
            out += [f"{half}: TSB-AD's own window (find_length_rank, periodicity 1) / the peers' "
                    f"window on {len(r)} univariate streams: median {np.median(r):.2f}, equal "
                    f"(within 10 %) on {int((abs(r - 1) <= 0.1).sum())}", ""]  # fmt: skip
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["export", "score", "report"])
    p.add_argument("--half", choices=["tuning", "confirmation"], default=None)
    p.add_argument("--methods", default=",".join(METHODS + BOARD), help="comma-separated")
    p.add_argument("--only", default=None, help="comma-separated substrings of stream names")
    a = p.parse_args(argv)
    which = a.methods.split(",")
    bad = [m for m in which if m not in RUN]
    if bad:
        p.error(f"unknown method(s) {', '.join(bad)}; known: {', '.join(RUN)}")
    if a.action == "export":
        print(f"{export()} streams written to {STREAMS}")
        return 0
    if a.action == "report":
        print(report())
        return 0
    score(which=which, half=a.half, only=a.only.split(",") if a.only else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
