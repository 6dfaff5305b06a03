"""Readings of session 16 on the window benchmark (issue 32), after the fresh set had been
read: every shared stream is development now, and nothing here chose the default.

    python -m experiments.window_bench._offline16 roughness  # where full resolution gains
    python -m experiments.window_bench._offline16 ranks      # rank averages of the methods
    python -m experiments.window_bench._offline16 members    # relative, local-mean distances
    python -m experiments.window_bench._offline16 flags      # flag shares on real streams
    python -m experiments.window_bench._offline16 oracle     # the per-stream best of the methods
    python -m experiments.window_bench._offline16 lof        # scikit-learn's LOF as one member

- ``roughness``: per development stream, the lag-1 autocorrelation of the normal data's first
  differences (per channel, averaged; white noise gives -0.5) beside the eighth round's
  ``exact - default`` AP (cells of :mod:`._eighth`).
- ``ranks``: per stream, each method's step scores turned into ranks within the stream
  (``rankdata / T``), averaged over a set of methods, AP of the average; per set of streams.
- ``members``: one member (channel-standardised window at the base window, 32 segments,
  strides w/8, mean over covering windows): the distance ``d(q, o*)`` to the nearest normal
  window ``o*``; ``d / r(o*)`` with ``r`` the normal data's matrix profile at the reference
  stride (nearest normal window starting at least w away), raw, floored at median(r), and
  ``d / (r + median(r))``; the distance to the mean of the ``k`` nearest normal windows from
  distinct places (starts at least w apart, chosen greedily by distance) and the mean
  distance to those ``k``; k = 3, 5, 10.
- ``flags``: the shipped default at ``contamination`` 0.01 and 0.05, fitted on each stream's
  normal stretch: the share of the test stream's normal steps it flags (what ``contamination``
  bounds for a stationary normal process) and the share of anomalous steps it flags, per kind
  of stream (NAB files, class streams), all 82 streams; ``flags member_scale=causal`` (or any
  other ``WindowNoveltyDetector`` parameter given as ``name=value``, strings only) for another
  setting.

- ``oracle``: per stream, the AP of the better of ours and a peer (or of all four: ours,
  Sub-kNN, aeon's LOF and KMeansAD), as if a selector knew the labels: what choosing a family
  per stream could give at best.

- ``lof``: the same one member as ``members``, scored by scikit-learn's
  ``LocalOutlierFactor(novelty=True)`` with k = 5, 10, 20 neighbours among the reference
  windows (strides w/8) against the nearest-neighbour distance; the 58 development streams
  (aeon's LOF, the best peer on the fresh set, uses raw windows at stride 1 and k = 20).

Results in ``docs/windows.md``.
"""

from __future__ import annotations

import sys

import numpy as np

from ._eighth import OUT, PEER_CELLS


def _all_names():
    from ._data import fresh_stream_names, half_of, stream_names

    return [(n, half_of(n)) for n in stream_names() + fresh_stream_names()]


def _default_cell(name: str, half: str):
    f = name.replace("/", "__")
    if half == "fresh":
        return np.load(PEER_CELLS["fresh"] / f / "ours.npz")
    return np.load(OUT / "dev" / f"{f}__default.npz")


def roughness(log=print) -> None:
    from sklearn.metrics import average_precision_score as ap

    from ._data import load_stream

    rows = []
    for n, h in _all_names():
        if h == "fresh":
            continue
        f = OUT / "dev" / n.replace("/", "__")
        a, b = (np.load(f"{f}__{c}.npz") for c in ("default", "exact"))
        gain = ap(b["labels"], b["scores"]) - ap(a["labels"], a["scores"])
        x = load_stream(n).normal
        x = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1)
        dx = np.diff(x, axis=0)
        r1 = np.mean([np.corrcoef(dx[:-1, c], dx[1:, c])[0, 1]
                      for c in range(x.shape[1]) if dx[:, c].std() > 0])  # fmt: skip
        rows.append((r1, gain, n))
    for r1, gain, n in sorted(rows):
        log(f"{r1:+.4f} {gain:+.3f} {n}")
    pos = [g for r, g, _ in rows if r > 0]
    log(f"full resolution where r1 > 0: {len(pos)} streams, mean AP change "
        f"{sum(pos) / len(rows):+.4f} over {len(rows)}")  # fmt: skip


COMBOS = (
    ("ours", "sub-knn"),
    ("ours", "aeon-lof"),
    ("ours", "aeon-kmeans"),
    ("ours", "sub-knn", "aeon-lof", "aeon-kmeans"),
    ("sub-knn", "aeon-lof", "aeon-kmeans"),
)


def ranks(log=print) -> None:
    from scipy.stats import rankdata
    from sklearn.metrics import average_precision_score as ap

    res = []
    for n, h in _all_names():
        own = _default_cell(n, h)
        S = {"ours": own["scores"]}
        for m in ("sub-knn", "aeon-kmeans", "aeon-lof"):
            S[m] = np.load(PEER_CELLS[h] / n.replace("/", "__") / f"{m}.npz")["scores"]
        R = {k: rankdata(v) / len(v) for k, v in S.items()}
        row = {k: ap(own["labels"], v) for k, v in S.items()}
        for c in COMBOS:
            row["+".join(c)] = ap(own["labels"], np.mean([R[m] for m in c], 0))
        res.append((h, row))
    for grp in (("tuning", "confirmation"), ("confirmation", "fresh"), ("fresh",)):
        rows = [r for h, r in res if h in grp]
        log(f"{'+'.join(grp)} ({len(rows)} streams): " + ", ".join(
            f"{k} {np.mean([r[k] for r in rows]):.3f}" for k in rows[0]))  # fmt: skip


def _sqd(A, B):
    return np.maximum((A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T, 0)


def _one_member(s) -> tuple:
    """The readings' one member of stream ``s``: reference features ``R`` at starts ``rs``,
    test features ``Q`` at starts ``qs`` (module docstring, ``members``), and the window."""
    from novelty.windows._engine import Featurizer

    from ._rounds import base_window

    mu, sd = s.normal.mean(0), s.normal.std(0)
    sd = np.where(sd > 0, sd, 1)
    N, X = (s.normal - mu) / sd, (s.test - mu) / sd
    w = min(base_window(s.normal), len(N) // 4)
    st = max(1, w // 8)
    f = Featurizer(window=w, n_segments=32, znorm=False, d=N.shape[1])
    rs = np.arange(0, len(N) - w + 1, st)
    qs = np.unique(np.r_[np.arange(0, len(X) - w + 1, st), len(X) - w])
    return f.features(N, rs), rs, f.features(X, qs), qs, w


def _member_scores(s, ks=(3, 5, 10)) -> tuple:
    R, rs, Q, qs, w = _one_member(s)
    st = max(1, w // 8)
    r = np.full(len(R), np.inf)  # the normal data's matrix profile at the reference stride
    for i in range(0, len(R), 2000):
        D = _sqd(R[i : i + 2000], R)
        D[np.abs(rs[i : i + 2000, None] - rs[None, :]) < w] = np.inf
        r[i : i + 2000] = np.sqrt(D.min(1))
    fin = np.isfinite(r)
    r[~fin] = r[fin].max() if fin.any() else 1.0
    med = np.median(r)
    med = med if med > 0 else (r.max() if r.max() > 0 else 1.0)
    out = {k: np.empty(len(Q)) for k in ["knn", *[f"lm{k}" for k in ks], *[f"mk{k}" for k in ks]]}
    nn = np.empty(len(Q), int)
    M = min(len(R), max(ks) * (2 * w // st + 2))
    for i in range(0, len(Q), 1000):
        D = _sqd(Q[i : i + 1000], R)
        idx = np.argpartition(D, M - 1, axis=1)[:, :M] if M < len(R) else None
        for a in range(len(D)):
            cand = np.arange(len(R)) if idx is None else idx[a]
            cand = cand[np.argsort(D[a, cand])]
            picked = []
            for c in cand:  # greedy: nearest first, starts at least w apart
                if all(abs(rs[c] - rs[p]) >= w for p in picked):
                    picked.append(c)
                    if len(picked) == max(ks):
                        break
            nn[i + a] = cand[0]
            out["knn"][i + a] = np.sqrt(D[a, cand[0]])
            for k in ks:
                pk = picked[:k]
                out[f"lm{k}"][i + a] = np.linalg.norm(Q[i + a] - R[pk].mean(0))
                out[f"mk{k}"][i + a] = np.sqrt(D[a, pk]).mean()
    d = out["knn"]
    out["rel"] = d / np.maximum(r[nn], 1e-12)
    out["rel_floor"] = d / np.maximum(r[nn], med)
    out["rel_add"] = d / (r[nn] + med)
    return out, qs, w


def members(log=print) -> None:
    from sklearn.metrics import average_precision_score as ap

    from novelty.windows._engine import aggregate_steps

    from ._data import load_stream

    res = []
    for n, h in _all_names():
        s = load_stream(n)
        out, qs, w = _member_scores(s)
        row = {k: ap(s.labels, aggregate_steps(qs, v[:, None], w, 0, len(s.test), "mean")[:, 0])
               for k, v in out.items()}  # fmt: skip
        res.append((h, row))
        log(f"{n} {w} " + " ".join(f"{k}={v:.3f}" for k, v in row.items()))
    rows = [r for _, r in res]
    base = np.array([r["knn"] for r in rows])
    for k in rows[0]:
        a = np.array([r[k] for r in rows])
        log(f"{k}: mean AP {a.mean():.3f} over {len(a)}, W/L vs knn {(a > base).sum()}/"
            f"{(a < base).sum()}")  # fmt: skip


def flags(log=print, **params) -> None:
    import warnings

    from novelty import WindowNoveltyDetector

    from ._data import load_stream

    res = []
    for n, _ in _all_names():
        s = load_stream(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            det = WindowNoveltyDetector(**params).fit(s.normal)
        p = det.p_values(s.test)
        y = s.labels.astype(bool)
        # normal steps farther than the longest member window from every anomalous step
        g = int(max(det.member_windows_))
        near = np.convolve(y.astype(float), np.ones(2 * g + 1), mode="same") > 0
        far = ~near
        row = [n.split("/")[0] == "nab"]
        for c in (0.01, 0.05):
            row += [(p[~y] <= c).mean(), (p[far] <= c).mean() if far.any() else np.nan,
                    (p[y] <= c).mean()]  # fmt: skip
        res.append(row)
        log(
            f"{n}: at 0.01 / 0.05 flagged: normal steps {row[1]:.3f} / {row[4]:.3f}, far "
            f"normal steps {row[2]:.3f} / {row[5]:.3f}, anomalous {row[3]:.3f} / {row[6]:.3f}"
        )
    A = np.array(res, dtype=float)
    kinds = (("NAB", A[:, 0] == 1), ("class streams", A[:, 0] == 0), ("all", A[:, 0] >= 0))
    for name, sel in kinds:
        B = A[sel]
        for j, c in ((1, 0.01), (4, 0.05)):
            far = B[:, j + 1][np.isfinite(B[:, j + 1])]
            log(
                f"{name} ({len(B)}), contamination {c}: normal steps flagged mean "
                f"{B[:, j].mean():.3f} median {np.median(B[:, j]):.3f}; far normal steps mean "
                f"{far.mean():.3f} median {np.median(far):.3f}, streams above 2 x {c}: "
                f"{(far > 2 * c).sum()} of {len(far)}; anomalous steps {B[:, j + 2].mean():.3f}"
            )


def oracle(log=print) -> None:
    from sklearn.metrics import average_precision_score as ap

    cols = ("ours", "sub-knn", "aeon-lof", "aeon-kmeans")
    rows = []
    for n, h in _all_names():
        own = _default_cell(n, h)
        r = [ap(own["labels"], own["scores"])]
        for m in cols[1:]:
            z = np.load(PEER_CELLS[h] / n.replace("/", "__") / f"{m}.npz")
            r.append(ap(z["labels"], z["scores"]))
        rows.append((h, r))
    for grp in (("tuning", "confirmation", "fresh"), ("confirmation", "fresh")):
        A = np.array([r for h, r in rows if h in grp])
        means = ", ".join(f"{c} {v:.3f}" for c, v in zip(cols, A.mean(0)))
        log(
            f"{'+'.join(grp)} ({len(A)} streams): {means}; per-stream best of ours and "
            f"sub-knn {A[:, :2].max(1).mean():.3f}, of ours and aeon-lof "
            f"{A[:, [0, 2]].max(1).mean():.3f}, of all four {A.max(1).mean():.3f}"
        )


def lof(log=print) -> None:
    from sklearn.metrics import average_precision_score as ap
    from sklearn.neighbors import LocalOutlierFactor, NearestNeighbors

    from novelty.windows._engine import aggregate_steps

    from ._data import load_stream

    res = []
    for n, h in _all_names():
        if h == "fresh":
            continue
        s = load_stream(n)
        R, _, Q, qs, w = _one_member(s)
        X = s.test
        vals = [NearestNeighbors(n_neighbors=1).fit(R).kneighbors(Q)[0][:, 0]]
        for k in (5, 10, 20):
            m = LocalOutlierFactor(n_neighbors=min(k, len(R) - 1), novelty=True).fit(R)
            vals.append(-m.score_samples(Q))
        row = [ap(s.labels, aggregate_steps(qs, v[:, None], w, 0, len(X), "mean")[:, 0])
               for v in vals]  # fmt: skip
        res.append(row)
        log(f"{n} {w} " + " ".join(f"{x:.3f}" for x in row))
    A = np.array(res)
    for j, name in enumerate(("nearest neighbour", "lof k=5", "lof k=10", "lof k=20")):
        log(
            f"{name}: mean AP {A[:, j].mean():.3f} over {len(A)}, W/L vs nearest neighbour "
            f"{(A[:, j] > A[:, 0]).sum()}/{(A[:, j] < A[:, 0]).sum()}"
        )


if __name__ == "__main__":
    kw = dict(a.split("=", 1) for a in sys.argv[2:])  # flags: detector=..., member_scale=...
    actions = {"roughness": roughness, "ranks": ranks, "members": members, "flags": flags,
               "oracle": oracle, "lof": lof}  # fmt: skip
    actions[sys.argv[1]](log=lambda s: print(s, flush=True), **kw)
