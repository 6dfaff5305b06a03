"""Randomized signature kernel: Euler scheme oracle, reproducibility, invariances."""

from functools import partial

import numpy as np
import pytest
import torch
from path_helpers import random_paths
from sklearn.base import clone

from tskernels import RandomizedSignatureKernel, kernel_registry

_paths = partial(random_paths, step=0.3)


def _euler(x, A, b, z0, act=np.tanh):
    """Plain loop: Z_{t+1} = Z_t + sum_i act(A_i Z_t + b_i) dx^i_t."""
    z = z0.copy()
    for t in range(len(x) - 1):
        dx = x[t + 1] - x[t]
        z = z + sum(act(A[i] @ z + b[i]) * dx[i] for i in range(x.shape[1]))
    return z


def test_features_follow_euler_scheme():
    X = _paths(0, 3, 9, 2)
    k = RandomizedSignatureKernel(n_features=12, scale=0.3, seed=4)
    A, b, z0 = (t.numpy() for t in k._draw(2))
    assert np.isclose(A.var(), 0.3, rtol=0.2)
    Z = k.features(X).numpy()
    for i in range(3):
        assert np.allclose(Z[i], _euler(X[i], A, b, z0), rtol=1e-12, atol=1e-12)
    K = k.gram(X)
    assert torch.allclose(K, torch.as_tensor(Z @ Z.T / 12), rtol=1e-12)
    assert torch.allclose(k.diag(X), torch.diagonal(K), rtol=1e-12)
    Y = _paths(1, 2, 5, 2)
    assert torch.allclose(k.gram(X, Y), torch.as_tensor(Z @ k.features(Y).numpy().T / 12))


def _euler_activation_first(x, A, b, z0, act=np.tanh):
    """Plain loop: Z_{t+1} = Z_t + sum_i (A_i^T act(Z_t) + b_i) dx^i_t."""
    z = z0.copy()
    for t in range(len(x) - 1):
        dx = x[t + 1] - x[t]
        h = act(z)
        z = z + sum((A[i].T @ h + b[i]) * dx[i] for i in range(x.shape[1]))
    return z


@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
def test_activation_first_follows_euler_scheme(activation):
    act = {"tanh": np.tanh, "sigmoid": lambda h: 1 / (1 + np.exp(-h))}[activation]
    X, Y = _paths(6, 3, 9, 3), _paths(7, 2, 5, 3)
    k = RandomizedSignatureKernel(
        n_features=11, scale=0.4, seed=2, activation=activation, activation_first=True
    )
    A, b, z0 = (t.numpy() for t in k._draw(3))
    Z = k.features(X).numpy()
    for i in range(3):
        assert np.allclose(Z[i], _euler_activation_first(X[i], A, b, z0, act), 1e-12, 1e-12)
        other = _euler(X[i], A, b, z0, act)  # the default form is a different field
        assert not np.allclose(Z[i], other, rtol=1e-3)
    default = RandomizedSignatureKernel(n_features=11, scale=0.4, seed=2, activation=activation)
    assert np.allclose(default.features(X).numpy()[0], _euler(X[0], A, b, z0, act), 1e-12, 1e-12)
    ZY = k.features(Y).numpy()
    assert torch.allclose(k.gram(X, Y), torch.as_tensor(Z @ ZY.T / 11), rtol=1e-12)
    K = k.gram(X)
    assert torch.equal(K, K.T) and torch.allclose(k.diag(X), torch.diagonal(K), rtol=1e-12)


def test_reproducible_per_seed_and_dtype():
    X = _paths(2, 4, 7, 3)
    k = RandomizedSignatureKernel(n_features=20, scale=0.5, seed=3)
    assert torch.equal(k.gram(X), clone(k).gram(X))
    assert not torch.allclose(k.gram(X), k.set_params(seed=4).gram(X))
    k32 = RandomizedSignatureKernel(n_features=20, scale=0.5, seed=3, dtype=torch.float32)
    k64 = RandomizedSignatureKernel(n_features=20, scale=0.5, seed=3)
    assert torch.allclose(k32.features(X).double(), k64.features(X), rtol=1e-4, atol=1e-4)


def test_padding_and_repeated_points_invariance():
    rng = np.random.default_rng(5)
    Xs = [np.cumsum(rng.normal(size=(T, 2)) * 0.3, 0) for T in (3, 8, 5)]
    k = RandomizedSignatureKernel(n_features=10, scale=0.2)
    K = k.gram(Xs)
    for i in range(3):
        assert torch.allclose(k.features(Xs[i][None])[0], k.features(Xs)[i], rtol=1e-13)
    assert torch.allclose(k.gram([np.repeat(x, 2, axis=0) for x in Xs]), K, rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_features": 0},
        {"scale": 0.0},
        {"seed": -1},
        {"activation": "softmax"},
        {"activation_first": "yes"},
    ],
)
def test_bad_parameters(kwargs):
    with pytest.raises(ValueError, match=list(kwargs)[0]):
        RandomizedSignatureKernel(**kwargs).gram(_paths(0, 2, 4, 2))


def test_registry_entry():
    spec = kernel_registry()["rand_sig_tanh"]
    assert spec.cls is RandomizedSignatureKernel and spec.unequal_length
    K = spec.example().gram(list(_paths(3, 5, 6, 2)))
    assert torch.equal(K, K.T) and float(torch.linalg.eigvalsh(K).min()) > -1e-10


def test_small_euler_steps_run_on_one_thread_and_restore(monkeypatch):
    """Small steps (n d M^2 < SMALL_STEP_WORK) run on one torch thread unless n_jobs is set:
    T sequential tiny parallel regions stall on a loaded machine (100x measured)."""
    import tskernels._randomized_signature as rs

    seen = []
    real = rs._ACTIVATIONS_INPLACE["tanh"]  # the CPU path's activation
    monkeypatch.setitem(
        rs._ACTIVATIONS_INPLACE, "tanh", lambda h: seen.append(torch.get_num_threads()) or real(h)
    )
    X = np.random.default_rng(0).normal(size=(6, 12, 2))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        RandomizedSignatureKernel(n_features=8).gram(X)
        assert set(seen) == {1} and torch.get_num_threads() == 2
        seen.clear()
        RandomizedSignatureKernel(n_features=8, n_jobs=2).gram(X)
        assert set(seen) == {2}
        seen.clear()
        monkeypatch.setattr(rs, "SMALL_STEP_WORK", 0)  # a large step keeps the threads
        RandomizedSignatureKernel(n_features=8).gram(X)
        assert set(seen) == {2}
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------- the CPU arrangement
def _unequal(seed, n, d, lengths=(2, 9, 5, 9, 1, 7, 3)):
    rng = np.random.default_rng(seed)
    return [np.cumsum(rng.normal(size=(lengths[i % len(lengths)], d)) * 0.4, 0) for i in range(n)]


@pytest.mark.parametrize("activation", ["tanh", "sigmoid", "relu", "identity"])
@pytest.mark.parametrize("activation_first", [False, True])
@pytest.mark.parametrize("equal", [True, False])
def test_cpu_path_equals_the_step_by_step_reference(activation, activation_first, equal):
    """``_euler_cpu`` (contiguous map, buffers, in-place increments, series sorted by length
    and solved while they run) equals ``_euler`` (one batched step at a time, every series to
    the end: the former implementation, kept for other devices) to 1e-12 relative, for every
    option, unequal lengths included; Grams and diagonals follow."""
    from tskernels.validation import as_series_batch

    scale = 0.05 if activation == "identity" else 0.5  # the identity field grows like e^(sA)
    k = RandomizedSignatureKernel(
        n_features=13, scale=scale, seed=5, activation=activation, activation_first=activation_first
    )
    X = _paths(8, 9, 11, 3) if equal else _unequal(8, 9, 3)
    Xb = as_series_batch(X)
    A, b, z0 = k._draw(3)
    ref = k._euler(Xb, A, b, z0)
    got = k._euler_cpu(Xb, A, b, z0)
    rel = float((got - ref).abs().max() / ref.abs().max())
    assert rel <= 1e-12
    assert not torch.equal(ref[0], z0)  # the paths moved Z
    Z = k.features(X)
    assert torch.allclose(Z, ref, rtol=1e-12, atol=1e-12 * float(ref.abs().max()))
    K = k.gram(X)
    Kref = ref @ ref.T / 13
    assert torch.allclose(K, Kref, rtol=1e-12, atol=1e-12 * float(Kref.abs().max()))
    assert torch.allclose(k.diag(X), torch.diagonal(Kref), rtol=1e-12)


def test_cpu_path_matches_plain_loop_on_unequal_lengths_and_skips_finished_series(monkeypatch):
    """Against the plain per-series loop (each series on its own length), and the steps past
    every series' end are not computed: the batched products shrink as series end."""
    import tskernels._randomized_signature as rs

    Xs = _unequal(3, 7, 2, lengths=(6, 2, 4, 1, 6, 3, 5))
    k = RandomizedSignatureKernel(n_features=9, scale=0.4, seed=1)
    A, b, z0 = (t.numpy() for t in k._draw(2))
    Z = k.features(Xs).numpy()
    for x, z in zip(Xs, Z):
        assert np.allclose(z, _euler(x, A, b, z0), rtol=1e-12, atol=1e-12)
    rows = []
    real = rs._ACTIVATIONS_INPLACE["tanh"]
    monkeypatch.setitem(rs._ACTIVATIONS_INPLACE, "tanh", lambda h: rows.append(len(h)) or real(h))
    k.features(Xs)
    assert rows == [6, 5, 4, 3, 2]  # running at steps 0..4: length - 1 > step (6 6 5 4 3 2 1)


def test_cv_cell_rows_equal_with_the_reference_path(monkeypatch):
    """A whole CV cell of the study (per-fold Grams, two scorers) gives the ROC and PR arrays
    of the same cell computed with the step-by-step reference, to 1e-12."""
    from experiments._protocol import Dataset, run_cv_cell

    rng = np.random.default_rng(2)
    X = np.cumsum(rng.normal(size=(30, 15, 2)), axis=1)
    y = np.array(["a", "b", "c"] * 10)
    data = Dataset("tiny", X, y, X[:9].copy(), y[:9].copy())
    config = {"folds": 3, "repeats": 1, "seed": 1, "share": "fold", "alphas": [1e-8, 1e-2],
              "max_rank": 6, "sse_lams": [1e-3], "threshold": 1e-10,
              "preprocessing": {"max_length": 100, "clip": 5.0, "eps": 1e-4, "basepoint": True},
              "device": None, "threads": 1, "rank_rule": "ours"}  # fmt: skip
    cell = {"cls": "a", "kernel": "rand_sig_tanh",
            "point": {"features": 25, "variance": 0.1, "seed": 0}, "levels": None,
            "time_channel": True, "scorers": ["conformance", "mahalanobis"]}  # fmt: skip
    got = run_cv_cell(cell, data, config)
    monkeypatch.setattr(RandomizedSignatureKernel, "_euler_cpu", RandomizedSignatureKernel._euler)
    ref = run_cv_cell(cell, data, config)
    assert len(got) == len(ref) > 0
    for g, r in zip(got, ref):
        assert (g["scorer"], g["params"], g["error"]) == (r["scorer"], r["params"], r["error"])
        assert np.allclose(g["roc"], r["roc"], rtol=1e-12, atol=1e-12, equal_nan=True)
        assert np.allclose(g["pr"], r["pr"], rtol=1e-12, atol=1e-12, equal_nan=True)
