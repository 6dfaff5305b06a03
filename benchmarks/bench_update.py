"""``KernelNoveltyDetector.update(X_new)`` against a refit on the union (issue 23, item 4).

The default recipe (MiniRocket + 1-NN, GAK + 1-NN) is fitted on N = 1,000 normal series
(T = 100, d = 3); then, for m = 10 and m = 100 new normal series, the fitted detector (a deep
copy) is updated with them (``update(B)``, frozen features) and, separately, a detector is
fitted on the union A + B (what ``update(B, refit=True)`` costs). Reported: wall times, their
ratio (target: update >= 10x faster than the refit at N = 1,000), the CPU times of the process
beside them (on a loaded machine the wall times stretch, the CPU times much less), and how
close the updated detector's scores are to the refitted one's on 200 fresh normal series
(Spearman correlation, and the share of equal flags at contamination = 0.05).

Cost model: the refit computes the (N + m)^2 / 2 GAK alignments, the MiniRocket features of
the union eleven times (fit + 10 cross-fitting folds) and the calibration; the update computes
m (N + m / 2) alignments, the features of the union once (those of the corpus are recomputed
by the kernel, as when scoring) and merges the kNN distances. The GAK part bounds the ratio
near (N + m)^2 / (2 m N): about 50 at m = 10 and 6 at m = 100.

**Synthetic data** (seeded): each series mixes 3 latent signals (each a sum of 3 sines with
random frequency in [0.5, 3] cycles per series, phase and amplitude in [0.5, 1.5]) into the d
channels by one mixing matrix shared by all series, plus N(0, 0.1^2) noise.

    python benchmarks/bench_update.py [--n-corpus 1000] [--new 10 100] [--json out.json]

Not a test (minutes); the measured table is in docs/update.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def make_series(n: int, T: int = 100, d: int = 3, seed: int = 0) -> np.ndarray:
    """``n`` normal series (T, d): 3 latent sums of sines mixed into d channels (docstring)."""
    mixing = np.random.default_rng(12345).normal(size=(3, d))
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, T)
    freq = rng.uniform(0.5, 3.0, size=(n, 3, 3, 1))
    phase = rng.uniform(0.0, 2 * np.pi, size=(n, 3, 3, 1))
    amp = rng.uniform(0.5, 1.5, size=(n, 3, 3, 1))
    latent = (amp * np.sin(2 * np.pi * freq * t + phase)).sum(axis=2)  # (n, 3, T)
    X = np.einsum("nlt,ld->ntd", latent, mixing)
    return X + rng.normal(scale=0.1, size=X.shape)


def _timed(fn):
    """(result, wall seconds, CPU seconds of this process: all its threads)."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - start, time.process_time() - cpu


def run(n_corpus: int, new_sizes: list[int], seed: int = 0) -> dict:
    import torch
    from scipy.stats import spearmanr

    from novelty import KernelNoveltyDetector

    warnings.simplefilter("ignore")
    n_max = max(new_sizes)
    X = make_series(n_corpus + n_max + 200, seed=seed)
    A, pool, test = X[:n_corpus], X[n_corpus : n_corpus + n_max], X[n_corpus + n_max :]
    load_before = os.getloadavg()
    fitted, fit_s, fit_cpu = _timed(lambda: KernelNoveltyDetector().fit(A))
    rows = []
    for m in new_sizes:
        B = pool[:m]
        det = copy.deepcopy(fitted)
        _, update_s, update_cpu = _timed(lambda det=det, B=B: det.update(B))
        refit, refit_s, refit_cpu = _timed(lambda B=B: KernelNoveltyDetector().fit(np.r_[A, B]))
        s_up, s_re = det.score_samples(test), refit.score_samples(test)
        rows.append(
            {
                "n_new": m,
                "update_s": update_s,
                "refit_s": refit_s,
                "ratio": refit_s / update_s,
                "update_cpu_s": update_cpu,
                "refit_cpu_s": refit_cpu,
                "ratio_cpu": refit_cpu / update_cpu,
                "spearman": float(spearmanr(s_up, s_re).statistic),
                "same_flags": float((det.predict(test) == refit.predict(test)).mean()),
                "flag_rate_update": float((det.predict(test) == -1).mean()),
                "flag_rate_refit": float((refit.predict(test) == -1).mean()),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return {
        "n_corpus": n_corpus,
        "T": 100,
        "d": 3,
        "fit_s": fit_s,
        "fit_cpu_s": fit_cpu,
        "rows": rows,
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "load_before": load_before,
            "load_after": os.getloadavg(),
        },
    }


def report(result: dict) -> str:
    m = result["machine"]
    lines = [
        f"Default recipe, N = {result['n_corpus']} synthetic series (T = {result['T']}, "
        f"d = {result['d']}); fit on N: {result['fit_s']:.1f} s wall, "
        f"{result['fit_cpu_s']:.1f} s CPU. Machine: {m['cpus']} cores, "
        f"torch {m['torch_threads']} threads, load average (1, 5, 15 min) "
        f"{', '.join(f'{v:.1f}' for v in m['load_before'])} before and "
        f"{', '.join(f'{v:.1f}' for v in m['load_after'])} after.",
        "",
        "| new series | update: wall / CPU (s) | refit on union: wall / CPU (s) | refit / "
        "update: wall, CPU | Spearman (scores) | equal flags | flag rate update / refit |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['n_new']} | {r['update_s']:.2f} / {r['update_cpu_s']:.2f} | "
            f"{r['refit_s']:.1f} / {r['refit_cpu_s']:.1f} | "
            f"{r['ratio']:.1f}x, {r['ratio_cpu']:.1f}x | "
            f"{r['spearman']:.4f} | {r['same_flags']:.3f} | "
            f"{r['flag_rate_update']:.3f} / {r['flag_rate_refit']:.3f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-corpus", type=int, default=1000)
    parser.add_argument("--new", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = run(args.n_corpus, args.new, args.seed)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
