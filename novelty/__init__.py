"""novelty: scorers that consume Gram matrices, and detectors on series.

Owns: the Gram-level scorers, the input boundary of the detector (``as_series_collection``),
``KernelNoveltyDetector`` with its default recipe, label-free selection (synthetic anomalies)
and conformal calibration, the sktime adapters and the score plot. May import ``tskernels``
and ``density`` (the SOSREP scorer uses its solver); never ``experiments``.

The sktime adapters are imported on first use (``novelty.SktimeKernelAdapter``), so
``import novelty`` does not import sktime.
"""

from ._baselines import KNNScorer, MeanEmbeddingScorer, OCSVMScorer
from ._detector import SCORERS, KernelNoveltyDetector
from ._layouts import as_series_collection, single_series_hint
from ._plot import plot_scores
from ._sosrep import SOSREPScorer
from ._spectral_support import SpectralSupport
from ._variance_norm import VarianceNorm

_SKTIME_EXPORTS = ("SktimeDistanceAdapter", "SktimeKernelAdapter", "sktime_kernels")

__all__ = [
    "SCORERS",
    "KernelNoveltyDetector",
    "KNNScorer",
    "MeanEmbeddingScorer",
    "OCSVMScorer",
    "SOSREPScorer",
    "SktimeDistanceAdapter",
    "SktimeKernelAdapter",
    "SpectralSupport",
    "VarianceNorm",
    "as_series_collection",
    "plot_scores",
    "single_series_hint",
    "sktime_kernels",
]


def __getattr__(name: str):
    if name in _SKTIME_EXPORTS:
        from . import _sktime

        return getattr(_sktime, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
