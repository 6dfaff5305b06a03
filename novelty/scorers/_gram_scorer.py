r"""The one contract of the novelty scorers on Gram matrices.

A :class:`GramScorer` is fitted on the Gram matrix of a corpus of normal points and scores new
points from their kernel values against the corpus:

- ``fit(K)``: ``K`` (N, N), :math:`K_{ij} = k(x_i, x_j)`, numpy or torch; returns ``self``;
- ``score(K_test, diag_test)``: ``K_test`` (n_test, N), :math:`k(y_t, x_i)`, and ``diag_test``
  (n_test,), :math:`k(y_t, y_t)`; returns a float64 numpy array (n_test,), **higher = more
  novel**;
- ``sweep(K_test, diag_test, axis_values, ranks)`` (scorers with a hyper-parameter axis): the
  scores for every value of the axis and every rank at once, array (n_axis, n_rank, n_test),
  equal to refitting with each (value, rank) and calling ``score``.

As in scikit-learn, ``__init__`` only stores parameters; each scorer declares its parameters'
constraints once (``_parameter_constraints``, scikit-learn's dialect: :mod:`novelty._constraints`)
and they are checked in ``fit`` and again in ``score``, so ``set_params`` cannot slip a bad
value past them; fitted attributes end in ``_``
and every post-fit method starts with scikit-learn's ``check_is_fitted``.

:func:`~novelty.scorers._scorer_registry.scorer_registry` (its own module, which imports every
scorer) maps each scorer name to its class; the detector, the experiments and the tests read
that one list. Capabilities are class attributes (tags): ``sweep_axis``,
``rank_param``, ``requires_diag``, ``requires_normalized``.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from numbers import Integral
from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._constraints import (  # re-exported: the scorer modules declare with these
    Interval,
    Options,
    StrOptions,
    check_values,
    validate_parameter_constraints,
    validate_params,
)
from ._folds import LOO_MAX, calibration_folds, fold_units
from ._validation import check_corpus_gram, check_cross_gram, check_test_diag

__all__ = [
    "GramScorer",
    "Interval",
    "Options",
    "ScorerNotFittedError",
    "StrOptions",
    "check_fitted",
    "validate_params",
]


class ScorerNotFittedError(NotFittedError, RuntimeError):
    """scikit-learn's ``NotFittedError`` (a ValueError and AttributeError), and a RuntimeError
    as the scorers raised before they shared this contract."""


def check_fitted(estimator) -> None:
    """scikit-learn's ``check_is_fitted``, raising :class:`ScorerNotFittedError`."""
    try:
        check_is_fitted(estimator)
    except NotFittedError as err:
        raise ScorerNotFittedError(str(err)) from None


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A float64 numpy array from a tensor on any device."""
    return t.detach().cpu().numpy().astype(np.float64, copy=False)


# ---------------------------------------------------------------------------- base class
class GramScorer(BaseEstimator, metaclass=ABCMeta):
    """Base class of the novelty scorers on Gram matrices (module docstring).

    Subclasses implement ``_fit(K)`` (``K`` a checked float64 tensor (N, N); set the fitted
    attributes, ending in ``_``) and ``_score(K_test, diag_test)`` (checked tensors; return a
    tensor (n_test,), higher = more novel), declare ``_parameter_constraints`` and their tags,
    and, when ``sweep_axis`` is set, implement ``_sweep``.

    The definition of a scorer (class attributes and methods, read by the registry, the
    detector, ``approximation=`` and the experiments; :mod:`novelty.scorers._scorer_registry`)
    ---------------------------------------------------------------------------------------
    name : str, the registry name (``KernelNoveltyDetector(scorer=name)``, ``--scorers name``).
    description : str, one line (``python -m experiments list --check``).
    feature_form : the class scoring on explicit features (:mod:`novelty.scorers._feature_scorers`,
        a :class:`~novelty.scorers._feature_scorers.FeatureScorer` taking this class's constructor
        parameters), or None: ``approximation=`` is not supported.
    held_out_scores(K, diag, groups) : held-out scores of the corpus (the calibration), by
        refits on the folds of :mod:`novelty.scorers._folds` (``held_out_steps(n)`` of them); kNN
        overrides both with its exact leave-one-out.
    limit_to_corpus(n) : adapt the parameters to a corpus of n series (kNN lowers k).
    keeps_refits : bool; with ``scores_by_refits(refits)``: whether new series are scored by
        the held-out refits (mean of their scores) rather than by the full fit, as the
        calibration was (the conformance score grows with the whitened dimension: when the
        refits keep fewer components, the full fit's scores are not on the calibration's
        scale). Default False: the refits are not kept.

    Tags (class attributes)
    -----------------------
    sweep_axis : str or None, the constructor parameter that ``sweep`` varies ("alpha", "lam").
    rank_param : str or None, the constructor parameter capping the rank that ``sweep``'s
        ``ranks`` vary (``"max_rank"``); None when the scorer has no rank axis.
    requires_diag : bool, whether ``score`` needs ``diag_test``.
    requires_normalized : bool, whether the kernel must be normalised, k(x, x) = 1.
    min_corpus : int, the fewest corpus points ``fit`` accepts (2; 1 for nearest-neighbour
        scores, which need only something to measure a distance to).
    """

    _parameter_constraints: ClassVar[dict] = {}
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    feature_form: ClassVar[type | None] = None
    sweep_axis: ClassVar[str | None] = None
    rank_param: ClassVar[str | None] = None
    requires_diag: ClassVar[bool] = True
    requires_normalized: ClassVar[bool] = False
    min_corpus: ClassVar[int] = 2

    def fit(self, K, y=None) -> GramScorer:
        """Fit on the corpus Gram ``K`` (N, N), numpy or torch (``y`` is ignored)."""
        validate_params(self)
        return self._fit_checked(check_corpus_gram(K, "K_corpus", min_points=self.min_corpus))

    def _fit_checked(self, K: torch.Tensor) -> GramScorer:
        """:meth:`fit` without its checks: ``K`` the output of :func:`check_corpus_gram`
        (at least ``min_corpus`` points) and the parameters validated by the caller. The
        internal entry point of callers that check once for many fits (the experiments'
        CV cells); the same computation as :meth:`fit`."""
        self._fit(K)
        self._device = K.device
        self.n_corpus_ = K.shape[0]
        return self

    def score(self, K_test, diag_test=None) -> np.ndarray:
        """Novelty score per test point (higher = more novel), float64 array (n_test,).

        ``K_test``: (n_test, N), k(test, corpus); ``diag_test``: (n_test,), k(test, test)."""
        return as_numpy(self.score_tensor(K_test, diag_test))

    def score_tensor(self, K_test, diag_test=None) -> torch.Tensor:
        """:meth:`score` as a float64 tensor on the scorer's device, not converted to numpy
        (for callers that combine several scores before one conversion)."""
        return self._score_checked(*self._check_test(K_test, diag_test))

    def _score_checked(self, K_test: torch.Tensor, diag_test: torch.Tensor | None):
        """:meth:`score_tensor` without its checks: the inputs the outputs of
        :func:`check_cross_gram` and :func:`check_test_diag` on this fit's device, the
        parameters validated by the caller (the internal entry point of :meth:`_fit_checked`)."""
        return self._score(K_test, diag_test).to(torch.float64)

    def sweep(self, K_test, diag_test=None, axis_values=None, ranks=None) -> np.ndarray:
        """Scores for every value of ``sweep_axis`` and every rank, array (n_axis, n_rank,
        n_test); entry (a, r) equals ``score`` after refitting with
        ``set_params(**{sweep_axis: axis_values[a], rank_param: ranks[r]})``.

        ``axis_values``: a non-empty sequence (None: the scorer's own value). ``ranks``: a
        sequence of ints (None: every rank kept at fit, 1..M; a scorer without a rank axis
        takes None only, n_rank = 1)."""
        if self.sweep_axis is None:
            raise NotImplementedError(
                f"{type(self).__name__} has no hyper-parameter axis to sweep; use score"
            )
        Kt, dt = self._check_test(K_test, diag_test)
        if axis_values is None:
            axis_values = [getattr(self, self.sweep_axis)]
        if isinstance(axis_values, (str, bytes)) or not hasattr(axis_values, "__len__"):
            raise ValueError(
                f"`axis_values` must be a sequence of `{self.sweep_axis}` values, got "
                f"{axis_values!r}"
            )
        values = list(axis_values)
        if not values:
            raise ValueError(f"`axis_values` is empty: give at least one `{self.sweep_axis}`")
        check_values(self, self.sweep_axis, values)
        if ranks is not None:
            if self.rank_param is None:
                raise ValueError(f"{type(self).__name__} has no rank axis: pass ranks=None")
            ranks = list(ranks)
            if not ranks:
                raise ValueError("`ranks` is empty: give at least one rank, or None for all")
            for r in ranks:
                validate_parameter_constraints(
                    {"ranks": [Interval(Integral, 1, None, closed="left")]},
                    {"ranks": r},
                    caller_name=f"{type(self).__name__}.sweep",
                )
        return as_numpy(self._sweep(Kt, dt, values, ranks))

    def held_out_scores(
        self,
        K,
        diag,
        groups: np.ndarray | None = None,
        *,
        models: list | None = None,
        progress=None,
    ) -> np.ndarray:
        """Novelty of every corpus point by a refit without it, array (N,): for each fold of
        :func:`novelty.scorers._folds.calibration_folds` (``LOO_MAX``; with duplicate ``groups``,
        every
        copy in the same fold) a clone of this unfitted scorer is fitted on ``K`` [train,
        train] and scores ``K`` [test, train] with ``diag`` [test]. ``models`` receives each
        refit as (training rows, fitted scorer); ``progress()`` is called after each."""
        n = K.shape[0]
        out = np.empty(n)
        for train, test in calibration_folds(n, LOO_MAX, groups):
            tr, te = torch.from_numpy(train), torch.from_numpy(test)
            scorer = clone(self).fit(K[tr][:, tr])
            out[test] = scorer.score(K[te][:, tr], diag[te])
            if progress is not None:
                progress()
            if models is not None:
                models.append((tr, scorer))
        return out

    @classmethod
    def held_out_steps(cls, n: int) -> int:
        """The refits of :meth:`held_out_scores` on n distinct series (progress steps)."""
        return len(fold_units(n, LOO_MAX))

    def limit_to_corpus(self, n_corpus: int) -> None:
        """Adapt the parameters to a corpus of ``n_corpus`` series (default: nothing)."""

    #: Whether ``held_out_scores`` should keep its refits for :meth:`scores_by_refits`.
    keeps_refits: ClassVar[bool] = False

    def scores_by_refits(self, refits: list) -> bool:
        """Whether new series are scored by the held-out ``refits`` ((rows, fitted scorer)
        pairs) instead of by this fitted scorer (the class docstring; default False)."""
        return False

    def extend(self, K_new_corpus, K_new_new, *, K_corpus=None, params=None) -> GramScorer:
        r"""A scorer fitted on the corpus with new points appended, from the kernel values
        that involve the new points; this fitted scorer is not changed.

        With the corpus :math:`A` (:math:`N` points) of this fit and new points :math:`B`
        (:math:`m`): ``K_new_corpus`` is :math:`K_{BA}` (m, N), ``K_new_new`` is
        :math:`K_{BB}` (m, m). The result equals a clone (with ``params`` set, when given:
        e.g. ``n_neighbors`` adapted to N + m) fitted on the union Gram
        :math:`\begin{pmatrix}K_{AA} & K_{BA}^\top \\ K_{BA} & K_{BB}\end{pmatrix}`.

        Default: that refit, which needs the corpus Gram ``K_corpus`` (:math:`K_{AA}`, (N, N));
        a scorer whose fit keeps what it needs of :math:`K_{AA}` overrides this without it
        (kNN: the corpus diagonal, :math:`O(m)` work)."""
        check_fitted(self)
        if K_corpus is None:
            raise ValueError(
                f"{type(self).__name__}.extend needs the corpus Gram `K_corpus` (its fit keeps "
                "no summary of it to extend)"
            )
        K = union_gram(
            torch.as_tensor(K_corpus), torch.as_tensor(K_new_corpus), torch.as_tensor(K_new_new)
        )
        return self._extension(params).fit(K)

    def extension_state(self, K, groups: np.ndarray | None = None, *, held_out: bool = True):
        """What of the corpus Gram ``K`` (N, N) (the Gram this scorer was fitted on) to keep so
        that it can later be extended (:meth:`extend`) and its corpus's held-out scores
        recomputed (``held_out``; False: they are kept as they are, e.g. cross-fitted), a dict.

        Default: ``{"gram": K}`` (``K`` itself, no copy), the ``K_corpus`` that :meth:`extend`
        refits on (and the held-out refits need). ``groups``: the corpus's duplicate groups
        (None: every series distinct), for scorers whose kept summary depends on them (kNN)."""
        return {"gram": K}

    def _extension(self, params: dict | None) -> GramScorer:
        """An unfitted clone with ``params`` set (the scorer that :meth:`extend` fits)."""
        scorer = clone(self)
        if params:
            scorer.set_params(**params)
        return scorer

    # ------------------------------------------------------------------ internals
    def _check_test(self, K_test, diag_test) -> tuple[torch.Tensor, torch.Tensor | None]:
        check_fitted(self)
        validate_params(self)
        Kt = check_cross_gram(K_test, self.n_corpus_, "K_test_corpus", self._device)
        if diag_test is None:
            if self.requires_diag:
                raise ValueError(
                    f"{type(self).__name__}.score needs `k_test_diag`, k(x, x) per test point"
                )
            return Kt, None
        return Kt, check_test_diag(diag_test, Kt.shape[0], "k_test_diag", self._device)

    @abstractmethod
    def _fit(self, K: torch.Tensor) -> None: ...

    @abstractmethod
    def _score(self, K_test: torch.Tensor, diag_test: torch.Tensor | None) -> torch.Tensor: ...

    def _sweep(self, K_test, diag_test, values: list, ranks: list[int] | None) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover (only called when sweep_axis is set)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = True  # fit takes a Gram: cross-validation slices both axes
        tags.non_deterministic = False
        return tags


def union_gram(K_aa: torch.Tensor, K_ba: torch.Tensor, K_bb: torch.Tensor) -> torch.Tensor:
    """The Gram of the corpus A then the new points B, (N + m, N + m), from K_AA (N, N),
    K_BA (m, N) and K_BB (m, m) (one new tensor; the inputs are not changed)."""
    N, n = K_aa.shape[0], K_bb.shape[0]
    K = K_aa.new_empty((N + n, N + n))
    K[:N, :N] = K_aa
    K[N:, :N] = K_ba
    K[:N, N:] = K_ba.T
    K[N:, N:] = K_bb
    return K
