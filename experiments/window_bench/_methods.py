"""The methods of the window benchmark: ours (its tuning candidates) and the peers.

Each method is ``f(stream) -> novelty (T,)`` (higher = more anomalous) on ``stream.test``,
fitted on ``stream.normal`` where it can be (semi-supervised), otherwise on the test stream
itself (STOMP, MERLIN: unsupervised). Peers get ``stream.window``. Window scores of the peers
written here become step scores by the mean over the windows covering a step (aeon's
``reverse_windowing`` rule). Channels are standardised by the normal data's mean and standard
deviation for every method.

- ``ours``: ``WindowNoveltyDetector()`` (the defaults, ``window="auto"``);
  ``ours@peer-window``: the defaults with the peers' window (a diagnostic, not a choice: it
  separates the automatic window from the detector); ``ours:<detector>-<aggregate>``:
  the candidates of the tuning half, all with ``window="auto"``;
  ``ours:<detector>-mean-<member_scale>`` (third round): "multiscale" and "ladder" with the
  members on their IQR or their calibration tail (docs/windows.md).
- ``sub-knn``: raw windows (stride 1) of the test stream, distance to the nearest raw window of
  the normal stretch (exact; the normal windows thinned to at most 8,000 by a stride).
- ``stumpy``: stumpy's matrix profile AB-join of the test stream against the normal stretch
  (z-normalised Euclidean distance of each test window to its nearest normal window; several
  channels: the sum of the channels' profiles).
- ``aeon-kmeans``, ``aeon-iforest``, ``aeon-lof``: aeon's KMeansAD, IsolationForest and LOF,
  fitted on the normal stretch (semi-supervised), window = ``stream.window``, stride 1.
- ``aeon-stomp``, ``aeon-merlin``: aeon's STOMP (self-join of the test stream) and MERLIN
  (discords of lengths window/2..window), univariate streams only (MERLIN on streams of at most
  6,000 steps). MERLIN is not in the default run: 20-30 s per 4,000-step stream unloaded, ten
  times that on the shared machine (``--methods aeon-merlin`` runs it).
- ``pyod-pca``, ``pyod-ecod``: PyOD's PCA (Sub-PCA) and ECOD fitted on the normal windows
  (thinned to at most 3,000), scoring every test window.
"""

from __future__ import annotations

import numpy as np

MAX_WINDOWS = 8000
MAX_PYOD = 3000


def _standardise(s):
    mu = s.normal.mean(axis=0)
    sd = s.normal.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (s.normal - mu) / sd, (s.test - mu) / sd


def _windows(x, w, stride=1):
    v = np.lib.stride_tricks.sliding_window_view(x, w, axis=0)  # (n, d, w)
    return v[::stride].reshape(v[::stride].shape[0], -1)


def steps_from_windows(ws: np.ndarray, w: int, T: int) -> np.ndarray:
    """Mean over the windows covering each step (windows at every start 0..T-w)."""
    acc = np.zeros(T + 1)
    cnt = np.zeros(T + 1)
    n = len(ws)
    np.add.at(acc, np.arange(n), ws)
    np.add.at(acc, np.arange(n) + w, -ws)
    cnt[:n] += 1
    cnt[w : n + w] -= 1
    return (np.cumsum(acc) / np.maximum(np.cumsum(cnt), 1))[:T]


def ours(params=None, peer_window=False):
    def run(s):
        from novelty import WindowNoveltyDetector

        kw = dict(params or {}, **({"window": s.window} if peer_window else {}))
        det = WindowNoveltyDetector(**kw).fit(s.normal)
        return -det.score_samples(s.test)

    return run


def sub_knn(s):
    nz, tz = _standardise(s)
    w = s.window
    R = _windows(nz, w, max(1, -(-(len(nz) - w + 1) // MAX_WINDOWS)))
    rr = (R * R).sum(1)
    Q = _windows(tz, w)
    out = np.empty(len(Q))
    for i in range(0, len(Q), 2000):
        q = Q[i : i + 2000]
        d2 = (q * q).sum(1)[:, None] + rr[None, :] - 2 * q @ R.T
        out[i : i + 2000] = np.sqrt(np.maximum(d2.min(1), 0))
    return steps_from_windows(out, w, len(tz))


def stumpy_ab(s):
    import stumpy

    nz, tz = _standardise(s)
    w = s.window
    prof = 0
    for c in range(s.d):
        mp = stumpy.stump(tz[:, c], m=w, T_B=nz[:, c], ignore_trivial=False)
        p = mp[:, 0].astype(float)
        prof = prof + np.where(np.isfinite(p), p, np.nanmax(p[np.isfinite(p)]))
    return steps_from_windows(np.asarray(prof), w, len(tz))


def _aeon(cls, semi, kw):
    def run(s):
        nz, tz = _standardise(s)
        det = cls(**kw(s))
        if semi:
            det.fit(nz if s.d > 1 else nz[:, 0], axis=0)
            return np.asarray(det.predict(tz if s.d > 1 else tz[:, 0], axis=0), dtype=float)
        return np.asarray(det.fit_predict(tz[:, 0], axis=0), dtype=float)

    return run


def _pyod(make):
    def run(s):
        nz, tz = _standardise(s)
        w = s.window
        R = _windows(nz, w, max(1, -(-(len(nz) - w + 1) // MAX_PYOD)))
        det = make().fit(R)
        Q = _windows(tz, w)
        ws = np.concatenate(
            [det.decision_function(Q[i : i + 4000]) for i in range(0, len(Q), 4000)]
        )
        return steps_from_windows(ws, w, len(tz))

    return run


def _applies(name, s) -> bool:
    if name in ("aeon-stomp", "aeon-merlin") and s.d > 1:
        return False
    if name == "aeon-merlin" and len(s.test) > 6000:
        return False
    return True


def methods() -> dict:
    from aeon.anomaly_detection.series.distance_based import LOF, MERLIN, STOMP, KMeansAD
    from aeon.anomaly_detection.series.outlier_detection import IsolationForest
    from pyod.models.ecod import ECOD
    from pyod.models.pca import PCA

    m = {"ours": ours(), "ours@peer-window": ours(peer_window=True)}
    for det in ("knn", "znorm-knn", "knn+znorm"):
        for agg in ("max", "mean"):
            m[f"ours:{det}-{agg}"] = ours({"detector": det, "aggregate": agg})
    for agg in ("max", "mean"):  # added after the first six: the maximum of the two members' z
        m[f"ours:knn+znorm-{agg}-zmax"] = ours(
            {"detector": "knn+znorm", "aggregate": agg, "combine": "max"}
        )
    for agg in ("max", "mean"):  # second round (issue 32, H7): members at w and 2w
        m[f"ours:multiscale-{agg}"] = ours({"detector": "multiscale", "aggregate": agg})
    # third round (issue 32, H2): members on their calibration's tail scale (q99 - median),
    # and the "ladder" of level members at w/2, w, 2w and 4w
    for det in ("multiscale", "ladder"):
        for sc in ("iqr", "tail"):
            m[f"ours:{det}-mean-{sc}"] = ours({"detector": det, "aggregate": "mean",
                                              "member_scale": sc})  # fmt: skip
    # fourth round (issue 32, session 14): the ladder with statistics members (opt-in, not
    # adopted on the tuning half: docs/windows.md "Fourth round")
    m["ours:ladder+stats"] = ours({"detector": "ladder+stats"})
    # seventh round (issue 32, session 15): its members on causal scales
    m["ours:ladder+stats-causal"] = ours({"detector": "ladder+stats", "member_scale": "causal"})
    m["ours:ladder-causal"] = ours({"detector": "ladder", "member_scale": "causal"})
    m["sub-knn"] = sub_knn
    m["stumpy"] = stumpy_ab
    m["aeon-kmeans"] = _aeon(KMeansAD, True, lambda s: {"window_size": s.window, "random_state": 0})
    m["aeon-iforest"] = _aeon(IsolationForest, True,
                              lambda s: {"window_size": s.window, "random_state": 0})  # fmt: skip
    m["aeon-lof"] = _aeon(LOF, True, lambda s: {"window_size": s.window})
    m["aeon-stomp"] = _aeon(STOMP, False, lambda s: {"window_size": s.window})
    m["aeon-merlin"] = _aeon(MERLIN, False, lambda s: {"min_length": max(4, s.window // 2),
                                                       "max_length": s.window})  # fmt: skip
    m["pyod-pca"] = _pyod(lambda: PCA())
    m["pyod-ecod"] = _pyod(lambda: ECOD())
    return m


PEERS = ("sub-knn", "stumpy", "aeon-kmeans", "aeon-iforest", "aeon-lof", "aeon-stomp",
         "pyod-pca", "pyod-ecod")  # fmt: skip
CANDIDATES = tuple(
    f"ours:{d}-{a}"
    for d in ("knn", "znorm-knn", "knn+znorm", "multiscale")
    for a in ("max", "mean")
) + tuple(f"ours:{d}-mean-{sc}" for d in ("multiscale", "ladder") for sc in ("iqr", "tail"))
