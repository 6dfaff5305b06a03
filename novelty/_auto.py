r"""The default detector recipe and the label-free choice of kernels and scorers.

**Default recipe** (:func:`default_members`): see the README section "The detector out of the
box" for the measurements behind it.

**Selection** (:func:`select_members`), from the normal series alone:

1. the corpus is split into ``n_folds`` folds (leave-one-out below 5 series);
2. in each fold, pre-processing and kernels are fitted on the training part; each held-out
   normal series gives one synthetic anomaly of every kind of :mod:`novelty._perturbations`;
3. per kernel, one training Gram and one cross Gram serve every scorer;
4. a candidate's selection score is the mean, over the kinds of perturbation, of the ROC-AUC
   of held-out normal series against that kind's anomalies (pooled over folds), so that no
   one perturbation decides;
5. each kernel keeps its best scorer; the ``top`` best kernels (by selection score) form the
   detector, their novelty scores standardised and averaged (``top=1`` keeps the best alone).

Candidates are evaluated kernel by kernel in a fixed order; a kernel whose turn comes after
``max_time`` seconds is left out and marked "skipped (time)" in ``selection_``.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from sklearn.base import clone
from sklearn.metrics import roc_auc_score

from ._members import (
    MemberSpec,
    checked_batch,
    kernel_input,
    make_scorer,
    novelty,
    prepare_kernel,
    preprocess_mode,
)
from ._perturbations import PERTURBATIONS, corpus_scale, perturb

__all__ = ["default_members", "candidate_kernels", "select_members", "median_point_distance"]

#: Number of kernels (each with its best scorer) averaged by ``kernel="auto"``.
TOP = 2
#: Scorer candidates of the selection: (scorer, parameters).
SCORER_CANDIDATES = (
    ("knn", {}),
    ("knn", {"n_neighbors": 5, "aggregate": "mean"}),
    ("mahalanobis", {}),
    ("conformance", {}),
)


def _subset(X, idx):
    return X[idx] if isinstance(X, np.ndarray) else [X[i] for i in idx]


def median_point_distance(Z, max_points: int = 1000, seed: int = 0) -> float:
    """Median Euclidean distance between time points sampled from the series (seeded)."""
    P = np.concatenate(list(Z)) if isinstance(Z, list) else np.asarray(Z).reshape(-1, Z.shape[-1])
    rng = np.random.default_rng(seed)
    P = P[rng.choice(len(P), size=min(len(P), max_points), replace=False)]
    d2 = ((P[:, None, :] - P[None, :, :]) ** 2).sum(-1)
    med = float(np.sqrt(np.median(d2[np.triu_indices(len(P), 1)]))) if len(P) > 1 else 0.0
    return med if med > 0 else 1.0


def _preprocessed(Xs):
    """Xs (checked by the caller) z-scored per channel: read as a checked SeriesBatch."""
    from tskernels.transforms import Preprocessor

    Xb = checked_batch(Xs)
    return Preprocessor(zscore="channel").fit(Xb).transform(Xb)


def _random_convolution():
    from tskernels import RandomConvolutionKernel

    return RandomConvolutionKernel(transform="minirocket", n_kernels=10_000, seed=0)


def candidate_kernels(Xs) -> list[tuple[str, object, bool | str, bool]]:
    """(name, unfitted kernel, pre-processing, normalise?) in the order the selection
    evaluates them: the random-convolution features on the raw series (their biases are
    drawn from the corpus, so no z-score), GAK, the integral RBF (median-heuristic
    bandwidth) and the level-4 truncated signature on series z-scored per channel."""
    import tskernels as tk

    Z = _preprocessed(Xs)
    d = Z.shape[2] if isinstance(Z, np.ndarray) else Z[0].shape[1]
    sigma = median_point_distance(Z)
    signature = tk.TruncatedSignatureKernel(tk.Linear(), level=4, scale=1 / math.sqrt(d))
    return [
        ("minirocket", _random_convolution(), False, False),
        ("gak", tk.GAK(), "channel", True),
        ("integral_rbf", tk.IntegralKernel(tk.RBF(sigma)), "channel", True),
        ("signature_l4", signature, "channel", True),
    ]


def default_members(Xs) -> list[MemberSpec]:
    """The default detector: the mean of two standardised 1-NN scores, on MiniRocket features
    of the raw series (power-transformed on the corpus, Euclidean distance) and on GAK
    (median-heuristic bandwidth) of the series z-scored per channel."""
    import tskernels as tk

    return [
        MemberSpec(
            kernel=_random_convolution(),
            scorer="knn",
            preprocess=False,
            normalize=False,
            name="minirocket+knn",
        ),
        MemberSpec(kernel=tk.GAK(), scorer="knn", preprocess="channel", name="gak+knn"),
    ]


def _folds(n: int, n_folds: int, rng) -> list[np.ndarray]:
    if n < 5:
        return [np.array([i]) for i in range(n)]
    return np.array_split(rng.permutation(n), min(n_folds, n))


def select_members(
    Xs,
    *,
    kernels=None,
    max_time: float = 60.0,
    random_state: int = 0,
    preprocess: bool = True,
    normalize: bool = True,
    n_folds: int = 5,
    top: int = TOP,
):
    """Choose members on normal series alone; returns (specs, selection table). ``Xs``: the
    corpus as checked at the detector's public call (not checked again)."""
    import pandas as pd

    start = time.perf_counter()
    rng = np.random.default_rng(random_state)
    if kernels is None:
        named = candidate_kernels(Xs)
    else:
        named = [(type(k).__name__, k, preprocess, normalize) for k in kernels]
    n = len(Xs)
    folds = _folds(n, n_folds, rng)
    kinds = list(PERTURBATIONS)
    # synthetic anomalies of every held-out series, drawn once (raw series space)
    sigma = corpus_scale(Xs)
    plan = []
    for test in folds:
        train = np.setdiff1d(np.arange(n), test)
        held = _subset(Xs, test)
        anomalies, labels = [], []
        for x in held:
            for kind in kinds:
                anomalies.append(perturb(x, kind, sigma, rng))
                labels.append(kind)
        plan.append((train, held, anomalies, labels))

    rows, scores = [], {}
    for kname, kernel, prep, norm in named:
        if scores and time.perf_counter() - start > max_time:  # the first kernel always runs
            for scorer, params in SCORER_CANDIDATES:
                rows.append(_row(kname, scorer, params, prep, np.nan, "skipped (time)"))
            continue
        t0 = time.perf_counter()
        acc = {i: ([], {k: [] for k in kinds}) for i in range(len(SCORER_CANDIDATES))}
        failed = None
        for train, held, anomalies, labels in plan:
            Xtr = _subset(Xs, train)
            Xte = _stack(list(held) + anomalies, Xs)
            try:
                mode = preprocess_mode(prep)
                if mode is not None:
                    from tskernels.transforms import Preprocessor

                    # Xtr: series of the checked corpus; Xte holds new (synthetic) series,
                    # checked by the pre-processing as any input
                    pre = Preprocessor(zscore=mode).fit(checked_batch(Xtr))
                    Ztr, Zte = pre.transform(checked_batch(Xtr)), pre.transform(Xte)
                else:
                    Ztr, Zte = Xtr, Xte
                Ztr = kernel_input(kernel, Ztr, derived=mode is not None)
                Zte = kernel_input(kernel, Zte, derived=True)
                k = prepare_kernel(MemberSpec(kernel=kernel), Ztr)
                K = k.gram(Ztr, normalize=norm)
                Kt = k.gram(Zte, Ztr, normalize=norm)
                diag = torch.ones(Kt.shape[0], dtype=Kt.dtype) if norm else k.diag(Zte)
            except (ValueError, ArithmeticError) as err:
                failed = f"failed: {err}"
                break
            nh = len(held)
            for i, (scorer, params) in enumerate(SCORER_CANDIDATES):
                spec = _spec(kernel, scorer, params, prep, norm)
                try:
                    s = novelty(spec, make_scorer(spec, K.shape[0]).fit(K), Kt, diag)
                except (ValueError, ArithmeticError):
                    continue
                acc[i][0].extend(s[:nh])
                for kind, v in zip(labels, s[nh:]):
                    acc[i][1][kind].append(v)
        secs = time.perf_counter() - t0
        for i, (scorer, params) in enumerate(SCORER_CANDIDATES):
            if failed:
                rows.append(_row(kname, scorer, params, prep, np.nan, failed))
                continue
            normal, by_kind = acc[i]
            if not normal:
                rows.append(_row(kname, scorer, params, prep, np.nan, "failed"))
                continue
            aucs = {}
            for kind in kinds:
                a = np.asarray(by_kind[kind])
                y = np.r_[np.zeros(len(normal)), np.ones(len(a))]
                aucs[kind] = float(roc_auc_score(y, np.r_[normal, a])) if len(a) else np.nan
            value = float(np.nanmean(list(aucs.values())))
            row = _row(kname, scorer, params, prep, value, "ok", secs)
            row.update({f"auc_{k}": v for k, v in aucs.items()})
            rows.append(row)
            scores[len(rows) - 1] = (value, _spec(kernel, scorer, params, prep, norm, kname))
    table = pd.DataFrame(rows)
    if not scores:
        raise ValueError("no candidate kernel/scorer could be evaluated on the corpus")
    # the best scorer of each kernel, then the `top` best kernels (diverse members)
    ranked = sorted(scores.items(), key=lambda kv: -kv[1][0])
    chosen, kernels_seen = [], set()
    for idx, _ in ranked:
        kname = rows[idx]["kernel"]
        if kname not in kernels_seen:
            kernels_seen.add(kname)
            chosen.append(idx)
        if len(chosen) == max(1, int(top)):
            break
    table["chosen"] = [i in chosen for i in range(len(table))]
    table = table.sort_values("score", ascending=False, na_position="last").reset_index(drop=True)
    return [scores[i][1] for i in chosen], table


def _spec(kernel, scorer, params, prep, normalize, kname="") -> MemberSpec:
    k = params.get("n_neighbors")
    label = f"{kname}+{scorer}" + (f"(k={k})" if k else "")
    return MemberSpec(
        kernel=clone(kernel),
        scorer=scorer,
        scorer_params=dict(params),
        preprocess=prep,
        normalize=normalize,
        name=label,
    )


def _row(kname, scorer, params, prep, value, status, secs=np.nan) -> dict:
    return {
        "kernel": kname,
        "scorer": scorer,
        "params": dict(params),
        "preprocess": prep,
        "score": value,
        "status": status,
        "seconds": secs,
    }


def _stack(series: list, like):
    """An array when every series has one length (as the corpus container would be)."""
    if len({len(s) for s in series}) == 1:
        return np.stack(series)
    return list(series)
