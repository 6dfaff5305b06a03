"""Parameter constraints in scikit-learn's dialect, without importing scikit-learn.

A class declares ``_parameter_constraints = {name: [constraint, ...]}``; a value is valid when
it satisfies at least one constraint of its list. A constraint is one of:

- ``None``: the value None;
- a type: an instance of it (``"an instance of 'bool'"``);
- ``"boolean"``: ``bool`` or ``numpy.bool_``;
- ``callable`` (the builtin): any callable;
- :class:`Interval` ``(type, left, right, closed=...)``: an ``Integral`` or ``Real`` number,
  not NaN, in the interval; a ``None`` bound is infinite, and the infinite end is excluded
  unless ``closed`` includes that side (so ``Interval(Real, 0, None, closed="neither")`` is
  the finite positive floats); True and False are not numbers here (scikit-learn takes them
  as 1 and 0: the one difference, the project's rule that a flag is never read as a number);
- :class:`Options` ``(type, options)`` / :class:`StrOptions` ``(options)``: an instance of the
  type that is one of the options;
- :class:`HasMethods` ``(methods)``: an object with every named method;
- a :class:`Constraint` subclass (``is_satisfied_by`` and a description) for what the above
  cannot say.

These are scikit-learn's ``sklearn.utils._param_validation`` semantics and messages (but for
booleans in an Interval). ``novelty`` uses scikit-learn's classes themselves (its estimators
import scikit-learn anyway; ``novelty._params``, whose ``Interval`` refuses booleans too);
tskernels keeps its own implementation because neither ``import tskernels`` nor a kernel's
first use imports scikit-learn (about 1 s). ``tests/test_constraints.py`` checks both agree
value by value and message by message. :func:`validate_parameter_constraints` raises scikit-learn's
``InvalidParameterError`` (a ValueError and a TypeError; imported only when raising), with
its message: ``The 'sigma' parameter of RBF must be a float in the range (0.0, inf). Got -1
instead.``

The one dialect of the project (docs/architecture.md, "Validation"): a class declares
``_parameter_constraints`` and checks the table in one place (``Parametrized._check_parameters``
for the kernels, ``novelty._constraints.validate_params`` for the estimators); a public
function or method declares its arguments' constraints with the :func:`validate_params`
decorator (scikit-learn's ``validate_params`` style, without importing scikit-learn and without
its renaming of nested errors). Both take these constraint objects and scikit-learn's own (any
object with ``is_satisfied_by``). Data checks (shape, NaN, channel counts, overflow) are no
parameters: they stay functions of :mod:`tskernels.validation`.
"""

from __future__ import annotations

import functools
import inspect
import math
from abc import ABC, abstractmethod
from numbers import Integral, Real

import numpy as np

__all__ = [
    "Constraint",
    "DaskClient",
    "HasMethods",
    "Interval",
    "IsInstance",
    "Options",
    "StrOptions",
    "TorchDevice",
    "validate_estimator",
    "validate_parameter_constraints",
    "validate_params",
]


class Constraint(ABC):
    """A set of valid values: ``is_satisfied_by(value)`` and ``str()``, the description that
    follows "must be" in the error message."""

    @abstractmethod
    def is_satisfied_by(self, value) -> bool: ...

    @abstractmethod
    def __str__(self) -> str: ...


def _type_name(t: type) -> str:
    if t is Real:
        return "float"
    if t is Integral:
        return "int"
    if t.__module__ == "builtins":
        return t.__qualname__
    return f"{t.__module__}.{t.__qualname__}"


class Interval(Constraint):
    """Numbers of ``type`` (``Integral`` or ``Real``) between ``left`` and ``right`` (None:
    unbounded); ``closed`` in "left", "right", "both", "neither" says which ends belong.
    Booleans are refused."""

    def __init__(self, type, left, right, *, closed: str):
        if type not in (Integral, Real):
            raise ValueError(f"Interval type must be Integral or Real, got {type!r}")
        if closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"closed must be 'left', 'right', 'both' or 'neither', got {closed!r}")
        if left is not None and right is not None and right <= left:
            raise ValueError(f"an Interval needs left < right, got left={left}, right={right}")
        self.type, self.left, self.right, self.closed = type, left, right, closed

    def is_satisfied_by(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, self.type):
            return False
        if not isinstance(value, Integral) and math.isnan(value):
            return False
        low = -math.inf if self.left is None else self.left
        high = math.inf if self.right is None else self.right
        above = value >= low if self.closed in ("left", "both") else value > low
        below = value <= high if self.closed in ("right", "both") else value < high
        return bool(above and below)

    def __str__(self) -> str:
        def bound(b, infinite: str):
            if b is None:
                return infinite
            return b if self.type is Integral else float(b)

        opening = "[" if self.closed in ("left", "both") else "("
        ending = "]" if self.closed in ("right", "both") else ")"
        kind = "an int" if self.type is Integral else "a float"
        return (
            f"{kind} in the range {opening}{bound(self.left, '-inf')}, "
            f"{bound(self.right, 'inf')}{ending}"
        )


class Options(Constraint):
    """Instances of ``type`` equal to one of ``options`` (a set)."""

    def __init__(self, type, options):
        self.type, self.options = type, options

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, self.type) and value in self.options

    def __str__(self) -> str:
        listed = ", ".join(repr(o) for o in self.options)
        return f"a {_type_name(self.type)} among {{{listed}}}"


class StrOptions(Options):
    """One of the strings ``options`` (a set)."""

    def __init__(self, options):
        super().__init__(str, options)


class HasMethods(Constraint):
    """Objects with every method named in ``methods`` (a name or a list of names)."""

    def __init__(self, methods):
        self.methods = [methods] if isinstance(methods, str) else list(methods)

    def is_satisfied_by(self, value) -> bool:
        return all(callable(getattr(value, m, None)) for m in self.methods)

    def __str__(self) -> str:
        names = [repr(m) for m in self.methods]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        return f"an object implementing {listed}"


class IsInstance(Constraint):
    """Instances of ``types`` (a class or a tuple of classes), described as ``description``
    in the message ("a density kernel (GaussianKernel, LaplacianKernel or SDOKernel)")."""

    def __init__(self, types, description: str):
        self.types, self.description = types, description

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, self.types)

    def __str__(self) -> str:
        return self.description


class TorchDevice(Constraint):
    """A torch device or its name (whether CUDA is available is checked at use, by
    :func:`tskernels.validation.resolve_device`)."""

    def is_satisfied_by(self, value) -> bool:
        import torch  # loaded by tskernels anyway; not at this module's import

        if not isinstance(value, (str, torch.device)):
            return False
        try:
            torch.device(value)
        except (RuntimeError, TypeError, ValueError):
            return False
        return True

    def __str__(self) -> str:
        return "a torch.device or its name ('cpu', 'cuda', 'cuda:1', ...)"


class DaskClient(Constraint):
    """A ``dask.distributed.Client`` (distributed is imported only to check an object)."""

    def is_satisfied_by(self, value) -> bool:
        if value is None or isinstance(value, (str, bytes, int, float)):
            return False
        from distributed import Client

        return isinstance(value, Client)

    def __str__(self) -> str:
        return (
            "a dask.distributed.Client (e.g. Client(LocalCluster()) or "
            "Client('tcp://scheduler:8786'))"
        )


class _Is(Constraint):
    def __init__(self, test, text: str):
        self._test, self._text = test, text

    def is_satisfied_by(self, value) -> bool:
        return self._test(value)

    def __str__(self) -> str:
        return self._text


class _IsNone(Constraint):
    def is_satisfied_by(self, value) -> bool:
        return value is None

    def __str__(self) -> str:
        return "None"


class _InstanceOf(Constraint):
    def __init__(self, types: tuple, text: str):
        self._types, self._text = types, text

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, self._types)

    def __str__(self) -> str:
        return self._text


def _instance_of(t: type) -> Constraint:
    return _InstanceOf((t,), f"an instance of {_type_name(t)!r}")


def _as_constraint(c) -> Constraint:
    """A declared constraint as a :class:`Constraint` (the shorthands of the module docstring)."""
    if isinstance(c, Constraint):
        return c
    if c is None:
        return _IsNone()
    if c is callable:
        return _Is(callable, "a callable")
    if isinstance(c, type):
        return _instance_of(c)
    if callable(getattr(c, "is_satisfied_by", None)):  # scikit-learn's constraint objects
        return c
    if isinstance(c, str) and c == "boolean":
        bool_, np_bool = _instance_of(bool), _instance_of(np.bool_)
        return _InstanceOf((bool, np.bool_), f"{bool_} or {np_bool}")
    raise ValueError(f"unknown constraint {c!r}")


#: id(constraints) -> (constraints, [(name, checks or None for "no_validation")]): each
#: declared dict (a class-level constant) converted once; the cache holds the dict, so its id
#: is never reused.
_COMPILED: dict[int, tuple[dict, dict]] = {}


def _compiled(constraints: dict) -> dict:
    hit = _COMPILED.get(id(constraints))
    if hit is None or hit[0] is not constraints:
        checks = {
            name: None if declared == "no_validation" else [_as_constraint(c) for c in declared]
            for name, declared in constraints.items()
        }
        hit = (constraints, checks)
        _COMPILED[id(constraints)] = hit
    return hit[1]


def validate_parameter_constraints(constraints: dict, params: dict, caller_name: str) -> None:
    """Check each of ``params`` (name -> value) that has an entry in ``constraints`` (name ->
    list of constraints, or "no_validation"); the first value that satisfies none raises
    scikit-learn's ``InvalidParameterError``: ``The '<name>' parameter of <caller_name> must
    be <c1>, <c2> or <c3>. Got <value!r> instead.``"""
    compiled = _compiled(constraints)
    for name, value in params.items():
        checks = compiled.get(name)
        if checks is None:  # undeclared, or "no_validation"
            continue
        for c in checks:
            if c.is_satisfied_by(value):
                break
        else:
            _raise(name, value, checks, caller_name)


def _raise(name: str, value, checks: list, caller_name: str):
    texts = [str(c) for c in checks]
    allowed = texts[0] if len(texts) == 1 else f"{', '.join(texts[:-1])} or {texts[-1]}"
    from sklearn.utils._param_validation import InvalidParameterError  # only when raising

    raise InvalidParameterError(
        f"The {name!r} parameter of {caller_name} must be {allowed}. Got {value!r} instead."
    )


def validate_estimator(estimator) -> None:
    """Check every constructor parameter of a scikit-learn-style ``estimator`` (its
    ``get_params(deep=False)``) against its class's ``_parameter_constraints``, as
    :func:`validate_parameter_constraints`; a parameter the class declares no constraint for
    is a bug of the class (TypeError)."""
    cls = type(estimator)
    params = estimator.get_params(deep=False)
    missing = sorted(set(params) - set(cls._parameter_constraints))
    if missing:
        raise TypeError(f"{cls.__name__} declares no constraint for its parameters {missing}")
    validate_parameter_constraints(cls._parameter_constraints, params, cls.__name__)


def validate_params(parameter_constraints: dict):
    """Decorator: check the arguments of a public function (or method) against
    ``parameter_constraints`` (name -> list of constraints, as a class declares them) at each
    call, before the body runs; the arguments left at their defaults are not checked (the
    defaults are valid by declaration, tested where the function is). A bad argument raises
    scikit-learn's ``InvalidParameterError`` (a ValueError and a TypeError) naming it, the
    function and the allowed values: ``The 'coverage' parameter of explain must be an int in
    the range [1, inf). Got 0 instead.`` A declared name the function does not take is a
    TypeError when decorating.

    >>> from numbers import Integral
    >>> @validate_params({"n": [Interval(Integral, 1, None, closed="left")]})
    ... def repeat(word, n=2):
    ...     return word * n
    >>> repeat("ab", n=3)
    'ababab'
    """

    def decorate(func):
        signature = inspect.signature(func)
        unknown = sorted(set(parameter_constraints) - set(signature.parameters))
        if unknown:
            raise TypeError(f"{func.__qualname__} declares constraints for {unknown}, not its own")
        caller = func.__qualname__

        @functools.wraps(func)
        def checked(*args, **kwargs):
            given = signature.bind(*args, **kwargs).arguments  # a TypeError as the call's own
            validate_parameter_constraints(parameter_constraints, given, caller)
            return func(*args, **kwargs)

        checked.parameter_constraints = parameter_constraints
        return checked

    return decorate
