"""tskernels' parameter constraints (``tskernels._constraints``) are scikit-learn's dialect
without scikit-learn: checked here against scikit-learn's own ``_param_validation`` value by
value (which values satisfy a constraint) and message by message (the error raised)."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import pytest
import torch
from sklearn.utils import _param_validation as sk

import tskernels._constraints as tc

VALUES = [
    None, True, False, np.bool_(True), 0, 1, -1, 2, 7, 2**40, np.int64(3), np.int32(-2), 0.0,
    0.5, 1.0, -0.5, 2.5, 1e300, np.float32(0.25), np.float64(-3.0), np.inf, -np.inf, np.nan,
    "a", "b", "auto", "", "1", b"a", [1], (1, 2), {"a": 1}, object(), print, torch.float32,
]  # fmt: skip

#: (ours, scikit-learn's): the same declaration in both implementations
PAIRS = [
    (None, None),
    (int, int),
    (str, str),
    (dict, dict),
    (torch.dtype, torch.dtype),
    ("boolean", "boolean"),
    (callable, callable),
    (tc.StrOptions({"a", "auto"}), sk.StrOptions({"a", "auto"})),
    (tc.Options(Integral, {-1, 2}), sk.Options(Integral, {-1, 2})),
    (tc.Options(torch.dtype, {torch.float32}), sk.Options(torch.dtype, {torch.float32})),
    (tc.HasMethods("keys"), sk.HasMethods("keys")),
    (tc.HasMethods(["keys", "items"]), sk.HasMethods(["keys", "items"])),
]
for kind in (Integral, Real):
    for left, right in [(0, None), (1, None), (None, 0), (None, None), (-1, 2), (0, 1), (0.5, 1.5)]:
        for closed in ("left", "right", "both", "neither"):
            if kind is Integral and (
                isinstance(left, float)
                or (left is None and closed in ("left", "both"))
                or (right is None and closed in ("right", "both"))
            ):
                continue  # scikit-learn refuses an integer interval closed at infinity
            PAIRS.append(
                (
                    tc.Interval(kind, left, right, closed=closed),
                    sk.Interval(kind, left, right, closed=closed),
                )
            )


@pytest.mark.parametrize("ours, theirs", PAIRS, ids=[str(sk.make_constraint(t)) for _, t in PAIRS])
def test_each_constraint_accepts_what_sklearn_accepts_and_reads_the_same(ours, theirs):
    mine, ref = tc._as_constraint(ours), sk.make_constraint(theirs)
    for value in VALUES:
        if isinstance(ours, tc.Interval) and isinstance(value, bool):
            assert not mine.is_satisfied_by(value)  # the one difference: a flag is no number
        else:
            assert mine.is_satisfied_by(value) == ref.is_satisfied_by(value), value
    assert str(mine) == str(ref)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_error_is_sklearns_with_its_message(k):
    ours = [p[0] for p in PAIRS[:: len(PAIRS) // 5][:k]]
    theirs = [p[1] for p in PAIRS[:: len(PAIRS) // 5][:k]]
    bad = type("BadType", (), {"__repr__": lambda self: "BadType()"})()
    with pytest.raises(sk.InvalidParameterError) as mine:
        tc.validate_parameter_constraints({"p": ours}, {"p": bad, "q": bad}, "Thing")
    with pytest.raises(sk.InvalidParameterError) as ref:
        sk.validate_parameter_constraints({"p": theirs}, {"p": bad, "q": bad}, "Thing")
    assert str(mine.value) == str(ref.value)
    assert isinstance(mine.value, ValueError) and isinstance(mine.value, TypeError)


def test_valid_values_and_undeclared_parameters_pass():
    constraints = {
        "a": [tc.Interval(Real, 0, None, closed="neither")],
        "b": [None, "boolean"],
        "d": "no_validation",
    }
    values = {"a": 0.1, "b": None, "c": "anything", "d": object()}
    tc.validate_parameter_constraints(constraints, values, "X")
    with pytest.raises(ValueError, match="unknown constraint 'real'"):
        tc.validate_parameter_constraints({"a": ["real"]}, {"a": 1.0}, "X")
