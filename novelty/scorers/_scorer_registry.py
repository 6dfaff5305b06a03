"""The one list of novelty scorers: :func:`scorer_registry` (name -> class), read by the
detector, ``approximation=``, the experiments and the tests; :func:`register_scorer` adds a
scorer of one's own, :func:`scorer_name` is the inverse.

A scorer is defined by its class (:class:`~novelty.scorers._gram_scorer.GramScorer`: its ``name``,
``family``, ``description``, parameter constraints, feature form, held-out scoring and CLI
grid). The built-in scorers are listed below, one line each, as "module:class" and imported on
first use: the names alone (:func:`scorer_names`) import neither torch nor scikit-learn, so the
experiments CLI answers a mistyped name at once. Each line's name is checked against the
class's own ``name`` when the class is imported.

To add a scorer: write its class (one module) and either add one line to ``_BUILTIN`` or call
``register_scorer(MyScorer)`` (docs/architecture.md has a runnable example).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._gram_scorer import GramScorer

__all__ = [
    "deferred_class",
    "register_scorer",
    "scorer_name",
    "scorer_names",
    "scorer_registry",
    "unregister_scorer",
]

#: The built-in scorers, one line each (name -> "module:class", in :mod:`novelty`).
_BUILTIN: dict[str, str] = {
    "conformance": "_variance_norm:ConformanceScorer",
    "mahalanobis": "_variance_norm:MahalanobisScorer",
    "sse": "_spectral_support:SpectralSupport",
    "sosrep": "_sosrep:SOSREPScorer",
    "knn": "_baselines:KNNScorer",
    "mean_embedding": "_baselines:MeanEmbeddingScorer",
    "ocsvm": "_baselines:OCSVMScorer",
}
#: Scorers registered by :func:`register_scorer`, after the built-in ones.
_ADDED: dict[str, type] = {}


class deferred_class:
    """A class attribute naming a class as "module:qualname", imported when first read: a
    built-in scorer names its feature form this way (the feature module imports the scorer
    modules, so the scorer modules cannot import it)."""

    def __init__(self, path: str):
        self.path = path

    def __get__(self, obj, owner=None) -> type:
        module, qualname = self.path.split(":")
        return getattr(import_module(module), qualname)


_LOADED: dict[str, type] = {}  # the built-in classes imported so far
_MAPPING: Mapping[str, type] | None = None  # scorer_registry()'s answer, until a change


def _load(name: str) -> type:
    cls = _LOADED.get(name)
    if cls is None:
        module, qualname = _BUILTIN[name].split(":")
        cls = getattr(import_module(f"{__package__}.{module}"), qualname)
        if cls.name != name:
            raise TypeError(
                f"{qualname}.name is {cls.name!r} but the registry lists it as {name!r}"
            )
        _LOADED[name] = cls
    return cls


def _reset() -> None:
    global _MAPPING
    _MAPPING = None


def scorer_names() -> tuple[str, ...]:
    """The registered scorer names, built-in ones first (imports no scorer module)."""
    return (*_BUILTIN, *_ADDED)


def scorer_registry() -> Mapping[str, type[GramScorer]]:
    """Read-only mapping scorer name -> :class:`GramScorer` subclass, in a fixed order
    (built-in, then registered):

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
    global _MAPPING
    if _MAPPING is None:  # built once; register_scorer / unregister_scorer reset it
        _MAPPING = MappingProxyType({**{name: _load(name) for name in _BUILTIN}, **_ADDED})
    return _MAPPING


def register_scorer(cls: type) -> type:
    """Register the GramScorer subclass ``cls`` under ``cls.name``: the detector
    (``scorer=cls.name``), ``approximation=`` (with its ``feature_form``) and the experiments
    CLI (``--scorers``) then accept it. Returns ``cls`` (usable as a class decorator). A name
    already taken by another class raises ValueError; registering the same class again does
    nothing."""
    from ._gram_scorer import GramScorer

    if not (isinstance(cls, type) and issubclass(cls, GramScorer)):
        raise TypeError(f"register_scorer takes a GramScorer subclass, got {cls!r}")
    name = cls.name
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{cls.__name__}.name must be an identifier-like string, got {name!r}")
    if name == "baselines":
        raise ValueError('"baselines" is the CLI word for the baseline family, not a name')
    for attr in ("family", "description"):
        if not isinstance(getattr(cls, attr), str) or not getattr(cls, attr):
            raise ValueError(f"{cls.__name__}.{attr} must be a non-empty string")
    form = cls.feature_form
    if form is not None and not (isinstance(form, type) and callable(getattr(form, "score", None))):
        raise ValueError(
            f"{cls.__name__}.feature_form must be None or a FeatureScorer class, got {form!r}"
        )
    taken = _ADDED.get(name) or (_load(name) if name in _BUILTIN else None)
    if taken is not None and taken is not cls:
        raise ValueError(f"scorer name {name!r} is taken by {taken.__name__}")
    if name not in _BUILTIN:
        _ADDED[name] = cls
        _reset()
    return cls


def unregister_scorer(name: str) -> None:
    """Remove a scorer added by :func:`register_scorer` (the built-in ones stay)."""
    if name in _BUILTIN:
        raise ValueError(f"{name!r} is a built-in scorer and cannot be unregistered")
    if name not in _ADDED:
        raise ValueError(f"no scorer {name!r} was registered")
    del _ADDED[name]
    _reset()


def scorer_name(scorer) -> str:
    """The registry name of a scorer instance or class (its class name if unregistered)."""
    cls = scorer if isinstance(scorer, type) else type(scorer)
    for name, registered in scorer_registry().items():
        if registered is cls:
            return name
    return cls.__name__
