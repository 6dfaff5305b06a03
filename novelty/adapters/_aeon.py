"""aeon adapter: :class:`KernelNoveltyDetector` as an aeon collection anomaly detector.

``AeonKernelNoveltyDetector`` is a
``aeon.anomaly_detection.collection.BaseCollectionAnomalyDetector`` (where aeon's ROCKAD
lives): ``fit(X, y=None)`` / ``predict(X)`` on aeon's layout, ``(n_cases, n_channels,
n_timepoints)`` arrays or lists of ``(n_channels, T_i)`` arrays, and ``predict`` returns
anomaly scores, higher = more anomalous: minus the wrapped detector's ``score_samples``.

Data: each aeon series ``(d, T)`` is transposed to ours, ``(T, d)``; nothing else is
reinterpreted: NaN are missing values, interpolated by the detector's
``missing="interpolate"``. An aeon ``numpy3D`` array holds equal-length series, so one with NaN
is passed as a list of ``(T, d)`` arrays: in an array the detector would read trailing all-NaN
steps as padding of unequal lengths, in a list they are a gap at the end (last observed value
held).

Labels: aeon's ``y`` holds anomaly labels (aeon's ``_check_y`` turns them to bool, True =
anomaly). Without ``y`` every training series is taken as normal (semi-supervised novelty
detection, as ROCKAD does; ROCKAD ignores ``y``). With ``y``, only the series with
``y == 0`` (normal) are fitted on; a ``y`` that marks every series anomalous is an error.

This module imports aeon; ``import novelty`` does not (the name is resolved on first use).
"""

from __future__ import annotations

import numpy as np
from aeon.anomaly_detection.collection import BaseCollectionAnomalyDetector

from ..detector._detector import KernelNoveltyDetector

__all__ = ["AeonKernelNoveltyDetector"]


def _to_ours(X):
    """aeon's (n, d, T) array or list of (d, T_i) arrays -> (n, T, d) array or (T_i, d) list."""
    if isinstance(X, np.ndarray):
        Xt = np.ascontiguousarray(np.transpose(X, (0, 2, 1)))
        # NaN in an equal-length aeon array are missing values, never padding: a list keeps
        # trailing all-NaN steps as a gap (an array would read them as padding)
        return list(Xt) if np.isnan(Xt).any() else Xt
    return [np.ascontiguousarray(np.asarray(x).T) for x in X]


class AeonKernelNoveltyDetector(BaseCollectionAnomalyDetector):
    """Kernel novelty detector (:class:`novelty.KernelNoveltyDetector`) for aeon collections.

    Parameters
    ----------
    kernel : None (default recipe) or a ``tskernels.Kernel``; the detector's ``kernel``.
    contamination : float, default 0.05, the detector's ``contamination`` (used by its
        ``predict``, not by the anomaly scores returned here).
    random_state : int, default 0, the detector's ``random_state``.
    detector_params : dict or None, further constructor parameters of
        :class:`novelty.KernelNoveltyDetector` (``scorer``, ``preprocess``, ``missing``, ...).

    Attributes
    ----------
    detector_ : the fitted :class:`novelty.KernelNoveltyDetector`.

    Notes
    -----
    ``fit(X)`` fits on all series; ``fit(X, y)`` on those with ``y == 0`` (aeon's ``y``:
    1 / True = anomaly). ``predict(X)`` returns ``-detector_.score_samples(X)`` as float64,
    higher = more anomalous.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> ad = AeonKernelNoveltyDetector().fit(rng.normal(size=(30, 2, 20)))
    >>> scores = ad.predict(np.concatenate([rng.normal(size=(2, 2, 20)),
    ...                                     rng.normal(size=(1, 2, 20)) + 5.0]))
    >>> bool(scores[2] > scores[:2].max())
    True
    """

    _tags = {
        "anomaly_output_type": "anomaly_scores",
        "learning_type:semi_supervised": True,
        "capability:univariate": True,
        "capability:multivariate": True,
        "capability:unequal_length": True,
        "capability:missing_values": True,
        "fit_is_empty": False,
        "X_inner_type": ["np-list", "numpy3D"],
    }

    def __init__(
        self,
        kernel=None,
        contamination: float = 0.05,
        random_state: int = 0,
        detector_params: dict | None = None,
    ):
        self.kernel = kernel
        self.contamination = contamination
        self.random_state = random_state
        self.detector_params = detector_params
        super().__init__()

    def _make_detector(self) -> KernelNoveltyDetector:
        params = dict(self.detector_params or {})
        clash = {"kernel", "contamination", "random_state"} & set(params)
        if clash:
            raise ValueError(
                f"detector_params sets {sorted(clash)}: pass them as the adapter's own parameters"
            )
        return KernelNoveltyDetector(
            kernel=self.kernel,
            contamination=self.contamination,
            random_state=self.random_state,
            **params,
        )

    def _fit(self, X, y=None):
        Xs = _to_ours(X)
        if y is not None:
            normal = ~np.asarray(y, dtype=bool)
            if not normal.any():
                raise ValueError("y marks every training series as anomalous (y == 1)")
            keep = np.flatnonzero(normal)
            Xs = Xs[keep] if isinstance(Xs, np.ndarray) else [Xs[i] for i in keep]
        self.detector_ = self._make_detector().fit(Xs)
        return self

    def _predict(self, X) -> np.ndarray:
        return np.asarray(-self.detector_.score_samples(_to_ours(X)), dtype=np.float64)

    @classmethod
    def _get_test_params(cls, parameter_set: str = "default"):
        """A fast configuration for aeon's estimator checks: one integral-RBF kernel on a
        common grid (it accepts unequal lengths, which aeon's checks feed)."""
        import tskernels

        return {"kernel": tskernels.IntegralKernel(tskernels.RBF(3.0), n_grid=20)}
