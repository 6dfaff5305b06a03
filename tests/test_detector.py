"""KernelNoveltyDetector (scikit-learn checks, every scorer x kernel) and the Gram baselines."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.svm import OneClassSVM
from sklearn.utils.estimator_checks import check_estimator

import tskernels
from novelty import (
    SCORERS,
    KernelNoveltyDetector,
    KNNScorer,
    MeanEmbeddingScorer,
    OCSVMScorer,
    VarianceNorm,
)
from tskernels import GAK, RBF, FlattenedKernel, IntegralKernel, Linear

# ``contamination`` is the share of *new* normal series that predict may flag (a conformal
# guarantee from held-out scores), not the share of training series flagged in-sample: a
# corpus series scores as part of the corpus (conformance 0, 1-NN distance 0), so in-sample
# flags fall short of it by design. These two checks count in-sample flags.
IN_SAMPLE = {
    "check_outliers_train": "contamination calibrates new series, not training series",
    "check_outliers_fit_predict": "contamination calibrates new series, not training series",
}
# With missing="interpolate" (the default) the tag allow_nan is set, so check_estimators_pickle
# puts NaN in its (30, 3) blobs: a trailing NaN of a 2-D (n, T) array is padding, so some
# series have 2 steps and others 3, and IntegralKernel's Gram on those unequal lengths is not
# positive semi-definite to these scorers' tolerance (the same with the series given as a
# list and missing="error": a limit of the kernel on unequal lengths, not of the NaN reading)
UNEQUAL_NOT_PSD = {"conformance", "mahalanobis", "sse", "mean_embedding", "ocsvm"}


# The detector's wrapper is the same code for every scorer, so CI runs scikit-learn's checks
# with "knn" (the default scorer) and "conformance" (refitted held-out models); the others are
# marked slow to keep the suite within budget (22-46 s each at load 1 on 2 cores; their scorer
# classes pass scikit-learn's checks on their own in tests/test_scorer_contract.py), as is
# kernel=None, the default recipe (about 40 fits, each refitting MiniRocket's 10,000 features
# and power transform for 10 calibration folds: 830 s on 2 cores at load 6; the default's fit,
# predict, pickling and clone are tested on their own below and elsewhere)
FAST_CHECKS = ("knn", "conformance")


@pytest.mark.parametrize(
    "scorer",
    [pytest.param(None, marks=pytest.mark.slow)]
    + [s if s in FAST_CHECKS else pytest.param(s, marks=pytest.mark.slow) for s in SCORERS],
)
def test_sklearn_checks(scorer):
    # scikit-learn's checks feed 2-D (n_samples, n_features) arrays: read as n univariate
    # series, the reading layout="univariate" declares (without it a 2-D array is an error)
    if scorer is None:
        est = KernelNoveltyDetector(layout="univariate")
    else:
        est = KernelNoveltyDetector(IntegralKernel(RBF(2.0)), scorer=scorer, layout="univariate")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, on_fail=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    expected = set(IN_SAMPLE) | (
        {"check_estimators_pickle"} if scorer in UNEQUAL_NOT_PSD else set()
    )
    assert failed <= expected, failed
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}, skipped  # needs SCIPY_ARRAY_API
    assert sum(r["status"] == "passed" for r in results) >= 40


def _series(n, T=12, d=2, shift=0.0, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, T)
    base = np.stack([np.sin(t + k) for k in range(d)], axis=1)
    return base[None] + 0.2 * rng.normal(size=(n, T, d)) + shift


REGISTRY = tskernels.kernel_registry()


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.parametrize("scorer", SCORERS)
def test_every_scorer_on_every_kernel(name, scorer):
    X = _series(14, seed=1)
    Y = np.concatenate([_series(4, seed=2), _series(4, seed=3)[:, ::-1] * 3])
    det = KernelNoveltyDetector(REGISTRY[name].example(), scorer=scorer, alpha=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SOSREP on Grams with negative entries
        try:
            det.fit(X)
        except FloatingPointError as err:  # SOSREP left the positive orthant: said clearly
            assert scorer == "sosrep" and "non-negative" in str(err)
            return
    s = det.score_samples(Y)
    assert s.shape == (8,) and s.dtype == np.float64
    assert np.isfinite(s).all() or scorer == "sosrep"
    np.testing.assert_allclose(det.decision_function(Y), s - det.offset_)
    assert set(det.predict(Y)) <= {-1, 1}


def test_scores_rank_anomalies_below_normals():
    X = _series(30, seed=4)
    # moderate anomalies (a bump on one channel): the variance norm sees a point only
    # through its kernel values against the corpus, so it needs anomalies within reach of
    # the bandwidth
    normal, odd = _series(10, seed=5), _series(10, seed=6)
    odd[:, 4:8, 0] += 1.5
    y = np.r_[np.ones(10), np.zeros(10)]
    kernel = IntegralKernel(RBF(3.0))
    for scorer in SCORERS:
        det = KernelNoveltyDetector(kernel, scorer=scorer, alpha=1e-3).fit(X)
        auc = roc_auc_score(y, det.score_samples(np.concatenate([normal, odd])))
        # conformance (nearest corpus point in the whitened metric) is the noisiest here
        assert auc > (0.7 if scorer == "conformance" else 0.85), (scorer, auc)


def test_threshold_is_the_conformal_quantile_of_leave_one_out_scores():
    X = _series(9, seed=7)
    kernel = IntegralKernel(RBF(2.0))
    det = KernelNoveltyDetector(kernel, scorer="mahalanobis", contamination=0.2).fit(X)
    Xp = det.preprocessor_.transform(X)
    K = kernel.gram(Xp, normalize=True).numpy()
    loo = []
    for i in range(9):
        keep = np.delete(np.arange(9), i)
        vn = VarianceNorm().fit(K[np.ix_(keep, keep)])
        loo.append(float(vn.mahalanobis(K[i : i + 1, keep], 1e-2)[0]))
    np.testing.assert_allclose(det.calibration_scores_, loo, rtol=1e-12)
    # floor(0.2 * 10) = 2: the second largest held-out score is the threshold
    assert det.offset_ == pytest.approx(-np.sort(loo)[-2], rel=1e-12)


def test_knn_calibration_is_exact_leave_one_out():
    X = _series(25, seed=8)
    kernel = FlattenedKernel(RBF(3.0))
    for params in ({}, {"n_neighbors": 3, "aggregate": "mean"}, {"n_neighbors": 2}):
        det = KernelNoveltyDetector(kernel, scorer="knn", scorer_params=params).fit(X)
        Xp = det.preprocessor_.transform(X)
        for i in (0, 7, 24):
            keep = np.delete(np.arange(25), i)
            ref = KernelNoveltyDetector(
                kernel, scorer="knn", scorer_params=params, preprocess=False
            ).fit(Xp[keep])
            got = det.calibration_scores_[i]
            assert got == pytest.approx(-ref.score_samples(Xp[i : i + 1])[0], rel=1e-10)


def test_predict_fraction_on_fresh_normals():
    det = KernelNoveltyDetector(scorer="knn", contamination=0.1).fit(_series(60, seed=8))
    inliers = (det.predict(_series(200, seed=9)) == 1).mean()
    assert 0.8 <= inliers <= 1.0
    assert (det.predict(_series(5, seed=10) + 4.0) == -1).all()


def test_detector_matches_gram_level_scorer():
    X, Y = _series(12, seed=11), _series(5, seed=12)
    kernel = IntegralKernel(RBF(1.5))
    det = KernelNoveltyDetector(kernel, scorer="conformance", alpha=1e-5, rank=4).fit(X)
    Xp, Yp = det.preprocessor_.transform(X), det.preprocessor_.transform(Y)
    vn = VarianceNorm(max_rank=4).fit(kernel.gram(Xp, normalize=True))
    ref = vn.conformance(kernel.gram(Yp, Xp, normalize=True), 1e-5).numpy()
    np.testing.assert_allclose(det.score_samples(Y), -ref, rtol=1e-12)


def test_univariate_2d_equals_3d_and_lists():
    X, Y = _series(10, d=1, seed=13), _series(3, d=1, seed=18)
    uni = KernelNoveltyDetector(layout="univariate")
    a = uni.fit(X[:, :, 0]).score_samples(Y[:, :, 0])
    b = KernelNoveltyDetector().fit(X).score_samples(Y)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    # one recording (T, d) as a 2-D array: layout="single" reads it as X[None]
    one = KernelNoveltyDetector(layout="single").fit(X[0])
    np.testing.assert_allclose(
        one.score_samples(Y[1]), KernelNoveltyDetector().fit(X[:1]).score_samples(Y[1:2])
    )
    # a list is read as unequal-length input (z-scored per channel), without preprocessing
    # it must agree with the array
    c = KernelNoveltyDetector(preprocess=False).fit(list(X)).score_samples(list(Y))
    d = KernelNoveltyDetector(preprocess=False).fit(X).score_samples(Y)
    np.testing.assert_allclose(c, d, rtol=1e-12)


def test_2d_array_without_layout_is_an_error_naming_both_readings():
    X = np.random.default_rng(0).normal(size=(50, 3))
    with pytest.raises(ValueError, match=r"X\[None\] .*X\[\.\.\., None\].*layout="):
        KernelNoveltyDetector().fit(X)
    det = KernelNoveltyDetector().fit(X[None].repeat(3, axis=0))
    with pytest.raises(ValueError, match="reads two ways"):
        det.score_samples(X)
    with pytest.raises(ValueError, match="The 'layout' parameter of KernelNoveltyDetector must be"):
        KernelNoveltyDetector(layout="rows").fit(X[None])


def test_unequal_lengths():
    rng = np.random.default_rng(14)
    X = [rng.normal(size=(T, 2)) for T in rng.integers(8, 15, size=10)]
    det = KernelNoveltyDetector(IntegralKernel(RBF(2.0), n_grid=20)).fit(X)
    assert det.score_samples([rng.normal(size=(9, 2))]).shape == (1,)


def test_grid_search_and_pipeline():
    odd = _series(8, seed=16)
    odd[:, 4:8, 0] += 0.8
    X = np.concatenate([_series(24, seed=15), odd])
    y = np.r_[np.ones(24), np.zeros(8)]

    def auc(est, X, y):
        return roc_auc_score(y, est.score_samples(X))

    pipe = Pipeline(
        [("scale", FunctionTransformer(lambda Z: 2.0 * Z)), ("det", KernelNoveltyDetector())]
    )
    grid = GridSearchCV(
        pipe,
        {
            "det__kernel": [IntegralKernel(RBF(1.0))],
            "det__kernel__static__sigma": [0.5, 2.0],
            "det__alpha": [1e-8, 1e-2],
        },
        scoring=auc,
        cv=StratifiedKFold(3, shuffle=True, random_state=0),
    ).fit(X, y)
    assert set(grid.best_params_) == {"det__kernel", "det__kernel__static__sigma", "det__alpha"}
    assert grid.best_score_ > 0.7


def test_normal_label_fits_on_the_normal_series_only():
    normal = _series(20, seed=21)
    odd = _series(6, seed=22)
    odd[:, 4:8, 0] += 2.0
    X, y = np.concatenate([normal, odd]), np.r_[np.ones(20), np.zeros(6)]
    kernel = IntegralKernel(RBF(2.0))
    det = KernelNoveltyDetector(kernel, scorer="mahalanobis", normal_label=1).fit(X, y)
    ref = KernelNoveltyDetector(kernel, scorer="mahalanobis").fit(normal)
    np.testing.assert_allclose(det.score_samples(X), ref.score_samples(X), rtol=1e-12)
    assert det.offset_ == ref.offset_
    # without normal_label, y is ignored and the outliers join the corpus
    mixed = KernelNoveltyDetector(kernel, scorer="mahalanobis").fit(X, y)
    assert not np.allclose(mixed.score_samples(X), ref.score_samples(X))
    # a list (the unequal-length form, its own pre-processing: compared without) the same way
    plain = {"scorer": "mahalanobis", "preprocess": False}
    as_list = KernelNoveltyDetector(kernel, normal_label=1, **plain).fit(list(X), y)
    ref_list = KernelNoveltyDetector(kernel, **plain).fit(normal)
    np.testing.assert_allclose(as_list.score_samples(X), ref_list.score_samples(X), rtol=1e-12)
    with pytest.raises(ValueError, match="labels for"):
        KernelNoveltyDetector(kernel, normal_label=1).fit(X, y[:-1])
    with pytest.raises(ValueError, match="normal_label=5"):
        KernelNoveltyDetector(kernel, normal_label=5).fit(X, y)


def test_bad_inputs():
    X = _series(6)
    with pytest.raises(ValueError, match="empty"):
        KernelNoveltyDetector().fit(np.zeros((0, 5, 2)))
    bad = X.copy()
    bad[2, 3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KernelNoveltyDetector(missing="error").fit(bad)  # the default interpolates NaN gaps
    det = KernelNoveltyDetector(missing="error").fit(X)
    with pytest.raises(ValueError, match="channel mismatch"):
        det.score_samples(_series(2, d=3))
    with pytest.raises(ValueError, match="NaN"):
        det.score_samples(bad)
    with pytest.raises(ValueError, match="scorer"):
        KernelNoveltyDetector(scorer="lof").fit(X)
    for c in (0.0, 0.6, -0.1, True, "5%"):
        with pytest.raises(ValueError, match="contamination"):
            KernelNoveltyDetector(contamination=c).fit(X)
    with pytest.raises(ValueError, match="'kernel' parameter.*Registered kernels: .*gak"):
        KernelNoveltyDetector(kernel="best").fit(X)
    with pytest.raises(ValueError, match=r"tskernels.make_kernel\('gak'\)"):
        KernelNoveltyDetector(kernel="gak").fit(X)
    with pytest.raises(ValueError, match="normalize"):
        KernelNoveltyDetector(IntegralKernel(RBF(1.0)), scorer="sse", normalize=False).fit(X)
    with pytest.raises(ValueError, match="complex"):
        KernelNoveltyDetector().fit(X.astype(complex))


def test_several_labels_without_normal_label_warn():
    X = _series(8)
    kernel = FlattenedKernel(RBF(3.0))
    with pytest.warns(UserWarning, match=r"y holds 2 labels \('a', 'b'\).*normal_label"):
        det = KernelNoveltyDetector(kernel).fit(X, np.array(list("aaaabbbb")))
    assert det.n_corpus_ == 8  # ignored, as scikit-learn's convention says
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="fit\\(X, y\\)")  # one label / normal_label set
        KernelNoveltyDetector(kernel).fit(X, np.zeros(8))
        assert (
            KernelNoveltyDetector(kernel, normal_label="a").fit(X, list("aaaabbbb")).n_corpus_ == 4
        )


def test_default_recipe_sklearn_essentials():
    """What scikit-learn's checks ask of the default recipe, in a few fits: clone, fit returns
    self, predict in {-1, +1} consistent with decision_function, a pickle round trip scoring
    identically, 2-D input read as univariate series, and fitting twice giving the same."""
    import pickle

    from sklearn.base import clone

    rng = np.random.default_rng(0)
    X = rng.normal(size=(25, 8))  # 25 univariate series, scikit-learn's (n, T) layout
    est = KernelNoveltyDetector(layout="univariate")
    det = clone(est)
    assert det.fit(X) is det and det.n_corpus_ == 25 and det.n_features_in_ == 8
    Y = np.r_[rng.normal(size=(5, 8)), rng.normal(size=(5, 8)) + 6.0]
    pred, dec = det.predict(Y), det.decision_function(Y)
    assert set(pred.tolist()) <= {-1, 1} and np.array_equal(pred == -1, dec < 0)
    assert np.all(pred[5:] == -1)
    again = pickle.loads(pickle.dumps(det))
    np.testing.assert_array_equal(again.score_samples(Y), det.score_samples(Y))
    np.testing.assert_array_equal(clone(est).fit(X).score_samples(Y), det.score_samples(Y))
    assert est.get_params() == KernelNoveltyDetector(layout="univariate").get_params()


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_corpus_scores_but_never_flags(n):
    """One or two normal series: scored against (GAK + 1-NN: the default recipe without the
    corpus-fitted MiniRocket member; and GAK with scorer="auto", which keeps the 1-NN scorer
    without selection on one series), p-values at least 1/(n+1), nothing flagged at
    contamination 0.05 (with the warning that says so)."""
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, 25, 2))
    test = np.concatenate([rng.normal(size=(6, 25, 2)), rng.normal(size=(6, 25, 2)) + 4.0])
    outs = []
    for params in ({}, {"kernel": GAK(), "scorer": "auto"}):
        with pytest.warns(UserWarning, match="no series can be flagged"):
            det = KernelNoveltyDetector(**params).fit(X)
        label = "gak+knn" if not params else "GlobalAlignmentKernel+knn"
        assert [m.spec.name for m in det.members_] == [label]
        novelty = -det.score_samples(test)
        assert novelty[6:].min() > novelty[:6].max()  # the shifted series rank first
        p = det.p_values(test)
        assert np.all(p >= 1 / (n + 1)) and np.all(det.predict(test) == 1)
        # two series: each one's 1-NN distance to the other; one series: none
        assert det.calibration_scores_.shape == ((2,) if n == 2 else (0,))
        outs.append(novelty)
    np.testing.assert_array_equal(outs[0], outs[1])  # the same GAK 1-NN member
    if n == 1:
        assert "one normal series" in det.selection_["status"].iloc[0]
    # an explicit kernel with the kNN scorer works from one series; a scorer needing two says so
    KernelNoveltyDetector(FlattenedKernel(RBF(3.0)), scorer="knn").fit(X)
    if n == 1:
        with pytest.raises(
            ValueError, match="'conformance' needs at least 2 normal series, got 1 sample"
        ):
            KernelNoveltyDetector(FlattenedKernel(RBF(3.0)), scorer="conformance").fit(X)


def test_non_psd_kernel_is_reported():
    # an indefinite similarity: negative of the linear kernel
    class Negated(FlattenedKernel):
        def _gram_block(self, X, Y, symmetric):
            return -super()._gram_block(X, Y, symmetric)

        def _diag(self, X):
            return super()._diag(X)

    for scorer in ("knn", "mahalanobis"):
        with pytest.raises(ValueError, match="positive semi-definite"):
            KernelNoveltyDetector(Negated(Linear()), scorer=scorer, normalize=False).fit(_series(8))


# ---------------------------------------------------------------- Gram-level baselines
@pytest.fixture(scope="module")
def vectors():
    rng = np.random.default_rng(17)
    return rng.normal(size=(30, 3)), rng.normal(size=(7, 3)) * 2


def test_knn_feature_space_distance(vectors):
    X, Y = vectors
    d = np.sqrt(((Y[:, None] - X[None]) ** 2).sum(-1))
    for k in (1, 3):
        got = KNNScorer(k).fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
        np.testing.assert_allclose(got, np.sort(d, axis=1)[:, k - 1], rtol=1e-10)
    with pytest.raises(ValueError, match="n_neighbors"):
        KNNScorer(31).fit(X @ X.T)
    with pytest.raises(ValueError, match="k_test_diag"):
        KNNScorer().fit(X @ X.T).score(Y @ X.T, None)


def test_mean_embedding_distance(vectors):
    X, Y = vectors
    got = MeanEmbeddingScorer().fit(X @ X.T).score(Y @ X.T, (Y**2).sum(1))
    np.testing.assert_allclose(got, np.linalg.norm(Y - X.mean(0), axis=1), rtol=1e-10)


def test_ocsvm_matches_sklearn_linear(vectors):
    X, Y = vectors
    got = OCSVMScorer(nu=0.2).fit(X @ X.T).score(torch.from_numpy(Y @ X.T))
    ref = -OneClassSVM(kernel="linear", nu=0.2).fit(X).decision_function(Y)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-8)


def test_real_data_epilepsy(uea_dir):
    # regression check on the reference data set (protocol sections 2-4); the reference's
    # cross-validated figure for conformance with the integral RBF kernel is ROC-AUC 0.943
    from experiments.data import load_uea

    try:
        Xtr, ytr = load_uea("Epilepsy", "train", data_dir=uea_dir)
        Xte, yte = load_uea("Epilepsy", "test", data_dir=uea_dir)
    except FileNotFoundError:
        pytest.skip("Epilepsy not in the shared data")
    kernel = IntegralKernel(RBF(np.e * np.sqrt(3)))  # d = 3 channels
    aucs = []
    for c in np.unique(ytr):
        det = KernelNoveltyDetector(kernel, scorer="conformance", alpha=1e-2, rank=3)
        aucs.append(roc_auc_score(yte == c, det.fit(Xtr[ytr == c]).score_samples(Xte)))
    assert np.mean(aucs) > 0.9, aucs


def test_default_members_are_the_recipe_and_the_former_pair():
    """Issue 30's default: ROCKAD's recipe (standardised MiniRocket, mean 5-NN) beside the
    former default's MiniRocket 1-NN, and its GAK 1-NN for multivariate series; GAK alone
    below 3 series."""
    from novelty.detector._auto import default_members

    X = np.random.default_rng(0).normal(size=(6, 20, 2))
    specs = default_members(X)
    assert [s.name for s in specs] == ["minirocket_std+knn(k=5)", "minirocket+knn", "gak+knn"]
    recipe = specs[0]
    assert isinstance(recipe.kernel, tskernels.RandomConvolutionKernel)
    assert recipe.kernel.power_transform is False and recipe.kernel.n_kernels == 10_000
    assert recipe.scorer == "knn"
    assert recipe.scorer_params == {"n_neighbors": 5, "aggregate": "mean"}
    assert specs[1].kernel.power_transform is True
    assert [s.name for s in default_members(X[:2])] == ["gak+knn"]
    # univariate series: no GAK (the tuning half's rule on the data's shape, issue 30)
    uni = default_members(X[..., :1])
    assert [s.name for s in uni] == ["minirocket_std+knn(k=5)", "minirocket+knn"]
    assert [s.name for s in default_members([x[:, :1] for x in X])] == [s.name for s in uni]
    assert [s.name for s in default_members(X[:2, :, :1])] == ["gak+knn"]


def test_recipe_member_equals_minirocket_standardised_knn_by_hand():
    """The recipe member's novelty is the mean Euclidean distance to the 5 nearest corpus
    series of sktime's MiniRocket features standardised on the corpus (scikit-learn), up to
    the kernel's 1/sqrt(F) scale (Linear(scale=1/F) on the features)."""
    from sklearn.neighbors import NearestNeighbors
    from sklearn.preprocessing import StandardScaler
    from sktime.transformations.panel.rocket import MiniRocketMultivariate

    from novelty.detector._auto import recipe_member
    from novelty.detector._members import Member

    rng = np.random.default_rng(3)
    X = np.cumsum(rng.normal(size=(20, 30, 2)), axis=1)
    Y = np.cumsum(rng.normal(size=(6, 30, 2)), axis=1)
    member = Member(recipe_member()).fit(tskernels.SeriesBatch.from_checked(X), {})
    got = member.novelty(tskernels.SeriesBatch.from_checked(Y))
    rocket = MiniRocketMultivariate(num_kernels=10_000, random_state=0, n_jobs=1)
    F = np.asarray(rocket.fit_transform(X.transpose(0, 2, 1)), dtype=np.float64)
    G = np.asarray(rocket.transform(Y.transpose(0, 2, 1)), dtype=np.float64)
    scaler = StandardScaler().fit(F)
    dist, _ = (
        NearestNeighbors(n_neighbors=5).fit(scaler.transform(F)).kneighbors(scaler.transform(G))
    )
    np.testing.assert_allclose(got * np.sqrt(F.shape[1]), dist.mean(axis=1), rtol=1e-6)


def test_default_is_the_mean_of_members_standardised_by_held_out_scores():
    """score_samples of the default = -mean over its members of (s - median(c)) / IQR(c),
    each member fitted alone as a one-member detector (s its novelty, c its held-out
    scores), the median and IQR taken with numpy."""
    from novelty.detector._auto import default_members

    rng = np.random.default_rng(5)
    X = np.cumsum(rng.normal(size=(24, 25, 2)), axis=1)
    Y = np.cumsum(rng.normal(size=(7, 25, 2)), axis=1) * rng.uniform(0.5, 2.0, size=(7, 1, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        det = KernelNoveltyDetector().fit(X)
        zs = []
        for spec in default_members(X):
            one = KernelNoveltyDetector(
                kernel=spec.kernel,
                scorer=spec.scorer,
                scorer_params=spec.scorer_params,
                preprocess=spec.preprocess,
                normalize=spec.normalize,
            ).fit(X)
            c = one.calibration_scores_
            q25, med, q75 = np.quantile(c, [0.25, 0.5, 0.75])
            zs.append((-one.score_samples(Y) - med) / (q75 - q25))
    np.testing.assert_allclose(-det.score_samples(Y), np.mean(zs, axis=0), rtol=1e-9, atol=1e-12)
