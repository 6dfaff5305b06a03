"""One parameter dialect (issue 24, item 3): every registered kernel, static kernel, scorer,
scorer's feature form and the detector declares a constraint for each constructor parameter
(scikit-learn's ``_parameter_constraints``), and a bad value given by ``set_params`` raises
at fit (or at use) with one error: scikit-learn's ``InvalidParameterError`` (a ValueError),
``The '<name>' parameter of <Class> must be <allowed>. Got <value> instead.``

The bad values: an object of a type no constraint accepts, then for each constraint a value
of the right type outside it (scikit-learn's own ``generate_invalid_param_val``), as in
scikit-learn's ``check_param_validation``."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.utils import _param_validation as sk

import tskernels as tk
import tskernels._constraints as tc
from novelty import KernelNoveltyDetector, VarianceNorm, scorer_registry

X = 0.4 * np.random.default_rng(0).normal(size=(6, 8, 2))
POINTS = np.random.default_rng(1).normal(size=(6, 3))
GRAM = np.exp(-0.5 * ((POINTS[:, None] - POINTS[None]) ** 2).sum(-1))
PHI = np.random.default_rng(2).normal(size=(6, 4))  # feature vectors, k(x, x) = |x|^2 + 1
PHI_DIAG = (PHI**2).sum(1) + 1.0


class BadType:
    def __repr__(self):
        return "BadType()"


def _kernels():
    for name, spec in sorted(tk.kernel_registry().items()):
        yield name, spec.example, lambda k: k.fit(X)
    for cls in (tk.RBF, tk.Laplacian, tk.Linear, tk.Polynomial):
        yield cls.__name__, cls, lambda k: k.gram(POINTS)


def _estimators():
    for name, cls in sorted(scorer_registry().items()):
        yield name, cls, lambda s: s.fit(GRAM)
    yield "VarianceNorm", VarianceNorm, lambda s: s.fit(GRAM)
    for _, cls in sorted(scorer_registry().items()):  # the feature forms, same dialect
        if cls.feature_form is not None:
            form = cls.feature_form
            yield form.__name__, form, lambda s: s.fit(PHI, PHI_DIAG)
    yield "detector", KernelNoveltyDetector, lambda d: d.fit(X)


CASES = [(name, make, use, "kernel") for name, make, use in _kernels()] + [
    (name, make, use, "estimator") for name, make, use in _estimators()
]


def _constraints(obj, family: str) -> dict:
    return type(obj)._all_constraints if family == "kernel" else type(obj)._parameter_constraints


def _as_sklearn(c):
    """The scikit-learn constraint of a declared one (tskernels' Interval/StrOptions mirrored,
    to let scikit-learn generate a value outside it); None where there is none."""
    if isinstance(c, tc.Interval):
        return sk.Interval(c.type, c.left, c.right, closed=c.closed)
    if isinstance(c, tc.StrOptions):
        return sk.StrOptions(set(c.options))
    if isinstance(c, tc.Constraint):
        return None
    return sk.make_constraint(c)


def _satisfies_any(value, declared, family: str) -> bool:
    if family == "kernel":
        return any(tc._as_constraint(c).is_satisfied_by(value) for c in declared)
    return any(sk.make_constraint(c).is_satisfied_by(value) for c in declared)


def _bad_values(declared, family: str) -> list:
    out = [BadType()]
    for c in declared:
        ref = _as_sklearn(c)
        if ref is None:
            continue
        try:
            value = sk.generate_invalid_param_val(ref)
        except NotImplementedError:
            continue
        if not _satisfies_any(value, declared, family):
            out.append(value)
    return out


@pytest.mark.parametrize("name, make, use, family", CASES, ids=[c[0] for c in CASES])
def test_every_parameter_is_declared_and_checked_at_use(name, make, use, family):
    obj = make()
    params = obj.get_params(deep=False)
    declared = _constraints(obj, family)
    assert set(declared) == set(params), f"{name}: constraints and parameters differ"
    checked = 0
    for param, constraints in declared.items():
        if constraints == "no_validation":
            continue
        for bad in _bad_values(constraints, family):
            target = make().set_params(**{param: bad})  # accepted when set ...
            pattern = (
                rf"^The '{param}' parameter of {type(target).__name__} must be .+\. "
                rf"Got {re.escape(repr(bad))} instead\."
            )
            with pytest.raises(sk.InvalidParameterError, match=pattern):  # ... refused at use
                use(target)
            checked += 1
    assert checked >= len(params) - 1


def test_the_error_is_a_value_error_naming_the_allowed_values():
    with pytest.raises(ValueError) as err:
        tk.GAK().set_params(sigma=-1.0).fit(X)
    assert str(err.value) == (
        "The 'sigma' parameter of GlobalAlignmentKernel must be None or a float in the range "
        "(0.0, inf). Got -1.0 instead."
    )
    with pytest.raises(ValueError) as err:
        KernelNoveltyDetector().set_params(contamination=0.7).fit(X)
    assert str(err.value) == (
        "The 'contamination' parameter of KernelNoveltyDetector must be a float in the range "
        "(0.0, 0.5]. Got 0.7 instead."
    )


def test_a_nested_parameter_is_checked_by_its_own_class():
    k = tk.SignaturePDEKernel(tk.RBF(1.0)).set_params(static__sigma=0.0)
    with pytest.raises(sk.InvalidParameterError, match=r"^The 'sigma' parameter of RBF must be"):
        k.gram(X)


@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_no_numbers(value):
    with pytest.raises(sk.InvalidParameterError, match="'n_grid' parameter of IntegralKernel"):
        tk.IntegralKernel(n_grid=value).fit(X)
    with pytest.raises(sk.InvalidParameterError, match="'alpha' parameter of Kernel"):
        KernelNoveltyDetector(alpha=value).fit(X)
