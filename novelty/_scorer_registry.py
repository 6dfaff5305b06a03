"""The one list of Gram scorers: :func:`scorer_registry` (name -> class), read by the
detector, the experiments and the tests, and :func:`scorer_name` (its inverse). It imports
every scorer module; the scorer modules import only the base in :mod:`novelty._gram_scorer`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ._baselines import KNNScorer, MeanEmbeddingScorer, OCSVMScorer
from ._gram_scorer import GramScorer
from ._sosrep import SOSREPScorer
from ._spectral_support import SpectralSupport
from ._variance_norm import ConformanceScorer, MahalanobisScorer

__all__ = ["scorer_name", "scorer_registry"]

_REGISTRY: Mapping[str, type[GramScorer]] = MappingProxyType(
    {
        "conformance": ConformanceScorer,
        "mahalanobis": MahalanobisScorer,
        "sse": SpectralSupport,
        "sosrep": SOSREPScorer,
        "knn": KNNScorer,
        "mean_embedding": MeanEmbeddingScorer,
        "ocsvm": OCSVMScorer,
    }
)


def scorer_registry() -> Mapping[str, type[GramScorer]]:
    """Read-only mapping scorer name -> :class:`GramScorer` subclass, in a fixed order:

    ========================  ===============================  ==========  ===========
    name                      class                            sweep_axis  rank_param
    ========================  ===============================  ==========  ===========
    ``"conformance"``         :class:`ConformanceScorer`       alpha       max_rank
    ``"mahalanobis"``         :class:`MahalanobisScorer`       alpha       max_rank
    ``"sse"``                 :class:`SpectralSupport`         lam         --
    ``"sosrep"``              :class:`SOSREPScorer`            --          --
    ``"knn"``                 :class:`KNNScorer`               --          --
    ``"mean_embedding"``      :class:`MeanEmbeddingScorer`     --          --
    ``"ocsvm"``               :class:`OCSVMScorer`             --          --
    ========================  ===============================  ==========  ===========

    The mean-kNN rule (ROCKAD's) is ``KNNScorer(aggregate="mean")``.
    """
    return _REGISTRY


def scorer_name(scorer) -> str:
    """The registry name of a scorer instance or class (its class name if unregistered)."""
    cls = scorer if isinstance(scorer, type) else type(scorer)
    for name, registered in scorer_registry().items():
        if registered is cls:
            return name
    return cls.__name__
