r"""One (pre-processing, kernel, scorer) pipeline of a detector, fitted on a corpus, with its
held-out calibration scores.

A :class:`Member` turns series into novelty scores (higher = more novel):

1. optional pre-processing fitted on the corpus (:class:`tskernels.transforms.Preprocessor`);
2. the kernel, fitted on the corpus when its parameters depend on data (GAK's median
   heuristic, the random-convolution features), and the corpus Gram :math:`K`;
3. a Gram-level scorer (:class:`~novelty.scorers._gram_scorer.GramScorer`, named in
   :func:`~novelty.scorer_registry` or given as an instance) fitted on :math:`K`.

Its calibration scores are held-out scores of the corpus series: leave-one-out for the kNN
scorer (exact: each series against the others, read off :math:`K`), leave-one-out refits for
N <= ``LOO_MAX`` series, else ``CALIBRATION_FOLDS``-fold refits. A kernel whose features are
learned from the corpus (``needs_fit``) is refitted without the held-out series too
(:func:`cross_fitted_scores`). They feed the conformal
threshold and p-values (:mod:`novelty.detector._calibration`) and, for an ensemble, the robust
standardisation :math:`(s - \operatorname{median}(c)) / \operatorname{IQR}(c)` that puts the
members' scores on one scale before they are averaged.

**Exact duplicates.** Two corpus series are copies when their values are exactly equal after
the detector's input reading (the checked collection that ``Member.fit`` receives: same length,
same values, -0.0 equal to 0.0; :func:`duplicate_groups`). A held-out score must not see the
series it scores, so every copy of a series is held out with it: the kNN leave-one-out leaves
out the whole group (distances to its copies are +inf, like the diagonal), and the refits put
all copies of a series in the same fold (leave-one-group-out, or folds of groups). The
calibration then has one score per *distinct* series (that of its first occurrence): a series
duplicated r times is one held-out unit, not r exchangeable ones, since the exchangeability
behind the conformal guarantee is that of distinct normal series (counting copies r times
would let a heavily duplicated series move the threshold). A corpus without copies is
calibrated exactly as before (no grouping at all).

Inputs are checked once, at the detector's public call (:func:`novelty.as_series_collection`),
and become a :class:`tskernels.SeriesBatch`, the one series type below it: ``Member.fit`` and
``Member.novelty`` take that batch and hand it to the pre-processing and the kernel, which
trust it (no second scan). The pre-processing returns a batch confirmed finite by one
reduction; the selection's synthetic anomalies are new data, checked once as any input
(:func:`tskernels.as_series_batch`). A kernel computing in float32 casts the batch and checks
the range of the cast.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.base import clone

from tskernels import SeriesBatch

from ..scorers._folds import CALIBRATION_FOLDS, calibration_folds
from ..scorers._gram_scorer import GramScorer, union_gram
from ..scorers._scorer_registry import scorer_name, scorer_names, scorer_registry
from ._progress import step

__all__ = [
    "SCORERS",  # noqa: F822 (module __getattr__: read afresh)
    "MemberSpec",
    "BaseMember",
    "Member",
    "duplicate_groups",
    "make_scorer",
]

#: Corpus sizes up to this refit a corpus-fitted kernel leaving one series out, larger ones
#: CALIBRATION_FOLDS folds.
CROSS_FIT_LOO_MAX = 20


@dataclass(frozen=True)
class MemberSpec:
    """What to fit: an unfitted kernel, a scorer (a name of :func:`novelty.scorer_registry`
    with ``scorer_params`` its constructor parameters, or an unfitted GramScorer instance) and
    the variance-norm scorers' ``alpha`` and ``rank`` (their ``max_rank``).

    ``adapt_to_corpus``: the scorer is adapted to the size N of the corpus it is fitted on
    (``limit_to_corpus(N)``: kNN lowers ``n_neighbors`` to N), at fit, in each held-out refit
    and at ``update``; the members of the default recipe and of the selection set it. False:
    the parameters are used as given (a ``n_neighbors`` above N is an error). A spec of a
    tskernels 0.1 file (loaded with ``trust_pickle=True``) reads it as ``name != ""``, the
    rule it replaces (:func:`novelty.detector._persistence.load_detector`).

    ``kind``: the member kind that fits this spec, a key of
    :data:`novelty.detector._member_kinds.MEMBER_KINDS` (``"gram"``: pre-processing, kernel
    Gram and scorer)."""

    kernel: object
    scorer: str | GramScorer = "knn"
    alpha: float = 1e-2
    rank: int | None = None
    scorer_params: dict = field(default_factory=dict)
    preprocess: bool | str = "channel"  # False, "channel" or "step" (the protocol's)
    normalize: bool = True
    name: str = ""
    adapt_to_corpus: bool = False
    kind: str = "gram"

    def __post_init__(self):
        from tskernels import StaticKernel

        if isinstance(self.kernel, StaticKernel):
            k = type(self.kernel).__name__
            raise ValueError(
                f"`kernel` {self.kernel!r} is a static kernel on points, not on series: put a "
                f"series kernel around it, e.g. FlattenedKernel({k}(...)) or "
                f"IntegralKernel({k}(...))"
            )

    @classmethod
    def of_detector(cls, det) -> MemberSpec:
        """The one member a detector with a given kernel fits: its ``kernel``, ``scorer``,
        ``alpha``, ``rank``, ``scorer_params``, ``preprocess`` and ``normalize``."""
        return cls(
            kernel=det.kernel,
            scorer=det.scorer,
            alpha=float(det.alpha),
            rank=det.rank,
            scorer_params=dict(det.scorer_params or {}),
            preprocess=det.preprocess,
            normalize=bool(det.normalize),
        )

    def corpus_size(self, n: int) -> int | None:
        """The corpus size to adapt the scorer to (:func:`make_scorer`'s ``n_corpus``): ``n``
        when ``adapt_to_corpus``, else None."""
        return n if self.adapt_to_corpus else None

    def label(self) -> str:
        scorer = self.scorer if isinstance(self.scorer, str) else scorer_name(self.scorer)
        return self.name or f"{type(self.kernel).__name__}+{scorer}"


def preprocess_mode(preprocess) -> str | None:
    """None (no pre-processing), "channel" (True) or "step"."""
    if preprocess is False or preprocess is None:
        return None
    if preprocess is True:
        return "channel"
    if preprocess in ("channel", "step"):
        return preprocess
    raise ValueError(f'`preprocess` must be True, False, "channel" or "step", got {preprocess!r}')


def __getattr__(name: str):
    if name == "SCORERS":  # read at each use: a scorer registered later is in it
        return scorer_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def scorer_class(scorer) -> type[GramScorer]:
    """The GramScorer class of a spec's ``scorer``: a registry name or an instance."""
    if isinstance(scorer, GramScorer):
        return type(scorer)
    registry = scorer_registry()
    if scorer not in registry:
        raise ValueError(f"`scorer` must be one of {tuple(registry)}, got {scorer!r}")
    return registry[scorer]


def scorer_params(spec: MemberSpec, cls: type) -> dict:
    """Constructor parameters of a scorer given by name: ``alpha`` and ``max_rank`` from the
    spec's ``alpha`` and ``rank`` when ``cls`` declares them (``rank`` None: the class's
    default), then ``scorer_params`` (which may override them)."""
    params = {}
    if "alpha" in cls._parameter_constraints:
        params["alpha"] = float(spec.alpha)
    if "max_rank" in cls._parameter_constraints and spec.rank is not None:
        params["max_rank"] = int(spec.rank)
    params.update(spec.scorer_params or {})
    return params


def make_scorer(spec: MemberSpec, n_corpus: int | None = None) -> GramScorer:
    """An unfitted GramScorer for ``spec``: a clone of an instance, or the registry's class
    built with ``scorer_params`` (for the variance-norm scorers, ``alpha`` and ``rank`` of the
    spec give ``alpha`` and ``max_rank`` unless ``scorer_params`` sets them,
    :func:`scorer_params`). With a corpus size ``n_corpus``, the scorer's
    ``limit_to_corpus(n_corpus)`` adapts it (kNN: ``n_neighbors`` at most N)."""
    if isinstance(spec.scorer, GramScorer):
        if spec.scorer_params:
            raise ValueError(
                f"`scorer_params` {spec.scorer_params!r} apply to a scorer given by name; the "
                f"scorer instance {spec.scorer!r} carries its own parameters (set them on it)"
            )
        scorer = clone(spec.scorer)
    else:
        cls = scorer_class(spec.scorer)
        params = scorer_params(spec, cls)
        unknown = sorted(set(params) - set(cls._parameter_constraints))
        if unknown:
            raise ValueError(
                f"`scorer_params` has unknown parameter(s) {unknown} for scorer "
                f"{spec.scorer!r} ({cls.__name__}); its parameters: "
                f"{sorted(cls._parameter_constraints)}"
            )
        scorer = cls(**params)
    if n_corpus is not None:
        scorer.limit_to_corpus(n_corpus)
    return scorer


def planned_steps(spec: MemberSpec, n: int) -> int:
    """Progress steps of fitting ``spec`` on ``n`` series (:mod:`novelty.detector._progress`): the
    kernel and its Gram, then one per calibration refit (the scorer class's
    ``held_out_steps``: none for kNN's exact leave-one-out)."""
    if n <= 1:
        return 1
    if getattr(spec.kernel, "needs_fit", False) and n >= 3:
        return 1 + (n if n <= CROSS_FIT_LOO_MAX else CALIBRATION_FOLDS)
    return 1 + scorer_class(spec.scorer).held_out_steps(n)


def prepare_kernel(spec: MemberSpec, Z):
    """A fresh copy of the spec's kernel, fitted on Z when it has data-dependent parameters."""
    kernel = clone(spec.kernel)
    if hasattr(kernel, "fit"):
        kernel.fit(Z)
    return kernel


def fit_preprocessing(spec: MemberSpec, X: SeriesBatch, preprocessors: dict | None = None):
    """(pre-processing, pre-processed corpus) of ``spec`` on the checked corpus ``X``: the
    :class:`tskernels.transforms.Preprocessor` of its mode fitted on ``X`` (taken from, or
    stored in, the cache ``preprocessors`` keyed by mode, so the members of one detector share
    it) and its output, a SeriesBatch; or (None, ``X``) without pre-processing."""
    mode = preprocess_mode(spec.preprocess)
    if mode is None:
        return None, X
    cache = {} if preprocessors is None else preprocessors
    if mode not in cache:
        from tskernels.transforms import Preprocessor

        cache[mode] = Preprocessor(zscore=mode).fit(X)
    return cache[mode], cache[mode].transform(X)


def cross_grams(kernel, Z, corpus, normalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(Kt, diag) of the fitted ``kernel`` for the series ``Z`` against the ``corpus`` (both
    SeriesBatch): ``Kt`` [i, j] = k(z_i, x_j), Tensor (n, N), normalised when
    ``normalize``, and ``diag`` [i] = k(z_i, z_i), Tensor (n,): ones when normalised (a
    normalised kernel's diagonal is 1), else ``kernel.diag(Z)``."""
    Kt = kernel.gram(Z, corpus, normalize=normalize)
    if normalize:
        return Kt, torch.ones(Kt.shape[0], dtype=Kt.dtype, device=Kt.device)
    return Kt, kernel.diag(Z)


@dataclass(frozen=True)
class FittedPipeline:
    """A member's pipeline fitted on a corpus (:func:`fit_pipeline`)."""

    preprocessor: object  # the fitted Preprocessor, None without pre-processing
    kernel: object  # a fitted copy of the spec's kernel
    corpus: SeriesBatch  # the pre-processed corpus (the checked corpus without pre-processing)
    gram: torch.Tensor  # the corpus Gram (N, N), normalised when `normalize`
    normalize: bool

    def transform(self, X: SeriesBatch) -> SeriesBatch:
        """What the kernel receives for the series ``X``: ``X`` through the pre-processing."""
        return X if self.preprocessor is None else self.preprocessor.transform(X)

    def grams(self, X: SeriesBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(Kt, diag) of new series ``X`` against the corpus (:func:`cross_grams`)."""
        return cross_grams(self.kernel, self.transform(X), self.corpus, self.normalize)


def fit_pipeline(
    spec: MemberSpec, X: SeriesBatch, preprocessors: dict | None = None
) -> FittedPipeline:
    """The member pipeline of ``spec`` on the checked corpus ``X``, the one sequence that
    :class:`Member` and the selection (:func:`novelty.detector._auto.select_members`) both run: the
    pre-processing fitted on ``X`` (:func:`fit_preprocessing`), a copy of the kernel fitted on
    its output (:func:`prepare_kernel`) and the corpus Gram."""
    preprocessor, Z = fit_preprocessing(spec, X, preprocessors)
    kernel = prepare_kernel(spec, Z)
    K = kernel.gram(Z, normalize=spec.normalize)
    return FittedPipeline(preprocessor, kernel, Z, K, bool(spec.normalize))


def duplicate_groups(X) -> np.ndarray | None:
    """Exact copies among the series of the checked collection ``X`` ((n, T, d) array, list of
    (T_i, d) arrays, or a SeriesBatch): group ids (n,), numbered in order of first occurrence,
    equal for series of equal length whose values are all equal (-0.0 equal to 0.0); ``None``
    when every series is distinct. Each series is hashed (:func:`series_digest`) and a hash
    match is confirmed by comparing the values (:func:`groups_of_digests`), so a hash
    collision never merges distinct series. Within :func:`known_duplicate_groups` (``X``
    itself), the groups its caller found are returned without hashing again."""
    known = _KNOWN_GROUPS.get()
    if known is not None and known[0] is X:
        return None if known[1] is None else known[1].copy()
    series = _series_list(X)
    return groups_of_digests([series_digest(x) for x in series], series.__getitem__)


def groups_of_digests(digests: list, series_at) -> np.ndarray | None:
    """:func:`duplicate_groups` of n series from their digests (:func:`series_digest`, in
    order) and ``series_at(i)``, series i as an array (read only for a digest seen before,
    to confirm the match by the values): group ids (n,) numbered in order of first
    occurrence, or None when every series is distinct."""
    n = len(digests)
    groups = np.empty(n, dtype=np.int64)
    seen: dict[bytes, list[int]] = {}  # hash -> first rows of the groups with that hash
    n_groups = 0
    for i, h in enumerate(digests):
        firsts = seen.setdefault(h, [])
        if firsts:
            x = np.ascontiguousarray(series_at(i), dtype=np.float64) + 0.0
        for j in firsts:
            if np.array_equal(series_at(j), x):
                groups[i] = groups[j]
                break
        else:
            firsts.append(i)
            groups[i] = n_groups
            n_groups += 1
    return None if n_groups == n else groups


#: (collection, its duplicate groups) while :func:`known_duplicate_groups` is active
_KNOWN_GROUPS: contextvars.ContextVar = contextvars.ContextVar("known_groups", default=None)


@contextlib.contextmanager
def known_duplicate_groups(X, groups: np.ndarray | None):
    """Within: :func:`duplicate_groups` of this very collection ``X`` (the same object) is
    ``groups`` (a copy), found once by the caller (the detector's fit hashes its corpus once
    for all its members)."""
    token = _KNOWN_GROUPS.set((X, groups))
    try:
        yield
    finally:
        _KNOWN_GROUPS.reset(token)


def series_digest(x) -> bytes:
    """BLAKE2b digest (16 bytes) of one series' shape and float64 values (-0.0 as 0.0): equal
    for exact copies (:func:`duplicate_groups` confirms a match by the values)."""
    x = np.ascontiguousarray(x, dtype=np.float64) + 0.0
    h = hashlib.blake2b(repr(x.shape).encode(), digest_size=16)
    h.update(x.tobytes())
    return h.digest()


def _series_list(X) -> list:
    """The series of a checked collection as numpy arrays (T_i, d), without copying."""
    return list(X)


def first_occurrences(groups: np.ndarray) -> np.ndarray:
    """Row of the first occurrence of each group (in group order)."""
    return np.unique(np.asarray(groups), return_index=True)[1]


def held_out_scores(
    spec: MemberSpec,
    K: torch.Tensor,
    diag: torch.Tensor,
    groups: np.ndarray | None = None,
    models: list | None = None,
    scorer: GramScorer | None = None,
) -> np.ndarray:
    """Novelty of every corpus series by a scorer fitted without it (see the module doc); with
    duplicate ``groups`` (:func:`duplicate_groups`), without any of its copies either: the
    scorer's own ``held_out_scores`` (refits on the folds of :mod:`novelty.scorers._folds`; kNN's
    exact leave-one-out). ``scorer``: the member's scorer, whose parameters the refits take
    (default: a new :func:`make_scorer` of ``spec``; the same parameters but for the
    adaptation to the corpus size, which only kNN makes and its exact leave-one-out does not
    read). A ``models`` list receives each refit as (training rows, fitted scorer)."""
    template = make_scorer(spec) if scorer is None else scorer
    return template.held_out_scores(
        K, diag, groups, models=models, progress=lambda: step(f"{spec.label()}: calibration")
    )


def cross_fitted_scores(spec: MemberSpec, Z, groups: np.ndarray | None = None) -> np.ndarray:
    """Novelty of every corpus series by a kernel *and* scorer fitted without it (and, with
    duplicate ``groups``, without any of its copies: they share its fold).

    For kernels whose features are learned from the corpus (``needs_fit``: the random
    convolutions' biases are drawn from corpus series, their power transform is fitted on the
    corpus), a series left out of the scorer alone is still seen by its own features, and its
    held-out score is optimistic. Here the kernel is refitted on each training part: leave-one-
    out up to ``CROSS_FIT_LOO_MAX`` series, else ``CALIBRATION_FOLDS`` folds (scores of models
    fitted on fewer series: conservative).
    """
    n = len(Z)
    out = np.empty(n)
    for train, test in calibration_folds(n, CROSS_FIT_LOO_MAX, groups):
        Ztr, Zte = Z[train], Z[test]
        kernel = clone(spec.kernel)
        with _reusing_features(kernel):  # each part's features computed once per fold
            if hasattr(kernel, "fit"):  # as prepare_kernel
                kernel.fit(Ztr)
            K = kernel.gram(Ztr, normalize=spec.normalize)
            Kt, diag = cross_grams(kernel, Zte, Ztr, spec.normalize)
        scorer = make_scorer(spec, spec.corpus_size(K.shape[0])).fit(K)
        out[test] = scorer.score(Kt, diag)
        step(f"{spec.label()}: cross-fitting")
    return out


def _reusing_features(kernel):
    """The kernel's feature memo for one fold of :func:`cross_fitted_scores` (the random
    convolutions': the training part's features come from ``fit``, each part's are computed
    once; the Grams are bit for bit those computed afresh), else a no-op context."""
    reuse = getattr(kernel, "_reusing_features", None)
    return reuse() if callable(reuse) else contextlib.nullcontext()


class BaseMember(ABC):
    """What the detector asks of a fitted member (exact :class:`Member`, or
    :class:`~novelty.detector._approx_member.ApproximateMember`): ``fit(X, preprocessors)``,
    ``novelty(X)`` / ``novelty_tensor(X)`` (higher = more novel), ``calibration_`` (held-out
    scores, one per distinct corpus series), ``duplicate_groups_``, ``corpus_``,
    ``update_state_``, and ``update(X_new, raw, groups)`` (:mod:`novelty.detector._update`).
    Shared here: the spec and the frozen pre-processing (``_prepare``)."""

    def __init__(self, spec: MemberSpec):
        self.spec = spec

    @abstractmethod
    def fit(self, X, preprocessors: dict) -> BaseMember: ...

    @abstractmethod
    def novelty_tensor(self, X: SeriesBatch) -> torch.Tensor: ...

    @abstractmethod
    def check_updatable(self) -> None:
        """Raise when ``update(refit=False)`` cannot update this member (before any work)."""

    @abstractmethod
    def update(self, X_new: SeriesBatch, raw: SeriesBatch, groups) -> BaseMember: ...

    def _prepare(self, X: SeriesBatch, preprocessors: dict, fit: bool = False) -> SeriesBatch:
        """The pre-processed series of the checked ``X`` (``X`` itself without
        pre-processing)."""
        if fit:
            preprocessor, Z = fit_preprocessing(self.spec, X, preprocessors)
            if preprocessor is not None:
                self.preprocessor_ = preprocessor
            return Z
        if preprocess_mode(self.spec.preprocess) is None:
            return X
        return self.preprocessor_.transform(X)

    def novelty(self, X: SeriesBatch) -> np.ndarray:
        """Novelty of the checked series ``X`` (higher = more novel), float64 array (n,)."""
        return self.novelty_tensor(X).cpu().numpy()


class Member(BaseMember):
    """A fitted :class:`MemberSpec`: ``novelty(X_prepared)`` and calibration scores.

    ``fit`` and ``novelty`` take series checked at the detector's public call (an (n, T, d)
    float64 array or a list of (T_i, d) ones, :func:`novelty.as_series_collection`); they are
    not checked again here (module docstring).

    Exact copies in the corpus (equal values in ``X`` as ``fit`` receives it) are found by
    ``fit`` (``duplicate_groups_``: group ids, None without copies) and held out together;
    ``calibration_`` has one held-out score per distinct series, in order of first occurrence
    (a duplicated series is one held-out unit; module docstring, "Exact duplicates"). A corpus
    of copies of one series has no held-out score (as a corpus of one series)."""

    def fit(self, X, preprocessors: dict) -> Member:
        spec = self.spec
        pipeline = fit_pipeline(spec, X, preprocessors)
        if pipeline.preprocessor is not None:
            self.preprocessor_ = pipeline.preprocessor
        self.kernel_, self.corpus_ = pipeline.kernel, pipeline.corpus
        Zk, K = pipeline.corpus, pipeline.gram
        diag = torch.diagonal(K).clone()
        step(f"{spec.label()}: Gram")
        self.scorer_ = make_scorer(spec, spec.corpus_size(K.shape[0])).fit(K)
        groups = duplicate_groups(X)  # exact copies are held out together
        self.duplicate_groups_ = groups
        n = K.shape[0] if groups is None else int(groups.max()) + 1  # distinct series
        if n == 1:  # nothing to hold out: scored against, never calibrated
            self.calibration_ = np.empty(0)
        elif getattr(self.kernel_, "needs_fit", False) and n >= 3:
            self.calibration_ = cross_fitted_scores(spec, Zk, groups)
        else:  # (two series: a kernel refitted on one would be degenerate)
            # new series are scored by the refits when the scorer says so (the conformance
            # score when the refits keep fewer components: GramScorer.scores_by_refits)
            models = [] if self.scorer_.keeps_refits else None
            self.calibration_ = held_out_scores(spec, K, diag, groups, models, self.scorer_)
            if models and self.scorer_.scores_by_refits(models):
                self.held_out_models_ = models
        if groups is not None and self.calibration_.size:
            self.calibration_ = self.calibration_[first_occurrences(groups)]
        self.update_state_ = fit_state(self, X, K)  # what update(X_new) needs
        return self

    def grams(self, X: SeriesBatch):
        """(Kt, diag) of the checked series ``X`` against the corpus (:func:`cross_grams`)."""
        return cross_grams(self.kernel_, self._prepare(X, {}), self.corpus_, self.spec.normalize)

    def novelty_tensor(self, X: SeriesBatch) -> torch.Tensor:
        """:meth:`novelty` as a float64 tensor on the scorer's device (the detector stacks its
        members' scores and converts them to numpy once)."""
        Kt, diag = self.grams(X)
        models = getattr(self, "held_out_models_", None)
        if models:  # as the calibration was scored (Member.fit)
            mean = np.mean([s.score(Kt[:, tr], diag) for tr, s in models], axis=0)
            return torch.from_numpy(mean)
        return self.scorer_.score_tensor(Kt, diag)

    def check_updatable(self) -> None:
        if getattr(self, "update_state_", None) is None:
            from ._update import NO_STATE

            raise ValueError(NO_STATE)
        state = self.update_state_
        knn = "nearest_d2" in state or hasattr(self.scorer_, "n_neighbors")
        if "gram" not in state and not knn:  # update recomputes held-out scores from one
            raise ValueError(
                f"{type(self.scorer_).__name__}.extension_state keeps neither the corpus Gram "
                "nor the nearest distances of a kNN scorer, so update cannot recompute the "
                "held-out scores: use update(X_new, refit=True)"
            )

    def update(self, X_new: SeriesBatch, raw: SeriesBatch, groups) -> Member:
        """A copy of this member with the checked new series ``X_new`` appended to its corpus
        (this member is not changed): ``raw`` is the checked raw union (corpus then
        ``X_new``), ``groups`` its duplicate groups (:func:`duplicate_groups`). The
        pre-processing and kernel stay frozen; the scorer is extended by its own
        :meth:`~novelty.scorers._gram_scorer.GramScorer.extend` (adapted to the union's size
        when ``spec.adapt_to_corpus``), the calibration as :mod:`novelty.detector._update`
        says (exact; cross-fitted members keep the corpus's held-out scores)."""
        from ._update import gram_calibration, knn_calibration

        self.check_updatable()
        spec, state = self.spec, dict(self.update_state_)
        N, n_new = len(state["raw"]), len(X_new)
        Znew = self._prepare(X_new, {})  # the frozen pre-processing
        K_ba = self.kernel_.gram(Znew, self.corpus_, normalize=spec.normalize)
        K_bb = self.kernel_.gram(Znew, normalize=spec.normalize)
        g = _group_tensor(groups, N + n_new, K_ba.device)
        params = None
        if spec.adapt_to_corpus:  # the spec's parameters adapted to the union (as fit does)
            params = make_scorer(spec, N + n_new).get_params(deep=False)
        K_aa = state.get("gram")  # kept by the scorers that extend by a refit (not kNN)
        scorer = self.scorer_.extend(K_ba, K_bb, K_corpus=K_aa, params=params)
        models = None
        if K_aa is None:
            diag = scorer.corpus_diag_  # the union's kernel diagonal
            calibration = knn_calibration(self, state, K_ba, K_bb, diag, g, groups)
        else:
            K = union_gram(K_aa, K_ba, K_bb)
            state["gram"] = K
            calibration, models = gram_calibration(self, state, scorer, K, g, groups)
        if int(g.max()) + 1 == 1:  # nothing to hold out (as fit)
            calibration = np.empty(0)
        state["raw"] = raw
        new = copy.copy(self)
        new.scorer_ = scorer
        new.calibration_ = calibration
        new.duplicate_groups_ = groups
        plain_input = preprocess_mode(spec.preprocess) is None  # corpus_ is the raw corpus
        new.corpus_ = raw if plain_input else _concat(self.corpus_, Znew)
        new.update_state_ = state
        if models is not None:  # scored like the calibration (Member.fit, novelty_tensor)
            new.held_out_models_ = models
        elif hasattr(new, "held_out_models_"):
            del new.held_out_models_
        return new


# ------------------------------------------------------------------ state kept for update
def fit_state(member: Member, X, K: torch.Tensor) -> dict:
    """What ``update`` needs of a member fitted on the checked collection ``X`` with corpus
    Gram ``K`` (called at the end of ``Member.fit``, once ``scorer_``, ``duplicate_groups_``
    and ``calibration_`` are set): ``{"raw": X, "cross_fitted": bool}`` plus what the fitted
    scorer keeps of ``K`` for its extension
    (:meth:`~novelty.scorers._gram_scorer.GramScorer.extension_state`: the Gram itself, or
    kNN's nearest distances, none when the calibration is cross-fitted)."""
    state = {"raw": X, "cross_fitted": _cross_fitted(member)}
    state.update(
        member.scorer_.extension_state(
            K, member.duplicate_groups_, held_out=not state["cross_fitted"]
        )
    )
    return state


def _cross_fitted(member: Member) -> bool:
    """Whether ``Member.fit`` cross-fitted the calibration (its rule: a ``needs_fit`` kernel
    and at least 3 distinct corpus series)."""
    return bool(getattr(member.kernel_, "needs_fit", False)) and _n_distinct(member) >= 3


def _n_distinct(member: Member) -> int:
    groups = member.duplicate_groups_
    return len(_raw(member)) if groups is None else int(groups.max()) + 1


def _raw(member):
    return member.update_state_["raw"] if hasattr(member, "update_state_") else member.corpus_


def _concat(A, B):
    from ._update import concat_series

    return concat_series(A, B)


# ------------------------------------------------------------------ the detector
def _group_tensor(groups, n: int, device) -> torch.Tensor:
    if groups is None:
        return torch.arange(n, device=device)
    return torch.as_tensor(np.asarray(groups), dtype=torch.long, device=device)


def robust_scale(c: np.ndarray) -> tuple[float, float]:
    """(median, IQR) of finite calibration scores; the IQR floored so it is never 0."""
    f = c[np.isfinite(c)]
    if f.size == 0:
        return 0.0, 1.0
    q25, med, q75 = np.quantile(f, [0.25, 0.5, 0.75])
    iqr = q75 - q25
    floor = 1e-12 * max(1.0, float(np.abs(f).max()))
    if iqr <= floor:
        iqr = max(float(f.std()), floor)
    return float(med), float(iqr)
