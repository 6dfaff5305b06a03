r"""Novelty scorers on explicit feature vectors :math:`\Phi` (Nyström or random features of
:mod:`novelty.detector._approximation`), so that no N x N Gram is formed.

Each is the exact Gram scorer of the same name with :math:`K = \Phi\Phi^\top`, rewritten on
M x M matrices (N corpus vectors of dimension M):

- :class:`FeatureVarianceNorm`: with the corpus covariance
  :math:`C = \tfrac1N \sum_n (\Phi_n - \mu)(\Phi_n - \mu)^\top = V \operatorname{diag}(s) V^\top`,
  the non-zero eigenvalues of the centred, scaled Gram are those of C and the projections of
  :class:`novelty.VarianceNorm` are :math:`p_m(y) = v_m^\top \Phi(y)`,
  :math:`c_m = v_m^\top \mu` (same ``threshold`` and ``max_rank``, same weights
  :math:`w_m = s_m/(s_m+\alpha)^2`). Fit O(N M^2 + M^3).
- :class:`FeatureSpectralSupport`: the non-zero eigenvalues :math:`\sigma_j` of K/n are those
  of :math:`G = \Phi^\top\Phi / n = V \operatorname{diag}(\sigma) V^\top` and
  :math:`F_n(x) = \sum_j \sigma_j g_\lambda(\sigma_j) (v_j^\top \Phi(x))^2`.
- :class:`FeatureKNN`: the k nearest corpus vectors by an exact search (no loop over pairs:
  chunked matrix products, then the chosen distances recomputed from differences).
- :class:`FeatureMeanEmbedding`: :math:`k(y,y) - 2\Phi(y)^\top\bar\Phi + \|\bar\Phi\|^2`.

**Distances and the residual.** :math:`\|\Phi(x)\|^2 \le k(x, x)`: the Nyström map loses the
residual :math:`r(x) = k(x, x) - \|\Phi(x)\|^2 \ge 0` (the part of :math:`\phi(x)` outside the
landmarks' span). The kNN and mean-embedding scorers use the exact diagonal,

.. math:: d^2(y, x) = k(y, y) + k(x, x) - 2\,\Phi(y)^\top\Phi(x)
          = \|\Phi(y) - \Phi(x)\|^2 + r(y) + r(x)

(``distance="kernel"``, the default), which equals the exact kernel distance when the
landmarks are the whole corpus (the test point's own residual is not 0 then, the cross term
is exact); ``distance="feature"`` drops the residuals, :math:`\|\Phi(y) - \Phi(x)\|`, and does
not (tests/test_approximation.py checks both). The search runs on :math:`[\Phi(x), \sqrt{r(x)}]`
against :math:`[\Phi(y), 0]`, then adds :math:`r(y)`. The variance-norm and spectral-support
scores live in the span of the features (as the exact ones live in the span of the corpus).

The conformance score is the nearest corpus vector in the whitened coordinates
:math:`\sqrt{w_m}\, v_m^\top \Phi` (r <= ``max_rank`` of them), by the same exact search.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator

from .._constraints import ALPHA, RANK, StrOptions, validate_arguments, validate_params
from ._baselines import KNNScorer
from ._folds import LOO_MAX, fold_units
from ._spectral_support import DIAG_TOL, SpectralSupport, filter_iterations, spectral_filter
from ._variance_norm import MahalanobisScorer, VarianceNorm, _eigh_descending, kept_rank

__all__ = [
    "FeatureConformance",
    "FeatureKNN",
    "FeatureMahalanobis",
    "FeatureMeanEmbedding",
    "FeatureScorer",
    "FeatureSpectralSupport",
    "FeatureVarianceNorm",
    "nearest_squared_distances",
]

#: Bytes of one (queries x corpus) block of squared distances in the nearest-neighbour search.
NN_CHUNK_BYTES = 64 * 2**20
#: Searches of at least this many multiply-adds (queries x corpus x dimension) pick their
#: candidates in float32 (``nearest_squared_distances``), FAST_EXTRA more than asked for.
FAST_WORK = 10**10
FAST_EXTRA = 4


def _as_features(Phi, name: str, n_features: int | None = None, min_rows: int = 0):
    t = torch.as_tensor(Phi)
    if t.ndim != 2:
        raise ValueError(
            f"`{name}` must be a 2-D array (n, M) of features, got shape {tuple(t.shape)}"
        )
    if n_features is not None and t.shape[1] != n_features:
        raise ValueError(
            f"`{name}` has {t.shape[1]} features, the scorer was fitted on {n_features}"
        )
    if t.shape[0] < min_rows:
        raise ValueError(f"`{name}` needs at least {min_rows} rows, got {t.shape[0]}")
    t = t.to(device="cpu", dtype=torch.float64)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"`{name}` has non-finite entries")
    return t.contiguous()


def _as_diag(diag, n: int, name: str) -> torch.Tensor:
    if diag is None:
        raise ValueError(f"`{name}` is needed: k(x, x) per series (ones for a normalised kernel)")
    d = torch.as_tensor(diag).to(device="cpu", dtype=torch.float64).reshape(-1)
    if d.shape[0] != n:
        raise ValueError(f"`{name}` has {d.shape[0]} entries for {n} series")
    if not bool(torch.isfinite(d).all()):
        raise ValueError(f"`{name}` has non-finite entries")
    return d


def _row_sq(A: torch.Tensor) -> torch.Tensor:
    """Squared norms of the rows, in chunks (no second copy of a large A)."""
    out = torch.empty(A.shape[0], dtype=A.dtype)
    rows = max(1, NN_CHUNK_BYTES // (8 * max(1, A.shape[1])))
    for i in range(0, A.shape[0], rows):
        out[i : i + rows] = torch.linalg.vector_norm(A[i : i + rows], dim=1) ** 2
    return out


def _residual(Phi: torch.Tensor, diag: torch.Tensor, name: str) -> torch.Tensor:
    """k(x, x) - ||Phi(x)||^2 >= 0 (rounding below 0 clamped, a clear deficit raises)."""
    r = diag - _row_sq(Phi)
    scale = float(diag.abs().max()) + 1.0 if diag.numel() else 1.0
    if r.numel() and float(r.min()) < -1e-6 * scale:
        raise ValueError(
            f"||Phi(x)||^2 exceeds k(x, x) by {-float(r.min()):.3g} in `{name}`: the features "
            "and the diagonal are not from one kernel (a normalised diagonal with features of "
            "the unnormalised kernel?)"
        )
    return r.clamp_min(0.0)


def nearest_squared_distances(
    Q: torch.Tensor,
    E: torch.Tensor,
    k: int = 1,
    *,
    q_extra: torch.Tensor | None = None,
    e_extra: torch.Tensor | None = None,
    exclude: torch.Tensor | None = None,
    groups: tuple[torch.Tensor, torch.Tensor] | None = None,
    fast: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The k smallest :math:`\|q - e\|^2 + q_\mathrm{extra} + e_\mathrm{extra}` over the
    rows e of E, for each row q of Q: (values (n, k) ascending, indices (n, k)).

    Exact search: blocks of :math:`\|q\|^2 + \|e\|^2 - 2QE^\top` (at most ``NN_CHUNK_BYTES``
    each) give the k candidates, whose distances are then recomputed from the differences
    (no cancellation near 0). ``exclude``: one corpus row per query left out (leave-one-out).
    ``groups`` = (query groups (n,), corpus groups (N,)): every corpus row of a query's group
    is left out (its exact copies, :func:`novelty.detector._members.duplicate_groups`).
    ``fast`` (default: when n N M >= ``FAST_WORK``): the candidates come from float32 products
    (twice the speed), ``FAST_EXTRA`` more than k of them, and are recomputed in float64; a
    true neighbour can then be missed only for a near-tie, by about 1e-7 (|q|^2 + |e|^2) in
    squared distance.
    """
    n, N = Q.shape[0], E.shape[0]
    left_out = int(exclude is not None)
    if groups is not None:
        counts = torch.bincount(groups[1])
        left_out = int(counts[groups[0]].max()) if n else 0
    if k > N - left_out:
        raise ValueError(f"k={k} neighbours requested from {N} corpus vectors")
    qe = torch.zeros(n, dtype=Q.dtype) if q_extra is None else q_extra
    ee = torch.zeros(N, dtype=E.dtype) if e_extra is None else e_extra
    e_sq = _row_sq(E) + ee
    if fast is None:
        fast = n * N * E.shape[1] >= FAST_WORK
    kc = min(N - left_out, k + FAST_EXTRA) if fast else k
    Ec, e_sqc = (E.float(), e_sq.float()) if fast else (E, e_sq)
    vals = torch.empty((n, k), dtype=Q.dtype)
    idx = torch.empty((n, k), dtype=torch.long)
    rows = max(1, NN_CHUNK_BYTES // (8 * max(1, N)))
    for i in range(0, n, rows):
        q = Q[i : i + rows]
        qc = q.float() if fast else q
        d2 = torch.addmm(e_sqc[None, :], qc, Ec.T, alpha=-2.0)  # ||e||^2 - 2 q.e (+ ||q||^2)
        if exclude is not None:
            d2[torch.arange(q.shape[0]), exclude[i : i + rows]] = float("inf")
        if groups is not None:
            d2.masked_fill_(groups[0][i : i + rows, None] == groups[1][None, :], float("inf"))
        j = torch.topk(d2, kc, dim=1, largest=False).indices if kc > 1 else d2.argmin(1)[:, None]
        exact = ((q[:, None, :] - E[j]) ** 2).sum(-1) + ee[j] + qe[i : i + rows, None]
        exact, order = torch.sort(exact, dim=1)
        vals[i : i + q.shape[0]] = exact[:, :k]
        idx[i : i + q.shape[0]] = torch.gather(j, 1, order)[:, :k]
    return vals, idx


class FeatureScorer(BaseEstimator, metaclass=ABCMeta):
    r"""The contract of the scorers on explicit feature vectors (the ``feature_form`` of a
    :class:`~novelty.scorers._gram_scorer.GramScorer`, used under ``approximation=``):

    - ``__init__`` takes the constructor parameters of its Gram scorer (it may add its own),
      with the same ``_parameter_constraints`` (its Gram scorer's declarations, reused), checked
      by ``fit`` in the one dialect (:func:`novelty._constraints.validate_params`);
    - ``fit(Phi, diag)``: ``Phi`` (N, M) corpus features, ``diag`` (N,) the exact
      :math:`k(x, x)`; returns ``self``;
    - ``score(Phi_test, diag_test)``: Tensor (n_test,), higher = more novel, equal to the Gram
      scorer's score with :math:`K = \Phi\Phi^\top` (up to the residuals, module docstring);
    - ``held_out_scores(Phi, diag, rows, groups, make=...)``: the calibration scores of the
      corpus rows ``rows`` (refits without them by default, :meth:`held_out_scores`);
    - ``limit_to_corpus(n)``: adapt the parameters to a corpus of n vectors (default: none).
    """

    _parameter_constraints: ClassVar[dict] = {}

    @abstractmethod
    def fit(self, Phi, diag=None) -> FeatureScorer: ...

    @abstractmethod
    def score(self, Phi_test, diag_test) -> torch.Tensor: ...

    def limit_to_corpus(self, n_corpus: int) -> None:
        """Adapt the parameters to a corpus of ``n_corpus`` vectors (default: nothing)."""

    def held_out_scores(self, Phi, diag, rows, groups=None, *, make) -> np.ndarray:
        """Scores of the corpus rows ``rows`` (n_held,), each by a scorer fitted without it,
        array (n_held,). Folds: :func:`novelty.scorers._folds.fold_units` over ``rows`` as given
        (they are in random order already: leave-one-out up to ``LOO_MAX``, else consecutive folds);
        with duplicate ``groups`` (one id per corpus row), every row of a fold's groups is
        left out of its refit. ``make(n_train)`` returns the unfitted scorer of a refit."""
        rows = np.asarray(rows)
        out = np.empty(rows.size)
        keep = torch.ones(Phi.shape[0], dtype=torch.bool)
        for f in fold_units(rows.size, LOO_MAX, shuffle=False):
            test = torch.from_numpy(rows[f])
            # the fold's series and, with copies, every row of their groups
            if groups is None:
                out_rows = test
            else:
                out_rows = torch.from_numpy(np.flatnonzero(np.isin(groups, groups[rows[f]])))
            keep[out_rows] = False
            scorer = make(int(keep.sum())).fit(Phi[keep], diag[keep])
            out[f] = scorer.score(Phi[test], diag[test]).numpy()
            keep[out_rows] = True
        return out

    def _check_fitted(self) -> None:
        if not hasattr(self, "n_features_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet: call fit first")

    def _test(self, Phi_test, name: str = "Phi_test") -> torch.Tensor:
        self._check_fitted()
        return _as_features(Phi_test, name, self.n_features_)


class FeatureVarianceNorm(FeatureScorer):
    """:class:`novelty.VarianceNorm` on feature vectors (module docstring).

    Parameters and methods as :class:`novelty.VarianceNorm`, with feature matrices in place of
    Grams: ``fit(Phi)`` (N, M); ``mahalanobis(Phi_test, alpha, rank=None)`` and
    ``conformance(Phi_test, alpha, rank=None)`` return Tensors (n_test,) (a scalar ``alpha``
    and an integer or None ``rank``).
    """

    def __init__(self, threshold: float = 1e-10, max_rank: int | None = 50):
        self.threshold = threshold
        self.max_rank = max_rank

    _parameter_constraints = VarianceNorm._parameter_constraints

    def score(self, Phi_test, diag_test=None) -> torch.Tensor:
        """The engine has two scores, not one: TypeError naming them (its scorers,
        :class:`FeatureMahalanobis` and :class:`FeatureConformance`, each pick one)."""
        raise TypeError(
            f"{type(self).__name__} is the engine of two scores: call mahalanobis(Phi_test, "
            "alpha) or conformance(Phi_test, alpha), or use FeatureMahalanobis / "
            "FeatureConformance"
        )

    def fit(self, Phi, diag=None) -> FeatureVarianceNorm:
        """Covariance of the corpus features, its eigendecomposition, corpus projections."""
        validate_params(self)
        max_rank = None if self.max_rank is None else int(self.max_rank)
        Phi = _as_features(Phi, "Phi", min_rows=2)
        N, M = Phi.shape
        mu = Phi.mean(dim=0)
        C = torch.zeros((M, M), dtype=torch.float64)
        rows = max(1, NN_CHUNK_BYTES // (8 * M))
        for i in range(0, N, rows):
            D = Phi[i : i + rows] - mu
            C.addmm_(D.T, D)
        C = (C + C.T) / (2 * N)
        s, V = _eigh_descending(C)
        keep = kept_rank(s, self.threshold, max_rank, "the feature covariance")
        self.n_corpus_ = N
        self.n_features_ = M
        self.n_components_ = keep
        self.spectrum_ = s
        self.eigenvalues_ = s[:keep].clone()
        self.components_ = V[:, :keep].contiguous()
        self.corpus_projections_ = Phi @ self.components_
        self.corpus_mean_ = mu @ self.components_
        return self

    def _weights(self, alpha: float) -> torch.Tensor:
        s = self.eigenvalues_
        t = s + alpha
        return s / t / t

    def _prepare(self, Phi_test, alpha, rank):
        P = self._test(Phi_test) @ self.components_
        a = float(alpha)  # alpha and rank checked by the public method
        r = self.n_components_ if rank is None else int(rank)
        if r > self.n_components_:
            raise ValueError(
                f"`rank`={r} exceeds the {self.n_components_} components kept at fit; "
                f"use rank <= {self.n_components_}"
            )
        return P[:, :r], self._weights(a)[:r], r

    def transform(self, Phi_test) -> torch.Tensor:
        """Projections ``p_m`` of the test features, Tensor (n_test, r)."""
        return self._test(Phi_test) @ self.components_

    @validate_arguments({"alpha": ALPHA, "rank": RANK[:2]})  # one alpha; None or an int
    def mahalanobis(self, Phi_test, alpha, rank: int | None = None) -> torch.Tensor:
        """Kernel Mahalanobis distance, Tensor (n_test,)."""
        P, w, r = self._prepare(Phi_test, alpha, rank)
        return torch.sqrt((w * (P - self.corpus_mean_[:r]) ** 2).sum(dim=1))

    @validate_arguments({"alpha": ALPHA, "rank": RANK[:2]})
    def conformance(self, Phi_test, alpha, rank: int | None = None) -> torch.Tensor:
        """Whitened distance to the nearest corpus point (exact search), Tensor (n_test,)."""
        P, w, r = self._prepare(Phi_test, alpha, rank)
        sw = torch.sqrt(w)
        if P.shape[0] == 0:
            return P.new_zeros(0)
        d2, _ = nearest_squared_distances(P * sw, self.corpus_projections_[:, :r] * sw)
        return torch.sqrt(d2[:, 0].clamp_min(0.0))

    def __repr__(self) -> str:
        return f"FeatureVarianceNorm(threshold={self.threshold!r}, max_rank={self.max_rank!r})"


class FeatureMahalanobis(FeatureVarianceNorm):
    """The feature form of :class:`novelty.MahalanobisScorer` (its parameters):
    ``score(Phi_test, diag_test)`` = ``mahalanobis(Phi_test, alpha)`` (``diag_test`` unused)."""

    _parameter_constraints = MahalanobisScorer._parameter_constraints

    def __init__(self, alpha: float = 1e-2, *, threshold: float = 1e-10, max_rank=50):
        super().__init__(threshold=threshold, max_rank=max_rank)
        self.alpha = alpha

    def score(self, Phi_test, diag_test=None) -> torch.Tensor:
        return self.mahalanobis(Phi_test, self.alpha)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(alpha={self.alpha!r}, threshold={self.threshold!r}, "
            f"max_rank={self.max_rank!r})"
        )


class FeatureConformance(FeatureMahalanobis):
    """The feature form of :class:`novelty.ConformanceScorer` (its parameters):
    ``score(Phi_test, diag_test)`` = ``conformance(Phi_test, alpha)``."""

    def score(self, Phi_test, diag_test=None) -> torch.Tensor:
        return self.conformance(Phi_test, self.alpha)


class FeatureSpectralSupport(FeatureScorer):
    """:class:`novelty.SpectralSupport` on feature vectors of a normalised kernel;
    ``score(Phi_test, k_test_diag)`` = 1 - F_n(x) (module docstring)."""

    def __init__(self, filter="tikhonov", lam=1e-3, iterations=None, nu=1.0):
        self.filter = filter
        self.lam = lam
        self.iterations = iterations
        self.nu = nu

    _parameter_constraints = SpectralSupport._parameter_constraints

    def fit(self, Phi, diag=None) -> FeatureSpectralSupport:
        """Eigendecompose Phi^T Phi / n and store the filtered spectrum."""
        validate_params(self)
        lam = float(self.lam)
        iterations = filter_iterations(self.filter, lam, self.iterations)
        Phi = _as_features(Phi, "Phi", min_rows=2)
        if diag is not None:
            _check_unit(_as_diag(diag, Phi.shape[0], "diag"), "diag")
        n, M = Phi.shape
        G = Phi.T @ Phi / n
        sigma, V = _eigh_descending((G + G.T) / 2)
        sigma = sigma.clamp_min(0.0)
        self.n_corpus_ = n
        self.n_features_ = M
        self.eigenvalues_ = sigma
        self.components_ = V
        self.weights_ = sigma * spectral_filter(sigma, self.filter, lam, iterations, self.nu)
        return self

    def support_function(self, Phi_test, k_test_diag) -> torch.Tensor:
        """F_n(x) for each test point, Tensor (n_test,)."""
        P = self._test(Phi_test)
        _check_unit(_as_diag(k_test_diag, P.shape[0], "k_test_diag"), "k_test_diag")
        return ((P @ self.components_) ** 2 * self.weights_).sum(dim=1)

    def score(self, Phi_test, k_test_diag) -> torch.Tensor:
        """Novelty score 1 - F_n(x), Tensor (n_test,)."""
        return 1.0 - self.support_function(Phi_test, k_test_diag)

    def __repr__(self) -> str:
        return f"FeatureSpectralSupport(filter={self.filter!r}, lam={self.lam!r})"


def _check_unit(diag: torch.Tensor, name: str) -> None:
    if diag.numel() and float((diag - 1.0).abs().max()) > DIAG_TOL:
        raise ValueError(
            f"spectral support needs a normalised kernel, k(x, x) = 1, but `{name}` has an "
            f"entry {float(diag[(diag - 1.0).abs().argmax()]):.6g}; use normalize=True"
        )


class FeatureKNN(FeatureScorer):
    """:class:`novelty.KNNScorer` on feature vectors: distance to the k-th nearest corpus
    vector (or the mean over the k nearest), ``distance`` "kernel" (default, exact diagonal)
    or "feature" (module docstring)."""

    _AGGREGATES = ("kth", "mean")
    _DISTANCES = ("kernel", "feature")

    def __init__(self, n_neighbors: int = 1, *, aggregate: str = "kth", distance="kernel"):
        self.n_neighbors = n_neighbors
        self.aggregate = aggregate
        self.distance = distance

    _parameter_constraints = {
        **KNNScorer._parameter_constraints,
        "distance": [StrOptions(set(_DISTANCES))],
    }

    def _params(self, n_corpus: int, leave_out: bool = False) -> int:
        validate_params(self)
        k = int(self.n_neighbors)
        if k > n_corpus - leave_out:
            raise ValueError(f"`n_neighbors`={k} exceeds the corpus size N={n_corpus - leave_out}")
        return k

    def fit(self, Phi, diag) -> FeatureKNN:
        """Keep the corpus features and their residuals k(x, x) - ||Phi(x)||^2."""
        Phi = _as_features(Phi, "Phi", min_rows=1)
        self._params(Phi.shape[0])
        d = _as_diag(diag, Phi.shape[0], "diag")
        self.corpus_ = Phi
        self.residual_ = _residual(Phi, d, "Phi")
        self.n_corpus_, self.n_features_ = Phi.shape
        return self

    def limit_to_corpus(self, n_corpus: int) -> None:
        """k lowered to ``n_corpus`` when above it (a bad k is left for ``fit`` to report)."""
        k = self.n_neighbors
        if not isinstance(k, bool) and isinstance(k, (int, np.integer)) and k > n_corpus:
            self.n_neighbors = n_corpus

    def held_out_scores(self, Phi, diag, rows, groups=None, *, make=None) -> np.ndarray:
        """Exact leave-one-out of the fitted scorer (:meth:`leave_one_out`), no refit."""
        return self.leave_one_out(torch.from_numpy(np.asarray(rows)), groups).numpy()

    def _aggregate(self, d2: torch.Tensor) -> torch.Tensor:
        dist = torch.sqrt(d2.clamp_min(0.0))
        return dist[:, -1] if self.aggregate == "kth" else dist.mean(dim=1)

    def score(self, Phi_test, k_test_diag) -> torch.Tensor:
        """Distance to the k-th nearest corpus vector (or mean over the k nearest)."""
        P = self._test(Phi_test)
        k = self._params(self.n_corpus_)
        if P.shape[0] == 0:
            return P.new_zeros(0)
        qe = _residual(P, _as_diag(k_test_diag, P.shape[0], "k_test_diag"), "Phi_test")
        return self._aggregate(self._nearest(P, k, qe if self.distance == "kernel" else None))

    def _nearest(self, P: torch.Tensor, k: int, q_extra) -> torch.Tensor:
        """The k smallest squared distances (n, k), ascending, of the rows ``P`` to the corpus
        rows, with the residuals ``q_extra`` and the corpus's added (``distance="kernel"``;
        None: plain feature distances)."""
        d2, _ = nearest_squared_distances(
            P, self.corpus_, k,
            q_extra=q_extra, e_extra=None if q_extra is None else self.residual_,
        )  # fmt: skip
        return d2

    def _left_out_k(self, rows: torch.Tensor, groups) -> int:
        """k of :meth:`leave_one_out` for the corpus rows ``rows``: lowered to what remains
        once the largest duplicate group among them (without ``groups``: the row itself) is
        left out."""
        if groups is None:
            return self._params(self.n_corpus_, leave_out=True)
        g = torch.as_tensor(np.asarray(groups), dtype=torch.long)
        largest = int(torch.bincount(g)[g[rows]].max()) if rows.numel() else 1
        return min(self._params(self.n_corpus_), self.n_corpus_ - largest)

    def leave_one_out(self, rows, groups=None) -> torch.Tensor:
        """Scores of corpus rows ``rows`` against the rest of the corpus (exact); with duplicate
        ``groups`` (one id per corpus row), against the rows of other groups only (every copy
        of the series left out with it, k lowered to what remains)."""
        self._check_fitted()
        rows = torch.as_tensor(rows, dtype=torch.long).reshape(-1)
        kernel = self.distance == "kernel"
        k = self._left_out_k(rows, groups)
        if groups is None:
            pairs, exclude = None, rows
        else:
            g = torch.as_tensor(np.asarray(groups), dtype=torch.long)
            pairs, exclude = (g[rows], g), None
        d2, _ = nearest_squared_distances(
            self.corpus_[rows], self.corpus_, k,
            q_extra=self.residual_[rows] if kernel else None,
            e_extra=self.residual_ if kernel else None, exclude=exclude, groups=pairs,
        )  # fmt: skip
        return self._aggregate(d2)

    def __repr__(self) -> str:
        return (
            f"FeatureKNN(n_neighbors={self.n_neighbors!r}, aggregate={self.aggregate!r}, "
            f"distance={self.distance!r})"
        )


class FeatureMeanEmbedding(FeatureScorer):
    r""":class:`novelty.MeanEmbeddingScorer` on feature vectors:
    :math:`\sqrt{k(y,y) - 2\Phi(y)^\top\bar\Phi + \|\bar\Phi\|^2}`."""

    def fit(self, Phi, diag=None) -> FeatureMeanEmbedding:
        Phi = _as_features(Phi, "Phi", min_rows=2)
        self.mean_ = Phi.mean(dim=0)
        self.mean_norm_sq_ = float(self.mean_ @ self.mean_)
        self.n_corpus_, self.n_features_ = Phi.shape
        return self

    def score(self, Phi_test, k_test_diag) -> torch.Tensor:
        P = self._test(Phi_test)
        d = _as_diag(k_test_diag, P.shape[0], "k_test_diag")
        _residual(P, d, "Phi_test")
        d2 = d - 2.0 * (P @ self.mean_) + self.mean_norm_sq_
        return torch.sqrt(d2.clamp_min(0.0))
