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
``np.load(path, mmap_mode="r")[:N]``; the test set is the next ``N // 10`` series of the file
(at N = 10^6 a second file of 10^5 series).

**Measurement** (each N in its own subprocess, so peak RSS is its own): wall time of fit and
score, CPU seconds of the process (user + system: other sessions share the cores, so wall time
depends on the load; CPU time less so), peak RSS (``resource.getrusage``; includes the pages of
the memory map that were read), the load average (``os.getloadavg``) at start and end. A
least-squares line fit_s ~ N with its slope and R^2 is fitted over the measured N; 1-NN
scoring costs O(n_test N D) and is reported per (test, corpus) pair.

    python benchmarks/bench_million.py run --n 10000 30000 100000 --out results/million.json
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
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one(args) -> dict:
    """Fit on the first N series of the memory map, score the next N // 10 (subprocess part)."""
    import tskernels as tk
    from benchmarks.bench_scale import median_sigma
    from novelty import KernelNoveltyDetector

    load0 = os.getloadavg()
    X = np.load(args.path, mmap_mode="r")
    N = args.n
    n_test = max(1, N // 10)
    if N + n_test > len(X):
        raise SystemExit(f"the memory map holds {len(X)} series, fewer than {N + n_test}")
    corpus, test = X[:N], X[N : N + n_test]
    sigma = median_sigma(np.asarray(X[:1000]))
    det = KernelNoveltyDetector(
        kernel=tk.FlattenedKernel(tk.RBF(sigma)),
        scorer="knn",
        approximation="features",
        n_components=args.n_components,
        verbose=True,
    )
    c0, t0 = _cpu_s(), time.perf_counter()
    det.fit(corpus)
    t1 = time.perf_counter()
    s = det.score_samples(test)
    t2, c2 = time.perf_counter(), _cpu_s()
    assert np.isfinite(s).all()
    return {
        "n_corpus": N,
        "n_test": n_test,
        "n_components": args.n_components,
        "fit_s": t1 - t0,
        "score_s": t2 - t1,
        "total_s": t2 - t0,
        "cpu_s": c2 - c0,
        "peak_rss_gib": _peak_rss_gib(),
        "load_start": " ".join(f"{v:.2f}" for v in load0),
        "load_end": " ".join(f"{v:.2f}" for v in os.getloadavg()),
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
    """Markdown table, the fit line fit_s ~ N and the 1-NN scoring rate per (test, corpus)
    pair: scoring N // 10 series against N costs O(N^2 / 10), so total time is not linear in
    N here; at a fixed 10^5 scored it is (one pass over the corpus per test block)."""
    cols = ["n_corpus", "n_test", "fit_s", "score_s", "total_s", "cpu_s", "peak_rss_gib"]
    cols += ["load_start", "load_end"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in sorted(rows, key=lambda r: r["n_corpus"]):
        cells = [f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        out.append("| " + " | ".join(cells) + " |")
    fit = linear_fit(rows, "fit_s")
    if fit:
        big = max(rows, key=lambda r: r["n_corpus"])
        pair_s = big["score_s"] / (big["n_corpus"] * big["n_test"])
        out += [
            "",
            f"Line fit_s ~ N: slope {fit['slope_s_per_series'] * 1e3:.3f} ms/series, "
            f"intercept {fit['intercept_s']:.1f} s, R^2 = {fit['r2']:.4f}. Scoring rate at the "
            f"largest N: {pair_s * 1e9:.2f} ns per (test, corpus) pair. Projected (not "
            f"measured) at N = 10^6 + 10^5 scored: fit {fit['at_1e6_s']:.0f} s + score "
            f"{pair_s * 1e11:.0f} s = {fit['at_1e6_s'] + pair_s * 1e11:.0f} s.",
        ]
    return "\n".join(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--n", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    r.add_argument("--n-components", type=int, default=1000)
    r.add_argument("--dir", default="/tmp")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default="results/million.json")
    o = sub.add_parser("one")
    o.add_argument("--path", required=True)
    o.add_argument("--n", type=int, required=True)
    o.add_argument("--n-components", type=int, default=1000)
    rep = sub.add_parser("report")
    rep.add_argument("--from-json", required=True)
    args = p.parse_args(argv)
    if args.cmd == "one":
        print(json.dumps(one(args)))
        return
    if args.cmd == "report":
        print(report(json.loads(Path(args.from_json).read_text())))
        return
    n_file = max(args.n) + max(1, max(args.n) // 10)
    path = make_memmap(
        Path(args.dir) / f"bench_million_{n_file}_{args.seed}.npy", n_file, args.seed
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(out.read_text()) if out.exists() else []
    for n in args.n:
        cmd = [
            sys.executable,
            __file__,
            "one",
            "--path",
            str(path),
            "--n",
            str(n),
            "--n-components",
            str(args.n_components),
        ]
        res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
        row = json.loads(res.stdout.strip().splitlines()[-1])
        rows = [x for x in rows if x["n_corpus"] != n] + [row]
        out.write_text(json.dumps(rows, indent=1))
        print(json.dumps(row), flush=True)
    print(report(rows))


if __name__ == "__main__":
    main()
