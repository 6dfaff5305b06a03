"""Volterra reservoir kernel: the series formula evaluated directly, PSD, admissibility."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tskernels import VolterraReservoirKernel, as_series_batch
from tskernels._reservoir import _right_aligned, vrk_torch


def _series_formula(x, y, tau, lam):
    """1 + sum_{k=1..T} lam^{2k} prod_{t=0..k-1} 1 / (1 - tau^2 <x_{T-t}, y_{T-t}>),
    T = min(T_x, T_y), both series read backward from their last step."""
    T = min(len(x), len(y))
    total = 1.0
    for k in range(1, T + 1):
        prod = 1.0
        for t in range(k):
            prod /= 1.0 - tau**2 * float(np.dot(x[len(x) - 1 - t], y[len(y) - 1 - t]))
        total += lam ** (2 * k) * prod
    return total


def _ragged(lengths, d=3, seed=0, scale=0.4):
    rng = np.random.default_rng(seed)
    return [scale * rng.normal(size=(L, d)) for L in lengths]


@pytest.mark.parametrize("tau, lam", [(0.3, 0.5), (0.8, 0.95), (0.5, 1.2)])
def test_equals_series_formula_equal_lengths(tau, lam):
    X = np.stack(_ragged([7] * 5, seed=1, scale=0.3))
    Y = np.stack(_ragged([7] * 3, seed=2, scale=0.3))
    k = VolterraReservoirKernel(tau, lam)
    ref = np.array([[_series_formula(a, b, tau, lam) for b in Y] for a in X])
    np.testing.assert_allclose(k.gram(X, Y).numpy(), ref, rtol=1e-13)
    ref_xx = np.array([[_series_formula(a, b, tau, lam) for b in X] for a in X])
    np.testing.assert_allclose(k.gram(X).numpy(), ref_xx, rtol=1e-13)
    np.testing.assert_allclose(k.diag(X).numpy(), np.diag(ref_xx), rtol=1e-13)


def test_equals_series_formula_unequal_lengths():
    X = _ragged((5, 9, 2, 7), seed=3)
    Y = _ragged((8, 3, 6), seed=4)
    k = VolterraReservoirKernel(tau=0.6, lam=0.9)
    ref = np.array([[_series_formula(a, b, 0.6, 0.9) for b in Y] for a in X])
    np.testing.assert_allclose(k.gram(X, Y).numpy(), ref, rtol=1e-13)
    ref_xx = np.array([[_series_formula(a, b, 0.6, 0.9) for b in X] for a in X])
    np.testing.assert_allclose(k.gram(X).numpy(), ref_xx, rtol=1e-13)
    np.testing.assert_allclose(k.diag(X).numpy(), np.diag(ref_xx), rtol=1e-13)


def test_torch_path_equals_numba_path():
    X = as_series_batch(_ragged((5, 9, 2, 7), seed=5))
    Y = as_series_batch(_ragged((8, 3, 6, 9, 4), seed=6))
    k = VolterraReservoirKernel(tau=0.5, lam=0.8)
    T = min(X.length, Y.length)
    (xa, sx), (ya, sy) = _right_aligned(X, T), _right_aligned(Y, T)
    got = vrk_torch(xa, sx, ya, sy, 0.25, 0.64)
    torch.testing.assert_close(got, k.gram(X.to_list(), Y.to_list()), rtol=1e-13, atol=0)
    Z = np.stack(_ragged([40] * 4, seed=7))  # > one time chunk, equal lengths
    Zb = as_series_batch(Z)
    za, _ = _right_aligned(Zb, 40)
    torch.testing.assert_close(
        vrk_torch(za, None, za, None, 0.25, 0.64), k.gram(Z), rtol=1e-12, atol=0
    )


def test_class_on_torch_path_equals_numba_path():
    X, Y = _ragged((5, 9, 2, 7, 40), seed=13), _ragged((8, 3, 36), seed=14)
    ref = VolterraReservoirKernel(0.5, 0.8)
    tor = VolterraReservoirKernel(0.5, 0.8, block_size=2, backend="torch")  # the GPU path
    for args in ((X,), (X, Y)):
        torch.testing.assert_close(tor.gram(*args), ref.gram(*args), rtol=1e-13, atol=0)


@pytest.mark.parametrize("lengths", [[20] * 12, [4, 20, 11, 17, 8, 20, 15, 9, 3, 12]])
def test_psd_on_admissible_parameters(lengths):
    X = _ragged(lengths, seed=8, scale=0.5)
    worst = max(float(np.linalg.norm(x, axis=1).max()) for x in X) ** 2
    for tau in (0.5 / np.sqrt(worst), 0.99 / np.sqrt(worst)):
        for lam in (0.3, 0.9, 0.999):
            K = VolterraReservoirKernel(tau, lam).gram(X)
            assert torch.linalg.eigvalsh(K).min() > -1e-10 * K.trace()


def test_admissibility_error_states_largest_tau():
    X = np.stack(_ragged([6] * 4, seed=9))
    aligned = np.linalg.norm(X, axis=2)  # (n, T)
    worst = float((aligned.max(0) ** 2).max())
    bound = worst**-0.5
    VolterraReservoirKernel(tau=0.999 * bound, lam=0.5).gram(X)  # just admissible
    with pytest.raises(ValueError, match=f"below {bound:.6g}"):
        VolterraReservoirKernel(tau=1.001 * bound, lam=0.5).gram(X)
    with pytest.raises(ValueError, match="tau"):
        VolterraReservoirKernel(tau=1.001 * bound, lam=0.5).diag(X)


def test_admissibility_uses_aligned_steps_only():
    # a large point that is never aligned with anything large stays admissible
    x = np.zeros((1, 5, 2))
    x[0, 0] = [10.0, 0.0]  # first step of a long series
    y = np.full((1, 3, 2), 0.1)  # aligned with x's last 3 steps only
    k = VolterraReservoirKernel(tau=0.5, lam=0.5)
    expected = _series_formula(x[0], y[0], 0.5, 0.5)
    assert float(k.gram(list(x), list(y))[0, 0]) == pytest.approx(expected, rel=1e-14)
    with pytest.raises(ValueError, match="tau"):
        k.gram(list(x))  # x against itself: 0.25 * 100 >= 1


def test_clip_inputs_shrinks_norms():
    X = np.stack(_ragged([6] * 3, seed=10, scale=2.0))
    tau, lam = 0.4, 0.7
    with pytest.raises(ValueError, match="clip_inputs=True"):
        VolterraReservoirKernel(tau, lam).gram(X)
    K = VolterraReservoirKernel(tau, lam, clip_inputs=True).gram(X)
    r = 1 / tau - 0.1
    norms = np.linalg.norm(X, axis=2, keepdims=True)
    Xc = X * np.minimum(1.0, r / norms)
    ref = np.array([[_series_formula(a, b, tau, lam) for b in Xc] for a in Xc])
    np.testing.assert_allclose(K.numpy(), ref, rtol=1e-13)
    assert torch.linalg.eigvalsh(K).min() > -1e-10 * K.trace()


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(tau=0.0, lam=0.5), "tau"),
        (dict(tau=-1.0, lam=0.5), "tau"),
        (dict(tau=0.5, lam=0.0), "lam"),
        (dict(tau=0.5, lam=0.5, clip_inputs="yes"), "clip_inputs"),
        (dict(tau=20.0, lam=0.5, clip_inputs=True), "tau < 10"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        VolterraReservoirKernel(**params)


def test_float32():
    X = np.stack(_ragged([10] * 4, seed=11))
    k64 = VolterraReservoirKernel(0.5, 0.8)
    k32 = VolterraReservoirKernel(0.5, 0.8, dtype=torch.float32)
    K32 = k32.gram(X)
    assert K32.dtype == torch.float32
    torch.testing.assert_close(K32.double(), k64.gram(X), rtol=1e-5, atol=0)


@pytest.mark.gpu
def test_cuda_equals_cpu(gpu_device):
    X = _ragged((30, 25, 40), seed=12)
    cpu = VolterraReservoirKernel(0.5, 0.9).gram(X)
    gpu = VolterraReservoirKernel(0.5, 0.9, device=gpu_device).gram(X)
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-10, atol=0)  # the gpu-check's 1e-10
