"""Kernel parameters, constraints, tags and execution (issue 13, items 2-4): parameters come
from ``__init__`` (sklearn's clone and GridSearchCV work without sklearn in the base class),
declared constraints are checked at use (``set_params`` cannot slip past them), capabilities
are tags read by the registry, back-ends are switched through ``backend=``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError

import tskernels as tk

SPECS = sorted(tk.kernel_registry().items())
NAMES = [name for name, _ in SPECS]
X = 0.4 * np.random.default_rng(0).normal(size=(6, 8, 2))


def test_kernel_base_is_not_an_sklearn_estimator():
    from sklearn.base import BaseEstimator

    assert not issubclass(tk.Kernel, BaseEstimator)
    assert not issubclass(tk.StaticKernel, BaseEstimator)


@pytest.mark.parametrize("name", NAMES)
def test_get_params_set_params_clone(name):
    from sklearn.base import clone

    k = tk.kernel_registry()[name].example()
    params = k.get_params(deep=False)
    assert {"device", "dtype", "max_memory", "block_size", "backend", "n_jobs"} <= set(params)
    # each execution parameter given to the constructor is the one stored (none swapped)
    given = dict(n_jobs=1, device="cpu", dtype="float64", max_memory=2**20, block_size=7)
    stored = type(k)(**{**params, **given}).get_params(deep=False)
    assert {key: stored[key] for key in given} == given
    c = clone(k)
    assert type(c) is type(k) and c is not k
    assert repr(c) == repr(k)
    for key, value in c.get_params(deep=False).items():
        if hasattr(value, "get_params"):  # nested estimators are cloned, equal params
            assert value is not params[key] and repr(value) == repr(params[key])
        else:
            assert value is params[key] or value == params[key]
    with pytest.raises(ValueError, match="invalid parameter 'nope'"):
        k.set_params(nope=1)


def test_nested_params_and_repr():
    k = tk.SignaturePDEKernel(tk.RBF(2.0), scale=0.5)
    deep = k.get_params()
    assert deep["static__sigma"] == 2.0 and deep["scale"] == 0.5
    k.set_params(static__sigma=3.0, dyadic_order=1)
    assert k.static.sigma == 3.0 and k.dyadic_order == 1
    assert repr(k) == "SignaturePDEKernel(dyadic_order=1, scale=0.5, static=RBF(sigma=3.0))"
    assert repr(tk.GAK()) == "GlobalAlignmentKernel()"


def test_grid_search_over_kernel_parameters():
    from sklearn.model_selection import GridSearchCV

    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(3)
    Xs = rng.normal(size=(24, 12, 2))
    det = KernelNoveltyDetector(
        kernel=tk.FlattenedKernel(tk.RBF(1.0)), scorer="knn", contamination=0.1
    )

    def score(est, X, y=None):
        return float(np.mean(est.score_samples(X)))

    grid = GridSearchCV(det, {"kernel__static__sigma": [2.0, 8.0]}, cv=2, scoring=score)
    grid.fit(Xs)
    assert grid.best_params_["kernel__static__sigma"] in (2.0, 8.0)
    assert grid.best_estimator_.kernel.static.sigma == grid.best_params_["kernel__static__sigma"]


@pytest.mark.parametrize(
    "make, param, value",
    [
        (lambda: tk.GAK(sigma=1.0), "sigma", -3.0),
        (lambda: tk.GAK(), "triangular", 0),
        (lambda: tk.GAK(), "normalized", "yes"),
        (lambda: tk.VolterraReservoirKernel(), "tau", 0.0),
        (lambda: tk.SignaturePDEKernel(), "dyadic_order", -1),
        (lambda: tk.TruncatedSignatureKernel(), "levels", "both"),
        (lambda: tk.TruncatedSignatureKernel(), "level", 0),
        (lambda: tk.RandomizedSignatureKernel(), "activation", "softplus"),
        (lambda: tk.IntegralKernel(), "n_grid", 0),
        (lambda: tk.FlattenedKernel(), "backend", "cuda"),
        (lambda: tk.FlattenedKernel(tk.RBF(1.0)), "static__sigma", -3),
    ],
)
def test_set_params_cannot_slip_past_constraints(make, param, value):
    k = make().set_params(**{param: value})  # accepted when set: checked at use
    name = param.split("__")[-1]
    owner = type(k.static if param.startswith("static__") else k).__name__
    for use in (lambda: k.gram(X), lambda: k.diag(X), lambda: k.fit(X)):
        with pytest.raises(
            InvalidParameterError, match=rf"^The '{name}' parameter of {owner} must be .* Got "
        ):
            use()


def test_static_set_params_checked_at_use():
    rbf = tk.RBF(1.0).set_params(sigma=-3)
    with pytest.raises(
        InvalidParameterError,
        match=r"^The 'sigma' parameter of RBF must be a float in the range \(0\.0, inf\)\. "
        r"Got -3 instead\.$",
    ):
        rbf.gram(np.ones((2, 2)))


def test_parameters_checked_once_per_call(monkeypatch):
    k = tk.FlattenedKernel(tk.RBF(1.0), block_size=1)  # 21 blocks
    calls = []
    original = tk.Kernel._check_parameters
    monkeypatch.setattr(
        tk.Kernel, "_check_parameters", lambda self: (calls.append(1), original(self))[1]
    )
    k.gram(X, normalize=True)
    assert len(calls) == 1


# ------------------------------------------------------------------ tags
def test_registry_reads_the_tags():
    for _, spec in SPECS:
        tags = spec.cls.get_tags()
        assert spec.unequal_length is tags["unequal_length"]
        assert spec.get_tag("gpu") is tags["gpu"] and spec.needs_fit is tags["needs_fit"]
        assert spec.cls.supports_unequal_length is tags["unequal_length"]
        assert set(tags["backends"]) <= {"numba", "torch"} and "torch" in tags["backends"]
        assert tags["symmetric"] is True
        if tags["needs_fit"]:
            assert not tags["fit_is_empty"]
    gak = tk.GAK.get_tags()
    assert not gak["fit_is_empty"] and gak["log_space"] and not gak["needs_fit"]
    ts = tk.TruncatedSignatureKernel.get_tags()
    assert ts["gram_levels"] and ts["first_level"] == 1
    assert not tk.FlattenedKernel.get_tag("unequal_length")


def test_first_level_tag_matches_gram_levels():
    k = tk.TruncatedSignatureKernel(level=3, scale=0.5)
    levels = k.gram_levels(X)
    first = k.get_tag("first_level")
    for i in range(levels.shape[0]):
        ki = tk.TruncatedSignatureKernel(level=first + i, scale=0.5)
        torch.testing.assert_close(levels[i], ki.gram(X), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ execution
@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: tk.GAK(sigma=1.3, **kw),
        lambda **kw: tk.GAK(sigma=1.3, normalized=False, triangular=4, **kw),
        lambda **kw: tk.VolterraReservoirKernel(0.5, 0.6, **kw),
        lambda **kw: tk.SignaturePDEKernel(tk.RBF(1.0), scale=0.5, dyadic_order=1, **kw),
        lambda **kw: tk.TruncatedSignatureKernel(level=3, scale=0.5, **kw),
        lambda **kw: tk.TruncatedSignatureKernel(
            tk.RBF(1.0), level=3, discretization="order1", levels="single", **kw
        ),
    ],
)
def test_backends_agree_through_the_public_parameter(make):
    rng = np.random.default_rng(5)
    A = [0.5 * rng.normal(size=(L, 2)) for L in (7, 9, 5, 8)]
    B = [0.5 * rng.normal(size=(L, 2)) for L in (6, 9)]
    numba_k, torch_k = make(backend="numba"), make(backend="torch")
    for args in ((A,), (A, B)):
        for normalize in (False, True):
            torch.testing.assert_close(
                torch_k.gram(*args, normalize=normalize),
                numba_k.gram(*args, normalize=normalize),
                rtol=1e-11,
                atol=1e-300,
            )
    torch.testing.assert_close(torch_k.diag(A), numba_k.diag(A), rtol=1e-11, atol=1e-300)


def test_backend_errors_name_the_problem():
    with pytest.raises(ValueError, match="`backend` 'numba' is not available"):
        tk.FlattenedKernel(backend="numba").gram(X)
    if not torch.cuda.is_available():
        return
    with pytest.raises(ValueError, match="backend='numba' runs on the CPU only"):
        tk.GAK(backend="numba", device="cuda").gram(X)


def test_log_space_normalisation_is_overflow_safe():
    """normalize=True on a raw GAK goes through the log-space path: finite where the raw
    values overflow float64, equal to the normalised GAK."""
    Z = np.random.default_rng(2).normal(size=(3, 500, 1))
    raw = tk.GAK(sigma=5.0, normalized=False)
    with pytest.raises(tk.NonFiniteKernelError):
        raw.gram(Z)
    ref = tk.GAK(sigma=5.0).gram(Z)
    torch.testing.assert_close(raw.gram(Z, normalize=True), ref, rtol=1e-12, atol=0)


def test_normalised_cross_gram_computes_each_diagonal_once(monkeypatch):
    k = tk.SignaturePDEKernel(tk.Linear(), scale=0.3, dyadic_order=1)
    A, B = X[:4], X[4:]
    calls = []
    original = tk.SignaturePDEKernel._diag
    monkeypatch.setattr(
        tk.SignaturePDEKernel, "_diag", lambda self, Z: (calls.append(Z.n), original(self, Z))[1]
    )
    k.gram(A, B, normalize=True)
    assert sorted(calls) == [2, 4]  # K(x, x) of A and of B, once each
    calls.clear()
    k.gram(A, B)  # not normalised: still checked once each (finite, positive)
    assert sorted(calls) == [2, 4]


def test_no_private_helper_shared_between_numba_cores():
    import tskernels._signature_pde_numba as pde

    src = open(pde.__file__).read()
    assert "_gak_numba" not in src and "from ._math_numba import _exp_nonpos" in src


def test_log_space_tag_needs_the_log_hooks():
    # a kernel tagged log_space must define its log-space evaluation: checked at definition
    from tskernels import Kernel

    with pytest.raises(TypeError, match="tagged log_space but does not define _log_gram_block"):

        class NoLog(Kernel):  # noqa: F841
            _tags = {"log_space": True}

            def _gram_block(self, X, Y, symmetric):
                return X.values.sum((1, 2))[:, None] * Y.values.sum((1, 2))[None, :]

            def _diag(self, X):
                return X.values.sum((1, 2)) ** 2

            def _log_diag(self, X):
                return self._diag(X).log()


def test_parameter_names_are_read_once_per_class_and_never_inherited():
    """The ``__init__`` names are cached on each class itself: a subclass with other
    parameters gets its own, not its parent's."""
    import tskernels as tk

    class Scaled(tk.FlattenedKernel):
        def __init__(self, static=None, *, factor=2.0, **kwargs):
            super().__init__(static, **kwargs)
            self.factor = factor

    base = tk.FlattenedKernel._get_param_names()
    assert tk.FlattenedKernel._get_param_names() == base  # the cached answer
    assert "factor" not in base
    assert Scaled._get_param_names() == sorted([*base, "factor"])
    assert Scaled(factor=3.0).get_params(deep=False)["factor"] == 3.0
