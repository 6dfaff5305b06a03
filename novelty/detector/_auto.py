r"""The default detector recipe and the label-free choice of a scorer (``scorer="auto"``).

**Default recipe** (:func:`default_members`, issue 30): ROCKAD's recipe (standardised MiniRocket
features, mean 5-NN distance) averaged with the former default's MiniRocket 1-NN (and, for
multivariate series, its GAK 1-NN), each standardised by its held-out scores; chosen on the
benchmark's tuning half from a pool of candidates (``experiments/detector_pool``;
docs/results_detector.md, "Issue 30").

**Selection** (:func:`select_members`) serves ``scorer="auto"`` with a given kernel: the
detector passes its one kernel; several kernels can be passed here. It used to serve
``kernel="auto"`` too (four candidate kernels, the former default as baseline), which was
retired: on the benchmark's complete tuning half no weighting of candidates by the proxy beat
the fixed default ensemble by the 0.01 that issue 30 asked (the best +0.005, no better rank;
docs/results_detector.md, "The proxy on the complete tuning half, and `kernel="auto"`
retired").

From the normal series alone:

1. the corpus is split into ``n_folds`` folds (leave-one-out below 5 series);
2. in each fold, pre-processing and kernels are fitted on the training part; each held-out
   normal series gives one synthetic anomaly of every kind of
   :mod:`novelty.detector._perturbations`;
3. per kernel, one training Gram and one cross Gram serve every scorer;
4. a candidate's selection score (the *proxy*) is the mean, over the kinds of perturbation,
   of the ROC-AUC of held-out normal series against that kind's anomalies (pooled over
   folds), so that no one perturbation decides. Candidates are every (kernel, scorer), the
   ``top`` best kernels each with its best scorer averaged (``"top"``, with two kernels or
   more), and the baseline;
5. **shrinkage towards the baseline**: the baseline is the first kernel with the 1-NN scorer.
   The best other candidate replaces it only when its proxy is higher by more than
   :math:`z_{1 - \alpha / m}` standard errors of the paired difference (``alpha`` =
   ``SELECTION_ALPHA``, one-sided, Bonferroni over the :math:`m` alternatives), the standard
   error from ``n_boot`` bootstrap resamples of the held-out series (each with its own
   anomalies). A proxy that cannot tell the candidates apart on this corpus therefore keeps
   the baseline, and the selection departs from it only on evidence (tested in
   tests/test_detector_auto.py).

A corpus of one series has no held-out series to select on: the baseline is kept (one row in
``selection_`` says so). Averaged members are put on one scale by the median and IQR of their
held-out normal scores (as the detector does with calibration scores).

**Time.** ``max_time`` bounds the selection *and* the fit of the chosen members that follows
it. Candidates are evaluated kernel by kernel in the order given, the baseline's kernel first
and always (so the baseline can always be chosen). Every other kernel runs only while the
projected end stays within ``max_time``: the time spent, plus its remaining folds at the mean
time of its folds so far, plus a reserve for the final fit (``FINAL_FIT_FACTOR`` times the
selection time of each of the two most expensive kernels evaluated: the final fit of a member
costs about its kernel's selection time for corpus-fitted features, whose calibration refits
them on 10 folds, and much less for a fixed kernel's one Gram). A kernel that would overrun is
stopped after the fold that shows it and marked "skipped (time)" in ``selection_``. When
even the baseline's evaluation would end past ``max_time`` (checked after each of its folds),
the selection stops at once and the baseline is kept (one row in ``selection_`` says so).
So the whole ``fit`` takes about ``max_time`` or less, unless one fold of the first kernel plus
the baseline's own fit cost more (tested with a simulated clock in tests/test_progress.py).
"""

from __future__ import annotations

import math
import time
from functools import partial

import numpy as np
from sklearn.base import clone

from tskernels import SeriesBatch, as_series_batch

from ._members import MemberSpec, fit_pipeline, make_scorer
from ._perturbations import PERTURBATIONS, corpus_scale, perturb
from ._progress import plan, step

__all__ = ["default_members", "recipe_member", "select_members"]

#: Number of kernels (each with its best scorer) averaged by the "top" candidate.
TOP = 2
#: One-sided level of the test that lets a candidate replace the baseline (Bonferroni over
#: the alternatives): the conventional 5 %, not tuned.
SELECTION_ALPHA = 0.05
#: Bootstrap resamples of the held-out series for the standard error of a proxy difference.
N_BOOT = 200
#: Final fit of a chosen member, in units of its kernel's selection time (see "Time"): 0.6 for
#: features learned from the corpus (10 calibration refits of them on 90 % of the corpus vs 5
#: selection folds of 80 % plus 8 series per held-out one; measured about 0.45 for MiniRocket
#: on 200 series x 500 steps x 4 channels); a fixed kernel's one corpus Gram costs less.
FINAL_FIT_FACTOR = {True: 0.6, False: 0.25}
#: Scorer candidates of the selection: (scorer, parameters).
SCORER_CANDIDATES = (
    ("knn", {}),
    ("knn", {"n_neighbors": 5, "aggregate": "mean"}),
    ("mahalanobis", {}),
    ("conformance", {}),
)


#: Below this many normal series the default recipe leaves out the members whose features
#: are learned from the corpus (a power transform fitted on one or two series means nothing).
MIN_LEARNED_FEATURES = 3


def _random_convolution():
    """MiniRocket features of the default recipe's 1-NN member; after an equal-length fit a
    series of another length gets the same features at its own length
    (``other_lengths="native"``), so the detector scores any length."""
    from tskernels import RandomConvolutionKernel

    return RandomConvolutionKernel(
        transform="minirocket", n_kernels=10_000, seed=0, other_lengths="native"
    )


def _standardised_convolution():
    """MiniRocket features standardised on the corpus (no power transform): ROCKAD's recipe
    (10,000 kernels, seed 0; any length scored, as :func:`_random_convolution`)."""
    from tskernels import RandomConvolutionKernel

    return RandomConvolutionKernel(
        transform="minirocket",
        n_kernels=10_000,
        seed=0,
        power_transform=False,
        other_lengths="native",
    )


def recipe_member() -> MemberSpec:
    """ROCKAD's recipe as a member: MiniRocket features of the raw series standardised on the
    corpus, novelty = mean Euclidean distance to the ``min(5, N)`` nearest corpus series."""
    return MemberSpec(
        kernel=_standardised_convolution(),
        scorer="knn",
        scorer_params={"n_neighbors": 5, "aggregate": "mean"},
        preprocess=False,
        normalize=False,
        name="minirocket_std+knn(k=5)",
        adapt_to_corpus=True,
    )


def _rocket_member() -> MemberSpec:
    """MiniRocket features of the raw series (power-transformed on the corpus) with the 1-NN
    distance (the former default's first member)."""
    return MemberSpec(
        kernel=_random_convolution(),
        scorer="knn",
        preprocess=False,
        normalize=False,
        name="minirocket+knn",
        adapt_to_corpus=True,
    )


def _gak_member() -> MemberSpec:
    """GAK (median-heuristic bandwidth) 1-NN on series z-scored per channel."""
    import tskernels as tk

    return MemberSpec(
        kernel=tk.GAK(), scorer="knn", preprocess="channel", name="gak+knn", adapt_to_corpus=True
    )


def default_members(Xs) -> list[MemberSpec]:
    """The default detector (issue 30; docs/results_detector.md, chosen on the tuning half by
    greedy forward selection from ROCKAD's recipe, a rule on the data's shape): the mean of
    standardised scores of ROCKAD's recipe (:func:`recipe_member`) and MiniRocket features
    power-transformed on the corpus with the 1-NN distance; for multivariate series (d > 1)
    also GAK 1-NN on series z-scored per channel. A corpus of fewer than
    ``MIN_LEARNED_FEATURES`` series gets the GAK member alone."""
    if len(Xs) < MIN_LEARNED_FEATURES:
        return [_gak_member()]
    if _channels(Xs) > 1:
        return [recipe_member(), _rocket_member(), _gak_member()]
    return [recipe_member(), _rocket_member()]


def _channels(Xs) -> int:
    """The number of channels of a batch or list of (T_i, d) series."""
    d = getattr(Xs, "d", None)
    return int(d) if d is not None else int(np.shape(Xs[0])[-1])


def _folds(n: int, n_folds: int, rng) -> list[np.ndarray]:
    if n < 5:
        return [np.array([i]) for i in range(n)]
    return np.array_split(rng.permutation(n), min(n_folds, n))


def select_members(
    Xs,
    *,
    kernels,
    max_time: float = 60.0,
    random_state: int = 0,
    preprocess: bool = True,
    normalize: bool = True,
    n_folds: int = 5,
    top: int = TOP,
    n_boot: int = N_BOOT,
):
    """Choose members for the given ``kernels`` (a non-empty sequence of unfitted
    ``tskernels`` kernels, each with ``preprocess`` and ``normalize``) on normal series
    alone; returns (specs, selection table). ``Xs``: the corpus as checked at the detector's
    public call (not checked again).

    Three steps (module docstring): :func:`_plan_folds` (folds and synthetic anomalies),
    :func:`_evaluate` (every kernel's Grams, every scorer's proxy, under the time budget) and
    :func:`_choose` (the candidates against the baseline, the first kernel with the 1-NN
    scorer). A corpus of one series: the baseline, without selection."""
    Xs = SeriesBatch.from_checked(Xs)  # a checked collection given as numpy: shared
    start = time.perf_counter()
    rng = np.random.default_rng(random_state)
    named = [(type(k).__name__, k, preprocess, normalize) for k in kernels]
    if not named:
        raise ValueError("select_members needs at least one kernel, got none")
    if len(Xs) < 2:  # no held-out series with a training part: nothing to select on
        return _no_selection(named[0], "one normal series, no held-out series to select on")
    folds = _plan_folds(Xs, n_folds, rng)
    plan(len(named) * len(folds))
    try:
        rows, cands, keys = _evaluate(Xs, named, folds, _Budget(start, max_time))
    except _Overrun as over:  # even the baseline would end past max_time: no selection
        why = f"evaluating it would end at {over.end:.0f} s, past max_time={max_time:g} s"
        return _no_selection(named[0], why)
    if not cands:
        raise ValueError("no candidate kernel/scorer could be evaluated on the corpus")
    kernel_of = {row: position for (position, _), row in keys.items()}
    return _choose(rows, cands, kernel_of, keys.get((0, 0)), top, n_boot, random_state)


# ------------------------------------------------------------- step 1: fold planning
def _plan_folds(Xs, n_folds: int, rng) -> list[tuple]:
    """(training rows, held-out series, their synthetic anomalies, the anomalies' kinds) per
    fold: ``n_folds`` folds (leave-one-out below 5 series), one anomaly of every kind of
    perturbation per held-out series, drawn once in the raw series' space."""
    folds = _folds(len(Xs), n_folds, rng)
    kinds = list(PERTURBATIONS)
    sigma = corpus_scale(Xs)
    planned = []
    for test in folds:
        train = np.setdiff1d(np.arange(len(Xs)), test)
        held = Xs[test]
        anomalies, labels = [], []
        for x in held:
            for kind in kinds:
                anomalies.append(perturb(x, kind, sigma, rng))
                labels.append(kind)
        planned.append((train, held, anomalies, labels))
    return planned


# ---------------------------------------------------------------- step 2: evaluation
class _Overrun(Exception):
    """Evaluating the baseline's kernel would end past ``max_time`` (at ``end`` s)."""

    def __init__(self, end: float):
        self.end = end


class _Budget:
    """The time rule of the module docstring ("Time"): the time spent since ``start`` plus a
    reserve for the final fit, the two largest final-fit costs of the kernels evaluated."""

    def __init__(self, start: float, max_time: float):
        self.start = start
        self.max_time = max_time
        self.costs: list[float] = []  # final-fit reserve of each kernel evaluated (seconds)

    def reserve(self, extra: float = 0.0) -> float:
        return sum(sorted(self.costs + [extra], reverse=True)[:2])

    def spent(self) -> bool:
        """Whether no further kernel fits: the time so far plus the reserve is past it."""
        return time.perf_counter() - self.start + self.reserve() > self.max_time

    def projected_end(self, t0: float, done: int, n_folds: int, factor: float) -> float:
        """The end of a kernel begun at ``t0`` after ``done`` of its ``n_folds`` folds, at the
        mean time of its folds so far, with its final fit (``factor`` times its time) in the
        reserve."""
        spent = time.perf_counter() - t0
        projected = spent * n_folds / done
        return t0 + projected - self.start + self.reserve(factor * projected)

    def overruns(self, t0: float, done: int, n_folds: int, factor: float, required: bool):
        """Whether the kernel would end past ``max_time`` (:meth:`projected_end`); for a
        the baseline's kernel (``required``) that raises :class:`_Overrun` instead."""
        end = self.projected_end(t0, done, n_folds, factor)
        if end > self.max_time and required:  # even the baseline would overrun
            raise _Overrun(end)
        return end > self.max_time


def _evaluate(Xs, named: list, folds: list, budget: _Budget):
    """(rows of the selection table, {row: (spec, held-out normal scores, anomaly scores)}
    of the candidates evaluated, {(kernel position, scorer index): row}), kernel by kernel in
    the order of ``named``; the first (the baseline's) always runs, or raises
    :class:`_Overrun`."""
    kinds = list(PERTURBATIONS)
    rows, cands, keys = [], {}, {}
    for position, (kname, kernel, prep, norm) in enumerate(named):
        required = position == 0
        factor = FINAL_FIT_FACTOR[bool(getattr(kernel, "needs_fit", False))]
        if not required and budget.spent():
            for scorer, params in SCORER_CANDIDATES:
                rows.append(_row(kname, scorer, params, prep, np.nan, "skipped (time)"))
            step(f"{kname}: skipped (time)", n=len(folds))
            continue
        t0 = time.perf_counter()
        stop = partial(budget.overruns, t0, n_folds=len(folds), factor=factor, required=required)
        acc, broken, failed = _kernel_scores(Xs, named[position], folds, kinds, stop)
        secs = time.perf_counter() - t0
        if not failed:
            budget.costs.append(factor * secs)
        for i, (scorer, params) in enumerate(SCORER_CANDIDATES):
            if failed:
                rows.append(_row(kname, scorer, params, prep, np.nan, failed))
                continue
            normal, by_kind = acc[i]
            if i in broken or not normal:
                rows.append(_row(kname, scorer, params, prep, np.nan, "failed"))
                continue
            normal = np.asarray(normal)
            anomalies = np.stack([np.asarray(by_kind[kind]) for kind in kinds])  # (kinds, n)
            aucs = dict(zip(kinds, proxy_aucs(normal, anomalies)))
            value = float(np.mean(list(aucs.values())))
            row = _row(kname, scorer, params, prep, value, "ok", secs)
            row.update({f"auc_{k}": v for k, v in aucs.items()})
            rows.append(row)
            spec = _spec(kernel, scorer, params, prep, norm, kname)
            cands[len(rows) - 1] = (spec, normal, anomalies)
            keys[(position, i)] = len(rows) - 1
    return rows, cands, keys


def _kernel_scores(Xs, candidate: tuple, folds: list, kinds: list, stop):
    """The folds of one candidate kernel ``(name, kernel, pre-processing, normalise?)``: per
    fold, the member pipeline fitted on the training part, one training Gram and one cross
    Gram for every scorer candidate. Returns ({scorer index: (held-out normal scores, {kind:
    anomaly scores})}, the scorers that failed in some fold, the failure status or None);
    ``stop(done)`` after each fold but the last says whether the kernel would overrun."""
    kname, kernel, prep, norm = candidate
    acc = {i: ([], {k: [] for k in kinds}) for i in range(len(SCORER_CANDIDATES))}
    broken: set[int] = set()  # scorers that failed in some fold: not comparable
    failed = None
    for done, (train, held, anomalies, labels) in enumerate(folds, start=1):
        try:
            # the member pipeline fitted on the training part of the checked corpus; the
            # held-out part is joined by new (synthetic) series, checked as any input
            anomalies_batch = as_series_batch(anomalies, name="synthetic anomalies")
            Xte = SeriesBatch.concat([held, anomalies_batch])
            spec = MemberSpec(kernel, preprocess=prep, normalize=norm)
            pipeline = fit_pipeline(spec, Xs[train])
            K = pipeline.gram
            Kt, diag = pipeline.grams(Xte)
        except (ValueError, ArithmeticError) as err:
            failed = f"failed: {err}"
            step(n=len(folds) - done + 1)
            break
        nh = len(held)
        for i, (scorer, params) in enumerate(SCORER_CANDIDATES):
            if i in broken:
                continue
            spec = _spec(kernel, scorer, params, prep, norm)
            try:
                s = make_scorer(spec, K.shape[0]).fit(K).score(Kt, diag)
            except (ValueError, ArithmeticError):
                broken.add(i)
                continue
            acc[i][0].extend(s[:nh])
            for kind, v in zip(labels, s[nh:]):
                acc[i][1][kind].append(v)
        step(f"{kname}: fold {done}/{len(folds)}")
        if done < len(folds) and stop(done):  # this kernel would overrun: stop it here
            failed = "skipped (time)"
            step(n=len(folds) - done)
            break
    return acc, broken, failed


# ------------------------------------------------------------------ step 3: decision
def _choose(
    rows: list,
    cands: dict,
    kernel_of: dict,
    baseline: int | None,
    top: int,
    n_boot: int,
    seed: int,
):
    """(the chosen specs, the selection table): the candidates are every evaluated (kernel,
    scorer), the ``top`` best kernels each with its best scorer averaged ("top") and the
    baseline (the row of the first kernel's 1-NN, None when it was not evaluated: then the
    highest proxy wins); :func:`_decide` picks one. ``kernel_of``: candidate row -> the
    kernel's position in the given kernels (two kernels of one class are two kernels)."""
    import pandas as pd

    # the best scorer of each kernel, then the `top` best kernels (diverse members)
    ranked = sorted(cands, key=lambda i: -rows[i]["score"])
    best_of_kernel, kernels_seen = [], set()
    for idx in ranked:
        if kernel_of[idx] not in kernels_seen:
            kernels_seen.add(kernel_of[idx])
            best_of_kernel.append(idx)
    options = {f"row{i}": [i] for i in cands}  # name -> candidate rows
    if len(best_of_kernel) >= 2 and top > 1:
        options["top"] = best_of_kernel[: int(top)]
    if baseline is not None:
        options["baseline"] = [baseline]
    scored = {name: _combined(cands, idx) for name, idx in options.items()}
    has_baseline = "baseline" in options
    choice, stats = _decide(scored, "baseline" if has_baseline else None, n_boot, seed)

    table = pd.DataFrame(rows)
    table["chosen"] = False
    table["vs_baseline"] = [stats.get(f"row{i}", (np.nan,))[0] for i in range(len(rows))]
    table["z"] = [stats.get(f"row{i}", (np.nan, np.nan))[1] for i in range(len(rows))]
    extra = []
    for name in ("top", "baseline"):
        if name in options:
            labels_ = " + ".join(cands[i][0].name for i in options[name])
            value = _proxy(*scored[name])
            d, z = stats.get(name, (np.nan, np.nan))
            extra.append(
                {"candidate": name, "kernel": name, "scorer": labels_, "score": value,
                 "status": "ok", "vs_baseline": d, "z": z, "chosen": False}
            )  # fmt: skip
    if extra:
        table = pd.concat([table, pd.DataFrame(extra)], ignore_index=True)
    idx = options[choice]
    if choice in ("top", "baseline"):
        table.loc[table["kernel"] == choice, "chosen"] = True
    else:
        table.loc[idx[0], "chosen"] = True
    table = table.sort_values("score", ascending=False, na_position="last").reset_index(drop=True)
    return [cands[i][0] for i in idx], table


def _no_selection(first, why: str):
    """(the baseline's specs, a one-row table) when there is no selection (``why``: a corpus
    of one series, or evaluating the baseline alone would end past ``max_time``): the
    baseline, the first kernel ``first`` with the 1-NN scorer, is kept."""
    import pandas as pd

    kname, kernel, prep, norm = first
    specs = [_spec(kernel, "knn", {}, prep, norm, kname)]
    row = {"candidate": "baseline", "kernel": "baseline",
           "scorer": " + ".join(s.label() for s in specs), "score": np.nan,
           "status": f"kept the baseline without selection: {why}", "chosen": True}  # fmt: skip
    return specs, pd.DataFrame([row])


def proxy_aucs(normal: np.ndarray, anomalies: np.ndarray, weights=None) -> np.ndarray:
    r"""ROC-AUC of each kind's anomalies against the normal scores, (kinds,) or, with bootstrap
    ``weights`` (B, n) counts of the held-out series, (B, kinds):
    :math:`\sum_{ij} w_i w_j [a_j > s_i] / (\sum w)^2` (ties count 1/2)."""
    s = normal[None, :, None]  # (1, n, 1)
    a = anomalies[:, None, :]  # (kinds, 1, n)
    C = (a > s).astype(np.float64) + 0.5 * (a == s)  # (kinds, n_normal, n_anomaly)
    if weights is None:
        return C.mean(axis=(1, 2))
    W = np.asarray(weights, dtype=np.float64)
    num = np.einsum("bi,kij,bj->bk", W, C, W)
    return num / (W.sum(axis=1) ** 2)[:, None]


def _proxy(normal, anomalies) -> float:
    return float(np.mean(proxy_aucs(normal, anomalies)))


def _combined(cands: dict, idx: list[int]):
    """(normal, anomalies) of the mean of the members' scores, each standardised by the
    median and IQR of its held-out normal scores (one member: its scores as they are)."""
    if len(idx) == 1:
        return cands[idx[0]][1], cands[idx[0]][2]
    from ._members import robust_scale

    normal, anomalies = 0.0, 0.0
    for i in idx:
        med, iqr = robust_scale(cands[i][1])
        normal = normal + (cands[i][1] - med) / iqr
        anomalies = anomalies + (cands[i][2] - med) / iqr
    return normal / len(idx), anomalies / len(idx)


def _decide(scored: dict, baseline: str | None, n_boot: int, seed: int):
    """The chosen option and, per option, (proxy - baseline proxy, z = that / bootstrap SE).

    Without a baseline the highest proxy wins. With one, the best other option (highest
    proxy) wins only if its z exceeds the one-sided Bonferroni quantile
    :math:`z_{1 - \alpha/m}`, m = number of other options; else the baseline."""
    from scipy.stats import norm

    point = {name: _proxy(*v) for name, v in scored.items()}
    if baseline is None:
        return max(point, key=point.get), {}
    n = len(scored[baseline][0])
    rng = np.random.default_rng(seed)
    W = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot)
    boot = {name: proxy_aucs(*v, weights=W).mean(axis=1) for name, v in scored.items()}
    stats = {}
    for name in scored:
        d = point[name] - point[baseline]
        se = float(np.std(boot[name] - boot[baseline], ddof=1))
        stats[name] = (d, d / se if se > 0 else (0.0 if d == 0 else math.copysign(np.inf, d)))
    others = [name for name in scored if name != baseline]
    if not others:
        return baseline, stats
    best = max(others, key=point.get)
    critical = float(norm.ppf(1.0 - SELECTION_ALPHA / len(others)))
    return (best if stats[best][1] > critical else baseline), stats


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
        adapt_to_corpus=True,
    )


def _row(kname, scorer, params, prep, value, status, secs=np.nan) -> dict:
    k = params.get("n_neighbors")
    return {
        # one name per candidate (the member's label): "knn" and "knn(k=5)" apart
        "candidate": f"{kname}+{scorer}" + (f"(k={k})" if k else ""),
        "kernel": kname,
        "scorer": scorer,
        "params": dict(params),
        "preprocess": prep,
        "score": value,
        "status": status,
        "seconds": secs,
    }
