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


def _case_id(theirs) -> str:
    """scikit-learn's description of the constraint, with the members of a set sorted: a set's
    order follows the hash seed, and pytest-xdist's workers must collect the same test ids."""
    text = str(sk.make_constraint(theirs))
    head, brace, rest = text.partition("{")
    if not brace:
        return text
    members, _, tail = rest.partition("}")
    return head + "{" + ", ".join(sorted(members.split(", "))) + "}" + tail


@pytest.mark.parametrize("ours, theirs", PAIRS, ids=[_case_id(t) for _, t in PAIRS])
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


# ------------------------------------------------------------- the function decorator
_COUNT = [tc.Interval(Integral, 1, None, closed="left")]


@tc.validate_params({"n": _COUNT, "share": [sk.Interval(Real, 0, 1, closed="right")]})
def _repeat(word, n=2, *, share=0.5):
    """Repeat ``word``."""
    return word * n


def test_validate_params_checks_the_declared_arguments_at_each_call():
    assert _repeat("ab", 3) == "ababab" and _repeat("ab", n=1, share=1.0) == "ab"
    assert _repeat.__name__ == "_repeat" and _repeat.__doc__ == "Repeat ``word``."
    with pytest.raises(sk.InvalidParameterError) as err:
        _repeat("ab", 0)  # positional
    assert str(err.value) == (
        "The 'n' parameter of _repeat must be an int in the range [1, inf). Got 0 instead."
    )
    with pytest.raises(ValueError, match=r"The 'n' parameter of _repeat .* Got True instead"):
        _repeat("ab", n=True)  # a flag is not a count
    with pytest.raises(  # scikit-learn's own constraint objects are taken as they are
        ValueError, match=r"The 'share' parameter of _repeat must be a float in the range"
    ):
        _repeat("ab", share=1.5)
    with pytest.raises(TypeError, match="unexpected keyword"):  # the call's own TypeError
        _repeat("ab", m=2)


def test_validate_params_refuses_names_the_function_does_not_take():
    with pytest.raises(TypeError, match=r"declares constraints for \['m'\]"):
        tc.validate_params({"m": _COUNT})(lambda word, n=2: word * n)


def test_validate_params_names_the_method_and_leaves_defaults_unchecked():
    class Thing:
        @tc.validate_params({"k": _COUNT})
        def run(self, k=None):  # the default is not checked (valid by declaration)
            return k

    assert Thing().run() is None and Thing().run(k=4) == 4
    with pytest.raises(ValueError, match=r"The 'k' parameter of .*Thing\.run must be"):
        Thing().run(k=-1)


def test_validate_estimator_checks_every_parameter_and_needs_each_declared():
    class Est:
        _parameter_constraints = {"n": _COUNT}

        def __init__(self, n=1, extra=None):
            self.n, self.extra = n, extra

        def get_params(self, deep=False):
            return {"n": self.n, "extra": self.extra}

    with pytest.raises(TypeError, match=r"Est declares no constraint for its parameters"):
        tc.validate_estimator(Est())
    Est._parameter_constraints = {"n": _COUNT, "extra": "no_validation"}
    tc.validate_estimator(Est())
    with pytest.raises(ValueError, match=r"The 'n' parameter of Est must be an int"):
        tc.validate_estimator(Est(n=0))


def test_no_hand_written_parameter_checkers_are_left():
    """The one dialect: the former check_* parameter functions are gone from the packages."""
    import pathlib

    root = pathlib.Path(tc.__file__).resolve().parent.parent
    gone = (
        "def check_positive(", "def check_int(", "def check_nonnegative(", "def check_bool(",
        "def check_option(", "def check_n_jobs(", "def check_fraction(", "def check_alphas(",
        "def check_max_memory(", "def check_block_size(", "def _check_int(",
        "def check_normalize(", "def _check_tile(", "def _check_kernel(", "def _check_client(",
        "def _check_positive_int(", "def check_clip(", "def _check_window(", "def _check_per(",
    )  # fmt: skip
    found = [
        f"{path.relative_to(root)}: {name}"
        for pkg in ("tskernels", "novelty", "density")
        for path in (root / pkg).rglob("*.py")
        for name in gone
        if name in path.read_text()
    ]
    assert found == []


def test_method_arguments_of_the_scorers_are_declared():
    """VarianceNorm's alpha (a positive float or a non-empty sequence of them) and rank (None,
    an int >= 1 or "all") by the decorator; a rank above the kept components by the fit."""
    from novelty import VarianceNorm

    X = np.random.default_rng(0).normal(size=(12, 3))
    vn = VarianceNorm().fit(X @ X.T)
    Kt = X[:2] @ X.T
    assert vn.mahalanobis(Kt, [0.1, 1.0]).shape == (2, 2)
    assert vn.mahalanobis(Kt, torch.tensor([0.1])).shape == (1, 2)
    assert vn.mahalanobis(Kt, 0.1, rank="all").shape == (vn.n_components_, 2)
    for alpha in (0.0, -1, True, [], [0.1, -1.0], "0.1", np.array(0.5)):
        with pytest.raises(ValueError, match=r"The 'alpha' parameter of VarianceNorm\.mahal"):
            vn.mahalanobis(Kt, alpha)
    for rank in (0, "some", 1.5, True):
        with pytest.raises(ValueError, match=r"The 'rank' parameter of VarianceNorm\.conf"):
            vn.conformance(Kt, 0.1, rank=rank)
    with pytest.raises(ValueError, match="exceeds the"):
        vn.mahalanobis(Kt, 0.1, rank=vn.n_components_ + 1)
    with pytest.raises(ValueError, match=r"The 'alpha' parameter of VarianceNorm\.weights"):
        vn.weights([0.1])  # one alpha here
