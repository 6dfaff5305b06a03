"""novelty: scorers that consume Gram matrices, and detectors on series."""

from ._variance_norm import VarianceNorm

__all__ = ["VarianceNorm"]
