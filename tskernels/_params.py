"""Parameters, constraints and tags of kernels, without scikit-learn.

:class:`Parametrized` gives ``get_params`` / ``set_params`` (nested ``static__sigma``) read from
the ``__init__`` signature, a repr listing the parameters that differ from their defaults, and
``_check_parameters``: the class's ``_parameter_constraints`` (merged along the class
hierarchy), ``name -> [constraint, ...]`` in scikit-learn's dialect (:mod:`._constraints`), are
checked at use, once per public call, so ``set_params`` cannot slip past a constraint; a
parameter that has parameters itself (a static kernel) is checked by its own constraints.
``sklearn.clone`` and ``GridSearchCV`` work on these objects as on scikit-learn estimators
(they need only ``get_params``/``set_params``); ``import tskernels`` never imports sklearn.

Tags (:meth:`Parametrized.get_tag`) describe what a class can do; they are class data,
declared once in ``_tags`` and merged along the hierarchy.
"""

from __future__ import annotations

import inspect

from ._constraints import validate_parameter_constraints

__all__ = ["Parametrized"]


class Parametrized:
    """Base of kernels and static kernels: parameters from ``__init__``, constraints, tags."""

    #: name -> list of constraints (scikit-learn's dialect, :mod:`._constraints`).
    _parameter_constraints: dict[str, list] = {}
    #: capability tags (merged along the class hierarchy; see :meth:`get_tags`).
    _tags: dict[str, object] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        constraints: dict[str, list] = {}
        tags: dict[str, object] = {}
        for klass in reversed(cls.__mro__):
            constraints.update(klass.__dict__.get("_parameter_constraints", {}))
            tags.update(klass.__dict__.get("_tags", {}))
        cls._all_constraints = constraints
        cls._all_tags = tags

    # ------------------------------------------------------------------ tags
    @classmethod
    def get_tags(cls) -> dict[str, object]:
        """All tags of the class (a copy)."""
        return dict(getattr(cls, "_all_tags", cls._tags))

    @classmethod
    def get_tag(cls, name: str, default=None):
        """The tag ``name`` of the class (``default`` when it has none)."""
        return getattr(cls, "_all_tags", cls._tags).get(name, default)

    # ------------------------------------------------------------------ parameters
    @classmethod
    def _init_parameters(cls) -> dict[str, inspect.Parameter]:
        """The ``__init__`` parameters by name. An ``__init__`` that ends in ``**kwargs``
        passes them to its parent's, whose parameters are added (a kernel's
        ``**execution``: ``backend``, ``n_jobs``, ... of :class:`tskernels.Kernel`)."""
        out: dict[str, inspect.Parameter] = {}
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is None:
                continue
            if init is object.__init__:
                break
            forwards = False
            for p in inspect.signature(init).parameters.values():
                if p.kind == p.VAR_POSITIONAL:
                    raise RuntimeError(f"{klass.__name__}.__init__ must not take *args")
                if p.kind == p.VAR_KEYWORD:
                    forwards = True
                elif p.name != "self":
                    out.setdefault(p.name, p)
            if not forwards:
                break
        return out

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The sorted ``__init__`` parameter names, read from the signatures once per class."""
        names = cls.__dict__.get("_param_names")
        if names is None:
            names = tuple(sorted(cls._init_parameters()))
            cls._param_names = names  # on this class itself, never inherited
        return list(names)

    def get_params(self, deep: bool = True) -> dict:
        """The ``__init__`` parameters; ``deep=True`` adds ``<param>__<sub>`` of parameters that
        have parameters themselves (e.g. ``static__sigma``)."""
        out = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params):
        """Set parameters (``static__sigma=2.0`` sets the nested one); returns self. Values are
        checked when the object is next used."""
        if not params:
            return self
        valid = self._get_param_names()
        nested: dict[str, dict] = {}
        for key, value in params.items():
            name, sep, sub = key.partition("__")
            if name not in valid:
                raise ValueError(
                    f"invalid parameter {name!r} for {type(self).__name__}; valid parameters: "
                    f"{', '.join(valid)}"
                )
            if sep:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            inner = getattr(self, name)
            if not hasattr(inner, "set_params"):
                raise ValueError(
                    f"cannot set {sorted(sub_params)} on `{name}` = {inner!r}: it has no parameters"
                )
            inner.set_params(**sub_params)
        return self

    def _check_parameters(self) -> None:
        """Every declared constraint, on the current values (once per public call), then the
        constraints of the parameters that are :class:`Parametrized` themselves. A bad value
        raises scikit-learn's ``InvalidParameterError`` (a ValueError) naming the parameter,
        the class and the allowed values."""
        params = {name: getattr(self, name) for name in self._get_param_names()}
        validate_parameter_constraints(type(self)._all_constraints, params, type(self).__name__)
        for value in params.values():
            if isinstance(value, Parametrized):
                value._check_parameters()

    def __sklearn_tags__(self):
        """scikit-learn's tags (read by its ``check_is_fitted``; sklearn is imported by the
        caller already). ``requires_fit`` is False for a class tagged ``fit_is_empty``."""
        from sklearn.utils import Tags, TargetTags

        tags = Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            transformer_tags=None,
            regressor_tags=None,
            classifier_tags=None,
        )
        tags.requires_fit = not self.get_tag("fit_is_empty", True)
        return tags

    def __repr__(self) -> str:
        sig = self._init_parameters()
        shown = []
        for name in self._get_param_names():
            value = getattr(self, name, None)
            default = sig[name].default
            if default is not inspect.Parameter.empty and _same(value, default):
                continue
            shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


def _same(a, b) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # arrays and other objects without a boolean ==
        return False
