r"""Candidate score cache of the detector pool (issue 30).

For every problem of a benchmark half (the problems of :mod:`experiments.detector_bench`: at
most 5 classes per data set, corpus <= 100, test <= 300, seed 0) and every candidate member,
two score vectors (higher = more novel):

* ``cal``: held-out novelty scores of the corpus series, computed as the detector's members
  compute them (:mod:`novelty.detector._members`): a kernel whose features are learned from the
  corpus is refitted without the held-out series (leave-one-out up to 20 series, else 10
  folds; exact copies held out together, one score per distinct series); a fixed kernel or
  distance gets the exact leave-one-out 1-NN;
* ``test``: the novelty of the test series by the candidate fitted on the whole corpus.

Standardising by the held-out scores, :math:`z = (s - \mathrm{median}(cal)) / \mathrm{IQR}(cal)`,
is then what the detector's ensemble does, and any mean of candidates is evaluated offline
(:mod:`experiments.detector_pool.combine`). Stored as one ``.npz`` per problem in
``results/pool/<half>/`` (``<cand>__cal``, ``<cand>__test``, ``y``, and ``<cand>__secs``); a
rerun adds the candidates missing from a file, so the cache is resumable.

Candidates (:data:`CANDIDATES`; a group is computed in one pass over its folds):

* ``rcs_*``: MiniRocket (10,000 kernels, seed 0) features standardised on the corpus
  (``power_transform=False``): ``rcs_knn5`` is ROCKAD's recipe (mean distance to the 5 nearest
  corpus series), ``rcs_knn1``, ``rcs_maha``, ``rcs_conf`` (variance-norm scorers);
* ``rcp_*``: the same with the Yeo-Johnson power transform (``rcp_knn1`` is the former
  default's member);
* ``diff_knn5``: the recipe on the first differences of the series;
* ``multi_knn5``: MultiRocket (10,000 kernels) standardised, mean 5-NN (series resampled to
  one length);
* ``hydra_knn5``: aeon's Hydra features (log1p of the counts, then standardised), mean 5-NN;
* ``gak_knn1``: GAK on series z-scored per channel, 1-NN (the former default's member);
* ``euclid_knn1``, ``dtw_knn1`` (window 10 %), ``msm_knn1``, ``twe_knn1``: 1-NN of aeon's
  distances on series resampled to one length, average-pooled to <= 100 steps and z-normalised
  per series and channel;
* ``chan_knn5`` (multivariate only): the recipe on each channel alone, the per-channel scores
  standardised by their held-out scores and averaged;
* ``trunc_sig_*``, ``randsig_*``, ``randsig2_*``, ``pdesig_*`` (``knn1``: 1-NN, ``knn5``: mean
  5-NN): the signature kernels of :mod:`tskernels`, normalised, on series resampled to one
  length and pre-processed as the protocol says with a time channel (:func:`sig_kernels` gives
  their parameters, a rule on the pre-processed corpus's shape); fixed kernels, so the held-out
  scores are kNN's exact leave-one-out on the corpus Gram, as the detector's GAK member's.
* ``rcsd_*``: density-relative scores on the recipe's kernel (:func:`density_scores`,
  cross-fitted like ``rcs``): ``rcsd_lof10`` / ``rcsd_lof20`` the Local Outlier Factor,
  ``rcsd_ratio5`` the mean 5-NN distance over its neighbours' own, ``rcsd_cos5`` cosine 5-NN.

    python -m experiments.detector_pool.pool run --half tuning [--shard 0/2] [--only rcs,gak]
        [--reverse]

Problem files are written by :func:`save_merged` (a lock, then the union of the file's arrays
and the new ones), so several runs over different candidates can share a file.
"""

from __future__ import annotations

import argparse
import os
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]

OUT = REPO / "results" / "pool"

#: Candidate groups in the order they are computed (cheapest first) -> the candidates they give.
GROUPS = {
    "rcs": ["rcs_knn5", "rcs_knn1", "rcs_maha", "rcs_conf"],
    "rcp": ["rcp_knn1", "rcp_knn5", "rcp_maha", "rcp_conf"],
    "gak": ["gak_knn1"],
    "euclid": ["euclid_knn1"],
    "diff": ["diff_knn5"],
    "dtw": ["dtw_knn1"],
    "chan": ["chan_knn5"],
    "multi": ["multi_knn5"],
    "hydra": ["hydra_knn5"],
    "msm": ["msm_knn1"],
    "twe": ["twe_knn1"],
    "sig": ["trunc_sig_knn1", "trunc_sig_knn5", "randsig_knn1", "randsig_knn5"],
    "pdesig": ["pdesig_knn1", "pdesig_knn5"],
    "randsig2": ["randsig2_knn1", "randsig2_knn5"],
    "rcsd": ["rcsd_lof10", "rcsd_lof20", "rcsd_ratio5", "rcsd_cos5"],
}
CANDIDATES = [c for g in GROUPS.values() for c in g]


# ------------------------------------------------------------------ helpers
def _rc_kernel(power: bool, transform: str = "minirocket"):
    from tskernels import RandomConvolutionKernel

    return RandomConvolutionKernel(
        transform=transform,
        n_kernels=10_000,
        seed=0,
        power_transform=power,
        other_lengths="native" if transform == "minirocket" else "error",
    )


def _specs(kernel, names):
    from novelty.detector._members import MemberSpec

    out = {}
    for name in names:
        scorer = name.rsplit("_", 1)[1]
        if scorer == "knn5":
            spec = MemberSpec(kernel, "knn", scorer_params={"n_neighbors": 5, "aggregate": "mean"})
        elif scorer == "knn1":
            spec = MemberSpec(kernel, "knn")
        elif scorer == "maha":
            spec = MemberSpec(kernel, "mahalanobis")
        else:
            spec = MemberSpec(kernel, "conformance")
        out[name] = MemberSpec(
            kernel=kernel,
            scorer=spec.scorer,
            scorer_params=spec.scorer_params,
            preprocess=False,
            normalize=False,
            name=name,
            adapt_to_corpus=True,
        )
    return out


def cross_fitted(kernel, names, Xc, Xt, scores) -> dict:
    """(cal, test, seconds) of the candidates ``names`` on one corpus-fitted kernel,
    cross-fitted exactly as ``Member.fit`` does: the calibration folds of
    :func:`novelty.scorers._folds.calibration_folds` (exact copies held out together, one
    score per distinct series), a clone of ``kernel`` fitted on each training part, and one
    final fit on the whole corpus for the test scores. ``scores(k, train, Zq)`` gives
    {name: novelty of the batch ``Zq``} from the kernel ``k`` fitted on the corpus rows
    ``train``; one kernel fit per fold serves every candidate. Fewer than 3 distinct series
    leave the held-out scores NaN."""
    from sklearn.base import clone

    from novelty.detector._members import (
        CROSS_FIT_LOO_MAX,
        _reusing_features,
        duplicate_groups,
        first_occurrences,
    )
    from novelty.scorers._folds import calibration_folds
    from tskernels import SeriesBatch

    Zc, Zt = SeriesBatch.from_checked(Xc), SeriesBatch.from_checked(Xt)
    n = len(Zc)
    groups = duplicate_groups(Xc)
    n_distinct = n if groups is None else int(groups.max()) + 1
    cal = {name: np.full(n, np.nan) for name in names}
    t0 = time.perf_counter()
    if n_distinct >= 3:
        for train, test in calibration_folds(n, CROSS_FIT_LOO_MAX, groups):
            k = clone(kernel)
            with _reusing_features(k):  # each part's features computed once per fold
                k.fit(Zc[train])
                res = scores(k, train, Zc[test])
            for name in names:
                cal[name][test] = res[name]
    if groups is not None:
        cal = {name: c[first_occurrences(groups)] for name, c in cal.items()}
    k = clone(kernel)
    with _reusing_features(k):
        k.fit(Zc)
        res = scores(k, np.arange(n), Zt)
    secs = time.perf_counter() - t0
    return {name: (cal[name], np.asarray(res[name], dtype=np.float64), secs) for name in names}


def kernel_group(kernel, names, Xc, Xt) -> dict:
    """(cal, test, seconds) of several scorers on one corpus-fitted kernel, exactly as
    ``Member.fit`` cross-fits them (:func:`cross_fitted`; a scorer that raises gives NaN)."""
    from novelty.detector._members import cross_grams, make_scorer
    from tskernels import SeriesBatch

    specs = _specs(kernel, names)
    Zc = SeriesBatch.from_checked(Xc)

    def scores(k, train, Zq):
        K = k.gram(Zc[train], normalize=False)
        Kt, diag = cross_grams(k, Zq, Zc[train], False)
        out = {}
        for name, spec in specs.items():
            try:
                out[name] = make_scorer(spec, K.shape[0]).fit(K).score(Kt, diag)
            except (ValueError, ArithmeticError):
                out[name] = np.full(len(Zq), np.nan)
        return out

    return cross_fitted(kernel, list(specs), Xc, Xt, scores)


# ------------------------------------------------------------------ density-relative members
#: Candidates of the ``rcsd`` group -> (score, k): scores relative to the local density of the
#: corpus, on the recipe's kernel (:func:`density_scores`).
DENSITY = {
    "rcsd_lof10": ("lof", 10),
    "rcsd_lof20": ("lof", 20),
    "rcsd_ratio5": ("ratio", 5),
    "rcsd_cos5": ("cos", 5),
}


def _kernel_distances(K, diag_rows, diag_cols) -> np.ndarray:
    r"""Feature-space distances :math:`\sqrt{k(y,y) + k(x,x) - 2k(y,x)}` from a Gram block
    (numpy in, numpy out), by the kNN scorer's own definition
    (:func:`novelty.scorers._baselines.squared_feature_distances`): a squared distance below 0
    by rounding only (>= -1e-8 x the scale) is set to 0, a clearly negative one raises."""
    import torch

    from novelty.scorers._baselines import squared_feature_distances

    d2 = squared_feature_distances(
        torch.as_tensor(np.asarray(K, dtype=np.float64)),
        torch.as_tensor(np.asarray(diag_rows, dtype=np.float64)),
        torch.as_tensor(np.asarray(diag_cols, dtype=np.float64)),
    )
    return np.sqrt(d2.numpy())


def _nearest(D, k):
    """(indices, distances) of the k smallest entries of each row of ``D``, nearest first
    (a stable sort: among equal distances the lower column index comes first)."""
    idx = np.argsort(D, axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(D, idx, axis=1)


def density_scores(K, Kt, diag_t, names) -> dict:
    r"""Novelty (higher = more novel) of m query series against a corpus of n, read off the
    corpus Gram ``K`` (n, n), the query-corpus Gram ``Kt`` (m, n) and the queries' k(y, y)
    ``diag_t`` (m,), for the candidates ``names`` of :data:`DENSITY` (each with its k;
    k := min(k, n - 1), n >= 2 required). With :math:`d` the feature-space distance
    (:func:`_kernel_distances`), :math:`N_k(p)` the k nearest corpus series of p (of a corpus
    series: the others, leave-self-out) and :math:`r_k(o)` the distance of corpus series o to
    its k-th nearest other corpus series:

    * ``lof`` (Breunig et al. 2000): reachability :math:`\mathrm{reach}(p, o) =
      \max(r_k(o), d(p, o))`, local reachability density :math:`\mathrm{lrd}(p) = 1 /
      \mathrm{mean}_{o \in N_k(p)} \mathrm{reach}(p, o)` (the corpus's by leave-self-out),
      score :math:`\mathrm{LOF}(q) = \mathrm{mean}_{o \in N_k(q)} \mathrm{lrd}(o) /
      \mathrm{lrd}(q)` (scikit-learn's ``LocalOutlierFactor(novelty=True)`` gives -LOF, up to
      its 1e-10 added to the mean reachability);
    * ``ratio``: :math:`\mathrm{mean}_{o \in N_k(q)} d(q, o) / \mathrm{mean}_{o \in N_k(q)}
      m_k(o)`, :math:`m_k(o)` the mean distance of corpus series o to its k nearest other
      corpus series;
    * ``cos``: the mean of the k smallest cosine distances :math:`1 - k(q, x) /
      \sqrt{k(q, q) k(x, x)}`.

    A corpus series whose k nearest others all lie at distance 0 (an lrd or m_k of 0 or
    infinity) raises ArithmeticError, as does a series of zero norm for ``cos``: the caller
    passes distinct corpus series. Vectorised: O(n^2 log n + m n log n)."""
    K = np.asarray(K, dtype=np.float64)
    Kt = np.asarray(Kt, dtype=np.float64)
    diag_t = np.asarray(diag_t, dtype=np.float64)
    n = K.shape[0]
    if K.shape != (n, n) or Kt.ndim != 2 or Kt.shape[1] != n or diag_t.shape != (Kt.shape[0],):
        raise ValueError(
            f"Gram shapes do not fit: K {K.shape}, Kt {Kt.shape}, diag_t {diag_t.shape}"
        )
    if n < 2:
        raise ValueError(f"density scores need at least 2 corpus series, got {n}")
    diag_c = np.diagonal(K).copy()
    Dc = _kernel_distances(K, diag_c, diag_c)
    np.fill_diagonal(Dc, np.inf)  # leave-self-out: a corpus series is not its own neighbour
    Dq = _kernel_distances(Kt, diag_t, diag_c)
    order_c = np.argsort(Dc, axis=1, kind="stable")
    sorted_c = np.take_along_axis(Dc, order_c, axis=1)
    out = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for name in names:
            kind, k = DENSITY[name]
            k = min(k, n - 1)
            if kind == "cos":
                norms = np.sqrt(np.outer(diag_t, diag_c))
                if not (norms > 0).all():
                    raise ArithmeticError("cosine distance of a series with zero norm")
                out[name] = _nearest(1.0 - Kt / norms, k)[1].mean(axis=1)
                continue
            idx_q, dq = _nearest(Dq, k)
            if kind == "lof":
                kdist = sorted_c[:, k - 1]  # r_k(o)
                reach_c = np.maximum(kdist[order_c[:, :k]], sorted_c[:, :k]).mean(axis=1)
                lrd_c = 1.0 / reach_c
                if not np.isfinite(lrd_c).all():
                    raise ArithmeticError("a corpus series has an infinite local density")
                reach_q = np.maximum(kdist[idx_q], dq).mean(axis=1)
                out[name] = lrd_c[idx_q].mean(axis=1) * reach_q  # mean lrd(o) / lrd(q)
            else:  # ratio
                m_c = sorted_c[:, :k].mean(axis=1)
                den = m_c[idx_q].mean(axis=1)
                if not (den > 0).all():
                    raise ArithmeticError("corpus neighbours at mean 5-NN distance 0")
                out[name] = dq.mean(axis=1) / den
    return out


def _distinct_rows(rows: np.ndarray, groups) -> np.ndarray:
    """The rows of ``rows`` that are the first of their duplicate group (all without groups)."""
    if groups is None:
        return rows
    return rows[np.unique(np.asarray(groups)[rows], return_index=True)[1]]


def density_group(kernel, names, Xc, Xt) -> dict:
    """(cal, test, seconds) of the :data:`DENSITY` candidates ``names`` on one corpus-fitted
    kernel, cross-fitted exactly as :func:`kernel_group` (the same folds, copies held out
    together; one kernel fit per fold serves every candidate). A density is estimated on the
    distinct series of the training part only (exact copies would sit at distance 0 and make
    it infinite): the first of each copy group, the kernel still fitted on every series."""
    from novelty.detector._members import cross_grams, duplicate_groups
    from tskernels import SeriesBatch

    Zc = SeriesBatch.from_checked(Xc)
    groups = duplicate_groups(Xc)

    def scores(k, train, Zq):
        keep = _distinct_rows(train, groups)
        Ztr = Zc[keep]
        K = k.gram(Ztr, normalize=False)
        Kt, diag = cross_grams(k, Zq, Ztr, False)
        try:
            return density_scores(K.cpu().numpy(), Kt.cpu().numpy(), diag.cpu().numpy(), names)
        except (ValueError, ArithmeticError):
            return {name: np.full(len(Zq), np.nan) for name in names}

    return cross_fitted(kernel, names, Xc, Xt, scores)


def member_scores(spec, Xc, Xt):
    from novelty.detector._members import Member
    from tskernels import SeriesBatch

    t0 = time.perf_counter()
    m = Member(spec).fit(SeriesBatch.from_checked(Xc), {})
    s = m.novelty(SeriesBatch.from_checked(Xt))
    return m.calibration_, np.asarray(s, dtype=np.float64), time.perf_counter() - t0


def equal_length(Xc, Xt):
    """Corpus and test resampled to the corpus's longest length (as the peers get them)."""
    from experiments.detector_bench.inputs import lengths, to_length

    length = max(lengths(Xc))
    return to_length(Xc, length), to_length(Xt, length)


def pooled_znorm(X):
    """(n, d, T') for aeon: average pooled to <= 100 steps, z-normalised per series/channel."""
    from tskernels.transforms import average_pool, pooling_window

    X = average_pool(X, pooling_window(X.shape[1], 100))
    mu = X.mean(axis=1, keepdims=True)
    sd = X.std(axis=1, keepdims=True)
    Z = (X - mu) / np.where(sd > 1e-8, sd, 1.0)
    return np.ascontiguousarray(Z.transpose(0, 2, 1))


def distance_knn1(metric, Xc, Xt, **kw):
    from aeon.distances import pairwise_distance

    t0 = time.perf_counter()
    A, B = equal_length(Xc, Xt)
    A, B = pooled_znorm(A), pooled_znorm(B)
    D = pairwise_distance(A, method=metric, **kw)
    np.fill_diagonal(D, np.inf)
    Dt = pairwise_distance(B, A, method=metric, **kw)
    cal = D.min(axis=1) if len(A) > 1 else np.empty(0)
    return cal, Dt.min(axis=1), time.perf_counter() - t0


def feature_knn(make, Xc, Xt, k=5):
    """Features learned on the corpus (``make()`` a fresh transformer on (n, d, T)), then
    standardised on the corpus, mean distance to the k nearest; held-out by refits on the
    detector's folds."""
    from sklearn.neighbors import NearestNeighbors
    from sklearn.preprocessing import StandardScaler

    from novelty.detector._members import CROSS_FIT_LOO_MAX
    from novelty.scorers._folds import calibration_folds

    t0 = time.perf_counter()
    A, B = equal_length(Xc, Xt)
    A = np.ascontiguousarray(A.transpose(0, 2, 1))
    B = np.ascontiguousarray(B.transpose(0, 2, 1))

    def fit_score(tr, te):
        tf = make()
        F = np.log1p(np.clip(np.asarray(tf.fit_transform(tr), dtype=np.float64), 0, None))
        sc = StandardScaler().fit(F)
        nn = NearestNeighbors(n_neighbors=min(k, len(F))).fit(sc.transform(F))
        G = np.log1p(np.clip(np.asarray(tf.transform(te), dtype=np.float64), 0, None))
        return nn.kneighbors(sc.transform(G))[0].mean(axis=1)

    n = len(A)
    cal = np.empty(n)
    if n >= 3:
        for train, test in calibration_folds(n, CROSS_FIT_LOO_MAX, None):
            cal[test] = fit_score(A[train], A[test])
    else:
        cal[:] = np.nan
    return cal, fit_score(A, B), time.perf_counter() - t0


#: Signature kernels' rule on the data's shape (issue 30, item 2): every series resampled to
#: the corpus's longest length (:func:`equal_length`), then the protocol's pre-processing fitted
#: on the corpus (:func:`sig_preprocessor`): average-pooled to <= 100 steps, z-scored per
#: channel, clipped to +-5, a zero basepoint and a time channel in [0, 1]; d' = d + 1 channels.
SIG_MAX_LENGTH = 100


def sig_preprocessor(Xc):
    """The signature members' pre-processing (``Preprocessor(zscore="channel",
    time_channel=True)``), fitted on the checked corpus ``Xc``."""
    from tskernels import SeriesBatch
    from tskernels.transforms import Preprocessor

    pre = Preprocessor(max_length=SIG_MAX_LENGTH, zscore="channel", time_channel=True)
    return pre.fit(SeriesBatch.from_checked(Xc))


def point_median_distance(Z) -> float:
    """Median Euclidean distance between (up to 500, seeded) time points of the pre-processed
    corpus ``Z`` (a SeriesBatch): GAK's median heuristic without its sqrt(length) factor."""
    from tskernels._gak import gak_median_sigma

    return gak_median_sigma(Z, 0) / float(np.sqrt(np.median(Z.lengths.cpu().numpy())))


def sig_kernels(group: str, Z) -> dict:
    """Candidate prefix -> unfitted kernel, by a rule on the pre-processed corpus ``Z`` (d'
    channels, time channel included): ``trunc_sig`` the registry's ``trunc_sig_linear``
    (linear lift, levels 0..4) with its scale 0.5 divided by sqrt(d') (the protocol's scaling
    of the signature scales); ``randsig`` the registry's ``rand_sig_tanh`` (50 features, seed
    0) with its variance 0.1 divided by d' (the drift's variance then does not grow with the
    channels), ``randsig2`` the same with variance 0.01 / d' (a second rule, tried after the
    first); ``pdesig`` the PDE signature kernel (dyadic order 2) of the RBF lift whose
    bandwidth is the median distance between time points (:func:`point_median_distance`),
    amplitude 1/d' (the protocol's amplitude axis, scaled by 1/d')."""
    import tskernels as tk

    dp = int(Z.d)
    if group == "sig":
        return {
            "trunc_sig": tk.TruncatedSignatureKernel(tk.Linear(), level=4, scale=0.5 / dp**0.5),
            "randsig": tk.RandomizedSignatureKernel(n_features=50, scale=0.1 / dp, seed=0),
        }
    if group == "randsig2":  # the second rule tried: variance 0.01 / d'
        return {"randsig2": tk.RandomizedSignatureKernel(n_features=50, scale=0.01 / dp, seed=0)}
    if group == "pdesig":
        sigma = point_median_distance(Z)
        return {
            "pdesig": tk.SignaturePDEKernel(
                tk.RBF(sigma), scale=1.0, dyadic_order=2, amplitude=1.0 / dp
            )
        }
    raise ValueError(group)


def fixed_kernel_group(kernel, names, Xc, Xt, preprocessor) -> dict:
    """(cal, test, seconds) of several kNN scorers on one fixed (not ``needs_fit``) kernel,
    normalised (``K(x, x) = 1``), on series through the fitted ``preprocessor``: one corpus
    Gram and one test Gram serve every scorer; each scorer's held-out scores are what
    :class:`novelty.detector._members.Member` computes for the spec (kNN's exact leave-one-out
    on the corpus Gram, copies held out together; nothing held out for one distinct series),
    the kernel distance being :math:`d^2 = k(x,x) + k(y,y) - 2k(x,y)`."""
    import torch

    from novelty.detector._members import (
        duplicate_groups,
        first_occurrences,
        fit_pipeline,
        held_out_scores,
        make_scorer,
    )
    from tskernels import SeriesBatch

    t0 = time.perf_counter()
    specs = {}
    for name, spec in _specs(kernel, names).items():
        specs[name] = type(spec)(
            kernel=kernel,
            scorer=spec.scorer,
            scorer_params=spec.scorer_params,
            preprocess="channel",
            normalize=True,
            name=name,
            adapt_to_corpus=True,
        )
    Zc, Zt = SeriesBatch.from_checked(Xc), SeriesBatch.from_checked(Xt)
    pipe = fit_pipeline(next(iter(specs.values())), Zc, {"channel": preprocessor})
    K = pipe.gram
    diag = torch.diagonal(K).clone()
    Kt, dt = pipe.grams(Zt)
    groups = duplicate_groups(Xc)
    n_distinct = len(Zc) if groups is None else int(groups.max()) + 1
    out = {}
    for name, spec in specs.items():
        scorer = make_scorer(spec, spec.corpus_size(K.shape[0])).fit(K)
        if n_distinct == 1:
            cal = np.empty(0)
        else:
            cal = np.asarray(held_out_scores(spec, K, diag, groups, None, scorer))
            if groups is not None:
                cal = cal[first_occurrences(groups)]
        test = np.asarray(scorer.score(Kt, dt), dtype=np.float64)
        out[name] = (cal, test)
    secs = time.perf_counter() - t0
    return {name: (cal, test, secs) for name, (cal, test) in out.items()}


def signature_group(group: str, Xc, Xt) -> dict:
    """The ``sig`` / ``pdesig`` candidates (:func:`sig_kernels`), each kernel's seconds its own
    (pre-processing included)."""
    from tskernels import SeriesBatch

    A, B = equal_length(Xc, Xt)
    t0 = time.perf_counter()
    pre = sig_preprocessor(A)
    Z = pre.transform(SeriesBatch.from_checked(A))
    prep = time.perf_counter() - t0
    out = {}
    for prefix, kernel in sig_kernels(group, Z).items():
        names = [c for c in GROUPS[group] if c.startswith(prefix + "_")]
        res = fixed_kernel_group(kernel, names, A, B, pre)
        out.update({c: (cal, s, secs + prep) for c, (cal, s, secs) in res.items()})
    return out


def _channel(X, c):
    if isinstance(X, np.ndarray):
        return np.ascontiguousarray(X[:, :, [c]])
    return [np.ascontiguousarray(x[:, [c]]) for x in X]


def robust_z(cal, s):
    from novelty.detector._members import robust_scale

    med, iqr = robust_scale(np.asarray(cal))
    return (np.asarray(s) - med) / iqr


def compute_group(group: str, Xc, Xt) -> dict:
    names = GROUPS[group]
    if group == "rcs":
        return kernel_group(_rc_kernel(False), names, Xc, Xt)
    if group == "rcp":
        return kernel_group(_rc_kernel(True), names, Xc, Xt)
    if group == "rcsd":
        return density_group(_rc_kernel(False), names, Xc, Xt)
    if group == "diff":
        dc = [np.diff(x, axis=0) if len(x) > 1 else x for x in Xc]
        dt = [np.diff(x, axis=0) if len(x) > 1 else x for x in Xt]
        if isinstance(Xc, np.ndarray):
            dc = np.stack(dc)
        if isinstance(Xt, np.ndarray) and isinstance(Xc, np.ndarray):
            dt = np.stack(dt)
        out = kernel_group(_rc_kernel(False), ["diff_knn5"], dc, dt)
        return out
    if group == "multi":
        A, B = equal_length(Xc, Xt)
        return kernel_group(_rc_kernel(False, "multirocket"), ["multi_knn5"], A, B)
    if group == "gak":
        from novelty.detector._auto import _gak_member

        return {"gak_knn1": member_scores(_gak_member(), Xc, Xt)}
    if group == "euclid":
        return {"euclid_knn1": distance_knn1("euclidean", Xc, Xt)}
    if group == "dtw":
        return {"dtw_knn1": distance_knn1("dtw", Xc, Xt, window=0.1)}
    if group == "msm":
        return {"msm_knn1": distance_knn1("msm", Xc, Xt)}
    if group == "twe":
        return {"twe_knn1": distance_knn1("twe", Xc, Xt)}
    if group == "hydra":
        from aeon.transformations.collection.convolution_based import HydraTransformer

        def make():
            return HydraTransformer(random_state=0, output_type="numpy")

        return {"hydra_knn5": feature_knn(make, Xc, Xt)}
    if group in ("sig", "pdesig", "randsig2"):
        return signature_group(group, Xc, Xt)
    if group == "chan":
        d = Xc[0].shape[1]
        if d == 1:
            return {}
        t0 = time.perf_counter()
        cals, tests = [], []
        for c in range(d):
            r = kernel_group(_rc_kernel(False), ["rcs_knn5"], _channel(Xc, c), _channel(Xt, c))
            cal, s, _ = r["rcs_knn5"]
            cals.append(robust_z(cal, cal))
            tests.append(robust_z(cal, s))
        secs = time.perf_counter() - t0
        return {"chan_knn5": (np.mean(cals, axis=0), np.mean(tests, axis=0), secs)}
    raise ValueError(group)


# ------------------------------------------------------------------ the run
def problem_file(half: str, prob) -> Path:
    safe = str(prob.cls).replace("/", "_").replace(" ", "_")
    return OUT / half / f"{prob.dataset}__{safe}.npz"


def save_merged(path: Path, data: dict) -> dict:
    """Write ``data`` into the problem file ``path`` without losing what another process wrote
    there meanwhile: under an exclusive lock (``<path>.lock``), the file's current arrays are
    read, ``data``'s arrays replace or join them, and the union replaces the file atomically
    (a temporary file of this process, then ``os.replace``). Returns the union."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = dict(np.load(path, allow_pickle=False)) if path.exists() else {}
        merged.update(data)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
        np.savez(tmp, **merged)
        os.replace(tmp, path)
    return merged


def run(half: str, shard: tuple[int, int], only: list[str] | None, datasets=None, reverse=False):
    from experiments.detector_bench.problems import default_data_dirs, half_of, load_problems
    from novelty import as_series_collection

    dirs = default_data_dirs()
    split = half_of(dirs)
    names = sorted(n for n, h in split.items() if h == half)
    if datasets:
        names = [n for n in names if n in datasets]
    names = [n for i, n in enumerate(names) if i % shard[1] == shard[0]]
    if reverse:  # a second process from the other end meets the first one only once
        names = names[::-1]
    groups = [g for g in GROUPS if only is None or g in only or set(GROUPS[g]) & set(only)]
    (OUT / half).mkdir(parents=True, exist_ok=True)
    for name in names:
        probs = load_problems(name, dirs, seed=0, max_classes=5)
        for prob in probs:
            path = problem_file(half, prob)
            data = dict(np.load(path, allow_pickle=False)) if path.exists() else {}
            todo = [
                g
                for g in groups
                if not all(f"{c}__test" in data or f"{c}__err" in data for c in GROUPS[g])
            ]
            if not todo:
                continue
            Xc = as_series_collection(prob.corpus, missing="interpolate")
            Xt = as_series_collection(prob.test, missing="interpolate")
            data["y"] = prob.y
            data["n_corpus"] = np.array(len(Xc))
            data["d"] = np.array(Xc[0].shape[1])
            for g in todo:
                t0 = time.perf_counter()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        res = compute_group(g, Xc, Xt)
                    if g == "chan" and not res:
                        data["chan_knn5__err"] = np.array("univariate")
                    for cand, (cal, s, secs) in res.items():
                        data[f"{cand}__cal"] = np.asarray(cal, dtype=np.float64)
                        data[f"{cand}__test"] = np.asarray(s, dtype=np.float64)
                        data[f"{cand}__secs"] = np.array(secs)
                except Exception as err:  # noqa: BLE001 - recorded, the run goes on
                    msg = f"{type(err).__name__}: {err}".splitlines()[0][:300]
                    for cand in GROUPS[g]:
                        data[f"{cand}__err"] = np.array(msg)
                    traceback.print_exc(limit=2)
                print(
                    f"{name} {prob.cls} {g} {time.perf_counter() - t0:.1f}s",
                    flush=True,
                )
                save_merged(path, data)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd in ("run", "proxy"):
        r = sub.add_parser(cmd)
        r.add_argument("--half", default="tuning", choices=["tuning", "confirmation"])
        r.add_argument("--shard", default="0/1")
        r.add_argument("--only", default=None, help="comma-separated groups or candidates")
        r.add_argument("--datasets", nargs="*")
        r.add_argument("--reverse", action="store_true", help="data sets in reverse order")
    a = p.parse_args(argv)
    i, m = (int(v) for v in a.shard.split("/"))
    import torch

    torch.set_num_threads(1)
    only = a.only.split(",") if a.only else None
    if a.cmd == "run":
        run(a.half, (i, m), only, a.datasets, a.reverse)
    else:
        run_proxy(a.half, (i, m), only, a.datasets)


# ------------------------------------------------------------------ label-free proxy
#: Candidates with a proxy (kNN scorers: a synthetic anomaly is scored against the corpus
#: without the series it was made from).
PROXY_CANDIDATES = ["rcs_knn5", "rcs_knn1", "rcp_knn1", "rcp_knn5", "gak_knn1", "diff_knn5",
                    "euclid_knn1", "dtw_knn1", "msm_knn1", "twe_knn1", "hydra_knn5"]  # fmt: skip
PROXY_SOURCES = 25


def synthetic(Xc, seed=0):
    """(anomalies, source rows, kinds): every kind of :mod:`novelty.detector._perturbations` made
    from each of at most ``PROXY_SOURCES`` corpus series (seeded)."""
    from novelty.detector._perturbations import PERTURBATIONS, corpus_scale, perturb

    rng = np.random.default_rng(seed)
    n = len(Xc)
    src = np.sort(rng.choice(n, size=min(n, PROXY_SOURCES), replace=False))
    sigma = corpus_scale(Xc)
    out, rows, kinds = [], [], []
    for i in src:
        for k, kind in enumerate(PERTURBATIONS):
            out.append(np.asarray(perturb(np.asarray(Xc[i]), kind, sigma, rng), dtype=np.float64))
            rows.append(i)
            kinds.append(k)
    return out, np.array(rows), np.array(kinds)


def _masked_knn(D, rows, k):
    D = np.array(D, dtype=np.float64)
    D[np.arange(len(D)), rows] = np.inf
    k = min(k, D.shape[1] - 1)
    return np.sort(D, axis=1)[:, :k].mean(axis=1)


def proxy_scores(cand: str, Xc, A, rows, memo=None) -> np.ndarray:
    """Novelty of the synthetic anomalies ``A`` by candidate ``cand`` fitted on the whole
    corpus, each against the corpus without its source series."""
    import torch

    from novelty.detector._members import fit_pipeline

    k = 5 if cand.endswith("knn5") else 1
    if cand.split("_")[0] in ("rcs", "rcp", "diff", "gak"):
        from novelty import as_series_collection
        from tskernels import SeriesBatch

        if cand.startswith("diff"):
            Xc = [np.diff(x, axis=0) for x in Xc]
            A = [np.diff(x, axis=0) for x in A]
        if cand.startswith("gak"):
            from novelty.detector._auto import _gak_member

            spec = _gak_member()  # the default recipe's GAK member
        else:
            spec = _specs(_rc_kernel(cand.startswith("rcp")), ["x_knn1"])["x_knn1"]
        key = cand.split("_")[0]
        memo = {} if memo is None else memo
        if key not in memo:
            Xb = SeriesBatch.from_checked(as_series_collection(Xc))
            pipe = fit_pipeline(spec, Xb)
            Ab = SeriesBatch.from_checked(as_series_collection(A, missing="error"))
            Kt, dt = pipe.grams(Ab)
            diag = torch.diagonal(pipe.gram)
            memo[key] = (dt[:, None] + diag[None, :] - 2 * Kt).clamp_min(0).sqrt().cpu().numpy()
        return _masked_knn(memo[key], rows, k)
    if cand.split("_")[0] in ("euclid", "dtw", "msm", "twe"):
        from aeon.distances import pairwise_distance

        metric = {"euclid": "euclidean"}.get(cand.split("_")[0], cand.split("_")[0])
        kw = {"window": 0.1} if metric == "dtw" else {}
        P, Q = equal_length(Xc, A)
        D = pairwise_distance(pooled_znorm(Q), pooled_znorm(P), method=metric, **kw)
        return _masked_knn(D, rows, k)
    if cand == "hydra_knn5":
        from aeon.transformations.collection.convolution_based import HydraTransformer
        from scipy.spatial.distance import cdist
        from sklearn.preprocessing import StandardScaler

        P, Q = equal_length(Xc, A)
        tf = HydraTransformer(random_state=0, output_type="numpy")
        F = np.log1p(np.clip(tf.fit_transform(np.ascontiguousarray(P.transpose(0, 2, 1))), 0, None))
        G = np.log1p(np.clip(tf.transform(np.ascontiguousarray(Q.transpose(0, 2, 1))), 0, None))
        sc = StandardScaler().fit(F)
        return _masked_knn(cdist(sc.transform(G), sc.transform(F)), rows, k)
    raise ValueError(cand)


def run_proxy(half: str, shard, only=None, datasets=None):
    from experiments.detector_bench.problems import default_data_dirs, half_of, load_problems
    from novelty import as_series_collection

    dirs = default_data_dirs()
    split = half_of(dirs)
    names = sorted(n for n, h in split.items() if h == half)
    names = [n for i, n in enumerate(names) if i % shard[1] == shard[0]]
    if datasets:
        names = [n for n in names if n in datasets]
    cands = [c for c in PROXY_CANDIDATES if only is None or c in only]
    for name in names:
        for prob in load_problems(name, dirs, seed=0, max_classes=5):
            path = problem_file(half, prob)
            if not path.exists():
                continue
            data = dict(np.load(path, allow_pickle=False))
            todo = [c for c in cands if f"{c}__anom" not in data and f"{c}__test" in data]
            Xc = as_series_collection(prob.corpus, missing="interpolate")
            if not todo or len(Xc) < 5:
                continue
            A, rows, kinds = synthetic(Xc)
            data["proxy_kind"] = kinds
            memo: dict = {}
            for c in todo:
                t0 = time.perf_counter()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        data[f"{c}__anom"] = proxy_scores(c, Xc, A, rows, memo)
                except Exception:  # noqa: BLE001
                    traceback.print_exc(limit=2)
                print(f"proxy {name} {prob.cls} {c} {time.perf_counter() - t0:.1f}s", flush=True)
            save_merged(path, data)


if __name__ == "__main__":
    main()
