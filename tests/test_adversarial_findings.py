"""Findings of the adversarial run of issue 25 (items 4, 10, 11 and 14): each a clear error or
the right answer, never a bare exception, a silent clamp or NaN."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tskernels
from novelty import KernelNoveltyDetector


# ---------------------------------------------------------------- item 4: sosrep underflow
def test_sosrep_with_an_underflowing_kernel_raises_a_clear_error():
    X = np.random.default_rng(0).normal(size=(30, 20, 3))
    det = KernelNoveltyDetector(tskernels.FlattenedKernel(tskernels.RBF(0.05)), scorer="sosrep")
    with pytest.raises(ValueError, match="kernel underflows.*bandwidth is too small"):
        det.fit(X)


def test_infinite_threshold_decision_function_is_never_nan_and_agrees_with_p_values():
    # two corpus series far from the rest: their held-out sosrep scores are +inf (f underflows)
    rng = np.random.default_rng(0)
    X = rng.normal(scale=0.01, size=(30, 20, 3))
    X[0] += 100.0
    X[1] -= 100.0
    det = KernelNoveltyDetector(
        tskernels.FlattenedKernel(tskernels.RBF(1.0)), scorer="sosrep", preprocess=False
    )
    with pytest.warns(UserWarning, match=r"2 of 30 held-out novelty scores .* \+inf") as rec:
        det.fit(X)
    assert not any("use at least" in str(w.message) for w in rec)  # not the corpus size
    assert det.threshold_ == np.inf
    Y = np.r_[rng.normal(scale=0.01, size=(2, 20, 3)), np.full((1, 20, 3), 200.0)]
    assert det.score_samples(Y)[-1] == -np.inf  # +inf novelty: f underflows there too
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        dec = det.decision_function(Y)
    assert not np.isnan(dec).any()
    flagged = det.p_values(Y) <= det.contamination
    np.testing.assert_array_equal(det.predict(Y) == -1, flagged)
    np.testing.assert_array_equal(dec < 0, flagged)


# ---------------------------------------------------------------- item 10: SDO at large d
def test_sdo_sosrep_fits_at_500_columns_in_log_space():
    import density

    X = np.random.default_rng(0).normal(size=(200, 500))
    est = density.SOSREP(density.SDOKernel(a=0.05, n_features=2000)).fit(X)  # was OverflowError
    s = est.score_samples(X[:5])
    assert np.isfinite(s).all()
    assert np.isfinite(est.alpha_normalized_.numpy()).all()
    assert est.log_alpha_scale_ > 709  # exp of it is beyond float64: alpha_ cannot be formed
    with pytest.raises(ValueError, match="alpha_ is outside the float64 range"):
        est.alpha_
    # the log-space expansion is the float64 one wherever the latter is representable
    small = density.SOSREP(density.SDOKernel(a=0.05, n_features=2000)).fit(X[:, :20])
    f = small.kernel_.gram(X[:5, :20], X[:, :20]).numpy() @ small.alpha_.numpy()
    np.testing.assert_allclose(small.score_samples(X[:5, :20]), np.log(f**2), rtol=1e-9)


# ---------------------------------------------------------------- item 11: PDE backends agree
@pytest.mark.parametrize("magnitude", [1e5, 1e155])
def test_signature_pde_backends_agree_far_beyond_the_kernels_scale(magnitude):
    X = np.random.default_rng(0).normal(size=(4, 10, 2)) * magnitude
    grams = [
        tskernels.SignaturePDEKernel(tskernels.RBF(1), scale=0.25, backend=b).gram(X).numpy()
        for b in ("numba", "torch")  # numba raised "PDE diverged" at 1e155
    ]
    np.testing.assert_allclose(grams[0], grams[1], rtol=1e-12)
    assert np.isfinite(grams[0]).all() and (np.diag(grams[0]) > 1).all()
    pysiglib = pytest.importorskip("pysiglib")
    # every two points are far apart on sigma's scale: the same Gram at 1e3 (pysiglib's own
    # solver overflows at 1e155); pysiglib's RBFKernel(s) is exp(-|x - y|^2 / s)
    Z = 0.25 * X / magnitude * 1e3
    ref = pysiglib.sig_kernel_gram(Z, Z, dyadic_order=2, static_kernel=pysiglib.RBFKernel(2.0))
    np.testing.assert_allclose(grams[0], ref, rtol=1e-10)


# ---------------------------------------------------------------- item 14: the minor ones
@pytest.mark.parametrize("value", ["yes", "no", 1, None])
def test_normalize_must_be_a_bool(value):
    X = np.random.default_rng(0).normal(size=(3, 5, 2))
    k = tskernels.FlattenedKernel(tskernels.RBF(1.0))
    with pytest.raises(ValueError, match="The 'normalize' parameter of Kernel.gram must be an"):
        k.gram(X, normalize=value)
    with pytest.raises(ValueError, match="'normalize' parameter of KernelNoveltyDetector must be"):
        KernelNoveltyDetector(k, normalize=value).fit(X)
    sig = tskernels.TruncatedSignatureKernel(level=2)
    with pytest.raises(ValueError, match="'normalize' parameter of .*gram_levels must be an"):
        sig.gram_levels(X, normalize=value)
    assert k.gram(X, normalize=np.True_).shape == (3, 3)  # numpy's bool is a bool


_CLIP = r"The 'clip' parameter of Preprocessor must be None or a float in the range \(0.0, inf\]"


@pytest.mark.parametrize("clip", [0, -1, 0.0, float("nan"), "5", True])
def test_preprocessor_clip_must_be_positive(clip):
    from tskernels.transforms import Preprocessor
    from tskernels.transforms import clip as clip_values

    X = np.random.default_rng(0).normal(size=(4, 6, 2))
    with pytest.raises(
        ValueError,
        match=_CLIP,
    ):
        Preprocessor(clip=clip).fit(X)
    fitted = Preprocessor().fit(X)
    with pytest.raises(
        ValueError,
        match=_CLIP,
    ):
        fitted.set_params(clip=clip).transform(X)
    with pytest.raises(
        ValueError, match=r"The 'bound' parameter of clip must be a float in the range \(0.0, inf\]"
    ):
        clip_values(X, clip)
    assert Preprocessor(clip=None).fit_transform(X).shape == (4, 7, 2)


def test_detector_with_a_static_kernel_says_to_wrap_it():
    X = np.random.default_rng(0).normal(size=(10, 6, 2))
    with pytest.raises(ValueError, match=r"static kernel.*FlattenedKernel\(RBF\(\.\.\.\)\)"):
        KernelNoveltyDetector(kernel=tskernels.RBF()).fit(X)


def test_class_labels_in_messages_print_as_plain_strings(tmp_path):
    from experiments.data import DataError, _finish, _split

    X = np.zeros((3, 4, 1))
    y = np.array(["a", "b", "b"])
    with pytest.raises(DataError) as err:
        _split(X, y, 0, "here")
    assert "class 'a' has 1" in str(err.value) and "np.str_" not in str(err.value)
    with pytest.raises(DataError) as err:
        _finish("n", list(X), np.array(["a", "a"]), list(X), y, "src")
    assert "one class ('a')" in str(err.value) and "np.str_" not in str(err.value)
