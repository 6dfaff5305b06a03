"""The one list of novelty scorers: :func:`scorer_registry` (name -> class), read by the
detector, ``approximation=``, the experiments and the tests; :func:`register_scorer` adds a
scorer of one's own, :func:`scorer_name` is the inverse.

A scorer is defined by its class (:class:`~novelty.scorers._gram_scorer.GramScorer`: its ``name``,
``family``, ``description``, parameter constraints, feature form, held-out scoring and CLI
grid). The built-in scorers are listed below, one line each, as "module:class" and imported on
first use: the names alone (:func:`scorer_names`) import neither torch nor scikit-learn, so the
experiments CLI answers a mistyped name at once. Each line's name is checked against the
class's own ``name`` when the class is imported.

To add a scorer: write its class (one module) and either add one line to ``_BUILTIN``, call
``register_scorer(MyScorer)`` (in this process), or declare it in the package that holds it
as an entry point of the group ``novelty.scorers`` (every process: the detector, both CLIs):

.. code-block:: toml

    [project.entry-points."novelty.scorers"]
    my_scorer = "my_package.scorers:MyScorer"

An installed entry point's name is listed without importing its module; the class is imported
when first used and checked as :func:`register_scorer` checks one (docs/architecture.md has a
runnable example).
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
#: The entry-point group of scorers from installed packages (module docstring).
ENTRY_POINT_GROUP = "novelty.scorers"
_PLUGINS: dict[str, str] | None = None  # installed entry points: name -> "module:qualname"


def _plugins() -> dict[str, str]:
    """The scorers declared by installed packages (entry points of ``ENTRY_POINT_GROUP``), read
    once per process; a name taken by a built-in scorer is ignored, with a warning."""
    global _PLUGINS
    if _PLUGINS is None:
        import warnings
        from importlib.metadata import entry_points

        found: dict[str, str] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in _BUILTIN or ep.name in found:
                warnings.warn(
                    f"entry point {ep.name!r} = {ep.value!r} of {ENTRY_POINT_GROUP!r}: the "
                    "name is taken by another scorer, so it is ignored",
                    UserWarning,
                    stacklevel=2,
                )
                continue
            found[ep.name] = ep.value
        _PLUGINS = found
    return _PLUGINS


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
    """The class of a built-in or installed (entry-point) scorer, imported once."""
    cls = _LOADED.get(name)
    if cls is None:
        if name in _BUILTIN:
            module, qualname = _BUILTIN[name].split(":")
            cls = getattr(import_module(f"{__package__}.{module}"), qualname)
        else:
            module, qualname = _plugins()[name].split(":")
            try:
                cls = import_module(module)
                for part in qualname.split("."):
                    cls = getattr(cls, part)
            except (ImportError, AttributeError) as err:
                raise ImportError(
                    f"scorer {name!r} (entry point {_plugins()[name]!r} of "
                    f"{ENTRY_POINT_GROUP!r}) cannot be imported: {err}"
                ) from err
            _check_definition(cls)
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
    plugins = [name for name in _plugins() if name not in _ADDED]
    return (*_BUILTIN, *plugins, *_ADDED)


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
        loaded = {name: _load(name) for name in (*_BUILTIN, *_plugins()) if name not in _ADDED}
        _MAPPING = MappingProxyType({**loaded, **_ADDED})
    return _MAPPING


def _check_definition(cls) -> None:
    """What every added scorer must declare (:func:`register_scorer`, entry points)."""
    from ._gram_scorer import GramScorer

    if not (isinstance(cls, type) and issubclass(cls, GramScorer)):
        raise TypeError(f"a registered scorer must be a GramScorer subclass, got {cls!r}")
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


def register_scorer(cls: type) -> type:
    """Register the GramScorer subclass ``cls`` under ``cls.name``: the detector
    (``scorer=cls.name``), ``approximation=`` (with its ``feature_form``) and the experiments
    CLI (``--scorers``) then accept it. Returns ``cls`` (usable as a class decorator). A name
    already taken by another class raises ValueError; registering the same class again does
    nothing."""
    _check_definition(cls)
    name = cls.name
    taken = _ADDED.get(name) or (_load(name) if name in (*_BUILTIN, *_plugins()) else None)
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
