"""novelty: scorers that consume Gram matrices, and detectors on series."""

from ._baselines import KNNScorer, MeanEmbeddingScorer, OCSVMScorer
from ._detector import SCORERS, KernelNoveltyDetector
from ._sktime import SktimeKernelAdapter, sktime_kernels
from ._sosrep import SOSREPScorer
from ._spectral_support import SpectralSupport
from ._variance_norm import VarianceNorm

__all__ = [
    "SCORERS",
    "KernelNoveltyDetector",
    "KNNScorer",
    "MeanEmbeddingScorer",
    "OCSVMScorer",
    "SOSREPScorer",
    "SktimeKernelAdapter",
    "SpectralSupport",
    "VarianceNorm",
    "sktime_kernels",
]
