"""Bad inputs raise clear errors (never a silent NaN or clamp)."""

import numpy as np
import pytest
import torch

from density import KDE, SOSREP, GaussianKernel, LaplacianKernel, SDOKernel, sosrep_solve

GOOD = np.random.default_rng(0).random((10, 2))


@pytest.mark.parametrize("make", [lambda: SOSREP(GaussianKernel(1.0)), lambda: KDE(SDOKernel())])
def test_nan_and_inf_data(make):
    bad = GOOD.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite.*row 3, column 1"):
        make().fit(bad)
    est = make().fit(GOOD)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        est.score_samples(bad)


def test_single_point_and_empty():
    with pytest.raises(ValueError, match="1 sample.*at least 2"):
        SOSREP(GaussianKernel(1.0)).fit(GOOD[:1])
    with pytest.raises(ValueError, match="at least"):
        KDE(GaussianKernel(1.0)).fit(np.zeros((0, 2)))


def test_zero_dimensions_and_wrong_shapes():
    with pytest.raises(ValueError, match="d = 0"):
        SOSREP(GaussianKernel(1.0)).fit(np.zeros((5, 0)))
    with pytest.raises(ValueError, match="2-D"):
        SOSREP(GaussianKernel(1.0)).fit(np.zeros(5))
    est = SOSREP(GaussianKernel(1.0)).fit(GOOD)
    with pytest.raises(ValueError, match="fitted on 2"):
        est.score_samples(np.zeros((3, 3)))
    with pytest.raises(TypeError, match="numeric"):
        SOSREP(GaussianKernel(1.0)).fit(np.array([["a", "b"]]))


def test_non_finite_kernel_values_raise():
    K = torch.eye(3, dtype=torch.float64)
    K[0, 2] = float("inf")
    with pytest.raises(ValueError, match="NaN or infinite"):
        sosrep_solve(K)
    # finite data whose kernel values overflow: refused at fit, never clamped
    huge = np.full_like(GOOD, 1.5e308)
    with pytest.raises(FloatingPointError, match="not finite"):
        SOSREP(SDOKernel(a=1e-4, n_features=50)).fit(huge)
    # exact kernels see only differences: identical points at 1.5e308 are identical points
    # (was a NaN Gram from |x|^2 + |y|^2 - 2<x, y>), the same fit as at the origin
    at_huge = SOSREP(GaussianKernel(1.0)).fit(huge)
    at_zero = SOSREP(GaussianKernel(1.0)).fit(np.zeros_like(GOOD))
    torch.testing.assert_close(at_huge.score_samples(huge), at_zero.score_samples(0 * GOOD))


def test_bad_parameters():
    with pytest.raises(ValueError, match="sigma"):
        SOSREP(GaussianKernel(-1.0)).fit(GOOD)
    with pytest.raises(ValueError, match="lr"):
        SOSREP(GaussianKernel(1.0), lr=0.7).fit(GOOD)
    with pytest.raises(ValueError, match="tol"):
        SOSREP(GaussianKernel(1.0), tol=0).fit(GOOD)
    with pytest.raises(TypeError, match="density kernel"):
        SOSREP("rbf").fit(GOOD)
    with pytest.raises(ValueError, match="CUDA is not available"):
        if torch.cuda.is_available():
            raise ValueError("CUDA is not available (skipped branch on GPU machines)")
        SOSREP(GaussianKernel(1.0), device="cuda").fit(GOOD)


def test_unfitted_raises():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        SOSREP(GaussianKernel(1.0)).score_samples(GOOD)


def test_laplacian_singular_at_centres_raises():
    est = SOSREP(LaplacianKernel(1.0)).fit(GOOD)
    with pytest.raises(ValueError, match="singular"):
        est.expansion_.raw_value_and_laplacian(torch.as_tensor(GOOD[:2]))


def test_wrong_kind_of_kernel_method_names_the_kernel():
    import numpy as np

    from density import GaussianKernel, SDOKernel

    X = np.random.default_rng(0).normal(size=(5, 2))
    with pytest.raises(TypeError, match="GaussianKernel is an exact kernel and has no `_features`"):
        GaussianKernel(1.0).fit(X)._features(X)
    with pytest.raises(TypeError, match="SDOKernel is a random-feature kernel and has no `_log_k`"):
        SDOKernel(1.0, n_features=16).fit(X)._log_k(X, X)


@pytest.mark.parametrize(
    "make, name, bad",
    [
        (lambda: GaussianKernel(1.0), "sigma", 0.0),
        (lambda: LaplacianKernel(1.0), "dtype", "int32"),
        (lambda: SDOKernel(), "n_features", 0),
        (lambda: SDOKernel(), "seed", -1),
        (lambda: SDOKernel(), "m", True),
        (lambda: SOSREP(GaussianKernel(1.0)), "max_iter", 0),
        (lambda: SOSREP(GaussianKernel(1.0)), "seed", 1.5),
        (lambda: SOSREP(GaussianKernel(1.0)), "device", "gpu0"),
        (lambda: KDE(GaussianKernel(1.0)), "kernel", GaussianKernel),
    ],
)
def test_every_parameter_is_declared_and_checked_at_fit(make, name, bad):
    """The one dialect: each class declares a constraint for every constructor parameter, and
    a bad value set after construction raises at fit naming the parameter and the class."""
    est = make()
    assert set(est.get_params(deep=False)) == set(type(est)._parameter_constraints)
    est.set_params(**{name: bad})
    with pytest.raises(ValueError, match=rf"The '{name}' parameter of {type(est).__name__} must"):
        est.fit(torch.as_tensor(GOOD))


def test_public_functions_declare_their_arguments():
    from density import first_stable_minimum, select_bandwidth

    K = torch.eye(3)
    with pytest.raises(ValueError, match=r"The 'max_iter' parameter of sosrep_solve must be"):
        sosrep_solve(K, max_iter=0)
    with pytest.raises(ValueError, match=r"The 'window' parameter of first_stable_minimum"):
        first_stable_minimum([1.0, 0.0, 1.0], window=True)
    with pytest.raises(ValueError, match=r"The 'estimator' parameter of select_bandwidth must be"):
        select_bandwidth(GaussianKernel(), GOOD, [1.0])
    with pytest.raises(ValueError, match=r"The 'validation_fraction' parameter of select_bandwid"):
        select_bandwidth(KDE(GaussianKernel()), GOOD, [1.0], validation_fraction=0.0)
