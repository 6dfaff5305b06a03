"""The vectorised Yeo-Johnson transform against scikit-learn's PowerTransformer."""

import numpy as np
import pytest
from sklearn.preprocessing import PowerTransformer

from tskernels._yeo_johnson import YeoJohnson, yeo_johnson, yeo_johnson_log_likelihood


def _features(seed=0, n=60):
    rng = np.random.default_rng(seed)
    return np.concatenate(
        [
            rng.exponential(size=(n, 40)) * 10,
            rng.normal(size=(n, 40)),
            -rng.lognormal(size=(n, 40)),
            np.abs(rng.normal(size=(n, 40))) ** 3,
            rng.integers(0, 3, size=(n, 10)).astype(float),  # ties, few values
        ],
        axis=1,
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_equals_sklearn_power_transformer(seed):
    F = _features(seed)
    ref = PowerTransformer(method="yeo-johnson").fit(F)
    ours = YeoJohnson().fit(F)
    # at least as likely as sklearn's lambdas (its Brent search is per feature)
    ll_ref = yeo_johnson_log_likelihood(F, ref.lambdas_)
    ll = yeo_johnson_log_likelihood(F, ours.lambdas_)
    assert (ll >= ll_ref - 1e-8 * np.abs(ll_ref)).all()
    np.testing.assert_allclose(ours.lambdas_, ref.lambdas_, atol=1e-5)
    G = _features(seed + 10)
    np.testing.assert_allclose(ours.transform(G), ref.transform(G), atol=1e-5)


def test_formula_against_scipy():
    from scipy.stats import yeojohnson

    x = np.r_[-3.0, -0.5, 0.0, 0.2, 4.0]
    for lam in (-1.5, 0.0, 0.7, 2.0, 3.1):
        np.testing.assert_allclose(
            yeo_johnson(x[:, None], np.array([lam]))[:, 0], yeojohnson(x, lam), rtol=1e-12
        )


def test_constant_feature_maps_to_zero_and_standardises():
    F = _features(2)
    F[:, 3] = 7.0
    Z = YeoJohnson().fit_transform(F)
    assert (Z[:, 3] == 0).all()
    keep = np.delete(np.arange(F.shape[1]), 3)
    np.testing.assert_allclose(Z[:, keep].mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(Z[:, keep].std(0), 1, rtol=1e-10)


def test_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        YeoJohnson().fit(np.array([[1.0, np.nan], [2.0, 3.0]]))
    with pytest.raises(ValueError, match="2-D"):
        YeoJohnson().fit(np.ones(5))
    yj = YeoJohnson().fit(_features())
    with pytest.raises(ValueError, match="features"):
        yj.transform(np.ones((2, 3)))
