"""novelty: scorers that consume Gram matrices, and detectors on series.

Its folders say the architecture (each ``__init__`` says what it owns and may import):

- :mod:`novelty.scorers`: the one definition of a scorer (:class:`GramScorer`: ``fit(K)``,
  ``score(K_test, diag_test)`` higher = more novel, ``sweep``, held-out scoring, feature
  form), the built-in scorers and their registry (:func:`scorer_registry`,
  :func:`register_scorer`);
- :mod:`novelty.detector`: ``KernelNoveltyDetector``, its members, the default recipe and
  label-free selection, conformal calibration, approximation, update, explain, persistence,
  the score plot;
- :mod:`novelty.adapters`: sktime and aeon adapters, Dask scoring, the CLI's files;
- here: the input boundary (``as_series_collection``, ``_layouts``, ``_missing``), the
  parameter dialect (``_constraints``) and the detection CLI (``__main__``).

Arrows run adapters -> detector -> scorers -> (boundary, dialect); the package may import
``tskernels`` and ``density`` (the SOSREP scorer uses its solver), never ``experiments``.

Every public name is imported on first use (PEP 562: ``from novelty import X`` and
``novelty.X`` work as usual, ``dir(novelty)`` lists them), so ``import novelty`` imports
neither scikit-learn, sktime nor aeon; the map ``_EXPORTS`` says which module holds each
name.
"""

from importlib import import_module

_EXPORTS = {
    "AeonKernelNoveltyDetector": "adapters._aeon",
    "KNNScorer": "scorers._baselines",
    "MeanEmbeddingScorer": "scorers._baselines",
    "OCSVMScorer": "scorers._baselines",
    "score_in_partitions": "adapters._dask_scoring",
    "SCORERS": "detector._members",
    "KernelNoveltyDetector": "detector._detector",
    "BaseMember": "detector._members",
    "read_metadata": "detector._persistence",
    "WindowNoveltyDetector": "windows._detector",
    "GramScorer": "scorers._gram_scorer",
    "scorer_registry": "scorers._scorer_registry",
    "register_scorer": "scorers._scorer_registry",
    "unregister_scorer": "scorers._scorer_registry",
    "FeatureScorer": "scorers._feature_scorers",
    "as_series_collection": "_layouts",
    "single_series_hint": "_layouts",
    "interpolate_missing": "_missing",
    "Explanation": "detector._explain",
    "plot_explanation": "detector._explain",
    "plot_scores": "detector._plot",
    "SOSREPScorer": "scorers._sosrep",
    "SpectralSupport": "scorers._spectral_support",
    "ConformanceScorer": "scorers._variance_norm",
    "MahalanobisScorer": "scorers._variance_norm",
    "VarianceNorm": "scorers._variance_norm",
    "NystroemFeatures": "detector._approximation",
    "RandomFeatures": "detector._approximation",
    "FeatureKNN": "scorers._feature_scorers",
    "FeatureMeanEmbedding": "scorers._feature_scorers",
    "FeatureSpectralSupport": "scorers._feature_scorers",
    "FeatureVarianceNorm": "scorers._feature_scorers",
}
_EXPORTS.update(
    dict.fromkeys(
        ("SktimeDistanceAdapter", "SktimeKernelAdapter", "sktime_kernels"), "adapters._sktime"
    )
)

__all__ = [
    "SCORERS",
    "AeonKernelNoveltyDetector",
    "BaseMember",
    "ConformanceScorer",
    "Explanation",
    "FeatureKNN",
    "FeatureMeanEmbedding",
    "FeatureScorer",
    "FeatureSpectralSupport",
    "FeatureVarianceNorm",
    "GramScorer",
    "KernelNoveltyDetector",
    "KNNScorer",
    "MahalanobisScorer",
    "MeanEmbeddingScorer",
    "NystroemFeatures",
    "OCSVMScorer",
    "RandomFeatures",
    "SOSREPScorer",
    "SktimeDistanceAdapter",
    "SktimeKernelAdapter",
    "SpectralSupport",
    "VarianceNorm",
    "WindowNoveltyDetector",
    "as_series_collection",
    "interpolate_missing",
    "plot_explanation",
    "plot_scores",
    "read_metadata",
    "register_scorer",
    "scorer_registry",
    "score_in_partitions",
    "single_series_hint",
    "sktime_kernels",
    "unregister_scorer",
]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    if name != "SCORERS":  # SCORERS is read afresh: a scorer registered later is in it
        globals()[name] = value  # resolved once
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
