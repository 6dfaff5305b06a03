"""benchmarks/bench_million.py: the memory-mapped corpus is written block by block (peak
memory of the generator about one block, not the file), seeded, and read back by the detector
without a change of results; the linear fit of time ~ N against a known line."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from benchmarks import bench_million as bm


def test_memmap_generator_memory_is_one_block(tmp_path, monkeypatch):
    monkeypatch.setattr(bm, "BLOCK", 500)
    n, T, d = 20_000, 100, 6  # file 48 MB; one block 500 x 100 x 6 float64 = 2.4 MB
    tracemalloc.start()
    path = bm.make_memmap(tmp_path / "x.npy", n, seed=3, T=T, d=d)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    file_bytes = n * T * d * 4
    assert peak < 4 * 500 * T * d * 8  # a few blocks of float64 temporaries
    assert peak < file_bytes / 5
    X = np.load(path, mmap_mode="r")
    assert X.shape == (n, T, d) and X.dtype == np.float32
    # random walks: the steps are N(0, 0.1^2), independent of the position
    steps = np.diff(np.asarray(X[:2000], dtype=np.float64), axis=1)
    assert abs(steps.std() - 0.1) < 0.002
    # seeded: the same seed, the same file
    again = bm.make_memmap(tmp_path / "y.npy", n, seed=3, T=T, d=d)
    np.testing.assert_array_equal(np.load(again, mmap_mode="r")[-5:], X[-5:])


def test_detector_on_memmap_equals_in_memory(tmp_path):
    import tskernels as tk
    from novelty import KernelNoveltyDetector

    path = bm.make_memmap(tmp_path / "x.npy", 600, seed=1, T=20, d=3)
    X = np.load(path, mmap_mode="r")

    def det():
        return KernelNoveltyDetector(
            kernel=tk.FlattenedKernel(tk.RBF(3.0)),
            scorer="knn",
            approximation="features",
            n_components=64,
        )

    a = det().fit(X[:500]).score_samples(X[500:])
    b = det().fit(np.array(X[:500])).score_samples(np.array(X[500:]))
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_linear_fit_recovers_a_known_line():
    rows = [{"n_corpus": n, "fit_s": 5.0 + 2e-3 * n} for n in (1e4, 3e4, 1e5)]
    fit = bm.linear_fit(rows)
    assert fit["slope_s_per_series"] == pytest.approx(2e-3)
    assert fit["intercept_s"] == pytest.approx(5.0)
    assert fit["r2"] == pytest.approx(1.0)
    rows[1]["fit_s"] += 50.0  # off the line: R^2 drops
    assert bm.linear_fit(rows)["r2"] < 0.99
