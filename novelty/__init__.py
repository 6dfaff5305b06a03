"""novelty: scorers that consume Gram matrices, and detectors on series.

Owns: the Gram-level scorers (one contract, :class:`GramScorer`: ``fit(K)``,
``score(K_test, diag_test)`` higher = more novel, ``sweep`` over a hyper-parameter axis and
ranks) and their registry (:func:`scorer_registry`, name -> class, read by the detector, the
experiments and the tests; :func:`register_scorer` adds one's own), the input boundary of
the detector (``as_series_collection``), ``KernelNoveltyDetector`` with its default recipe,
label-free selection (synthetic anomalies) and conformal calibration, the sktime and aeon
adapters and the score plot. May import ``tskernels`` and ``density`` (the SOSREP scorer uses
its solver); never ``experiments``.

Every public name is imported on first use (PEP 562: ``from novelty import X`` and
``novelty.X`` work as usual, ``dir(novelty)`` lists them), so ``import novelty`` imports
neither scikit-learn, sktime nor aeon; the map ``_EXPORTS`` says which module holds each
name.
"""

from importlib import import_module

_EXPORTS = {
    "AeonKernelNoveltyDetector": "_aeon",
    "KNNScorer": "_baselines",
    "MeanEmbeddingScorer": "_baselines",
    "OCSVMScorer": "_baselines",
    "score_in_partitions": "_dask_scoring",
    "SCORERS": "_members",
    "KernelNoveltyDetector": "_detector",
    "GramScorer": "_gram_scorer",
    "scorer_registry": "_scorer_registry",
    "register_scorer": "_scorer_registry",
    "unregister_scorer": "_scorer_registry",
    "FeatureScorer": "_feature_scorers",
    "as_series_collection": "_layouts",
    "single_series_hint": "_layouts",
    "interpolate_missing": "_missing",
    "Explanation": "_explain",
    "plot_explanation": "_explain",
    "plot_scores": "_plot",
    "SOSREPScorer": "_sosrep",
    "SpectralSupport": "_spectral_support",
    "ConformanceScorer": "_variance_norm",
    "MahalanobisScorer": "_variance_norm",
    "VarianceNorm": "_variance_norm",
    "NystroemFeatures": "_approximation",
    "RandomFeatures": "_approximation",
    "FeatureKNN": "_feature_scorers",
    "FeatureMeanEmbedding": "_feature_scorers",
    "FeatureSpectralSupport": "_feature_scorers",
    "FeatureVarianceNorm": "_feature_scorers",
}
_EXPORTS.update(
    dict.fromkeys(("SktimeDistanceAdapter", "SktimeKernelAdapter", "sktime_kernels"), "_sktime")
)

__all__ = [
    "SCORERS",
    "AeonKernelNoveltyDetector",
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
    "as_series_collection",
    "interpolate_missing",
    "plot_explanation",
    "plot_scores",
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
