"""A million-series corpus on disk: KernelNoveltyDetector(approximation="features") fitted on a
memory-mapped ``.npy`` and scored, time and peak memory against N (issue 34, item 5).

Target: 10^6 corpus series (T = 100, d = 6, float32, memory-mapped) fitted plus 10^5 scored in
at most 30 min and 8 GiB on 2 cores, with a progress bar; time linear in N.

**Data** (:func:`make_memmap`, seeded): Gaussian random walks, ``cumsum`` of N(0, 0.1^2)
steps per channel, written block by block (``BLOCK`` series at a time) into a ``.npy`` under
``--dir`` (default /tmp; never the repository) with ``numpy.lib.format.open_memmap``, so the
generator's memory is one block. 10^6 x 100 x 6 float32 = 2.4 GB.

**Detector**: ``FlattenedKernel(RBF(sigma))`` (sigma = median distance of 1,000 pre-processed
corpus series), ``approximation="features"`` (random Fourier features, D = ``--n-components``),
1-NN scorer, ``verbose=True`` (the project's tqdm bar). The corpus is
``np.load(path, mmap_mode="r")[:N]``: a memory map, so ``fit`` streams it in blocks
(novelty/detector/_streaming.py: float32 features, blocked nearest-neighbour search). With
``--in-memory`` the corpus is ``np.asarray(...)`` instead: the in-memory path (the "before").
The test set is the ``--n-test`` series after the largest N of the file (default N // 10 after
the N-th series), read into memory.

**Measurement** (each N in its own subprocess, so peak RSS is its own): wall time and CPU
seconds (user + system, all threads) of fit and of score, peak RSS (VmHWM of the subprocess;
the 10^6 row of 2026-11-27 used ``ru_maxrss``, which on Linux also counts the parent's peak
before the fork, 2.4 GB from writing the file: an upper bound),
the load average (``os.getloadavg``) at start and end. Other sessions share the 2 cores, so
wall time depends on the load; CPU seconds less so (``cpu_s / 2`` is the wall time two idle
cores would need if both were busy throughout: an estimate, labelled so). Scoring costs
O(n_test N D): at a fixed ``--n-test`` both fit and score are linear in N, and the time to
score 10^5 is projected from n_test by the factor 10^5 / n_test (the same work per query).
A least-squares line time ~ N gives slope and R^2.

``--dask``: after the single-process fit, the same fit again with the feature pass on a Dask
``LocalCluster(n_workers=2, threads_per_worker=1)`` (``novelty.detector._streaming
.mapping_blocks``), in the same subprocess; its wall time, the driver's CPU seconds, the
workers' peak RSS, and the calibration scores against the serial fit's (equal up to the order
of additions inside the matrix products: one thread per worker against two).

    python benchmarks/bench_million.py run --n 10000 100000 --n-test 10000 \
        --out results/million.json
    python benchmarks/bench_million.py run --n 100000 --n-test 10000 --dask
    python benchmarks/bench_million.py report --from-json results/million.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

BLOCK = 20_000


def make_memmap(path: Path, n: int, seed: int, *, T: int = 100, d: int = 6) -> Path:
    """Write n seeded random walks (n, T, d) float32 to ``path`` (.npy) block by block; an
    existing file of the right shape is kept."""
    path = Path(path)
    if path.exists():
        old = np.load(path, mmap_mode="r")
        if old.shape == (n, T, d) and old.dtype == np.float32:
            return path
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, T, d))
    rng = np.random.default_rng(seed)
    for i in range(0, n, BLOCK):
        m = min(BLOCK, n - i)
        out[i : i + m] = np.cumsum(0.1 * rng.standard_normal((m, T, d)), axis=1, dtype=np.float32)
    out.flush()
    del out
    return path


def _peak_rss_gib() -> float:
    """Peak resident memory of this process: VmHWM of /proc/self/status, the high-water mark
    of this program's own memory (``ru_maxrss`` instead where there is no /proc: on Linux it
    also keeps the parent's peak from before the fork, a floor that hides smaller peaks)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def dask_mapper(client):
    """A ``mapping_blocks`` mapper on a Dask client: one task per block, results as they
    complete (each released once copied)."""
    from distributed import as_completed

    def mapper(func, args):
        futures = [client.submit(func, *a, pure=False) for a in args]
        position = {f.key: p for p, f in enumerate(futures)}
        for f in as_completed(futures):
            yield position[f.key], f.result()
            f.release()

    return mapper


def _detector(sigma: float, n_components: int):
    import tskernels as tk
    from novelty import KernelNoveltyDetector

    return KernelNoveltyDetector(
        kernel=tk.FlattenedKernel(tk.RBF(sigma)),
        scorer="knn",
        approximation="features",
        n_components=n_components,
        verbose=True,
    )


def one(args) -> dict:
    """Fit on the first N series of the memory map, score n_test series (subprocess part)."""
    from benchmarks.bench_scale import median_sigma

    load0 = os.getloadavg()
    X = np.load(args.path, mmap_mode="r")
    N = args.n
    n_test = args.n_test or max(1, N // 10)
    t_start = args.test_start if args.test_start is not None else N
    if max(N, 0 if args.test_path else t_start + n_test) > len(X):
        raise SystemExit(f"the memory map holds {len(X)} series, fewer than needed")
    corpus, test = X[:N], np.asarray(X[t_start : t_start + n_test])
    if args.test_path:  # a second file (another seed): n_test series beside the N of X
        test = np.asarray(np.load(args.test_path, mmap_mode="r")[:n_test])
    if args.in_memory:
        corpus = np.asarray(corpus)
    sigma = median_sigma(np.asarray(X[:1000]))
    det = _detector(sigma, args.n_components)
    c0, t0 = _cpu_s(), time.perf_counter()
    det.fit(corpus)
    c1, t1 = _cpu_s(), time.perf_counter()
    s = det.score_samples(test)
    c2, t2 = _cpu_s(), time.perf_counter()
    assert np.isfinite(s).all()
    row = {
        "n_corpus": N,
        "n_test": n_test,
        "n_components": args.n_components,
        "path": type(det.members_[0]).__name__,
        "fit_s": t1 - t0,
        "score_s": t2 - t1,
        "total_s": t2 - t0,
        "fit_cpu_s": c1 - c0,
        "score_cpu_s": c2 - c1,
        "cpu_s": c2 - c0,
        "peak_rss_gib": _peak_rss_gib(),
        "load_start": " ".join(f"{v:.2f}" for v in load0),
        "load_end": " ".join(f"{v:.2f}" for v in os.getloadavg()),
    }
    if args.dask:
        row.update(_dask_fit(det, corpus, sigma, args.n_components))
    return row


def _worker_cpu_s() -> float:
    return _cpu_s()


def _warm_worker() -> None:
    import novelty.detector._streaming  # noqa: F401


def _dask_fit(det, corpus, sigma: float, n_components: int) -> dict:
    """The same fit with the feature pass on LocalCluster(2 workers x 1 thread)."""
    from distributed import Client, LocalCluster

    from novelty.detector._streaming import mapping_blocks

    serial = det.calibration_scores_.copy()
    det.members_ = None  # the serial fit's features freed before the second fit
    t = time.perf_counter()
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(_warm_worker)  # imports on the workers, outside the timing
        start_s = time.perf_counter() - t
        load0 = os.getloadavg()
        d2 = _detector(sigma, n_components)
        cpu0 = client.run(_worker_cpu_s)
        c0, t0 = _cpu_s(), time.perf_counter()
        with mapping_blocks(dask_mapper(client)):
            d2.fit(corpus)
        c1, t1 = _cpu_s(), time.perf_counter()
        workers = client.run(_peak_rss_gib)
        cpu = client.run(_worker_cpu_s)
    return {
        "dask_cluster_start_s": start_s,
        "dask_fit_s": t1 - t0,
        "dask_driver_cpu_s": c1 - c0,
        "dask_workers_cpu_s": float(sum(cpu.values()) - sum(cpu0.values())),
        "dask_workers_peak_rss_gib": [float(v) for v in workers.values()],
        "dask_equal_bitwise": bool(np.array_equal(d2.calibration_scores_, serial)),
        "dask_max_abs_diff": float(np.abs(d2.calibration_scores_ - serial).max()),
        "dask_load_start": " ".join(f"{v:.2f}" for v in load0),
    }


def linear_fit(rows: list[dict], key: str = "fit_s") -> dict:
    """Least-squares ``key`` = a + b N over the rows: slope b (s per series), intercept a,
    R^2, and the line's value at N = 10^6."""
    n = np.array([r["n_corpus"] for r in rows], dtype=float)
    t = np.array([r[key] for r in rows], dtype=float)
    if len(n) < 2:
        return {}
    b, a = np.polyfit(n, t, 1)
    res = t - (a + b * n)
    r2 = 1.0 - float(res @ res) / float(((t - t.mean()) ** 2).sum())
    return {
        "slope_s_per_series": float(b),
        "intercept_s": float(a),
        "r2": r2,
        "at_1e6_s": float(a + b * 1e6),
    }


def report(rows: list[dict]) -> str:
    """Markdown table, the lines fit_s ~ N and (at one n_test) score_s ~ N, and the projected
    time of 10^5 scored (score_s x 10^5 / n_test: the same work per query)."""
    cols = ["n_corpus", "n_test", "path", "fit_s", "score_s", "total_s", "fit_cpu_s"]
    cols += ["score_cpu_s", "peak_rss_gib", "load_start", "load_end"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    rows = sorted(rows, key=lambda r: (r["n_corpus"], r.get("path", "")))
    for r in rows:
        cells = [f"{r[c]:.3f}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in cols]
        out.append("| " + " | ".join(cells) + " |")
    streamed = [r for r in rows if r.get("path") == "StreamedMember"]
    for key in ("fit_s", "fit_cpu_s", "score_cpu_s", "cpu_s"):
        same_test = [r for r in streamed if r["n_test"] == streamed[-1]["n_test"]]
        fit = linear_fit(streamed if key.startswith("fit") else same_test, key)
        if fit:
            out.append(
                f"\nLine {key} ~ N (streamed rows): slope {fit['slope_s_per_series'] * 1e3:.3f} "
                f"ms/series, intercept {fit['intercept_s']:.1f} s, R^2 = {fit['r2']:.4f}."
            )
    for r in streamed:
        f = 1e5 / r["n_test"]
        out.append(
            f"\nN = {r['n_corpus']}: 10^5 scored, projected from {r['n_test']} measured "
            f"(x{f:g}): wall {r['fit_s'] + f * r['score_s']:.0f} s, CPU "
            f"{r['fit_cpu_s'] + f * r['score_cpu_s']:.0f} s (two idle cores: about "
            f"{(r['fit_cpu_s'] + f * r['score_cpu_s']) / 2:.0f} s, an estimate)."
        )
    for r in rows:
        if "dask_fit_s" not in r:
            continue
        same = r["dask_equal_bitwise"]
        out.append(
            f"\nN = {r['n_corpus']}, Dask LocalCluster(2 x 1 thread) fit: {r['dask_fit_s']:.1f} s "
            f"wall against {r['fit_s']:.1f} s in one process, same subprocess (cluster start "
            f"{r['dask_cluster_start_s']:.1f} s apart); driver CPU {r['dask_driver_cpu_s']:.1f} s"
            f", workers CPU {r['dask_workers_cpu_s']:.1f} s against {r['fit_cpu_s']:.1f} s, "
            f"workers' peak RSS {', '.join(f'{v:.2f}' for v in r['dask_workers_peak_rss_gib'])}"
            f" GiB; calibration scores "
            + ("bit for bit the serial fit's." if same else
               f"within {r.get('dask_max_abs_diff', float('nan')):.1e} of the serial fit's.")
        )  # fmt: skip
    return "\n".join(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--n", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    r.add_argument("--n-components", type=int, default=1000)
    r.add_argument("--n-test", type=int, default=None, help="default N // 10")
    r.add_argument("--in-memory", action="store_true", help="fit on an in-memory copy")
    r.add_argument("--dask", action="store_true")
    r.add_argument("--dir", default="/tmp")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default="results/million.json")
    o = sub.add_parser("one")
    o.add_argument("--path", required=True)
    o.add_argument("--n", type=int, required=True)
    o.add_argument("--n-components", type=int, default=1000)
    o.add_argument("--n-test", type=int, default=None)
    o.add_argument("--test-start", type=int, default=None)
    o.add_argument("--test-path", default=None, help="test series from this .npy instead")
    o.add_argument("--in-memory", action="store_true")
    o.add_argument("--dask", action="store_true")
    rep = sub.add_parser("report")
    rep.add_argument("--from-json", required=True)
    args = p.parse_args(argv)
    if args.cmd == "one":
        print(json.dumps(one(args)))
        return
    if args.cmd == "report":
        print(report(json.loads(Path(args.from_json).read_text())))
        return
    n_test_max = args.n_test or max(1, max(args.n) // 10)
    n_file = max(args.n) + n_test_max
    path = make_memmap(
        Path(args.dir) / f"bench_million_{n_file}_{args.seed}.npy", n_file, args.seed
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(out.read_text()) if out.exists() else []
    for n in args.n:
        cmd = [sys.executable, __file__, "one", "--path", str(path), "--n", str(n)]
        cmd += ["--n-components", str(args.n_components)]
        if args.n_test:  # one test set for every N: the series after the largest N
            cmd += ["--n-test", str(args.n_test), "--test-start", str(max(args.n))]
        cmd += ["--in-memory"] * args.in_memory + ["--dask"] * args.dask
        res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
        row = json.loads(res.stdout.strip().splitlines()[-1])
        key = (row["n_corpus"], row["n_test"], row["path"], row["n_components"])
        rows = [x for x in rows if (x["n_corpus"], x["n_test"], x.get("path"),
                                    x["n_components"]) != key] + [row]  # fmt: skip
        out.write_text(json.dumps(rows, indent=1))
        print(json.dumps(row), flush=True)
    print(report(rows))


if __name__ == "__main__":
    main()
