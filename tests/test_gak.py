"""Global alignment kernel: against tslearn's cdist_gak, a brute-force banded recursion, and
the log-space oracle; median heuristic, raw/log values, the torch wavefront."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
import torch
from sklearn.base import clone

from tskernels import GAK, GlobalAlignmentKernel, NonFiniteKernelError, as_series_batch
from tskernels._gak_numba import _SMALL, _exp_nonpos, _exp_small
from tskernels._gak_torch import log_gak_wavefront

tslearn_metrics = pytest.importorskip("tslearn.metrics")
tslearn_utils = pytest.importorskip("tslearn.utils")


def _rand(n, T, d=3, seed=0, scale=1.0):
    return scale * np.random.default_rng(seed).normal(size=(n, T, d))


def _ragged(lengths, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(L, d)) for L in lengths]


def _tslearn(X, Y=None, sigma=1.0):
    to = tslearn_utils.to_time_series_dataset
    return tslearn_metrics.cdist_gak(to(X), None if Y is None else to(Y), sigma=sigma)


def _brute_log_gak(x, y, sigma, band=None, weights=False):
    """Straight linear-space recursion over the full table, in numpy float64."""
    n, m = len(x), len(y)
    M = np.zeros((n + 1, m + 1))
    M[0, 0] = 1.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            off = abs(i - j)
            if band is not None and off >= band:
                continue
            w = 1.0 - off / band if weights else 1.0
            e = w * math.exp(-np.sum((x[i - 1] - y[j - 1]) ** 2) / (2 * sigma**2))
            M[i, j] = e / (2 - e) * (M[i - 1, j - 1] + M[i - 1, j] + M[i, j - 1])
    return math.log(M[n, m]) if M[n, m] > 0 else -math.inf


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.abs(b)))


# ---------------------------------------------------------------- against tslearn
@pytest.mark.parametrize(
    "T, n, sigma",
    # the last two: every |x - y|^2 / (2 sigma^2) <= 1/16 (short exp polynomial path)
    [(20, 6, 1.5), (60, 5, 3.0), (400, 3, 8.0), (100, 6, 40.0), (300, 3, 100.0)],
)
def test_equals_tslearn_equal_lengths(T, n, sigma):
    X, Y = _rand(n, T, seed=1), _rand(n - 1, T, seed=2)
    k = GAK(sigma=sigma)
    assert _rel(k.gram(X).numpy(), _tslearn(X, sigma=sigma)) < 1e-10
    assert _rel(k.gram(X, Y).numpy(), _tslearn(X, Y, sigma=sigma)) < 1e-10


def test_equals_tslearn_T1000():
    X = _rand(3, 1000, seed=3)
    k = GAK(sigma=10.0)
    K = k.gram(X).numpy()
    assert _rel(K, _tslearn(X, sigma=10.0)) < 1e-10
    assert np.isfinite(k.log_gram(X).numpy()).all()  # raw values are ~1e700 here


def test_long_series_equal_tslearn_log_values():
    # rows of the table span far more than the float64 range at these lengths: the block
    # scaling must keep the cells that matter for the corner
    X = _ragged((3000, 2200), seed=19)
    k = GAK(sigma=20.0)
    be = _np_backend()
    ref = [[tslearn_metrics._gak._log_unnormalized_gak(a, b, 20.0, be) for b in X] for a in X]
    assert _rel(k.log_gram(X).numpy(), ref) < 1e-12
    assert _rel(k.gram(X).numpy(), _tslearn(X, sigma=20.0)) < 1e-10


@pytest.mark.parametrize("lengths", [(5, 17, 30, 12), (400, 350, 420)])
def test_equals_tslearn_unequal_lengths(lengths):
    X = _ragged(lengths, seed=4)
    Y = _ragged(lengths[::-1][:2], seed=5)
    sigma = 2.0 * math.sqrt(max(lengths)) / 3
    k = GAK(sigma=sigma)
    assert _rel(k.gram(X).numpy(), _tslearn(X, sigma=sigma)) < 1e-10
    assert _rel(k.gram(X, Y).numpy(), _tslearn(X, Y, sigma=sigma)) < 1e-10


def test_small_sigma_uses_exact_log_space():
    # |x - y|^2 / (2 sigma^2) far above 700: local kernels underflow in linear space
    X = _rand(4, 15, seed=6, scale=3.0)
    k = GAK(sigma=0.05)
    lg = k.log_gram(X).numpy()
    ref = [
        [
            tslearn_metrics._gak._log_unnormalized_gak(a, b, sigma=0.05, backend=_np_backend())
            for b in X
        ]
        for a in X
    ]
    assert np.allclose(lg, ref, rtol=1e-10, atol=1e-12)
    K = k.gram(X).numpy()
    assert np.allclose(np.diag(K), 1.0) and np.isfinite(K).all()


def _np_backend():
    from tslearn.backend import instantiate_backend

    return instantiate_backend("numpy")


def test_raw_kernel_and_overflow():
    X = _rand(3, 12, seed=7)
    raw = GAK(sigma=1.5, normalized=False)
    ref = [[tslearn_metrics.unnormalized_gak(a, b, sigma=1.5) for b in X] for a in X]
    assert _rel(raw.gram(X).numpy(), ref) < 1e-10
    assert _rel(raw.diag(X).numpy(), np.diag(ref)) < 1e-10
    long = _rand(2, 700, seed=8, scale=0.1)
    with pytest.raises(NonFiniteKernelError, match="normalized=True"):
        GAK(sigma=5.0, normalized=False).gram(long)
    K = GAK(sigma=5.0).gram(long)  # normalised: fine
    assert torch.isfinite(K).all()


def test_normalized_is_exp_of_centered_log():
    X, Y = _ragged((8, 11, 6), seed=9), _ragged((7, 9), seed=10)
    k = GAK(sigma=1.7)
    lxy = k.log_gram(X, Y)
    lx = torch.diagonal(k.log_gram(X))
    ly = torch.diagonal(k.log_gram(Y))
    expected = torch.exp(lxy - 0.5 * lx[:, None] - 0.5 * ly[None, :])
    torch.testing.assert_close(k.gram(X, Y), expected, rtol=1e-13, atol=0)
    torch.testing.assert_close(k.diag(X), torch.ones(3, dtype=torch.float64))


# ---------------------------------------------------------------- band
@pytest.mark.parametrize("band", [1, 2, 3, 6])
@pytest.mark.parametrize("weights", [False, True])
def test_band_equals_brute_force(band, weights):
    X = _ragged((9, 11, 8, 12), seed=11)
    k = GAK(sigma=1.3, triangular=band, triangular_weights=weights)
    lg = k.log_gram(X).numpy()
    ref = np.array([[_brute_log_gak(a, b, 1.3, band, weights) for b in X] for a in X])
    finite = np.isfinite(ref)
    assert np.array_equal(np.isfinite(lg), finite)  # excluded pairs (|T_x - T_y| >= t): -inf
    assert np.allclose(lg[finite], ref[finite], rtol=1e-12, atol=1e-14)
    K = k.gram(X).numpy()
    assert np.all(K[~finite] == 0.0)


def test_wide_band_equals_plain_gak():
    X = _ragged((9, 14, 12), seed=12)
    plain = GAK(sigma=1.1).gram(X)
    for band in (14, 15, 100):
        torch.testing.assert_close(GAK(sigma=1.1, triangular=band).gram(X), plain, rtol=0, atol=0)


def test_triangular_weights_positive_definite():
    X = _rand(12, 15, seed=13)
    K = GAK(sigma=2.0, triangular=3, triangular_weights=True).gram(X)
    assert torch.linalg.eigvalsh(K).min() > -1e-12


# ---------------------------------------------------------------- bandwidth
def test_median_heuristic_is_reproducible_and_kept():
    from scipy.spatial.distance import pdist

    X = _rand(10, 30, seed=14)
    k = GAK().fit(X)
    K1 = k.gram(X)
    pts = X.reshape(-1, 3)
    idx = np.random.default_rng(0).choice(len(pts), size=300, replace=False)
    assert k.sigma_median_ == pytest.approx(np.median(pdist(pts[idx])) * math.sqrt(30))
    assert k.sigma_ == k.sigma_median_
    k.gram(_rand(4, 30, seed=15, scale=10.0))  # another batch: sigma kept
    assert k.sigma_ == k.sigma_median_
    torch.testing.assert_close(GAK().gram(X), K1, rtol=0, atol=0)  # same seed, same value
    torch.testing.assert_close(GAK(sigma=k.sigma_median_).gram(X), K1, rtol=1e-14, atol=0)
    k2 = GAK(sigma_factor=2.0).fit(X)
    assert k2.sigma_ == pytest.approx(2.0 * k.sigma_median_)
    k2.set_params(sigma_factor=0.5)
    assert k2.sigma_ == pytest.approx(0.5 * k.sigma_median_)
    torch.testing.assert_close(
        k2.gram(X[:2]), GAK(sigma=0.5 * k.sigma_median_).gram(X[:2]), rtol=1e-14, atol=0
    )
    assert not hasattr(clone(k2), "sigma_median_")


def test_gram_writes_no_attribute():
    """Unfitted, ``gram`` computes the median heuristic on its X for that call only: no
    attribute is written (so a second call on other data uses that data's bandwidth)."""
    X, Z = _rand(6, 20, seed=30), _rand(5, 20, seed=31, scale=4.0)
    for k in (GAK(), GAK(normalized=False), GAK(sigma=1.5), GAK(triangular=4)):
        before = dict(vars(k))
        k.gram(X)
        k.gram(X, Z, normalize=True)
        k.diag(Z)
        k.log_gram(Z, X)
        assert vars(k) == before and set(vars(k)) == set(before)
    k = GAK()
    torch.testing.assert_close(k.gram(Z), GAK().fit(Z).gram(Z), rtol=0, atol=0)
    assert not hasattr(k, "sigma_median_")
    with pytest.raises(AttributeError, match="before fit"):
        k.sigma_
    assert not k.__sklearn_is_fitted__() and GAK().fit(X).__sklearn_is_fitted__()


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(sigma=-1.0), "sigma"),
        (dict(sigma=1.0, sigma_factor=2.0), "sigma_factor"),
        (dict(sigma_factor=0.0), "sigma_factor"),
        (dict(triangular=0), "triangular"),
        (dict(triangular=2.5), "triangular"),
        (dict(triangular_weights=True), "triangular"),
        (dict(n_jobs=0), "n_jobs"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        GlobalAlignmentKernel(**params)


def test_constant_data_heuristic_raises():
    with pytest.raises(ValueError, match="median heuristic"):
        GAK().gram(np.ones((3, 5, 2)))


def test_n_jobs_restores_thread_count():
    before = numba.get_num_threads()
    GAK(sigma=1.0, n_jobs=1).gram(_rand(4, 10))
    assert numba.get_num_threads() == before


# ---------------------------------------------------------------- internals
def test_vectorised_exp_accuracy():
    from numba import njit

    @njit
    def run(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = _exp_nonpos(x[i])
        return out

    x = -np.concatenate([np.geomspace(1e-300, 1, 2000), np.linspace(0, 700, 20001)])
    got, ref = run(x), np.exp(x)
    assert np.max(np.abs(got - ref) / ref) < 4.5e-16  # within 2 ulp

    @njit
    def run_small(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = _exp_small(x[i])
        return out

    x = np.concatenate([-np.geomspace(1e-300, _SMALL, 2000), np.linspace(-_SMALL, 0, 20001)])
    got, ref = run_small(x), np.exp(x)
    assert np.max(np.abs(got - ref) / ref) < 4.5e-16


@pytest.mark.parametrize("band, weights", [(None, False), (4, False), (4, True)])
def test_wavefront_equals_numba(band, weights):
    X = as_series_batch(_ragged((9, 12, 7, 10), seed=16))
    Y = as_series_batch(_ragged((11, 8), seed=17))
    k = GAK(sigma=1.4, triangular=band, triangular_weights=weights)
    w, b = k._weights(max(X.length, Y.length))
    log_w = torch.from_numpy(np.log(w))
    inv2s2 = 1 / (2 * 1.4**2)
    got = log_gak_wavefront(X.values, X.lengths, Y.values, Y.lengths, inv2s2, log_w, b)
    ref = k.log_gram(X.to_list(), Y.to_list())
    fin = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(got), fin)
    torch.testing.assert_close(got[fin], ref[fin], rtol=1e-12, atol=0)
    diag = log_gak_wavefront(X.values, X.lengths, X.values, X.lengths, inv2s2, log_w, b, True)
    torch.testing.assert_close(diag, torch.diagonal(k.log_gram(X.to_list())), rtol=1e-12, atol=0)


@pytest.mark.parametrize("normalized", [True, False])
def test_class_on_wavefront_path_equals_numba_path(normalized):
    X, Y = _ragged((9, 12, 7, 10, 5), seed=21), _ragged((11, 8, 6), seed=22)
    ref = GAK(sigma=1.6, triangular=6, normalized=normalized)
    # the GPU code path (torch wavefront), run on the CPU; small blocks
    wave = GAK(sigma=1.6, triangular=6, normalized=normalized, max_memory=20_000, backend="torch")
    assert wave._block_rows(as_series_batch(X), as_series_batch(Y)) < 5
    for args in ((X,), (X, Y)):
        torch.testing.assert_close(wave.gram(*args), ref.gram(*args), rtol=1e-12, atol=1e-300)
    torch.testing.assert_close(wave.diag(X), ref.diag(X), rtol=1e-12, atol=0)


@pytest.mark.gpu
def test_cuda_equals_cpu(gpu_device):
    X = _ragged((30, 25, 40), seed=18)
    cpu = GAK(sigma=3.0).gram(X)
    gpu = GAK(sigma=3.0, device=gpu_device).gram(X)
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-10, atol=0)


def test_float32_normalised_from_float64_logs():
    # log K ~ 1e3 at T = 1000: normalising in float32 would lose ~1e-4; we normalise in float64
    X = _rand(3, 1000, seed=20)
    K64 = GAK(sigma=10.0).gram(X)
    K32 = GAK(sigma=10.0, dtype=torch.float32).gram(X)
    assert K32.dtype == torch.float32
    torch.testing.assert_close(K32.double(), K64, rtol=1e-6, atol=1e-30)
