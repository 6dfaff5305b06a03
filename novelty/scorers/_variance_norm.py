r"""Variance-norm scorers: the kernelised Mahalanobis distance and the conformance score.

With corpus Gram :math:`B` (N x N), column means :math:`a_i`, grand mean :math:`b`, the centred
scaled Gram :math:`A_{ij} = (B_{ij} - a_i - a_j + b)/N = U \operatorname{diag}(s) U^\top`
(descending; keep the top M components with :math:`s_m >` ``threshold``, M <= ``max_rank``),
a point with kernel row :math:`k_i = k(y, x_i)` projects to

.. math:: p_m(y) = \sum_i U_{im} (k_i - \bar k) / \sqrt{N s_m},

the corpus to :math:`E_{nm} = p_m(x_n)` with mean :math:`c_m`. With weights
:math:`w_m = s_m / (s_m + \alpha)^2` (Tikhonov),

.. math::
    \mathrm{mahalanobis}(y) = \Bigl(\sum_{m \le r} w_m (p_m - c_m)^2\Bigr)^{1/2},\qquad
    \mathrm{conformance}(y) = \Bigl(\min_n \sum_{m \le r} w_m (p_m - E_{nm})^2\Bigr)^{1/2}.

Cumulative sums over m give every rank r = 1..M from one pass.

:class:`VarianceNorm` is the shared engine (one fit, both scores, any alphas and ranks);
:class:`MahalanobisScorer` and :class:`ConformanceScorer` are the two scores as
:class:`~novelty.scorers._gram_scorer.GramScorer` s, with ``alpha`` a constructor parameter and a
``sweep`` over every (alpha, rank) from one fit.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.linalg
import torch
from sklearn.base import BaseEstimator

from .._constraints import ALPHA, ALPHAS, RANK, validate_arguments
from ._gram_scorer import GramScorer, Interval, check_fitted, validate_params
from ._scorer_registry import deferred_class
from ._validation import PSD_RTOL, as_alphas, check_corpus_gram, check_cross_gram
from ._variance_norm_numba import conformance_sq_all_ranks

__all__ = ["ConformanceScorer", "MahalanobisScorer", "VarianceNorm"]

#: Bytes of the (chunk, M, N) working tensor of the conformance minimum.
_CONFORMANCE_CHUNK_BYTES = 32 * 2**20


_THRESHOLD = [Interval(Real, 0, None, closed="left")]
_MAX_RANK = [None, Interval(Integral, 1, None, closed="left")]


class VarianceNorm(BaseEstimator):
    r"""Kernelised Mahalanobis and conformance scores (distances: higher = more novel).

    Parameters
    ----------
    threshold : float, default 1e-10
        Keep eigen-components of the centred, scaled Gram with eigenvalue ``s_m > threshold``.
    max_rank : int, default 50
        At most this many components (the largest) are kept.

    Attributes (after ``fit``)
    --------------------------
    n_corpus_ : int, N.
    n_components_ : int, M, components kept.
    eigenvalues_ : Tensor (M,), the kept ``s_m`` (descending).
    spectrum_ : Tensor (N,), every eigenvalue of the centred, scaled Gram (descending).
    projection_ : Tensor (N, M), ``U_im / sqrt(N s_m)``.
    corpus_projections_ : Tensor (N, M), ``E_nm``; ``corpus_mean_`` Tensor (M,), ``c_m``.

    Examples
    --------
    >>> import torch
    >>> X = torch.randn(20, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> vn = VarianceNorm().fit(X @ X.T)
    >>> vn.n_components_
    3
    >>> float(vn.conformance(X[:2] @ X.T, 1e-8).max()) < 1e-6
    True
    """

    _parameter_constraints = {"threshold": _THRESHOLD, "max_rank": _MAX_RANK}
    min_corpus = 2  # a centred spectrum needs two points

    def __init__(self, threshold: float = 1e-10, max_rank: int | None = 50):
        self.threshold = threshold
        self.max_rank = max_rank

    # ------------------------------------------------------------------ fitting
    def fit(self, K_corpus, y=None) -> VarianceNorm:
        """Centre the corpus Gram (N, N), eigendecompose it and project the corpus."""
        validate_params(self)
        return self._fit(check_corpus_gram(K_corpus, "K_corpus"))

    def _fit(self, B: torch.Tensor) -> VarianceNorm:
        """``fit`` on a checked corpus Gram (parameters checked by the caller)."""
        max_rank = self.max_rank
        N = B.shape[0]
        a = B.mean(dim=0)
        b = a.mean()
        A = (B - a[:, None] - a[None, :] + b) / N
        if not bool(torch.isfinite(A).all()):
            raise ValueError(
                f"`K_corpus` entries are too large to centre (max |K| = "
                f"{float(B.abs().max()):.3g}): the centred Gram overflows float64; rescale "
                "the kernel (e.g. normalise it) or the data"
            )
        s, U = _eigh_descending(A)
        top = float(s[0])
        if float(s[-1]) < -PSD_RTOL * max(top, 0.0) or top <= 0 and float(s[-1]) < 0:
            raise ValueError(
                f"`K_corpus` is not positive semi-definite: the centred Gram has eigenvalue "
                f"{float(s[-1]):.3g} (largest {top:.3g}); use a positive-definite kernel, or "
                "check the Gram for a wrong parameter or a non-kernel similarity"
            )
        keep = kept_rank(s, self.threshold, max_rank, "the centred corpus Gram")
        eigenvalues = s[:keep].clone()
        projection = U[:, :keep] / torch.sqrt(N * eigenvalues)[None, :]
        corpus_projections = _project(B, projection)
        self.n_corpus_ = N
        self.n_components_ = keep
        self.spectrum_ = s
        self.eigenvalues_ = eigenvalues
        self.projection_ = projection
        self.corpus_projections_ = corpus_projections
        self.corpus_mean_ = corpus_projections.mean(dim=0)
        self._device = B.device
        return self

    def _project(self, K: torch.Tensor) -> torch.Tensor:
        """p_m for each row of K (n, N), Tensor (n, M)."""
        return _project(K, self.projection_)

    def transform(self, K_test_corpus) -> torch.Tensor:
        """Projections ``p_m`` of the test points, Tensor (n_test, M)."""
        self._check_fitted()
        return self._project(self._check_test(K_test_corpus))

    # ------------------------------------------------------------------ scoring
    @validate_arguments({"alpha": ALPHAS, "rank": RANK})
    def mahalanobis(self, K_test_corpus, alpha, rank: int | str | None = None) -> torch.Tensor:
        r"""Kernel Mahalanobis distance :math:`(\sum_{m \le r} w_m (p_m - c_m)^2)^{1/2}`.

        ``K_test_corpus``: (n_test, N), k(test, corpus). ``alpha``: a positive float or a
        sequence; ``rank``: None (all M kept components), an int r <= M, or ``"all"`` (every
        r = 1..M). Returns float64 Tensor (n_test,), with a leading (n_alpha,) axis for a
        sequence of alphas and an (M,) axis before n_test for ``rank="all"``.
        """
        return self._score(K_test_corpus, alpha, rank, conformance=False)

    @validate_arguments({"alpha": ALPHAS, "rank": RANK})
    def conformance(self, K_test_corpus, alpha, rank: int | str | None = None) -> torch.Tensor:
        r"""Conformance score :math:`(\min_n \sum_{m \le r} w_m (p_m - E_{nm})^2)^{1/2}`:
        distance to the nearest corpus point in the whitened metric (0 on corpus points).
        Arguments and shapes as :meth:`mahalanobis`."""
        return self._score(K_test_corpus, alpha, rank, conformance=True)

    @validate_arguments({"alpha": ALPHA})
    def weights(self, alpha: float) -> torch.Tensor:
        """w_m = s_m / (s_m + alpha)^2, Tensor (M,)."""
        self._check_fitted()
        return self._weights([float(alpha)])[0]

    def _weights(self, alphas: list[float]) -> torch.Tensor:
        s = self.eigenvalues_
        al = torch.tensor(alphas, dtype=s.dtype, device=s.device)[:, None]
        # s / (s + alpha)^2 as (s / (s + alpha)) / (s + alpha): the square overflows beyond
        # s ~ 1e154 (weights 0), the quotients never do
        t = s[None, :] + al
        return s[None, :] / t / t  # (n_alpha, M)

    def _score(self, K, alpha, rank, conformance: bool) -> torch.Tensor:
        self._check_fitted()
        alphas, scalar_alpha = as_alphas(alpha)  # checked by the public method
        r, all_ranks = self._check_rank(rank)
        out = self._distances(self._check_test(K), alphas, r, conformance)
        if not all_ranks:
            out = out[:, -1]
        return out[0] if scalar_alpha else out

    def _distances(
        self, Kt: torch.Tensor, alphas: list[float], r: int, conformance: bool
    ) -> torch.Tensor:
        """The distances of ranks 1..r for every alpha, Tensor (n_alpha, r, n_test), from a
        checked test Gram ``Kt`` (:meth:`_check_test`), checked float ``alphas`` and
        ``r <= n_components_``: the computation behind :meth:`mahalanobis` and
        :meth:`conformance`, and the internal entry point of callers that checked once
        (the experiments' CV cells)."""
        P = self._project(Kt)[:, :r]  # (n_test, r)
        W = self._weights(alphas)[:, :r]  # (n_alpha, r)
        if conformance:
            sq = _conformance_sq(P, self.corpus_projections_[:, :r], W)
        else:
            diff2 = (P - self.corpus_mean_[:r]) ** 2  # (n_test, r)
            sq = torch.cumsum(W[:, :, None] * diff2.T[None, :, :], dim=1)  # (n_alpha, r, n)
        return torch.sqrt(sq.clamp_min(0.0))  # cumulative sums of non-negative terms

    # ------------------------------------------------------------------ checks
    def _check_fitted(self) -> None:
        check_fitted(self)
        validate_params(self)

    def _check_test(self, K) -> torch.Tensor:
        return check_cross_gram(K, self.n_corpus_, "K_test_corpus", self._device)

    def _check_rank(self, rank) -> tuple[int, bool]:
        M = self.n_components_
        if rank is None:
            return M, False
        if isinstance(rank, str):  # "all" (RANK, checked by the public method)
            return M, True
        r = int(rank)
        if r > M:
            raise ValueError(
                f"`rank`={r} exceeds the {M} components kept at fit (eigenvalues above "
                f"threshold={self.threshold:g}, max_rank={self.max_rank}); use rank <= {M}"
            )
        return r, False


class _VarianceNormScorer(GramScorer):
    """A variance-norm score as a GramScorer (the subclasses set ``_conformance``)."""

    _conformance = False
    _parameter_constraints = {
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "threshold": _THRESHOLD,
        "max_rank": _MAX_RANK,
    }
    sweep_axis = "alpha"
    rank_param = "max_rank"
    requires_diag = False

    def __init__(self, alpha: float = 1e-2, *, threshold: float = 1e-10, max_rank: int | None = 50):
        self.alpha = alpha
        self.threshold = threshold
        self.max_rank = max_rank

    def _fit(self, K: torch.Tensor) -> None:
        vn = VarianceNorm(threshold=self.threshold, max_rank=self.max_rank)._fit(K)
        self.variance_norm_ = vn
        self.n_components_ = vn.n_components_

    def _score(self, Kt: torch.Tensor, dt: torch.Tensor | None) -> torch.Tensor:
        return self.variance_norm_._score(Kt, float(self.alpha), None, self._conformance)

    def _sweep(self, Kt, dt, values: list, ranks: list[int] | None) -> torch.Tensor:
        out = self.variance_norm_._score(Kt, values, "all", self._conformance)  # (a, M, n)
        if ranks is None:
            return out
        if self.max_rank is not None and max(ranks) > self.max_rank:
            raise ValueError(
                f"`ranks` reach {max(ranks)} but the scorer was fitted with "
                f"max_rank={self.max_rank}; fit with max_rank >= {max(ranks)} (or None)"
            )
        # a rank above the M components kept (eigenvalues above `threshold`) uses all M,
        # as a fit with max_rank = r would
        M = self.n_components_
        idx = torch.tensor([min(int(r), M) - 1 for r in ranks], device=out.device)
        return out[:, idx]


class MahalanobisScorer(_VarianceNormScorer):
    r"""Kernel Mahalanobis distance to the corpus mean (module docstring),

    .. math:: \Bigl(\sum_{m \le M} \frac{s_m}{(s_m + \alpha)^2} (p_m(y) - c_m)^2\Bigr)^{1/2},

    M the components kept at fit (eigenvalues of the centred, scaled Gram above
    ``threshold``, at most ``max_rank``). ``diag_test`` is not used. ``sweep`` gives every
    (alpha, rank) from one fit; ``variance_norm_`` is the fitted :class:`VarianceNorm`.

    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(20, 3))
    >>> s = MahalanobisScorer(alpha=1e-8).fit(X @ X.T)
    >>> s.score(X[:2] @ X.T).shape, s.sweep(X[:2] @ X.T, None, [1e-8, 1e-2]).shape
    ((2,), (2, 3, 2))
    """

    name = "mahalanobis"
    description = "kernelised Mahalanobis distance to the corpus mean"
    keeps_refits = True

    def scores_by_refits(self, refits: list) -> bool:
        """True whenever there are held-out refits: new series are scored, as the calibration
        was, by the refits (the detector takes the mean of their scores).

        The distance's distribution depends on the number of series the scorer is fitted on,
        not only through the rank: below ``max_rank`` an N-series fit keeps N - 1 whitened
        components and its refits N - 2, and above it the Tikhonov-weighted spectrum of N
        series is not that of the (N - N/10)-series fold refits. Scored by the N-series fit,
        fresh normal series were flagged at 0.13-0.17 for a nominal 0.1 (issue 31, finding 8;
        figures in ``tests/test_mahalanobis_calibration.py``)."""
        return bool(refits)

    feature_form = deferred_class("novelty.scorers._feature_scorers:FeatureMahalanobis")


class ConformanceScorer(_VarianceNormScorer):
    r"""Conformance score: distance to the nearest corpus point in the variance norm (module
    docstring),

    .. math:: \Bigl(\min_n \sum_{m \le M} \frac{s_m}{(s_m + \alpha)^2}
        (p_m(y) - E_{nm})^2\Bigr)^{1/2},

    0 on corpus points. Parameters, ``sweep`` and attributes as :class:`MahalanobisScorer`.
    """

    _conformance = True
    name = "conformance"
    keeps_refits = True

    def scores_by_refits(self, refits: list) -> bool:
        """True when the held-out refits keep fewer components than this fit: the score grows
        with the whitened dimension, so new series are then scored as the calibration was."""
        ranks = [model.n_components_ for _, model in refits]
        return bool(ranks) and max(ranks) < self.n_components_

    description = "distance to the nearest corpus point in the variance norm"
    feature_form = deferred_class("novelty.scorers._feature_scorers:FeatureConformance")


def _project(K: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """(K - row mean) @ projection: p_m for each row of K (n, N), Tensor (n, M)."""
    return (K - K.mean(dim=1, keepdim=True)) @ projection


def kept_rank(s: torch.Tensor, threshold: float, max_rank: int | None, what: str) -> int:
    """The number of components kept from the descending spectrum ``s``: the eigenvalues
    above ``threshold``, at most ``max_rank``; a ValueError naming ``what`` if none is."""
    keep = int((s > threshold).sum())
    if max_rank is not None:
        keep = min(keep, max_rank)
    if keep == 0:
        raise ValueError(
            f"no eigenvalue of {what} exceeds threshold={threshold:g} (largest "
            f"{float(s[0]):.3g}): the corpus points coincide in feature space"
        )
    return keep


def _eigh_descending(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every eigenpair of the symmetric A, descending. On the CPU LAPACK's divide-and-conquer
    ``syevd`` through scipy (steadier than torch's under contention for cores)."""
    if A.device.type == "cpu":
        s, U = scipy.linalg.eigh(A.numpy(), driver="evd", check_finite=False)
        return torch.from_numpy(s[::-1].copy()), torch.from_numpy(U[:, ::-1].copy())
    s, U = torch.linalg.eigh(A)
    return s.flip(0), U.flip(1)


def _conformance_sq(P: torch.Tensor, E: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """min_n cumsum_m W[a, m] (P[t, m] - E[n, m])^2 for every (a, m, t): Tensor (n_alpha, M, n_t).

    On the CPU: the compiled loop of ``_variance_norm_numba`` (exact early exit). Elsewhere:
    (chunk, M, N) blocks (cumulative sum over the middle axis, minimum over the
    contiguous last one), chunking the test points to bound memory.
    """
    if P.device.type == "cpu":
        out = conformance_sq_all_ranks(
            np.ascontiguousarray(P.numpy()),
            np.ascontiguousarray(E.numpy()),
            np.ascontiguousarray(W.numpy()),
        )
        return torch.from_numpy(out)
    n_t, M = P.shape
    N = E.shape[0]
    n_a = W.shape[0]
    out = torch.empty((n_a, M, n_t), dtype=P.dtype, device=P.device)
    Et = E.T.contiguous()  # (M, N)
    chunk = max(1, _CONFORMANCE_CHUNK_BYTES // max(1, 8 * M * N))
    for i in range(0, n_t, chunk):
        d2 = (P[i : i + chunk, :, None] - Et[None, :, :]) ** 2  # (c, M, N)
        buf = torch.empty_like(d2)
        for a in range(n_a):
            torch.mul(d2, W[a][None, :, None], out=buf)
            torch.cumsum(buf, dim=1, out=buf)
            out[a, :, i : i + chunk] = buf.amin(dim=2).T
    return out
