"""novelty: scorers that consume Gram matrices, and detectors on series."""

from ._baselines import KNNScorer, MeanEmbeddingScorer, OCSVMScorer
from ._sosrep import SOSREPScorer
from ._spectral_support import SpectralSupport
from ._variance_norm import VarianceNorm

__all__ = [
    "KNNScorer",
    "MeanEmbeddingScorer",
    "OCSVMScorer",
    "SOSREPScorer",
    "SpectralSupport",
    "VarianceNorm",
]
