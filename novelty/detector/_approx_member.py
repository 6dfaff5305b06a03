r"""A detector member on approximate features (``KernelNoveltyDetector(approximation=...)``):
the corpus enters through an N x M feature matrix, never an N x N Gram.

Fit on N corpus series with M = ``n_components``:

1. pre-processing as :class:`novelty.detector._members.Member`;
2. a **calibration set** H of ``min(CALIBRATION_MAX, N // 2)`` corpus series, drawn uniformly
   with the seed; the kernel (when it is fitted on data) and the landmarks use the other
   series only, so the series of H are mapped exactly as new series are;
3. the feature map (:mod:`novelty.detector._approximation`) and :math:`\Phi` of all N series; the
   feature-space scorer (:mod:`novelty.scorers._feature_scorers`) fitted on all N;
4. held-out scores of H: exact leave-one-out for the kNN scorer (each series of H against the
   other N - 1), otherwise the scorer refitted without each fold of H (leave-one-out up to
   ``LOO_MAX`` series, else ``CALIBRATION_FOLDS`` folds) and the fold scored. These are the
   conformal calibration scores (|H| of them instead of N).

Exact copies (:func:`novelty.detector._members.duplicate_groups`) are held out together, as in
:class:`~novelty.detector._members.Member`: H is drawn among the distinct series (one row per
group), the kernel and landmarks are fitted on the series of the other groups, and a held-out series
is scored without any of its copies (kNN: against the rows of other groups; the refits:
without every row of the fold's groups). A corpus without copies is fitted exactly as before.

Cost: N M kernel evaluations (+ the landmark rule's), O(N M^2) for the scorer, and for the
calibration of the kNN scorer |H| N M; memory O(N M). A corpus of at most M series is fitted
exactly (:class:`novelty.detector._members.Member`): the exact Gram is then no larger than the
approximation's M x M one, and a Nyström map with every series as a landmark reproduces it.

Kernels with exact explicit features (the random-convolution kernel with its linear static
kernel, the randomized signature) use them under ``"nystroem"`` as well: they are exact and
cheaper than landmarks. The default recipe's GAK member is mapped by Nyström
(N M alignments of O(T^2) each).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import clone

from ..scorers._gram_scorer import GramScorer
from ..scorers._scorer_registry import scorer_registry
from ._approximation import (
    make_feature_map,
)
from ._members import (
    BaseMember,
    Member,
    duplicate_groups,
    first_occurrences,
    scorer_class,
    scorer_params,
)

__all__ = ["ApproximateMember", "feature_scorers", "make_member"]

#: At most this many corpus series are held out for the calibration scores.
CALIBRATION_MAX = 1000
#: Series mapped and scored at a time by ``novelty``.
SCORE_BATCH = 8192


def feature_scorers() -> tuple[str, ...]:
    """The registered scorers available on features (their ``feature_form`` is not None)."""
    return tuple(n for n, cls in scorer_registry().items() if cls.feature_form is not None)


def make_member(spec, approximation, n_components, landmarks, seed, n_corpus):
    """An exact :class:`Member` (no approximation, or N <= n_components) or an
    :class:`ApproximateMember`."""
    if approximation is None or n_corpus <= n_components:
        return Member(spec)
    if scorer_class(spec.scorer).feature_form is None:
        raise ValueError(
            f"scorer={spec.scorer!r} has no feature-space version (its feature_form is None); "
            f"with approximation={approximation!r} use one of {feature_scorers()}"
        )
    return ApproximateMember(spec, approximation, n_components, landmarks, seed)


def make_feature_scorer(spec, n_corpus: int | None = None):
    """The unfitted feature form of the spec's scorer (its class's ``feature_form``) with the
    parameters the exact scorer would get (:func:`novelty.detector._members.scorer_params`, or an
    instance's own), adapted to a corpus of ``n_corpus`` vectors when given."""
    cls = scorer_class(spec.scorer)
    if isinstance(spec.scorer, GramScorer):
        params = spec.scorer.get_params(deep=False)
    else:
        params = scorer_params(spec, cls)
    scorer = cls.feature_form(**params)
    if n_corpus is not None:
        scorer.limit_to_corpus(n_corpus)
    return scorer


def _has_exact_features(kernel) -> bool:
    import tskernels as tk

    if isinstance(kernel, tk.RandomizedSignatureKernel):
        return True
    return isinstance(kernel, tk.RandomConvolutionKernel) and (
        kernel.static is None or type(kernel.static) is tk.Linear
    )


def calibration_rows(n: int, groups: np.ndarray | None, rng) -> np.ndarray:
    """The calibration set H of an approximation (module docstring): sorted rows of
    ``min(CALIBRATION_MAX, m // 2)`` of the m distinct series, drawn uniformly by ``rng``
    (one row per drawn series, its first occurrence; m = ``n`` without duplicate
    ``groups``)."""
    if groups is None:
        return np.sort(rng.choice(n, size=min(CALIBRATION_MAX, n // 2), replace=False))
    firsts = first_occurrences(groups)
    size = min(CALIBRATION_MAX, len(firsts) // 2)
    return firsts[np.sort(rng.choice(len(firsts), size=size, replace=False))]


class ApproximateMember(BaseMember):
    """A member on Nyström or random features (module docstring); ``novelty(X)`` and
    ``calibration_`` as :class:`Member` (its sibling: no Gram against the corpus), plus
    ``features_`` (the fitted map), ``calibration_indices_`` (H, into the corpus). Not updated
    without a refit (``update`` raises NotImplementedError: :mod:`novelty.detector._update`)."""

    def __init__(self, spec, approximation, n_components, landmarks="uniform", seed=0):
        super().__init__(spec)
        self.approximation = approximation
        self.n_components = n_components
        self.landmarks = landmarks
        self.seed = seed

    def fit(self, X, preprocessors: dict) -> ApproximateMember:
        spec = self.spec
        Z = self._prepare(X, preprocessors, fit=True)
        N = len(Z)
        rng = np.random.default_rng(self.seed)
        groups = duplicate_groups(X)  # exact copies: held out together
        self.duplicate_groups_ = groups
        H = calibration_rows(N, groups, rng)
        if groups is None:
            rest = np.setdiff1d(np.arange(N), H)
        else:  # the copies of a held-out series are not fitted on either
            rest = np.flatnonzero(~np.isin(groups, groups[H]))
        kernel = clone(spec.kernel)
        Zk = Z  # the checked SeriesBatch (pre-processed when the spec says so)
        if hasattr(kernel, "fit"):
            kernel.fit(Zk[rest])
        approximation = self.approximation
        if approximation == "nystroem" and _has_exact_features(kernel):
            approximation = "features"
        fmap = make_feature_map(
            kernel,
            approximation,
            self.n_components,
            landmarks=self.landmarks,
            normalize=bool(spec.normalize),
            seed=self.seed,
        ).fit(Zk, candidates=rest)
        Phi, diag = fmap.transform(Zk)
        self.kernel_ = kernel
        self.corpus_ = Z
        self.features_ = fmap
        self.approximation_ = approximation
        self.scorer_ = make_feature_scorer(spec, spec.corpus_size(N)).fit(Phi, diag)
        self.calibration_indices_ = H
        self.calibration_ = self.scorer_.held_out_scores(
            Phi, diag, H, groups, make=lambda n: make_feature_scorer(spec, spec.corpus_size(n))
        )
        self.update_state_ = {"raw": X}  # update(X_new, refit=True) refits on the union
        return self

    def check_updatable(self) -> None:
        raise NotImplementedError(self._no_update())

    def update(self, X_new, raw, groups) -> ApproximateMember:
        """Not available (the message says why): ``update(X_new, refit=True)`` refits."""
        raise NotImplementedError(self._no_update())

    def _no_update(self) -> str:
        return (
            f"update(refit=False) is not available for the approximate member "
            f"{self.spec.label()!r} (approximation={self.approximation!r} on "
            f"{len(self.corpus_)} > n_components={self.n_components} series): its landmarks "
            "and calibration set are drawn from the corpus, so new series cannot join it "
            "exactly; use update(X_new, refit=True)"
        )

    def novelty_tensor(self, X) -> torch.Tensor:
        """Novelty of the checked series ``X``, float64 tensor (n,), in batches of
        ``SCORE_BATCH`` series (no N x N Gram)."""
        Z = self._prepare(X, {})
        parts = []
        for i in range(0, len(Z), SCORE_BATCH):
            Phi, diag = self.features_.transform(Z[i : i + SCORE_BATCH])
            parts.append(self.scorer_.score(Phi, diag))
        return torch.cat(parts).to(torch.float64)
