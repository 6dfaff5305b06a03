"""The GramScorer contract, for every scorer of ``novelty.scorer_registry()``.

Oracles: an obvious outlier group (a far cluster must score above every inlier), refits per
(axis value, rank) for ``sweep``, and scikit-learn's ``clone`` / ``check_is_fitted``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from novelty import GramScorer, KNNScorer, scorer_registry
from novelty.scorers._scorer_registry import scorer_name

NAMES = list(scorer_registry())
#: A bad value per scorer parameter (each must fail at fit, however it was set).
BAD = {
    "alpha": -1.0,
    "threshold": -1e-3,
    "max_rank": 0,
    "n_neighbors": 0,
    "aggregate": "median",
    "nu": 0.0,
    "lr": 0.5,
    "max_iter": 0,
    "tol": float("nan"),
    "seed": -1,
    "filter": "gauss",
    "lam": 0.0,
    "iterations": 0,
}


def _rbf(A, B, sigma=1.0):
    return np.exp(-((A[:, None] - B[None]) ** 2).sum(-1) / (2 * sigma**2))


@pytest.fixture(scope="module")
def problem():
    """RBF Grams (normalised, entrywise positive, PSD: every scorer accepts them) of a
    Gaussian corpus, Gaussian inliers and a far cluster of outliers."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    inliers = rng.normal(size=(10, 2)) * 0.5
    outliers = rng.normal(size=(5, 2)) * 0.3 + 4.0
    Y = np.concatenate([inliers, outliers])
    return _rbf(X, X, 1.5), _rbf(Y, X, 1.5), np.ones(len(Y)), len(inliers)


def _make(name):
    return scorer_registry()[name]()


def test_registry_lists_gram_scorers_with_consistent_tags():
    assert NAMES == [
        "conformance",
        "mahalanobis",
        "sse",
        "sosrep",
        "knn",
        "mean_embedding",
        "ocsvm",
    ]
    for name, cls in scorer_registry().items():
        assert issubclass(cls, GramScorer)
        assert scorer_name(cls) == name and scorer_name(cls()) == name
        params = set(cls().get_params())
        assert params == set(cls._parameter_constraints), name  # every parameter declared
        assert cls.sweep_axis is None or cls.sweep_axis in params
        assert cls.rank_param is None or (cls.rank_param in params and cls.sweep_axis)
    with pytest.raises(TypeError):
        scorer_registry()["lof"] = KNNScorer  # read-only


@pytest.mark.parametrize("name", NAMES)
def test_scores_shape_finite_and_outliers_higher(problem, name):
    K, Kt, dt, n_in = problem
    scorer = _make(name).fit(K)
    for args in ((Kt, dt), (torch.from_numpy(Kt), torch.from_numpy(dt))):
        s = scorer.score(*args)
        assert isinstance(s, np.ndarray) and s.dtype == np.float64 and s.shape == (len(Kt),)
        assert np.isfinite(s).all()
        # higher = more novel: every far point above every inlier
        assert s[n_in:].min() > s[:n_in].max(), name
    assert scorer.score(Kt[:0], dt[:0]).shape == (0,)


@pytest.mark.parametrize("name", NAMES)
def test_not_fitted_error_before_fit(problem, name):
    K, Kt, dt, _ = problem
    scorer = _make(name)
    with pytest.raises(NotFittedError, match="not fitted"):
        scorer.score(Kt, dt)
    if scorer.sweep_axis is not None:
        with pytest.raises(NotFittedError):
            scorer.sweep(Kt, dt, [getattr(scorer, scorer.sweep_axis)])


@pytest.mark.parametrize("name", NAMES)
def test_clone_round_trip(problem, name):
    K, Kt, dt, _ = problem
    scorer = _make(name)
    params = {p: v for p, v in scorer.get_params().items() if p in ("alpha", "lam", "nu", "tol")}
    scorer.set_params(**{p: v * 2 for p, v in params.items() if p != "nu"})
    fitted = scorer.fit(K)
    twin = clone(fitted)
    assert twin.get_params() == fitted.get_params()
    assert repr(twin) == repr(fitted)  # sklearn's repr: the non-default parameters
    assert not hasattr(twin, "n_corpus_")  # clone carries parameters only
    np.testing.assert_array_equal(twin.fit(K).score(Kt, dt), fitted.score(Kt, dt))


@pytest.mark.parametrize("name", NAMES)
def test_set_params_cannot_bypass_constraints(problem, name):
    K, Kt, dt, _ = problem
    for param in _make(name).get_params():
        bad = BAD[param]
        with pytest.raises(ValueError, match=param):
            _make(name).set_params(**{param: bad}).fit(K)
        # a fitted scorer whose parameter is set to a bad value refuses to score
        fitted = _make(name).fit(K)
        fitted.set_params(**{param: bad})
        with pytest.raises(ValueError, match=param):
            fitted.score(Kt, dt)


@pytest.mark.parametrize("name", NAMES)
def test_bool_and_non_finite_parameters_rejected(problem, name):
    K = problem[0]
    for param, value in _make(name).get_params().items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            with pytest.raises(ValueError, match=param):
                _make(name).set_params(**{param: True}).fit(K)


SWEEPS = [n for n in NAMES if scorer_registry()[n].sweep_axis is not None]


@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_equals_refit_per_point(problem, name):
    K, Kt, dt, _ = problem
    cls = scorer_registry()[name]
    axis, rank = cls.sweep_axis, cls.rank_param
    values = [1e-6, 1e-3, 1e-1]
    ranks = [1, 3, 50] if rank else None
    scorer = cls().fit(K)
    got = scorer.sweep(Kt, dt, values, ranks)
    assert got.shape == (len(values), len(ranks) if rank else 1, len(Kt))
    for a, v in enumerate(values):
        for r, rk in enumerate(ranks or [None]):
            params = {axis: v} if rk is None else {axis: v, rank: rk}
            ref = clone(scorer).set_params(**params).fit(K).score(Kt, dt)
            np.testing.assert_allclose(got[a, r], ref, rtol=1e-12, atol=1e-12)
    if rank:  # ranks=None: every rank 1..M kept at fit
        every = scorer.sweep(Kt, dt, values)
        assert every.shape == (len(values), scorer.n_components_, len(Kt))
        np.testing.assert_array_equal(every[:, [0, 2]], got[:, :2])
    default = scorer.sweep(Kt, dt)  # the scorer's own axis value
    np.testing.assert_allclose(default[0, -1], scorer.score(Kt, dt), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_bad_inputs(problem, name):
    K, Kt, dt, _ = problem
    scorer = scorer_registry()[name]().fit(K)
    axis = scorer.sweep_axis
    with pytest.raises(ValueError, match="empty"):
        scorer.sweep(Kt, dt, [])
    with pytest.raises(ValueError, match=axis):
        scorer.sweep(Kt, dt, [1e-3, -1.0])
    with pytest.raises(ValueError, match="sequence"):
        scorer.sweep(Kt, dt, 1e-3)
    if scorer.rank_param:
        with pytest.raises(ValueError, match="ranks"):
            scorer.sweep(Kt, dt, [1e-3], [0])
        with pytest.raises(ValueError, match="max_rank"):
            scorer.sweep(Kt, dt, [1e-3], [scorer.max_rank + 1])
    else:
        with pytest.raises(ValueError, match="rank"):
            scorer.sweep(Kt, dt, [1e-3], [1])


@pytest.mark.parametrize("name", sorted(set(NAMES) - set(SWEEPS)))
def test_no_sweep_without_axis(problem, name):
    K, Kt, dt, _ = problem
    with pytest.raises(NotImplementedError, match="no hyper-parameter axis"):
        _make(name).fit(K).sweep(Kt, dt, [1.0])


def test_diag_required_only_where_used(problem):
    K, Kt, dt, _ = problem
    for name in NAMES:
        scorer = _make(name).fit(K)
        if scorer.requires_diag:
            with pytest.raises(ValueError, match="k_test_diag"):
                scorer.score(Kt, None)
        else:
            np.testing.assert_array_equal(scorer.score(Kt), scorer.score(Kt, dt))


def test_pairwise_tag():
    for cls in scorer_registry().values():
        assert cls().__sklearn_tags__().input_tags.pairwise


# scikit-learn's estimator checks, with the pairwise tag: the checks feed a Gram of their raw
# data (a linear kernel) to fit. What cannot pass, and why (measured with scikit-learn 1.9;
# every other check passes):
_ALL = {
    "check_fit_score_takes_y": "score(K_test, diag_test) is per-point novelty, not score(X, y)",
    "check_n_features_in": "a Gram scorer records n_corpus_ (the Gram's size), no features",
    "check_n_features_in_after_fitting": "a Gram scorer records n_corpus_, no features",
    "check_dtype_object": "object arrays are refused with a TypeError naming the dtype",
    "check_complex_data": "complex Grams are refused with a TypeError naming the dtype",
    "check_estimator_sparse_array": "Grams are dense; sparse input is refused (TypeError)",
    "check_estimator_sparse_matrix": "Grams are dense; sparse input is refused (TypeError)",
    "check_estimator_sparse_tag": "Grams are dense; sparse input is refused (TypeError)",
    "check_estimators_empty_data_messages": "the message names `K_corpus`, not features",
    "check_fit2d_1sample": "the message says a corpus needs at least 2 points (its words; kNN "
    "fits one point)",
}
_NOT_PSD = "sklearn's integer test data give an indefinite Gram, which is refused"
_NEGATIVE = "negative Gram entries: refused (not PSD / SOSREP leaves the positive orthant)"
_PER_SCORER = {
    "conformance": {"check_estimators_dtypes": _NOT_PSD},
    "mahalanobis": {"check_estimators_dtypes": _NOT_PSD},
    "mean_embedding": {
        "check_estimators_dtypes": _NOT_PSD,
        "check_positive_only_tag_during_fit": _NEGATIVE,
        "check_pipeline_consistency": "score(X, y) would read y as diag_test",
    },
    "ocsvm": {"check_estimators_dtypes": _NOT_PSD, "check_positive_only_tag_during_fit": _NEGATIVE},
    "knn": {"check_pipeline_consistency": "score(X, y) would read y as diag_test"},
    # (a Gram with negative entries is fitted with signs free since issue 34, item 3)
    "sosrep": {"check_positive_only_tag_during_fit": _NEGATIVE},
}
# SpectralSupport needs a normalised Gram (k(x, x) = 1); sklearn's linear Grams are not
_SSE = "SpectralSupport needs k(x, x) = 1; sklearn's linear-kernel Gram is not normalised"
_PER_SCORER["sse"] = {
    c: _SSE
    for c in (
        "check_dont_overwrite_parameters",
        "check_dict_unchanged",
        "check_estimators_dtypes",
        "check_estimators_fit_returns_self",
        "check_estimators_nan_inf",
        "check_estimators_overwrite_params",
        "check_f_contiguous_array_estimator",
        "check_fit2d_1feature",
        "check_fit2d_predict1d",
        "check_fit_check_is_fitted",
        "check_fit_idempotent",
        "check_methods_sample_order_invariance",
        "check_methods_subset_invariance",
        "check_pipeline_consistency",
        "check_positive_only_tag_during_fit",
        "check_readonly_memmap_input",
    )
}


def _expected_failed(estimator):
    expected = {**_ALL, **_PER_SCORER.get(scorer_name(estimator), {})}
    if estimator.min_corpus == 1:  # kNN scores against a single corpus point
        del expected["check_fit2d_1sample"]
    return expected


@parametrize_with_checks(
    [cls() for cls in scorer_registry().values()], expected_failed_checks=_expected_failed
)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


# ---------------------------------------------------------------------------- the detector
def _series(n, T=10, d=2, shift=0.0, seed=0):
    return np.random.default_rng(seed).normal(size=(n, T, d)) + shift


@pytest.mark.parametrize("name", ["knn", "mahalanobis", "sse"])
def test_detector_takes_a_scorer_instance_like_its_name(name):
    from novelty import KernelNoveltyDetector
    from tskernels import RBF, FlattenedKernel

    X, Y = _series(20), np.concatenate([_series(4, seed=1), _series(2, shift=4.0, seed=2)])
    kernel = FlattenedKernel(RBF(3.0))
    params = {"knn": {"n_neighbors": 3}, "mahalanobis": {"threshold": 1e-8}, "sse": {"lam": 1e-2}}
    by_name = KernelNoveltyDetector(kernel, scorer=name, scorer_params=params[name]).fit(X)
    cls = scorer_registry()[name]
    instance = cls(**params[name], **({"alpha": 1e-2, "max_rank": 50} if cls.rank_param else {}))
    by_instance = KernelNoveltyDetector(kernel, scorer=instance).fit(X)
    np.testing.assert_array_equal(by_instance.score_samples(Y), by_name.score_samples(Y))
    assert isinstance(by_instance.scorer_, cls) and by_instance.scorer_ is not instance
    assert not hasattr(instance, "n_corpus_")  # the detector fits a clone


def test_detector_scorer_params_grid_and_nested_params():
    from sklearn.model_selection import GridSearchCV

    from novelty import KernelNoveltyDetector
    from tskernels import RBF, FlattenedKernel

    X = _series(30)
    y = np.zeros(30, dtype=int)
    kernel = FlattenedKernel(RBF(3.0))
    # scorer_params tuned as a whole; a scorer instance's own parameters as scorer__<param>
    for est, grid in (
        (
            KernelNoveltyDetector(kernel),
            {"scorer_params": [{"n_neighbors": 1}, {"n_neighbors": 3}]},
        ),
        (
            KernelNoveltyDetector(kernel, scorer=KNNScorer(), contamination=0.2),
            {"scorer__n_neighbors": [1, 3]},
        ),
    ):
        search = GridSearchCV(
            est, grid, cv=2, scoring=lambda e, X, y: float(e.score_samples(X).mean())
        )
        search.fit(X, y)
        assert len(search.cv_results_["params"]) == 2
    det = KernelNoveltyDetector(kernel, scorer=KNNScorer()).set_params(scorer__n_neighbors=4)
    assert det.fit(X).scorer_.n_neighbors == 4


def test_detector_rejects_bad_scorer_params_before_any_gram():
    from novelty import KernelNoveltyDetector
    from tskernels import RBF, FlattenedKernel

    X = _series(10)
    kernel = FlattenedKernel(RBF(3.0))
    with pytest.raises(ValueError, match="unknown parameter.*'k'.*n_neighbors"):
        KernelNoveltyDetector(kernel, scorer="knn", scorer_params={"k": 3}).fit(X)
    with pytest.raises(ValueError, match="aggregate"):
        KernelNoveltyDetector(kernel, scorer_params={"aggregate": "median"}).fit(X)
    with pytest.raises(ValueError, match="lam"):
        KernelNoveltyDetector(kernel, scorer="sse", scorer_params={"lam": -1.0}).fit(X)
    with pytest.raises(ValueError, match="scorer instance"):
        KernelNoveltyDetector(kernel, scorer=KNNScorer(), scorer_params={"n_neighbors": 2}).fit(X)
    with pytest.raises(ValueError, match="n_neighbors"):
        KernelNoveltyDetector(kernel, scorer=KNNScorer(0)).fit(X)
    with pytest.raises(ValueError, match="normalize"):
        KernelNoveltyDetector(kernel, scorer=scorer_registry()["sse"](), normalize=False).fit(X)
    with pytest.raises(ValueError, match="GramScorer"):
        KernelNoveltyDetector(kernel, scorer=object()).fit(X)
