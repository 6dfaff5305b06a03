"""SDO densities at large d in log space (issue 25, item 10): the bandwidth ``log_a``, log
bandwidth grids in ``select_bandwidth``, and clear errors where a value cannot be
represented (naming the dimension and the bandwidth)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import density as dn

D_FEATURES = 400


def _data(n, d, seed=0):
    return np.random.default_rng(seed).random((n, d))


def _log_a_unit_scale(d: int) -> float:
    """log a at which the SDO scale k_a(x, x) is exactly 1 (log_scale_ = 0) in d dimensions."""
    m = dn.sdo_default_m(d)
    return dn.sdo_log_scale(1.0, d, m) / (d / (2 * m))


def test_log_a_is_a_in_log_space():
    X = _data(30, 5)
    a = 0.37
    k1 = dn.SDOKernel(a=a, n_features=D_FEATURES).fit(torch.as_tensor(X))
    k2 = dn.SDOKernel(log_a=math.log(a), n_features=D_FEATURES).fit(torch.as_tensor(X))
    torch.testing.assert_close(k1.omega_, k2.omega_, rtol=1e-14, atol=0)
    assert k1.log_scale_ == pytest.approx(k2.log_scale_, rel=1e-14)
    assert k2.length_scale() == pytest.approx(a ** (1 / (2 * k2.m_)), rel=1e-14)
    s1 = (
        dn.SOSREP(dn.SDOKernel(a=a, n_features=D_FEATURES), lr=1 / 3, max_iter=300)
        .fit(X)
        .score_samples(X)
    )
    s2 = dn.SOSREP(
        dn.SDOKernel(log_a=math.log(a), n_features=D_FEATURES), lr=1 / 3, max_iter=300
    ).fit(X)
    np.testing.assert_allclose(s2.score_samples(X), s1, rtol=1e-12)
    assert dn.SDOKernel().fit(torch.as_tensor(X)).log_a_ == 0.0  # default a = 1


_LOG_A = r"The 'log_a' parameter of SDOKernel must be None or a float in the range \(-inf, inf\)"


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"a": 1.0, "log_a": 0.0}, "give `a` or `log_a`, not both"),
        ({"log_a": math.inf}, _LOG_A),
        ({"log_a": True}, _LOG_A),
        ({"a": -1.0}, "The 'a' parameter of SDOKernel"),
    ],
)
def test_bad_bandwidths_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        dn.SDOKernel(**kw).fit(torch.zeros(2, 3))


@pytest.mark.parametrize("d", [600, 1555])
def test_sosrep_at_large_d_matches_the_explicit_gram_and_the_scaling_law(d):
    """At d = 600 and 1,555 with log a chosen so k_a(x, x) = 1, score_samples (log space)
    equals log f^2 from the explicit Gram times alpha_ (float64, no log space); scaling the
    data by c and the length scale by c shifts the log pre-density by -d log c exactly (the
    change of variables of a density), with exp(-d log c) far outside float64."""
    X = _data(40, d)
    log_a = _log_a_unit_scale(d)
    est = dn.SOSREP(dn.SDOKernel(log_a=log_a, n_features=D_FEATURES)).fit(X)
    assert abs(est.kernel_.log_scale_) < 1e-9
    f = est.kernel_.gram(X[:6], X).numpy() @ est.alpha_.numpy()
    np.testing.assert_allclose(est.score_samples(X[:6]), np.log(f**2), rtol=1e-9)
    c = 8.0
    m = dn.sdo_default_m(d)
    big = dn.SOSREP(dn.SDOKernel(log_a=log_a + 2 * m * math.log(c), n_features=D_FEATURES))
    big.fit(c * X)
    assert d * math.log(c) > 1000  # c^-d underflows float64
    np.testing.assert_allclose(
        big.score_samples(c * X[:6]), est.score_samples(X[:6]) - d * math.log(c), rtol=1e-9
    )


def test_sosrep_with_a_small_a_at_600_columns_fits():
    """The reproducer of item 10: SDOKernel(a=0.05) on 600 columns."""
    X = _data(50, 600)
    est = dn.SOSREP(dn.SDOKernel(a=0.05, n_features=D_FEATURES)).fit(X)
    assert np.isfinite(est.score_samples(X[:4])).all()


@pytest.mark.parametrize("what", ["gram", "f", "density"])
def test_unrepresentable_values_raise_naming_d_and_the_bandwidth(what):
    X = _data(30, 600)
    kernel = dn.SDOKernel(a=0.05, n_features=D_FEATURES)
    match = r"outside the float64 range: .* at d = 600, a = 0\.05"
    with pytest.raises(ValueError, match=match):
        if what == "gram":
            kernel.fit(torch.as_tensor(X)).gram(X[:2])
        elif what == "f":
            dn.SOSREP(kernel).fit(X).f(X[:2])
        else:
            dn.KDE(kernel).fit(X).density(X[:2])


def test_values_within_range_are_unchanged():
    X = _data(30, 4)
    kde = dn.KDE(dn.SDOKernel(a=0.5, n_features=D_FEATURES)).fit(X)
    e = kde.expansion_
    expected = math.exp(e.log_factor) * e.raw_value(torch.as_tensor(X))
    np.testing.assert_array_equal(kde.density(X), expected.numpy())


@pytest.mark.filterwarnings("ignore:select_bandwidth")
def test_log_grid_selects_as_the_plain_grid_where_both_work():
    X = _data(80, 3, seed=1)
    est = dn.SOSREP(dn.SDOKernel(n_features=D_FEATURES, seed=2))
    ells = np.array([0.05, 0.1, 0.2, 0.4])
    m = dn.sdo_default_m(3)
    plain = dn.select_bandwidth(est, X, ells ** (2 * m), seed=3)
    logs = dn.select_bandwidth(est, X, 2 * m * np.log(ells), seed=3, log_grid=True)
    np.testing.assert_allclose(logs.bandwidth_scores_, plain.bandwidth_scores_, rtol=1e-8)
    assert math.exp(logs.bandwidth_) == pytest.approx(plain.bandwidth_, rel=1e-12)
    assert (plain.bandwidth_param_, logs.bandwidth_param_) == ("a", "log_a")
    assert logs.kernel_.log_a == logs.bandwidth_ and logs.kernel_.a is None


@pytest.mark.filterwarnings("ignore:select_bandwidth")
def test_log_grid_at_1555_columns_selects_a_finite_bandwidth():
    """The harness's grid at d = 1,555: ells ** (2m) is inf, its log grid is fine."""
    X = _data(60, 1555)
    ells = np.array([4.0, 8.0, 16.0])
    m = dn.sdo_default_m(1555)
    with np.errstate(over="ignore"):
        assert np.isinf(ells ** (2 * m)).all()
    est = dn.SOSREP(dn.SDOKernel(n_features=D_FEATURES))
    sel = dn.select_bandwidth(est, X, 2 * m * np.log(ells), log_grid=True)
    assert np.isfinite(sel.bandwidth_scores_).any() and sel.bandwidth_ in 2 * m * np.log(ells)
    assert np.isfinite(sel.score_samples(X[:3])).all()


def test_log_grid_needs_a_kernel_with_a_log_bandwidth_and_plain_grids_name_the_remedy():
    X = _data(20, 2)
    with pytest.raises(ValueError, match="`log_grid` needs a kernel with a log-space"):
        dn.select_bandwidth(dn.KDE(dn.GaussianKernel()), X, [0.0, 1.0], log_grid=True)
    with pytest.raises(ValueError, match="log_grid=True"):
        dn.select_bandwidth(dn.SOSREP(dn.SDOKernel()), X, [math.inf])
    with pytest.raises(ValueError, match="finite log bandwidths"):
        dn.select_bandwidth(dn.SOSREP(dn.SDOKernel()), X, [math.nan], log_grid=True)


# ---------------------------------------------------------------- memory of the autograd path
@pytest.mark.parametrize("kernel", ["gauss", "sdo"])
def test_autograd_path_in_blocks_equals_one_block(monkeypatch, kernel):
    """The Hutchinson estimate (autograd through raw_torch_value) formed the (n, N, d)
    differences at once; in blocks within MAX_MEMORY it is the same to rounding."""
    from density import _kernels

    X = _data(60, 3, seed=4)
    make = {
        "gauss": lambda: dn.GaussianKernel(0.3),
        "sdo": lambda: dn.SDOKernel(0.01, n_features=300),
    }
    est = dn.KDE(make[kernel]()).fit(X[:40])
    whole = dn.fisher_objective(est, X[40:], method="hutchinson", n_probes=4, smoothing=0.0)
    per_row = 40 * 3 * 8 * _kernels._TORCH_COPIES if kernel == "gauss" else 300 * 8 * 4
    monkeypatch.setattr(_kernels, "MAX_MEMORY", 3 * per_row)  # 3 rows a block
    assert _kernels.torch_rows_per_block(*((40, 3) if kernel == "gauss" else (1, 300)), 8) == 3
    blocked = dn.fisher_objective(est, X[40:], method="hutchinson", n_probes=4, smoothing=0.0)
    assert blocked.value == pytest.approx(whole.value, rel=1e-12)
    assert blocked.stderr == pytest.approx(whole.stderr, rel=1e-9)


@pytest.mark.parametrize("kernel", ["gauss", "sdo"])
def test_expansion_blocks_within_max_memory_equal_one_block(monkeypatch, kernel):
    """Values, log values and Laplacians of an expansion in blocks of 2 rows (MAX_MEMORY
    small) equal those of one block."""
    from density import _kernels

    X = _data(50, 3, seed=5)
    make = {
        "gauss": lambda: dn.GaussianKernel(0.3),
        "sdo": lambda: dn.SDOKernel(0.01, n_features=300),
    }
    est = dn.SOSREP(make[kernel]()).fit(X[:30])
    e, Y = est.expansion_, torch.as_tensor(X[30:])
    whole = (e.raw_value(Y), e.log_abs_value(Y), *e.raw_value_grad_laplacian(Y))
    width = 300 if kernel == "sdo" else 30
    monkeypatch.setattr(_kernels, "MAX_MEMORY", 2 * width * 8 * _kernels._TORCH_COPIES)
    assert len(list(e._chunks(Y))) == 10
    blocked = (e.raw_value(Y), e.log_abs_value(Y), *e.raw_value_grad_laplacian(Y))
    for a, b in zip(blocked, whole):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10 * float(b.abs().max()))
