"""The one list of novelty scorers: :func:`scorer_registry` (name -> class), read by the
detector, ``approximation=``, the experiments and the tests; :func:`register_scorer` adds a
scorer of one's own, :func:`scorer_name` is the inverse.

A scorer is defined by its class (:class:`~novelty.scorers._gram_scorer.GramScorer`: its
``name``, ``description``, parameter constraints, feature form and held-out scoring; how the
experiments run it is the experiments' table, ``experiments._grids.scorer_setup``). The
built-in scorers are listed below, one line each, as "module:class" and imported on first use:
the names alone (:func:`scorer_names`) import neither torch nor scikit-learn, so the
experiments CLI answers a mistyped name at once. Each line's name is checked against the
class's own ``name`` when the class is imported.

The state is one :class:`ScorerRegistry` object (the built-in table, read-only; the scorers
registered in this process; the entry points, read once; the classes imported so far); the
module's functions are its methods.

To add a scorer: write its class (one module) and either add one line to ``BUILTIN``, call
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
    "BUILTIN",
    "ScorerRegistry",
    "deferred_class",
    "register_scorer",
    "scorer_name",
    "scorer_names",
    "scorer_registry",
    "unregister_scorer",
]

#: The built-in scorers, one line each (name -> "module:class", in :mod:`novelty`).
BUILTIN: Mapping[str, str] = MappingProxyType(
    {
        "conformance": "_variance_norm:ConformanceScorer",
        "mahalanobis": "_variance_norm:MahalanobisScorer",
        "sse": "_spectral_support:SpectralSupport",
        "sosrep": "_sosrep:SOSREPScorer",
        "knn": "_baselines:KNNScorer",
        "mean_embedding": "_baselines:MeanEmbeddingScorer",
        "ocsvm": "_baselines:OCSVMScorer",
    }
)
#: The entry-point group of scorers from installed packages (module docstring).
ENTRY_POINT_GROUP = "novelty.scorers"


class deferred_class:
    """A class attribute naming a class as "module:qualname", imported when first read: a
    built-in scorer names its feature form this way (the feature module imports the scorer
    modules, so the scorer modules cannot import it)."""

    def __init__(self, path: str):
        self.path = path

    def __get__(self, obj, owner=None) -> type:
        module, qualname = self.path.split(":")
        return getattr(import_module(module), qualname)


class ScorerRegistry:
    """The scorers by name: the built-in table ``builtin`` (name -> "module:class" in
    ``package``, imported on first use), the installed entry points of ``group`` (read once),
    then the classes added by :meth:`register`, in that order."""

    def __init__(self, builtin: Mapping[str, str], package: str, group: str):
        self.builtin = MappingProxyType(dict(builtin))
        self.package = package
        self.group = group
        self._added: dict[str, type] = {}  # register(): name -> class
        self._plugins: dict[str, str] | None = None  # entry points: name -> "module:qualname"
        self._loaded: dict[str, type] = {}  # built-in / entry-point classes imported so far
        self._mapping: Mapping[str, type] | None = None  # mapping()'s answer, until a change

    def plugins(self) -> dict[str, str]:
        """The scorers declared by installed packages (entry points of ``group``), read once
        per process; a name taken by a built-in scorer is ignored, with a warning."""
        if self._plugins is None:
            import warnings
            from importlib.metadata import entry_points

            found: dict[str, str] = {}
            for ep in entry_points(group=self.group):
                if ep.name in self.builtin or ep.name in found:
                    warnings.warn(
                        f"entry point {ep.name!r} = {ep.value!r} of {self.group!r}: the "
                        "name is taken by another scorer, so it is ignored",
                        UserWarning,
                        stacklevel=3,
                    )
                    continue
                found[ep.name] = ep.value
            self._plugins = found
        return self._plugins

    def load(self, name: str) -> type:
        """The class of a built-in or installed (entry-point) scorer, imported once."""
        cls = self._loaded.get(name)
        if cls is None:
            if name in self.builtin:
                module, qualname = self.builtin[name].split(":")
                cls = getattr(import_module(f"{self.package}.{module}"), qualname)
            else:
                path = self.plugins()[name]
                module, qualname = path.split(":")
                try:
                    cls = import_module(module)
                    for part in qualname.split("."):
                        cls = getattr(cls, part)
                except (ImportError, AttributeError) as err:
                    raise ImportError(
                        f"scorer {name!r} (entry point {path!r} of {self.group!r}) cannot be "
                        f"imported: {err}"
                    ) from err
                _check_definition(cls)
            if cls.name != name:
                raise TypeError(
                    f"{qualname}.name is {cls.name!r} but the registry lists it as {name!r}"
                )
            self._loaded[name] = cls
        return cls

    def names(self) -> tuple[str, ...]:
        """The registered names, built-in ones first (imports no scorer module)."""
        plugins = [name for name in self.plugins() if name not in self._added]
        return (*self.builtin, *plugins, *self._added)

    def mapping(self) -> Mapping[str, type[GramScorer]]:
        """Read-only mapping name -> class, built once (a change of the registry resets it)."""
        if self._mapping is None:
            listed = (*self.builtin, *self.plugins())
            loaded = {name: self.load(name) for name in listed if name not in self._added}
            self._mapping = MappingProxyType({**loaded, **self._added})
        return self._mapping

    def register(self, cls: type) -> type:
        """:func:`register_scorer`."""
        _check_definition(cls)
        name = cls.name
        in_tables = name in self.builtin or name in self.plugins()
        taken = self._added.get(name) or (self.load(name) if in_tables else None)
        if taken is not None and taken is not cls:
            raise ValueError(f"scorer name {name!r} is taken by {taken.__name__}")
        if name not in self.builtin:
            self._added[name] = cls
            self._mapping = None
        return cls

    def unregister(self, name: str) -> None:
        """:func:`unregister_scorer`."""
        if name in self.builtin:
            raise ValueError(f"{name!r} is a built-in scorer and cannot be unregistered")
        if name not in self._added:
            raise ValueError(f"no scorer {name!r} was registered")
        del self._added[name]
        self._mapping = None

    def name_of(self, scorer) -> str:
        """:func:`scorer_name`."""
        cls = scorer if isinstance(scorer, type) else type(scorer)
        for name, registered in self.mapping().items():
            if registered is cls:
                return name
        return cls.__name__


#: The one registry of the process.
REGISTRY = ScorerRegistry(BUILTIN, __package__, ENTRY_POINT_GROUP)


def _load(name: str) -> type:
    """The class of a built-in or installed (entry-point) scorer, imported once."""
    return REGISTRY.load(name)


def scorer_names() -> tuple[str, ...]:
    """The registered scorer names, built-in ones first (imports no scorer module)."""
    return REGISTRY.names()


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
    return REGISTRY.mapping()


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
    if not isinstance(cls.description, str) or not cls.description:
        raise ValueError(f"{cls.__name__}.description must be a non-empty string")
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
    return REGISTRY.register(cls)


def unregister_scorer(name: str) -> None:
    """Remove a scorer added by :func:`register_scorer` (the built-in ones stay)."""
    REGISTRY.unregister(name)


def scorer_name(scorer) -> str:
    """The registry name of a scorer instance or class (its class name if unregistered)."""
    return REGISTRY.name_of(scorer)
