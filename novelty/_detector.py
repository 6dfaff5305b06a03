r"""A scikit-learn novelty detector on multivariate time series: kernel + Gram-level scorer.

``fit(X)`` on normal series: optional pre-processing (:class:`tskernels.transforms.Preprocessor`,
fitted on the corpus), the corpus Gram of ``kernel`` (normalised by default), and a scorer
fitted on it. ``score_samples`` is higher for more normal series (minus the scorer's novelty
score: minus a distance, :math:`F_n(x) - 1`, :math:`\log f(x)^2`, ...).
``decision_function = score_samples - offset_`` and ``predict`` gives +1 (inlier) where it is
>= 0, -1 otherwise. ``offset_`` is the ``1 - quantile`` quantile of out-of-fold corpus scores
(leave-one-out for N <= 20 corpus series, else 5 folds): in-sample scores would be optimistic
(a corpus series has conformance 0).

Input: an array (n, T, d), a list of (T_i, d) arrays, or a 2-D array (n, T) read as n
univariate series.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, OutlierMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from ._baselines import KNNScorer, MeanEmbeddingScorer, OCSVMScorer
from ._sosrep import SOSREPScorer
from ._spectral_support import SpectralSupport
from ._variance_norm import VarianceNorm

__all__ = ["KernelNoveltyDetector", "SCORERS"]

SCORERS = ("conformance", "mahalanobis", "sse", "sosrep", "knn", "mean_embedding", "ocsvm")
#: Corpus sizes up to this use leave-one-out scores for the threshold, larger ones K folds.
LOO_MAX = 20
THRESHOLD_FOLDS = 5


def _default_kernel():
    from tskernels import RBF, IntegralKernel

    return IntegralKernel(RBF(2.0))


class KernelNoveltyDetector(OutlierMixin, BaseEstimator):
    """Kernel novelty detector on series (scikit-learn API, +1 inlier / -1 outlier).

    Parameters
    ----------
    kernel : a ``tskernels.Kernel`` (default ``IntegralKernel(RBF(2.0))``); tuned through
        ``kernel__<param>`` in ``GridSearchCV``.
    scorer : one of "conformance", "mahalanobis" (variance norm), "sse" (spectral support),
        "sosrep", "knn", "mean_embedding", "ocsvm".
    alpha : float > 0, Tikhonov parameter of the variance-norm scorers.
    rank : int or None, number of principal components of the variance-norm scorers
        (None: every component above 1e-10, at most 50).
    preprocess : bool, apply the protocol's pre-processing fitted on the corpus.
    quantile : float in (0, 1), share of (held-out) normal series predicted as inliers.
    normalize : bool, normalise the kernel in feature space, K(x,y)/sqrt(K(x,x)K(y,y)).
    scorer_params : dict or None, extra parameters of the scorer (``lam``/``filter`` for
        "sse", ``lr``/``tol`` for "sosrep", ``n_neighbors`` for "knn", ``nu`` for "ocsvm",
        ``threshold`` for the variance norm).
    normal_label : label or None. None (default): ``fit`` ignores ``y`` and every series of X
        is normal. Otherwise ``fit(X, y)`` uses only the series with ``y == normal_label``, so
        that ``GridSearchCV`` on labelled data fits each fold on its normal series only.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> det = KernelNoveltyDetector().fit(rng.normal(size=(30, 20, 2)))
    >>> det.predict(rng.normal(size=(2, 20, 2)) + 5.0).tolist()
    [-1, -1]
    """

    def __init__(
        self,
        kernel=None,
        scorer: str = "conformance",
        alpha: float = 1e-8,
        rank: int | None = None,
        preprocess: bool = True,
        quantile: float = 0.95,
        normalize: bool = True,
        scorer_params: dict | None = None,
        normal_label=None,
    ):
        self.kernel = kernel
        self.scorer = scorer
        self.alpha = alpha
        self.rank = rank
        self.preprocess = preprocess
        self.quantile = quantile
        self.normalize = normalize
        self.scorer_params = scorer_params
        self.normal_label = normal_label

    # ------------------------------------------------------------------ sklearn API
    def fit(self, X, y=None) -> KernelNoveltyDetector:
        """Fit on normal series: all of X, or those with ``y == normal_label`` if that is set."""
        self._check_params()
        Xs = self._series(X, reset=True)
        Xs = self._normal_rows(Xs, y)
        n = len(Xs)
        if n < 3:
            raise ValueError(
                f"KernelNoveltyDetector needs at least 3 normal series (a corpus and held-out "
                f"scores for the threshold), got {n} sample{'s' if n != 1 else ''}"
            )
        self.n_channels_ = Xs.shape[2] if isinstance(Xs, np.ndarray) else Xs[0].shape[1]
        if self.preprocess:
            from tskernels.transforms import Preprocessor

            self.preprocessor_ = Preprocessor().fit(Xs)
            Xs = self.preprocessor_.transform(Xs)
        self.kernel_ = _default_kernel() if self.kernel is None else clone(self.kernel)
        self.corpus_ = Xs
        K = self.kernel_.gram(Xs, normalize=self.normalize)
        self.scorer_ = self._make_scorer().fit(K)
        held_out = self._out_of_fold_scores(K)
        self.offset_ = float(np.quantile(held_out, 1.0 - self.quantile))
        return self

    def score_samples(self, X) -> np.ndarray:
        """Normality score per series (higher = more normal), array (n,)."""
        check_is_fitted(self, "scorer_")
        Kt, diag = self._test_grams(X)
        return -self._novelty(self.scorer_, Kt, diag).cpu().numpy()

    def decision_function(self, X) -> np.ndarray:
        """score_samples - offset_: negative for predicted outliers, array (n,)."""
        return self.score_samples(X) - self.offset_

    def predict(self, X) -> np.ndarray:
        """+1 for inliers, -1 for outliers, array (n,)."""
        return np.where(self.decision_function(X) >= 0, 1, -1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.non_deterministic = False
        return tags

    # ------------------------------------------------------------------ internals
    def _normal_rows(self, Xs, y):
        if self.normal_label is None or y is None:
            return Xs
        y = np.asarray(y).ravel()
        if len(y) != len(Xs):
            raise ValueError(f"`y` has {len(y)} labels for {len(Xs)} series")
        keep = np.flatnonzero(y == self.normal_label)
        if len(keep) == 0:
            raise ValueError(
                f"no series has the label normal_label={self.normal_label!r} "
                f"(labels present: {sorted(set(y.tolist()))})"
            )
        return Xs[keep] if isinstance(Xs, np.ndarray) else [Xs[i] for i in keep]

    def _check_params(self) -> None:
        if self.scorer not in SCORERS:
            raise ValueError(f"`scorer` must be one of {SCORERS}, got {self.scorer!r}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, Real) or self.alpha <= 0:
            raise ValueError(f"`alpha` must be a positive float, got {self.alpha!r}")
        if self.rank is not None and (
            isinstance(self.rank, bool) or not isinstance(self.rank, Integral) or self.rank < 1
        ):
            raise ValueError(f"`rank` must be None or an integer >= 1, got {self.rank!r}")
        q = self.quantile
        if isinstance(q, bool) or not isinstance(q, Real) or not 0 < q < 1:
            raise ValueError(f"`quantile` must be a float in (0, 1), got {q!r}")
        if self.scorer_params is not None and not isinstance(self.scorer_params, dict):
            raise ValueError(f"`scorer_params` must be a dict or None, got {self.scorer_params!r}")
        if self.scorer == "sse" and not self.normalize:
            raise ValueError("scorer='sse' needs a normalised kernel: set normalize=True")

    def _make_scorer(self):
        params = dict(self.scorer_params or {})
        if self.scorer in ("conformance", "mahalanobis"):
            if self.rank is not None:
                params["max_rank"] = int(self.rank)
            return VarianceNorm(**params)
        cls = {
            "sse": SpectralSupport,
            "sosrep": SOSREPScorer,
            "knn": KNNScorer,
            "mean_embedding": MeanEmbeddingScorer,
            "ocsvm": OCSVMScorer,
        }[self.scorer]
        return cls(**params)

    def _series(self, X, reset: bool):
        """numpy (n, T, d) array or list of (T_i, d) arrays, validated."""
        if isinstance(X, torch.Tensor):
            X = X.detach().cpu().numpy()
        if isinstance(X, (list, tuple)) and len(X) and np.ndim(X[0]) == 2:
            out = []
            for i, x in enumerate(X):
                a = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x)
                _check_real(a, f"X[{i}]")
                if a.ndim != 2 or a.shape[0] == 0:
                    raise ValueError(f"`X[{i}]` must be a non-empty 2-D array (T_i, d)")
                if not np.isfinite(a).all():
                    raise ValueError(f"`X[{i}]` contains NaN or infinite values")
                out.append(a.astype(np.float64))
            if len({a.shape[1] for a in out}) > 1:
                raise ValueError("series in `X` have different channel counts")
            if reset and hasattr(self, "n_features_in_"):
                del self.n_features_in_
            return out
        if hasattr(X, "shape") and len(X.shape) == 3:
            a = np.asarray(X)
            _check_real(a, "X")
            if a.shape[0] == 0 or a.shape[1] == 0 or a.shape[2] == 0:
                raise ValueError(f"`X` is empty: shape {a.shape}")
            a = a.astype(np.float64)
            if not np.isfinite(a).all():
                raise ValueError("`X` contains NaN or infinite values")
            if reset and hasattr(self, "n_features_in_"):
                del self.n_features_in_
            return a
        # 2-D (n, T): univariate series, validated the scikit-learn way
        a = validate_data(self, X, reset=reset, dtype=np.float64, ensure_min_samples=1)
        return a[:, :, None]

    def _channels(self, Xs) -> int:
        return Xs.shape[2] if isinstance(Xs, np.ndarray) else Xs[0].shape[1]

    def _test_grams(self, X):
        Xs = self._series(X, reset=False)
        d = self._channels(Xs)
        if d != self.n_channels_:
            raise ValueError(
                f"channel mismatch: the detector was fitted on series with d={self.n_channels_} "
                f"channels, got d={d}"
            )
        if self.preprocess:
            Xs = self.preprocessor_.transform(Xs)
        Kt = self.kernel_.gram(Xs, self.corpus_, normalize=self.normalize)
        if self.normalize:
            diag = torch.ones(Kt.shape[0], dtype=Kt.dtype, device=Kt.device)
        else:
            diag = self.kernel_.diag(Xs)
        return Kt, diag

    def _out_of_fold_scores(self, K: torch.Tensor) -> np.ndarray:
        """Normality scores of every corpus series by a scorer fitted without it."""
        n = K.shape[0]
        if n <= LOO_MAX:
            folds = [np.array([i]) for i in range(n)]
        else:
            perm = np.random.default_rng(0).permutation(n)
            folds = np.array_split(perm, THRESHOLD_FOLDS)
        out = np.empty(n)
        diag = torch.diagonal(K)
        for test in folds:
            train = np.setdiff1d(np.arange(n), test)
            tr, te = torch.from_numpy(train), torch.from_numpy(test)
            scorer = self._make_scorer().fit(K[tr][:, tr])
            out[test] = -self._novelty(scorer, K[te][:, tr], diag[te]).cpu().numpy()
        return out

    def _novelty(self, scorer, Kt: torch.Tensor, diag: torch.Tensor) -> torch.Tensor:
        """The fitted Gram-level scorer's novelty score (higher = more novel)."""
        if self.scorer == "conformance":
            return scorer.conformance(Kt, float(self.alpha))
        if self.scorer == "mahalanobis":
            return scorer.mahalanobis(Kt, float(self.alpha))
        return scorer.score(Kt, diag)


def _check_real(a: np.ndarray, name: str) -> None:
    if np.iscomplexobj(a):
        raise ValueError(f"`{name}` must be real-valued, got complex data")
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise ValueError(f"`{name}` must hold numbers, got dtype {a.dtype}")
