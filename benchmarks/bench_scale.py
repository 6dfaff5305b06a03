"""Large corpora: KernelNoveltyDetector(approximation="nystroem") at scale, and its accuracy
against the exact detector where both run (issue 15, item 1).

Targets: 100,000 corpus series (T = 100, d = 6, float32) fitted plus 20,000 scored with
``approximation="nystroem", n_components=1000`` in at most 600 s and 8 GiB on 2 cores; at
N = 3,000 ROC-AUC within 0.01 of the exact detector.

**Kernel.** The RBF kernel on the flattened pre-processed series
(``FlattenedKernel(RBF(sigma))``, sigma = the median distance between 1,000 pre-processed,
flattened corpus series; k(x, x) = 1) with the 1-NN scorer (the default recipe's scorer).
One pair costs O(T d) in one matrix product: the 120,000 x 1,000 cross-Gram takes seconds.
The integral RBF kernel was the first choice (a candidate of the since retired
``kernel="auto"``); measured on this machine (loaded by other jobs) its 4,000 x 1,000
cross-Gram took 36 s against 0.7 s for the flattened RBF (its (T, n, m) intermediates are
memory-bound), which puts the 100k target out of reach on 2 cores. The default recipe is not
used at 100,000 series: its GAK member costs O(T^2) per pair (1.2e8 pairs x 1e4 cells) and
would alone exceed 600 s on 2 cores; its MiniRocket member would use its exact 10,000 features
("features"), ten times the 1-NN search of M = 1,000.

**Synthetic data** (:func:`make_series`, seeded): each series mixes L = 3 latent signals into
d channels with one mixing matrix shared by all series (drawn from seed 12345), each latent a
sum of 3 sines with random frequency in [0.5, 3] cycles per series, phase and amplitude in
[0.5, 1.5], plus N(0, 0.1^2) noise per entry. Anomalies (10 % of each test set, equal shares):
``bump`` (a Gaussian bump of height 3 and width 3 steps at a random time in one channel),
``frequency`` (one latent replaced by a sine of 6-9 cycles), ``decouple`` (one channel
replaced by an independent latent, breaking the mixing). float32.

**Parts** (each in a subprocess, so that peak RSS is its own):

- ``target``: fit on ``--n-corpus`` (100,000) normal series, score ``--n-test`` (20,000): wall
  time of fit and score, peak RSS (``resource.getrusage``, includes the data), ROC-AUC;
- ``accuracy``: N = ``--n-exact`` (3,000) corpus, 2,000 test series: exact vs nystroem
  (M = 1000, each landmark rule), kNN and conformance scorers;
- ``uea``: UEA data sets, test = the whole test split. The classes have 10-40 training series,
  fewer than M = 1000 (the detector is then exact), so the approximation is tested with few
  landmarks: one-vs-rest (corpus = the training series of class c, as
  benchmarks/bench_detector.py without subsampling) at M = N // 2, and leave-class-out
  (corpus = the training series of the other classes, anomalies = class c) at M = 32 and 64
  (landmarks drawn from the corpus minus the held-out calibration half).

    python benchmarks/bench_scale.py all [--write-docs docs/results_scale.md]
    python benchmarks/bench_scale.py target --n-corpus 100000 --n-test 20000 --json > t.json
    python benchmarks/bench_scale.py report --from-json t.json a.json u.json --load "..."
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

ANOMALIES = ("bump", "frequency", "decouple")


def make_series(n: int, seed: int, *, T: int = 100, d: int = 6, anomaly: str | None = None):
    """n synthetic series (n, T, d) float32 (module docstring); ``anomaly`` one of ANOMALIES."""
    mix = np.random.default_rng(12345).normal(size=(3, d)) / np.sqrt(3)
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, T)

    def latents(m, fmin=0.5, fmax=3.0):
        f = rng.uniform(fmin, fmax, size=(m, 3, 3, 1))
        ph = rng.uniform(0, 2 * np.pi, size=(m, 3, 3, 1))
        a = rng.uniform(0.5, 1.5, size=(m, 3, 3, 1))
        return (a * np.sin(2 * np.pi * f * t + ph)).sum(axis=2) / np.sqrt(3)  # (m, 3, T)

    Lat = latents(n)
    if anomaly == "frequency":
        j = rng.integers(3, size=n)
        f = rng.uniform(6.0, 9.0, size=n)
        ph = rng.uniform(0, 2 * np.pi, size=n)
        Lat[np.arange(n), j] = np.sin(2 * np.pi * f[:, None] * t + ph[:, None])
    X = np.einsum("mlt,ld->mtd", Lat, mix)
    if anomaly == "decouple":
        c = rng.integers(d, size=n)
        X[np.arange(n), :, c] = latents(n)[:, 0]
    if anomaly == "bump":
        c = rng.integers(d, size=n)
        t0 = rng.integers(5, T - 5, size=n)
        bump = 3.0 * np.exp(-0.5 * ((np.arange(T)[None, :] - t0[:, None]) / 3.0) ** 2)
        X[np.arange(n), :, c] += bump
    X += 0.1 * rng.normal(size=X.shape)
    return X.astype(np.float32)


def make_test(n: int, seed: int, frac: float = 0.1):
    """(X, y): n series, a share ``frac`` anomalous (equal shares of ANOMALIES), y 1 = anomaly."""
    n_anom = int(round(frac * n))
    parts = [make_series(n - n_anom, seed)]
    sizes = np.diff(np.linspace(0, n_anom, len(ANOMALIES) + 1).astype(int))
    for i, (kind, m) in enumerate(zip(ANOMALIES, sizes)):
        parts.append(make_series(int(m), seed + 1 + i, anomaly=kind))
    y = np.r_[np.zeros(n - n_anom), np.ones(n_anom)]
    return np.concatenate(parts), y


def median_sigma(X, n: int = 1000) -> float:
    """Median Euclidean distance between n pre-processed, flattened corpus series."""
    from tskernels.transforms import Preprocessor

    Z = Preprocessor(zscore="channel").fit(X[:n]).transform(X[:n])
    if not isinstance(Z, np.ndarray):  # unequal lengths: the flattened kernel cannot run
        raise ValueError("the flattened kernel needs equal-length series")
    F = Z.reshape(len(Z), -1)
    sq = (F * F).sum(1)
    d2 = np.clip(sq[:, None] + sq[None, :] - 2 * F @ F.T, 0, None)
    return float(np.sqrt(np.median(d2[np.triu_indices(len(F), 1)])))


def _detector(sigma: float, scorer: str, approximation, M: int, landmarks: str = "uniform"):
    import tskernels as tk
    from novelty import KernelNoveltyDetector

    return KernelNoveltyDetector(
        kernel=tk.FlattenedKernel(tk.RBF(sigma)),
        scorer=scorer,
        approximation=approximation,
        n_components=M,
        landmarks=landmarks,
    )


def _auc(y_anomaly, det, X) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y_anomaly, -det.score_samples(X)))


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


# ------------------------------------------------------------------------------ parts
def part_target(args) -> dict:
    t0 = time.perf_counter()
    X = make_series(args.n_corpus, seed=1)
    Xt, y = make_test(args.n_test, seed=2)
    sigma = median_sigma(X)
    t_data = time.perf_counter() - t0
    det = _detector(sigma, args.scorer, "nystroem", args.n_components, args.landmarks)
    t0 = time.perf_counter()
    det.fit(X)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    s = -det.score_samples(Xt)
    t_score = time.perf_counter() - t0
    from sklearn.metrics import roc_auc_score

    return {
        "n_corpus": args.n_corpus,
        "n_test": args.n_test,
        "M": args.n_components,
        "landmarks": args.landmarks,
        "scorer": args.scorer,
        "sigma": sigma,
        "data_s": t_data,
        "fit_s": t_fit,
        "score_s": t_score,
        "total_s": t_fit + t_score,
        "peak_rss_gib": _peak_rss_gib(),
        "auc": float(roc_auc_score(y, s)),
        "n_calibration": int(det.calibration_scores_.size),
        "false_alarms": float((det.predict(Xt[y == 0][:2000]) == -1).mean()),
    }


def part_accuracy(args) -> list[dict]:
    X = make_series(args.n_exact, seed=3)
    Xt, y = make_test(2000, seed=4)
    sigma = median_sigma(X)
    rows = []
    for scorer in ("knn", "conformance"):
        t0 = time.perf_counter()
        exact = _detector(sigma, scorer, None, args.n_components).fit(X)
        auc_exact = _auc(y, exact, Xt)
        t_exact = time.perf_counter() - t0
        for landmarks in ("uniform", "kmeans++", "leverage"):
            t0 = time.perf_counter()
            det = _detector(sigma, scorer, "nystroem", args.n_components, landmarks).fit(X)
            auc = _auc(y, det, Xt)
            rows.append(
                {
                    "data": "synthetic",
                    "N": args.n_exact,
                    "M": args.n_components,
                    "scorer": scorer,
                    "landmarks": landmarks,
                    "auc_exact": auc_exact,
                    "auc_nystroem": auc,
                    "diff": auc - auc_exact,
                    "exact_s": t_exact,
                    "nystroem_s": time.perf_counter() - t0,
                }
            )
    return rows


def part_uea(args) -> list[dict]:
    """Two designs per data set: one-vs-rest (corpus = the training series of class c,
    10-40 series) with M = N // 2 landmarks, and leave-class-out (corpus = the training
    series of every other class, 100-260 series; anomalies = the test series of class c) with
    M = 32 and 64."""
    import warnings

    from experiments.data import load_uea

    warnings.filterwarnings("ignore", message=".*can be flagged.*")
    data_dir = REPO.parent / "shared" / "data" / "uea"
    rows = []
    designs = (("one-vs-rest", ("N//2",)), ("leave-class-out", (32, 64)))
    for name in args.datasets:
        Xtr, ytr = load_uea(name, "train", data_dir=data_dir)
        Xte, yte = load_uea(name, "test", data_dir=data_dir)
        for design, Ms in designs:
            for scorer in ("knn", "conformance"):
                exact_aucs, sizes = [], []
                approx_aucs = {M: [] for M in Ms}
                for c in np.unique(ytr):
                    normal = ytr == c if design == "one-vs-rest" else ytr != c
                    idx = np.flatnonzero(normal)
                    corpus = Xtr[idx] if isinstance(Xtr, np.ndarray) else [Xtr[i] for i in idx]
                    sigma = median_sigma(corpus)
                    yan = (yte != c if design == "one-vs-rest" else yte == c).astype(float)
                    exact = _detector(sigma, scorer, None, 1000).fit(corpus)
                    exact_aucs.append(_auc(yan, exact, Xte))
                    sizes.append(len(idx))
                    for M in Ms:
                        m = len(idx) // 2 if M == "N//2" else M
                        approx = _detector(sigma, scorer, "nystroem", m).fit(corpus)
                        approx_aucs[M].append(_auc(yan, approx, Xte))
                for M in Ms:
                    rows.append(
                        {
                            "data": f"{name} ({design})",
                            "N": f"{min(sizes)}-{max(sizes)}",
                            "M": M,
                            "scorer": scorer,
                            "landmarks": "uniform",
                            "auc_exact": float(np.mean(exact_aucs)),
                            "auc_nystroem": float(np.mean(approx_aucs[M])),
                            "diff": float(np.mean(approx_aucs[M]) - np.mean(exact_aucs)),
                        }
                    )
    return rows


PARTS = {"target": part_target, "accuracy": part_accuracy, "uea": part_uea}


# ------------------------------------------------------------------------------ report
def _run_part(name: str, argv: list[str]):
    cmd = [sys.executable, __file__, name, "--json", *argv]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fmt(v):
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def table(rows: list[dict], cols: list[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def report(target: dict | None, accuracy: list[dict], uea: list[dict], load: str) -> str:
    out = [
        "# Large corpora: Nyström approximation (benchmarks/bench_scale.py)",
        "",
        "Kernel: RBF on the flattened pre-processed series (median-heuristic sigma), "
        "normalised; detector `KernelNoveltyDetector(kernel=FlattenedKernel(RBF(sigma)), "
        "scorer=..., approximation='nystroem', n_components=M)`. Synthetic data: smooth "
        "mixtures of sines, T = 100, d = 6, float32; test sets 10 % anomalies (bump, "
        "frequency, decoupled channel); see the script's docstring. ROC-AUC with the anomaly "
        "as the positive class. Machine: 2 cores, shared with other jobs (load average below; "
        "times scale with it).",
        "",
        f"Load average before the run: {load}",
        "",
    ]
    if target:
        out += [
            "### 100k corpus + 20k scored (target: <= 600 s, <= 8 GiB)",
            "",
            table(
                [target],
                [
                    "n_corpus",
                    "n_test",
                    "M",
                    "landmarks",
                    "scorer",
                    "fit_s",
                    "score_s",
                    "total_s",
                    "peak_rss_gib",
                    "auc",
                    "false_alarms",
                ],
            ),  # fmt: skip
            "",
        ]
    cols = ["data", "N", "M", "scorer", "landmarks", "auc_exact", "auc_nystroem", "diff"]
    if accuracy:
        out += ["### ROC-AUC, exact vs nystroem (target: |diff| <= 0.01)", ""]
        out += [table(accuracy, cols + ["exact_s", "nystroem_s"]), ""]
    if uea:
        out += [
            "### UEA (mean over classes; few landmarks: the classes are far below M = 1000)",
            "",
            table(uea, cols),
            "",
        ]
    out += [
        "### Notes",
        "",
        "- The N = 3000 rows compare the approximate detector with the exact one; the "
        "conformance scorer itself ranks these synthetic anomalies below chance (exact and "
        "approximate alike: the whitened metric of 50 components, alpha = 1e-2, finds them "
        "typical), the 1-NN scorer does not.",
        "- The UEA classes have 10-40 training series (100-260 in the leave-class-out design): "
        "with M = 1000 the detector is exact there (corpus <= M), with identical scores. The "
        "rows above force M = 32-64 landmarks, drawn from the half of the corpus not held out "
        "for calibration: far from the regime of the N = 3000 target, and the differences "
        "(up to 0.08 for 1-NN, 0.14 for conformance, both signs) show how few landmarks that "
        "is; in absolute value they shrink from M = 32 to M = 64 in every row.",
        "- Times: wall seconds of `fit` and `score_samples` (data generation excluded); peak "
        "RSS of the process, data included. The 1-NN search of 20,000 test series against "
        "100,000 corpus vectors in 1,000 dimensions (2e12 multiply-adds, float32 candidates) "
        "is most of the scoring time.",
        "",
    ]
    return "\n".join(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", choices=[*PARTS, "all", "report"])
    p.add_argument("--n-corpus", type=int, default=100_000)
    p.add_argument("--n-test", type=int, default=20_000)
    p.add_argument("--n-exact", type=int, default=3000)
    p.add_argument("--n-components", type=int, default=1000)
    p.add_argument("--landmarks", default="uniform")
    p.add_argument("--scorer", default="knn")
    p.add_argument("--datasets", nargs="+", default=["NATOPS", "Epilepsy", "RacketSports"])
    p.add_argument("--skip", nargs="*", default=[], choices=list(PARTS))
    p.add_argument("--json", action="store_true", help="print the part's result as JSON")
    p.add_argument("--write-docs", type=Path, default=None)
    p.add_argument(
        "--from-json", nargs=3, type=Path, metavar=("TARGET", "ACCURACY", "UEA"),
        help="report: the parts' saved --json outputs (and --load, the load average then)",
    )  # fmt: skip
    p.add_argument("--load", default="")
    args = p.parse_args(argv)
    if args.part == "report":
        parts = [json.loads(f.read_text().strip().splitlines()[-1]) for f in args.from_json]
        text = report(*parts, args.load)
        print(text)
        if args.write_docs:
            args.write_docs.write_text(text)
        return
    if args.part != "all":
        res = PARTS[args.part](args)
        print(json.dumps(res) if args.json else res)
        return
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    common = [
        f"--n-corpus={args.n_corpus}", f"--n-test={args.n_test}", f"--n-exact={args.n_exact}",
        f"--n-components={args.n_components}", f"--landmarks={args.landmarks}",
        f"--scorer={args.scorer}", "--datasets", *args.datasets,
    ]  # fmt: skip
    target = None if "target" in args.skip else _run_part("target", common)
    accuracy = [] if "accuracy" in args.skip else _run_part("accuracy", common)
    uea = [] if "uea" in args.skip else _run_part("uea", common)
    text = report(target, accuracy, uea, load)
    text += f"\nLoad average after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
    print(text)
    if args.write_docs:
        args.write_docs.write_text(text)


if __name__ == "__main__":
    main()
