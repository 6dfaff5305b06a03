"""The parameter constraints of novelty's estimators: scikit-learn's own.

Each estimator class (the scorers, the detector) declares
``_parameter_constraints = {name: [constraint, ...]}`` with the constraint objects of
``sklearn.utils._param_validation`` (``Interval``, ``StrOptions``, ``Options``,
``HasMethods``, ``None``, types, ``"boolean"``, ...), re-exported here, and checks them with
:func:`validate_params` at ``fit`` and at every later use, so ``set_params`` cannot slip a bad
value past them. A bad value raises scikit-learn's ``InvalidParameterError`` (a ValueError
and a TypeError): ``The 'alpha' parameter of VarianceNorm must be a float in the range (0.0,
inf). Got -1 instead.`` The kernels (``tskernels._constraints``) speak the same dialect and
raise the same error without importing scikit-learn.

Two additions, both subclasses of scikit-learn's classes so that its validation (and its
estimator checks) take them:

- :class:`Interval` refuses booleans (scikit-learn reads True as 1): a flag is not a number;
- :class:`InstanceOf` (an instance of a class imported when first checked) and
  :class:`NameOf` (one of the names a registry lists when checked), so that declaring them
  imports neither torch nor the registries (``from novelty import KernelNoveltyDetector``
  stays light).

A public function or method (not a class's parameters) declares its arguments with
:func:`validate_arguments` (``tskernels.validation.validate_params``, scikit-learn's
``validate_params`` decorator in the project's implementation; named apart from
:func:`validate_params`, the class check): ``@validate_arguments({"rank": RANK})``.
:class:`SequenceOf` and the shared lists :data:`ALPHA`, :data:`ALPHAS` and :data:`RANK` are
the scorers' method arguments.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable
from numbers import Integral, Real

from sklearn.utils import _param_validation as _sk
from sklearn.utils._param_validation import (
    HasMethods,
    InvalidParameterError,
    Options,
    StrOptions,
    validate_parameter_constraints,
)

__all__ = [
    "ALPHA",
    "ALPHAS",
    "RANK",
    "SequenceOf",
    "validate_arguments",
    "HasMethods",
    "InstanceOf",
    "Interval",
    "InvalidParameterError",
    "NameOf",
    "Options",
    "StrOptions",
    "check_values",
    "validate_params",
]


class Interval(_sk.Interval):
    """scikit-learn's ``Interval(type, left, right, closed=...)``, refusing True and False."""

    def is_satisfied_by(self, val):
        return not isinstance(val, bool) and super().is_satisfied_by(val)


class InstanceOf(HasMethods):
    """Instances of the class ``module.name`` (imported at the first check). A
    ``HasMethods`` only so that scikit-learn's ``make_constraint`` takes it."""

    def __init__(self, module: str, name: str, shown: str | None = None):
        super().__init__([])
        self.module, self.name = module, name
        self.shown = shown or f"{module}.{name}"

    def is_satisfied_by(self, val):
        return isinstance(val, getattr(importlib.import_module(self.module), self.name))

    def __str__(self):
        return f"an instance of {self.shown!r}"


class NameOf(StrOptions):
    """One of the strings ``names()`` returns when checked (a registry's names, read at use so
    the declaring module imports no registry)."""

    def __init__(self, names: Callable[[], Iterable[str]]):
        self._names = None
        super().__init__(set())
        self._names = names

    @property
    def options(self):
        if self._names is None:  # during StrOptions.__init__
            return set()
        return dict.fromkeys(self._names())  # ordered: the registry's order in the message

    @options.setter
    def options(self, value):  # StrOptions.__init__ sets it; the names are read at use
        pass


def validate_arguments(parameter_constraints: dict):
    """The decorator checking a public function's arguments:
    :func:`tskernels.validation.validate_params`, applied at the function's first call (so that
    declaring constraints here imports neither torch nor tskernels: a module such as the
    detector's calibration stays light to import)."""

    def decorate(func):
        checked = None

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            nonlocal checked
            if checked is None:
                from tskernels.validation import validate_params

                checked = validate_params(parameter_constraints)(func)
            return checked(*args, **kwargs)

        return wrapper

    return decorate


class SequenceOf(_sk._Constraint):
    """A non-empty sequence (list, tuple, numpy array or torch tensor; not a string) whose
    every item satisfies ``constraint``."""

    def __init__(self, constraint):
        super().__init__()
        self.constraint = constraint

    def is_satisfied_by(self, val):
        if isinstance(val, (str, bytes)) or not hasattr(val, "__getitem__"):
            return False
        try:
            items = [v.item() if hasattr(v, "item") else v for v in list(val)]
        except TypeError:  # not iterable: a 0-d array, a mapping's keys are no sequence
            return False
        return len(items) > 0 and all(self.constraint.is_satisfied_by(v) for v in items)

    def __str__(self):
        return f"a non-empty sequence, each item {self.constraint}"


#: A kernel Mahalanobis regulariser: one positive float; or one or a sequence of them.
ALPHA = [Interval(Real, 0, None, closed="neither")]
ALPHAS = [*ALPHA, SequenceOf(ALPHA[0])]
#: The rank argument of the Mahalanobis scores: None (every kept component), an int >= 1 (at
#: most the kept components: checked against the fit) or "all" (every rank 1..M).
RANK = [None, Interval(Integral, 1, None, closed="left"), StrOptions({"all"})]


def validate_params(estimator) -> None:
    """Check every constructor parameter of ``estimator`` against its class's
    ``_parameter_constraints`` (scikit-learn's ``validate_parameter_constraints``); a
    parameter without a declared constraint is a bug of the class and raises TypeError."""
    cls = type(estimator)
    params = _params(estimator)
    missing = sorted(set(params) - set(cls._parameter_constraints))
    if missing:
        raise TypeError(f"{cls.__name__} declares no constraint for its parameters {missing}")
    validate_parameter_constraints(cls._parameter_constraints, params, caller_name=cls.__name__)


def check_values(estimator, name: str, values: Iterable) -> None:
    """Each of ``values`` against the constraints of ``estimator``'s parameter ``name`` (a
    sweep's axis values), with the same error as a bad parameter."""
    constraints = {name: type(estimator)._parameter_constraints[name]}
    for value in values:
        validate_parameter_constraints(constraints, {name: value}, type(estimator).__name__)


#: Constructor parameter names per (class, its ``__init__``): scikit-learn's
#: ``_get_param_names`` reads the signature afresh at each call (``inspect.signature``, most
#: of a scorer's per-fit overhead in a CV cell).
_PARAM_NAMES: dict = {}


def _params(estimator) -> dict:
    """``estimator.get_params(deep=False)``: scikit-learn's, with the parameter names of a
    class that keeps scikit-learn's ``get_params`` and ``_get_param_names`` read once."""
    from sklearn.base import BaseEstimator

    cls = type(estimator)
    if (
        getattr(cls, "get_params", None) is not BaseEstimator.get_params
        or getattr(getattr(cls, "_get_param_names", None), "__func__", None)
        is not BaseEstimator._get_param_names.__func__
    ):
        return estimator.get_params(deep=False)
    key = (cls, cls.__init__)
    names = _PARAM_NAMES.get(key)
    if names is None:
        names = _PARAM_NAMES[key] = tuple(cls._get_param_names())
    return {name: getattr(estimator, name) for name in names}
