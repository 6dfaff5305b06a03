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

import numpy as np
import torch

from ._validation import (
    check_corpus_gram,
    check_cross_gram,
    check_int,
    check_psd,
    check_test_diag,
    pow2_scale,
)

__all__ = ["KNNScorer", "MeanEmbeddingScorer", "OCSVMScorer"]


class _GramScorer:
    def _check_fitted(self) -> None:
        if not hasattr(self, "n_corpus_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet: call fit first")

    def _test(self, K_test_corpus, k_test_diag):
        self._check_fitted()
        Kt = check_cross_gram(K_test_corpus, self.n_corpus_, "K_test_corpus", self._device)
        if k_test_diag is None:
            raise ValueError(f"{type(self).__name__}.score needs `k_test_diag`, k(x, x) per test")
        return Kt, check_test_diag(k_test_diag, Kt.shape[0], "k_test_diag", self._device)


class KNNScorer(_GramScorer):
    """Feature-space distance to the nearest corpus points.

    Parameters
    ----------
    n_neighbors : int, default 1
        Number k of nearest corpus points considered (at most the corpus size).
    aggregate : {"kth", "mean"}, default "kth"
        ``"kth"``: distance to the k-th nearest corpus point; ``"mean"``: mean of the
        distances to the k nearest (the rule of ROCKAD and of PyOD's ``KNN(method="mean")``).
        Both are the same for k = 1.
    """

    _AGGREGATES = ("kth", "mean")

    def __init__(self, n_neighbors: int = 1, *, aggregate: str = "kth"):
        self.n_neighbors = n_neighbors
        self.aggregate = aggregate

    def _check_params(self, n_corpus: int) -> tuple[int, str]:
        k = check_int(self.n_neighbors, "n_neighbors")
        if k > n_corpus:
            raise ValueError(f"`n_neighbors`={k} exceeds the corpus size N={n_corpus}")
        if not isinstance(self.aggregate, str) or self.aggregate not in self._AGGREGATES:
            raise ValueError(
                f"`aggregate` must be one of {self._AGGREGATES}, got {self.aggregate!r}"
            )
        return k, self.aggregate

    def fit(self, K_corpus) -> KNNScorer:
        K = check_corpus_gram(K_corpus, "K_corpus")
        self._check_params(K.shape[0])
        self.corpus_diag_ = torch.diagonal(K).clone()
        self.n_corpus_ = K.shape[0]
        self._device = K.device
        return self

    def score(self, K_test_corpus, k_test_diag) -> torch.Tensor:
        """Distance to the k-th nearest corpus point (or mean distance to the k nearest),
        Tensor (n_test,)."""
        Kt, dt = self._test(K_test_corpus, k_test_diag)
        k, aggregate = self._check_params(self.n_corpus_)
        if Kt.shape[0] == 0:
            return dt.clone()
        diag = self.corpus_diag_
        c = pow2_scale(Kt, dt, diag)  # 1.0 unless entries beyond 2^500 (sums would overflow)
        if c != 1.0:
            Kt, dt, diag = Kt * c, dt * c, diag * c
        d2 = dt[:, None] + diag[None, :] - 2.0 * Kt
        scale = float(dt.abs().max()) + 1.0
        if aggregate == "kth":
            dist = _sqrt_of_squared_distance(torch.kthvalue(d2, k, dim=1).values, scale)
        else:
            nearest = torch.topk(d2, k, dim=1, largest=False).values
            dist = _sqrt_of_squared_distance(nearest, scale).mean(dim=1)
        return dist if c == 1.0 else dist / math.sqrt(c)


def _sqrt_of_squared_distance(d2: torch.Tensor, scale: float) -> torch.Tensor:
    """sqrt of feature-space squared distances; values below 0 by rounding (|d2| <= 1e-8 x
    scale) are 0, a clearly negative one means the kernel values are inconsistent (not PSD, or
    test diagonal and cross Gram from different kernels) and raises."""
    if bool((d2 < -1e-8 * scale).any()):
        raise ValueError(
            f"negative squared feature-space distance {float(d2.min()):.3g}: the test diagonal "
            "and the Gram matrices are not from one positive semi-definite kernel"
        )
    return torch.sqrt(d2.clamp_min(0.0))


class MeanEmbeddingScorer(_GramScorer):
    """RKHS distance to the corpus mean embedding (the corpus Gram must be positive
    semi-definite: the distance is undefined otherwise)."""

    def fit(self, K_corpus) -> MeanEmbeddingScorer:
        K = check_corpus_gram(K_corpus, "K_corpus")
        check_psd(K, "K_corpus", type(self).__name__)
        c = pow2_scale(K)
        self.mean_norm_sq_ = K.mean() if c == 1.0 else (K * c).mean() / c
        self.n_corpus_ = K.shape[0]
        self._device = K.device
        return self

    def score(self, K_test_corpus, k_test_diag) -> torch.Tensor:
        """||phi(y) - mu||, Tensor (n_test,)."""
        Kt, dt = self._test(K_test_corpus, k_test_diag)
        if Kt.shape[0] == 0:
            return dt.clone()
        mu = self.mean_norm_sq_
        c = pow2_scale(Kt, dt, mu)  # 1.0 unless entries beyond 2^500 (sums would overflow)
        if c != 1.0:
            Kt, dt, mu = Kt * c, dt * c, mu * c
        d2 = dt - 2.0 * Kt.mean(dim=1) + mu
        dist = _sqrt_of_squared_distance(d2, scale=float(dt.abs().max()) + 1.0)
        return dist if c == 1.0 else dist / math.sqrt(c)


class OCSVMScorer(_GramScorer):
    """One-class SVM on the precomputed Gram; score = -decision_function."""

    def __init__(self, nu: float = 0.1):
        self.nu = nu

    def fit(self, K_corpus) -> OCSVMScorer:
        K = check_corpus_gram(K_corpus, "K_corpus")
        check_psd(K, "K_corpus", type(self).__name__)
        # Grams beyond 2^500 are scaled by a power of two (the decision function scales with
        # the kernel); others are passed as they are
        self._scale = pow2_scale(K)
        from sklearn.svm import OneClassSVM  # imported on use: sklearn.svm is slow to import

        self.svm_ = OneClassSVM(kernel="precomputed", nu=self.nu).fit(
            _scaled(K, self._scale).numpy(force=True)
        )
        self.n_corpus_ = K.shape[0]
        self._device = K.device
        return self

    def score(self, K_test_corpus, k_test_diag=None) -> torch.Tensor:
        """-decision_function of the one-class SVM, Tensor (n_test,)."""
        self._check_fitted()
        Kt = check_cross_gram(K_test_corpus, self.n_corpus_, "K_test_corpus", self._device)
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
