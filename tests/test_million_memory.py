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
    # the memory map is fitted in blocks, its features stored in float32 (novelty/detector/
    # _streaming.py: each distance moves by at most 2^-24 max ||Phi|| = 6e-8)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_linear_fit_recovers_a_known_line():
    rows = [{"n_corpus": n, "fit_s": 5.0 + 2e-3 * n} for n in (1e4, 3e4, 1e5)]
    fit = bm.linear_fit(rows)
    assert fit["slope_s_per_series"] == pytest.approx(2e-3)
    assert fit["intercept_s"] == pytest.approx(5.0)
    assert fit["r2"] == pytest.approx(1.0)
    rows[1]["fit_s"] += 50.0  # off the line: R^2 drops
    assert bm.linear_fit(rows)["r2"] < 0.99


# ---------------------------------------------------------------- the streamed fit (_streaming)
def _det(kernel=None, **kw):
    import tskernels as tk
    from novelty import KernelNoveltyDetector

    return KernelNoveltyDetector(
        kernel=kernel if kernel is not None else tk.FlattenedKernel(tk.RBF(3.0)),
        scorer="knn",
        approximation="features",
        n_components=64,
        **kw,
    )


@pytest.mark.parametrize(
    "kernel, kw",
    [
        ("flat", {}),
        ("flat", {"preprocess": "step"}),
        ("flat", {"preprocess": False, "normalize": False}),
        ("integral", {"scorer_params": {"n_neighbors": 3}}),
    ],
)
def test_streamed_fit_equals_in_memory_within_float32_storage(tmp_path, kernel, kw):
    """A memory map takes the streamed path (float32 corpus features); its scores, calibration
    and threshold are the in-memory detector's within the documented bound 2^-24 max||Phi||
    (plus float32 near-ties), checked at 1e-6, and its flags and p-values are equal."""
    import tskernels as tk
    from novelty.detector._streaming import StreamedMember

    k = tk.FlattenedKernel(tk.RBF(3.0)) if kernel == "flat" else tk.IntegralKernel(tk.RBF(2.0))
    path = bm.make_memmap(tmp_path / "x.npy", 1400, seed=1, T=20, d=3)
    X = np.load(path, mmap_mode="r")
    a = _det(k, **kw).fit(X[:1200])
    b = _det(k, **kw).fit(np.array(X[:1200]))
    assert isinstance(a.members_[0], StreamedMember)
    assert not isinstance(b.members_[0], StreamedMember)
    test = np.array(X[1200:])
    sa, sb = a.score_samples(X[1200:]), b.score_samples(test)
    assert np.abs(sa - sb).max() < 1e-6
    assert np.abs(sa - sb).max() > 0  # float32 storage: not the same computation
    np.testing.assert_allclose(a.calibration_scores_, b.calibration_scores_, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(
        a.members_[0].calibration_indices_, b.members_[0].calibration_indices_
    )
    assert a.threshold_ == pytest.approx(b.threshold_, abs=1e-6)
    np.testing.assert_array_equal(a.predict(test), b.predict(test))
    np.testing.assert_allclose(a.p_values(test), b.p_values(test), atol=1e-12)
    if kw.get("preprocess", True):
        za, zb = a.members_[0].preprocessor_.zscore_, b.members_[0].preprocessor_.zscore_
        np.testing.assert_allclose(za.mean_, zb.mean_, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(za.std_, zb.std_, rtol=1e-12)


def test_streamed_fit_holds_copies_out_together(tmp_path):
    """Exact copies in a memory-mapped corpus: the same duplicate groups and calibration set as
    the in-memory fit (a copy never scores its twin at 0 in the calibration)."""
    from novelty.detector._members import duplicate_groups

    path = bm.make_memmap(tmp_path / "x.npy", 900, seed=2, T=15, d=2)
    X = np.lib.format.open_memmap(path, mode="r+")
    X[10] = X[3]
    X[11] = X[3]
    X[500] = X[7]
    X.flush()
    X = np.load(path, mmap_mode="r")
    a = _det().fit(X)
    b = _det().fit(np.array(X))
    ga = a.members_[0].duplicate_groups_
    np.testing.assert_array_equal(ga, duplicate_groups(np.array(X, dtype=np.float64)))
    np.testing.assert_array_equal(ga, b.members_[0].duplicate_groups_)
    np.testing.assert_array_equal(
        a.members_[0].calibration_indices_, b.members_[0].calibration_indices_
    )
    np.testing.assert_allclose(a.calibration_scores_, b.calibration_scores_, atol=1e-6)
    assert (a.calibration_scores_ > 1e-3).all()


def test_streamed_path_only_for_memory_maps(tmp_path):
    """In-memory arrays, other scorers and labelled fits keep the in-memory path."""
    from novelty.detector._streaming import StreamedMember

    path = bm.make_memmap(tmp_path / "x.npy", 300, seed=1, T=10, d=2)
    X = np.load(path, mmap_mode="r")
    assert isinstance(_det().fit(X).members_[0], StreamedMember)
    assert not isinstance(_det().fit(np.asarray(X).copy()).members_[0], StreamedMember)
    m = _det(scorer_params=None).set_params(scorer="mahalanobis").fit(X).members_[0]
    assert not isinstance(m, StreamedMember)
    y = np.zeros(300, dtype=int)
    assert not isinstance(_det().fit(X, y).members_[0], StreamedMember)
    small = _det().set_params(n_components=400).fit(X).members_[0]  # N <= n_components: exact
    assert not isinstance(small, StreamedMember)


def test_streamed_fit_refuses_bad_blocks(tmp_path):
    """A non-finite value in the map is refused as fit refuses it in memory."""
    path = bm.make_memmap(tmp_path / "x.npy", 300, seed=1, T=10, d=2)
    X = np.lib.format.open_memmap(path, mode="r+")
    X[250, 3, 1] = np.inf
    X.flush()
    with pytest.raises(ValueError, match="infinite|finite"):
        _det().fit(np.load(path, mmap_mode="r"))


def test_block_reader_reads_slices_from_the_file(tmp_path):
    import pickle

    from novelty.detector._streaming import BlockReader

    path = bm.make_memmap(tmp_path / "x.npy", 5000, seed=4, T=7, d=3)
    X = np.load(path, mmap_mode="r")
    for view in (X, X[1234:4321], X[4999:]):
        r = BlockReader(view)
        assert r.path is not None  # read by file, not through the map
        r = pickle.loads(pickle.dumps(r))
        n = len(view)
        for i, j in ((0, n), (n // 3, n // 2), (n - 1, n)):
            np.testing.assert_array_equal(r(i, j), view[i:j])
    assert BlockReader(np.asarray(X[:10]).copy()).path is None


@pytest.mark.parametrize("k", [1, 3])
def test_nearest_in_blocks_equals_brute_force(k):
    """Tiled float32 candidates + float64 recomputation = a float64 brute force on the same
    stored rows (tiny tiles: many query and corpus blocks), with left-out pairs."""
    import torch

    from novelty.detector._streaming import nearest_in_blocks

    g = torch.Generator().manual_seed(0)
    E = torch.randn(3000, 40, generator=g, dtype=torch.float64).to(torch.float32)
    Q = torch.randn(250, 40, generator=g, dtype=torch.float64)
    ee, qe = (
        torch.rand(3000, generator=g, dtype=torch.float64),
        torch.rand(250, generator=g, dtype=torch.float64),
    )
    qpos = torch.arange(250).repeat_interleave(2)
    crow = torch.randint(0, 3000, (500,), generator=g)
    D2 = torch.cdist(Q, E.double()) ** 2 + ee[None, :] + qe[:, None]
    D2[qpos, crow] = float("inf")
    want_v, want_j = torch.topk(D2, k, dim=1, largest=False)
    v, j = nearest_in_blocks(
        Q, E, k, q_extra=qe, e_extra=ee, exclude=(qpos, crow), block_bytes=4 * 64 * 300
    )
    torch.testing.assert_close(v, want_v, rtol=1e-12, atol=1e-12)
    assert torch.equal(j, want_j)
    # the leave-one-out form: a row never finds itself
    v, j = nearest_in_blocks(
        E[:100].double(),
        E,
        1,
        exclude=(torch.arange(100), torch.arange(100)),
        block_bytes=4 * 50 * 200,
    )
    assert not torch.equal(j[:, 0], torch.arange(100))
    assert (j[:, 0] != torch.arange(100)).all()


STREAM_MEMORY = """
import json, sys, numpy as np, tskernels as tk
from novelty import KernelNoveltyDetector
from novelty.detector import _streaming
_streaming.BLOCK_BYTES = 8 * 2**20
_streaming.NN_BLOCK_BYTES = 8 * 2**20
def det():
    return KernelNoveltyDetector(kernel=tk.FlattenedKernel(tk.RBF(3.0)), scorer="knn",
                                 approximation="features", n_components=64)
def peak():  # this program's high-water mark (ru_maxrss would keep pytest's, from the fork)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
X = np.load(sys.argv[1], mmap_mode="r")
det().fit(X[:300]).score_samples(np.asarray(X[-10:]))  # warm-up: imports, thread pools
p0 = peak()
d = det().fit(X)
p1 = peak()
det().fit(np.asarray(X))  # the in-memory path: a float64 copy of the corpus and more
p2 = peak()
print(json.dumps({"stream": p1 - p0, "memory": p2 - p1, "kind": type(d.members_[0]).__name__}))
"""


@pytest.mark.slow
def test_streamed_fit_memory_is_features_plus_blocks(tmp_path):
    """The promise of the streamed fit (module docstring): peak resident memory grows by the
    float32 features (4 N D bytes), O(100 N) for the digests and residuals and a few blocks,
    not by the corpus (its float64 copy is 8 N T d bytes: 183 MiB here); the in-memory fit of
    the same array in the same process grows by more than the bound (the measurement sees a
    copy of the corpus)."""
    import json
    import subprocess
    import sys

    n, T, d, D = 40_000, 100, 6, 64
    path = bm.make_memmap(tmp_path / "x.npy", n, seed=5, T=T, d=d)
    out = subprocess.run(
        [sys.executable, "-c", STREAM_MEMORY, str(path)],
        capture_output=True, text=True, check=True, cwd=bm.REPO,
    )  # fmt: skip
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["kind"] == "StreamedMember"
    bound = 4 * n * D + 200 * n + 4 * 8 * 2**20 + 32 * 2**20
    corpus64 = 8 * n * T * d
    assert bound < corpus64 / 2  # the bound itself excludes a copy of the corpus
    assert r["stream"] < bound, (r, bound)
    assert r["memory"] > bound, (r, bound)


def test_streamed_fit_progress_reaches_its_plan(tmp_path):
    """The progress bar of a streamed fit and its scoring: every planned step is taken (the
    blocks of both passes, the calibration; one step per scored batch)."""
    from novelty.detector import _progress, _streaming

    class Bar:
        total = n = 0

        def update(self, k=1):
            self.n += k

        def refresh(self):
            pass

        def set_postfix_str(self, s, refresh=False):
            self.label = s

    path = bm.make_memmap(tmp_path / "x.npy", 3000, seed=1, T=12, d=2)
    X = np.load(path, mmap_mode="r")
    old = _streaming.BLOCK_BYTES, _streaming.SCORE_BATCH
    _streaming.BLOCK_BYTES, _streaming.SCORE_BATCH = 8 * 300 * (3 * 24 + 3 * 64), 100
    bar = Bar()
    token = _progress._BAR.set(bar)
    try:
        det = _det().fit(X[:2500])
        assert bar.n == bar.total >= 2 * 9  # 2500 / 300 rows: 9 blocks per pass
        fitted = bar.total
        det.score_samples(X[2500:])
        assert bar.n == bar.total == fitted + 1 + 5  # the member, 500 / 100 batches
    finally:
        _progress._BAR.reset(token)
        _streaming.BLOCK_BYTES, _streaming.SCORE_BATCH = old


def test_mapping_blocks_gives_the_serial_fit(tmp_path):
    """Pass 2 through a mapper (out of order here, as Dask's as_completed may return it) gives
    the serial fit bit for bit; a view that cannot be read by file is refused for a mapper."""
    from novelty.detector._streaming import mapping_blocks

    path = bm.make_memmap(tmp_path / "x.npy", 1500, seed=3, T=10, d=2)
    X = np.load(path, mmap_mode="r")

    def reversed_mapper(func, args):
        for p in reversed(range(len(args))):
            yield p, func(*args[p])

    from novelty.detector import _streaming

    old = _streaming.BLOCK_BYTES
    _streaming.BLOCK_BYTES = 8 * 100 * (3 * 20 + 3 * 64)  # 13 blocks
    try:
        serial = _det().fit(X[:1300])
        with mapping_blocks(reversed_mapper):
            mapped = _det().fit(X[:1300])
            with pytest.raises(ValueError, match="C-contiguous memory map"):
                _det().fit(X[:1300, ::2])
    finally:
        _streaming.BLOCK_BYTES = old
    np.testing.assert_array_equal(mapped.calibration_scores_, serial.calibration_scores_)
    np.testing.assert_array_equal(
        mapped.members_[0].scorer_.corpus_, serial.members_[0].scorer_.corpus_
    )
    np.testing.assert_array_equal(mapped.score_samples(X[1300:]), serial.score_samples(X[1300:]))


def test_streamed_detector_refuses_update_in_place_and_refits(tmp_path):
    """A detector fitted on a memory map in blocks is not updated without a refit (the
    documented refusal, before any work; the detector unchanged); update(refit=True) refits on
    the union."""
    path = bm.make_memmap(tmp_path / "x.npy", 300, seed=2, T=10, d=2)
    X = np.load(path, mmap_mode="r")
    det = _det().fit(X)
    Y = np.asarray(X[:5]) + 0.5
    before = det.score_samples(Y)
    with pytest.raises(NotImplementedError, match="memory-mapped corpus.*refit=True"):
        det.update(np.asarray(X[:4]))
    np.testing.assert_array_equal(det.score_samples(Y), before)
    assert det.update(np.asarray(X[:4]) + 0.1, refit=True).n_corpus_ == 304


def test_saving_a_streamed_detector_warns_that_loading_needs_trusted(tmp_path):
    """Its classes are outside the model files' safe list: save says so, and load refuses the
    file unless they are trusted (never silently runs code)."""
    from novelty import KernelNoveltyDetector

    path = bm.make_memmap(tmp_path / "x.npy", 300, seed=3, T=10, d=2)
    det = _det().fit(np.load(path, mmap_mode="r"))
    with pytest.warns(UserWarning, match="StreamedMember.*trusted="):
        det.save(tmp_path / "m.knd")
    with pytest.raises(ValueError, match="may not hold"):
        KernelNoveltyDetector.load(tmp_path / "m.knd")
