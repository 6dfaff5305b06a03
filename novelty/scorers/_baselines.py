r"""Baseline novelty scorers on Gram matrices (higher score = more novel).

- :class:`KNNScorer`: distance in feature space to the k-th nearest corpus point (or the mean
  distance to the k nearest), :math:`\|\phi(y) - \phi(x)\|^2 = k(y, y) + k(x, x) - 2 k(y, x)`;
- :class:`MeanEmbeddingScorer`: RKHS distance to the kernel mean embedding,
  :math:`\|\phi(y) - \mu\|^2 = k(y, y) - \tfrac2N \sum_i k(y, x_i) + \tfrac1{N^2}\sum_{ij} K_{ij}`;
- :class:`OCSVMScorer`: scikit-learn's ``OneClassSVM(kernel="precomputed")``; score is minus
  its decision function.

Every scorer needs a corpus of at least two points; an empty test Gram (0, N) gives empty
scores. Gram entries up to the float64 maximum are handled (an exact power-of-two rescale when
the entries exceed 2^500).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch

from ._gram_scorer import GramScorer, Interval, StrOptions, check_fitted, validate_params
from ._scorer_registry import deferred_class
from ._validation import check_psd, pow2_scale

__all__ = [
    "KNNScorer",
    "MeanEmbeddingScorer",
    "OCSVMScorer",
    "aggregate_nearest",
    "knn_leave_one_out",
    "squared_feature_distances",
]


class KNNScorer(GramScorer):
    r"""Feature-space distance to the nearest corpus points.

    With :math:`d_i(y) = \|\phi(y) - \phi(x_i)\| = (k(y, y) + k(x_i, x_i) - 2 k(y, x_i))^{1/2}`
    sorted ascending, :math:`d_{(1)} \le \dots \le d_{(N)}`, the score is :math:`d_{(k)}(y)`
    (``aggregate="kth"``) or :math:`\tfrac1k \sum_{j \le k} d_{(j)}(y)` (``"mean"``).

    Parameters
    ----------
    n_neighbors : int, default 1
        Number k of nearest corpus points considered (at most the corpus size).
    aggregate : {"kth", "mean"}, default "kth"
        ``"kth"``: distance to the k-th nearest corpus point; ``"mean"``: mean of the
        distances to the k nearest (the rule of ROCKAD and of PyOD's ``KNN(method="mean")``).
        Both are the same for k = 1.
    """

    _parameter_constraints = {
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "aggregate": [StrOptions({"kth", "mean"})],
    }
    min_corpus = 1  # a distance to one series is a score
    name = "knn"
    description = "feature-space distance to the nearest corpus point"
    feature_form = deferred_class("novelty.scorers._feature_scorers:FeatureKNN")

    def __init__(self, n_neighbors: int = 1, *, aggregate: str = "kth"):
        self.n_neighbors = n_neighbors
        self.aggregate = aggregate

    def held_out_scores(self, K, diag, groups=None, *, models=None, progress=None) -> np.ndarray:
        """Exact leave-one-out (:func:`knn_leave_one_out`, no refit; ``models`` stays empty)
        on two or more series; the refits of the base class on one."""
        if K.shape[0] >= 2:
            return knn_leave_one_out(self, K, diag, groups)
        return super().held_out_scores(K, diag, groups, models=models, progress=progress)

    @classmethod
    def held_out_steps(cls, n: int) -> int:
        return 0  # read off the Gram, no refit

    def limit_to_corpus(self, n_corpus: int) -> None:
        """k lowered to ``n_corpus`` when above it (a valid integer k only: a bad one is left
        for ``fit`` to report)."""
        k = self.n_neighbors
        if not isinstance(k, bool) and isinstance(k, (int, np.integer)) and k > n_corpus:
            self.set_params(n_neighbors=n_corpus)

    def extend(self, K_new_corpus, K_new_new, *, K_corpus=None, params=None) -> KNNScorer:
        """:meth:`GramScorer.extend` without the corpus Gram (``K_corpus`` is not read): the
        fit keeps only the corpus diagonal, so the extended scorer is this one's diagonal
        followed by that of ``K_new_new``, on the same device; no Gram is formed."""
        check_fitted(self)
        K_bb = torch.as_tensor(K_new_new)
        n_old, n_new = int(self.n_corpus_), int(K_bb.shape[0])
        shape = tuple(torch.as_tensor(K_new_corpus).shape)
        if K_bb.ndim != 2 or K_bb.shape[1] != n_new or shape != (n_new, n_old):
            raise ValueError(
                f"`K_new_corpus` must be (m, N) = (m, {n_old}) and `K_new_new` (m, m), got "
                f"{shape} and {tuple(K_bb.shape)}"
            )
        scorer = self._extension(params)
        validate_params(scorer)
        diag = torch.cat([self.corpus_diag_, torch.diagonal(K_bb).clone()])
        scorer._check_neighbors(n_old + n_new)
        scorer.corpus_diag_ = diag
        scorer._device = self._device
        scorer.n_corpus_ = n_old + n_new
        return scorer

    def extension_state(self, K, groups=None, *, held_out: bool = True) -> dict:
        """:meth:`GramScorer.extension_state` without the Gram (:meth:`extend` reads the
        kept corpus diagonal): with ``held_out``, ``{"nearest_d2": D}`` with ``D`` (N, k),
        per corpus series its k = ``min(n_neighbors, N)`` smallest squared feature-space
        distances (:func:`squared_feature_distances`) to the series outside its duplicate
        group (``groups``; None: itself only), ascending, +inf where fewer: what the exact
        leave-one-out of the extended corpus needs of the old one; else ``{}``."""
        check_fitted(self)
        if not held_out:
            return {}
        K = torch.as_tensor(K)
        diag = torch.diagonal(K).clone()
        n = K.shape[0]
        if groups is None:
            g = torch.arange(n, device=K.device)
        else:
            g = torch.as_tensor(np.asarray(groups), dtype=torch.long, device=K.device)
        d2 = squared_feature_distances(K, diag, diag, float(diag.abs().max()) + 1.0)
        d2 = d2.masked_fill(g[:, None] == g[None, :], math.inf)
        k = min(int(self.n_neighbors), n)
        return {"nearest_d2": torch.topk(d2, k, dim=1, largest=False).values}

    def _check_neighbors(self, n_corpus: int) -> int:
        k = int(self.n_neighbors)
        if k > n_corpus:
            raise ValueError(f"`n_neighbors`={k} exceeds the corpus size N={n_corpus}")
        return k

    def _fit(self, K: torch.Tensor) -> None:
        self._check_neighbors(K.shape[0])
        self.corpus_diag_ = torch.diagonal(K).clone()

    def _score(self, Kt: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
        k, aggregate = self._check_neighbors(self.n_corpus_), self.aggregate
        if Kt.shape[0] == 0:
            return dt.clone()

        def distance(Kt, dt, diag):
            d2 = squared_feature_distances(Kt, dt, diag)
            if aggregate == "kth":
                return torch.kthvalue(d2, k, dim=1).values.sqrt()
            return torch.topk(d2, k, dim=1, largest=False).values.sqrt().mean(dim=1)

        return _on_safe_scale(distance, Kt, dt, self.corpus_diag_)


def _on_safe_scale(distance, *kernel_values: torch.Tensor) -> torch.Tensor:
    """``distance(*kernel_values)``, a feature-space distance (the square root of a sum of
    kernel values), computed on the values times c = :func:`pow2_scale` (1.0 unless entries
    beyond 2^500, whose sums would overflow) and divided by sqrt(c): exact, c being an even
    power of two."""
    c = pow2_scale(*kernel_values)
    if c == 1.0:
        return distance(*kernel_values)
    return distance(*(v * c for v in kernel_values)) / math.sqrt(c)


def squared_feature_distances(
    K: torch.Tensor, diag_rows: torch.Tensor, diag_cols: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    r"""Squared feature-space distances read off a Gram matrix, Tensor of shape (n, m):

    .. math:: d^2_{ij} = \|\phi(y_i) - \phi(x_j)\|^2 = k(y_i, y_i) + k(x_j, x_j) - 2 k(y_i, x_j)

    with ``K`` [i, j] = k(y_i, x_j), ``diag_rows`` = k(y_i, y_i) (n,), ``diag_cols`` =
    k(x_j, x_j) (m,). Values below 0 by rounding (down to -1e-8 x ``scale``, by default
    max |k(y_i, y_i)| + 1) are set to 0; a clearly negative one raises
    (:func:`check_squared_distances`). The one definition behind the kNN scorer and its exact
    leave-one-out (:func:`knn_leave_one_out`)."""
    d2 = diag_rows[:, None] + diag_cols[None, :] - 2.0 * K
    if scale is None:
        scale = float(diag_rows.abs().max()) + 1.0 if diag_rows.numel() else 1.0
    check_squared_distances(d2, scale)
    return d2.clamp_min(0.0)


def check_squared_distances(d2: torch.Tensor, scale: float) -> None:
    """Raise when a squared feature-space distance is below -1e-8 x ``scale``: the kernel
    values are inconsistent (not positive semi-definite, or the diagonal and the Gram from
    different kernels); above that, a negative value is rounding."""
    if bool((d2 < -1e-8 * scale).any()):
        raise ValueError(
            f"negative squared feature-space distance {float(d2.min()):.3g}: the kernel is "
            "not positive semi-definite, or the diagonal and the Gram matrices are not from "
            "one kernel"
        )


def _sqrt_of_squared_distance(d2: torch.Tensor, scale: float) -> torch.Tensor:
    """sqrt of feature-space squared distances, checked (:func:`check_squared_distances`) and
    clamped at 0."""
    check_squared_distances(d2, scale)
    return torch.sqrt(d2.clamp_min(0.0))


def knn_leave_one_out(
    scorer: KNNScorer, K: torch.Tensor, diag: torch.Tensor, groups: np.ndarray | None = None
) -> np.ndarray:
    r"""kNN novelty of each corpus series against the other N - 1 (exact leave-one-out):
    the feature-space distances :math:`\sqrt{k(x,x) + k(y,y) - 2k(x,y)}` with the series
    itself left out, aggregated as the (unfitted) ``scorer`` does (k-th nearest, or mean of the
    k nearest). With duplicate ``groups``, every copy of the series is left out too (its
    distances are +inf like the diagonal), and a series with r copies in all is scored against
    the other N - r with k lowered to at most N - r."""
    validate_params(scorer)
    n = K.shape[0]
    k = min(int(scorer.n_neighbors), n - 1)
    aggregate = scorer.aggregate
    d2 = squared_feature_distances(K, diag, diag)  # checked, rounding clamped at 0
    if groups is not None:
        return knn_leave_group_out(scorer, d2, groups)
    d2.fill_diagonal_(float("inf"))
    nearest = torch.topk(d2, k, dim=1, largest=False).values.sqrt()
    out = nearest[:, -1] if aggregate == "kth" else nearest.mean(dim=1)
    return out.cpu().numpy()


def knn_leave_group_out(scorer: KNNScorer, d2: torch.Tensor, groups: np.ndarray) -> np.ndarray:
    """:func:`knn_leave_one_out` with every copy of a series left out: ``d2`` the squared
    corpus distances, ``groups`` the duplicate groups
    (:func:`novelty.detector._members.duplicate_groups`)."""
    n = d2.shape[0]
    g = torch.as_tensor(np.asarray(groups), dtype=torch.long, device=d2.device)
    d2 = d2.masked_fill(g[:, None] == g[None, :], float("inf"))  # the diagonal included
    available = n - torch.bincount(g)[g]  # series left to score against, per row
    if int(available.min()) < 1:
        raise ValueError("every corpus series is a copy of one series: nothing to hold out")
    k_row = available.clamp_max(int(scorer.n_neighbors))
    nearest = torch.topk(d2, int(k_row.max()), dim=1, largest=False).values.sqrt()
    return aggregate_nearest(nearest, k_row, scorer.aggregate)


def aggregate_nearest(nearest: torch.Tensor, k_row: torch.Tensor, aggregate: str) -> np.ndarray:
    """kNN novelty per row from its ascending nearest distances ``nearest`` (n, >= max k) with
    a row's own k in ``k_row`` (n,): the k-th distance ("kth") or the mean of the k nearest."""
    if aggregate == "kth":
        out = nearest.gather(1, (k_row - 1)[:, None])[:, 0]
    else:
        cols = torch.arange(nearest.shape[1], device=nearest.device)
        inside = cols[None, :] < k_row[:, None]
        zero = torch.zeros((), dtype=nearest.dtype, device=nearest.device)
        out = torch.where(inside, nearest, zero).sum(dim=1) / k_row.to(nearest.dtype)
    return out.cpu().numpy()


class MeanEmbeddingScorer(GramScorer):
    r"""RKHS distance to the corpus mean embedding :math:`\mu = \tfrac1N \sum_i \phi(x_i)`,

    .. math:: \|\phi(y) - \mu\| = \Bigl(k(y, y) - \tfrac2N \sum_i k(y, x_i)
        + \tfrac1{N^2} \sum_{ij} K_{ij}\Bigr)^{1/2}

    (the corpus Gram must be positive semi-definite: the distance is undefined otherwise)."""

    _parameter_constraints = {}
    name = "mean_embedding"
    description = "RKHS distance to the mean"
    feature_form = deferred_class("novelty.scorers._feature_scorers:FeatureMeanEmbedding")

    def _fit(self, K: torch.Tensor) -> None:
        check_psd(K, "K_corpus", type(self).__name__)
        c = pow2_scale(K)
        self.mean_norm_sq_ = K.mean() if c == 1.0 else (K * c).mean() / c

    def _score(self, Kt: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
        if Kt.shape[0] == 0:
            return dt.clone()

        def distance(Kt, dt, mu):
            d2 = dt - 2.0 * Kt.mean(dim=1) + mu
            return _sqrt_of_squared_distance(d2, scale=float(dt.abs().max()) + 1.0)

        return _on_safe_scale(distance, Kt, dt, self.mean_norm_sq_)


class OCSVMScorer(GramScorer):
    r"""One-class SVM (scikit-learn's ``OneClassSVM(kernel="precomputed", nu=nu)``) on the
    corpus Gram; score :math:`= -\bigl(\sum_i \beta_i k(y, x_i) - \rho\bigr)`, minus its
    decision function (``diag_test`` is not used)."""

    _parameter_constraints = {"nu": [Interval(Real, 0, 1, closed="right")]}
    requires_diag = False
    name = "ocsvm"
    description = "one-class SVM, nu = 0.1"
    feature_form = None  # approximation= not supported

    def __init__(self, nu: float = 0.1):
        self.nu = nu

    def _fit(self, K: torch.Tensor) -> None:
        check_psd(K, "K_corpus", type(self).__name__)
        # Grams beyond 2^500 are scaled by a power of two (the decision function scales with
        # the kernel); others are passed as they are
        self._scale = pow2_scale(K)
        from sklearn.svm import OneClassSVM  # imported on use: sklearn.svm is slow to import

        self.svm_ = OneClassSVM(kernel="precomputed", nu=self.nu).fit(
            _scaled(K, self._scale).numpy(force=True)
        )

    def _score(self, Kt: torch.Tensor, dt: torch.Tensor | None) -> torch.Tensor:
        if Kt.shape[0] == 0:
            return Kt.new_zeros(0)
        dec = self.svm_.decision_function(
            np.ascontiguousarray(_scaled(Kt, self._scale).numpy(force=True))
        )
        dec = torch.from_numpy(np.asarray(dec, dtype=np.float64)).to(self._device)
        return -dec if self._scale == 1.0 else -dec / self._scale


def _scaled(K: torch.Tensor, c: float) -> torch.Tensor:
    """K * c, without a copy when c = 1."""
    return K if c == 1.0 else K * c
