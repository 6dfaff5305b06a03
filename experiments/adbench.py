"""ADBench evaluation of SOSREP and KDE against PyOD detectors (protocol.md section 7).

Unsupervised protocol: subsample to at most 10,000 rows (stratified), stratified 70/30 split,
min-max scaling fitted on the 70 %, every detector trained on the contaminated 70 %, AUC-ROC of
its anomaly score on the 30 %, seeds 0, 1, 2. One row per (data set, method, seed) goes into a
SQLite file as soon as it finishes (with timings, git revision and device); a finished key is
never recomputed, so an interrupted run resumes where it stopped.

    python -m experiments.adbench run [--datasets cardio wine] [--methods SOSREP-SDO IForest]
    python -m experiments.adbench report

Bandwidths of SOSREP/KDE are chosen by the Fisher divergence on a held-out 20 % of the training
part (``density.select_bandwidth``: duplicates of fit points left out, SDO scored on the
mollified model) over length scales l in r * {1, 2, 4, 8} (sigma = l; SDO a = l^(2 m_SDO)),
where r is the median nearest-neighbour distance of the training part (distinct points), the
smallest scale the sample resolves, floored at 1/8 of the median pairwise distance (near-ties
of quantised data). Below it the held-out Fisher divergence keeps falling on these data, to
scales that rank anomalies worse (README, bandwidth selection; docs/results_adbench.md,
bandwidth sensitivity), so r is the grid floor. The SDO kernel uses 10,000 float32 random
features (SOSREP tol 1e-4, float32 resolution); SOSREP runs with lr = 1/3 (fastest
linearised contraction, see ``_density_method``).

``--methods sensitivity`` runs the diagnostic methods (``DIAGNOSTIC_METHODS``: fixed length
factors, the Fisher selection on a wide grid, clean-training variants) and
``report --sensitivity`` summarises them.

COF and SOD (quadratic, Python loops) are skipped above ``QUADRATIC_MAX_TRAIN`` training rows.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adbench"
DEFAULT_DB = Path(__file__).resolve().parents[1] / "results" / "adbench.sqlite"
MAX_ROWS = 10_000
LENGTH_FACTORS = (1.0, 2.0, 4.0, 8.0)
QUADRATIC_MAX_TRAIN = 2000


# -- data ------------------------------------------------------------------------------------
def list_datasets(data_dir: Path) -> list[str]:
    """Data set names (file stems such as '6_cardio'), smallest file first."""
    files = sorted(Path(data_dir).glob("*.npz"), key=lambda p: p.stat().st_size)
    return [p.stem for p in files]


def resolve_names(requested: list[str] | None, available: list[str]) -> list[str]:
    """Match '6_cardio', 'cardio' or 'Cardio' against the available stems."""
    if not requested:
        return available
    out = []
    for r in requested:
        hits = [a for a in available if a == r or a.split("_", 1)[-1].lower() == r.lower()]
        if not hits:
            raise SystemExit(f"unknown data set {r!r}; available: {', '.join(available)}")
        out.extend(hits)
    return out


def load_split(path: Path, seed: int):
    """(X_train, X_test, y_train, y_test), min-max scaled on train, <= 10,000 rows in all."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MinMaxScaler

    with np.load(path) as z:
        X, y = np.asarray(z["X"], dtype=np.float64), np.asarray(z["y"]).astype(int).ravel()
    if len(X) > MAX_ROWS:
        X, _, y, _ = train_test_split(X, y, train_size=MAX_ROWS, stratify=y, random_state=seed)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    scaler = MinMaxScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


def median_distance(X: np.ndarray, seed: int, n: int = 1000) -> float:
    """Median pairwise Euclidean distance on (at most) n rows; > 0 unless all rows are equal."""
    rng = np.random.default_rng(seed)
    S = X[rng.choice(len(X), size=min(n, len(X)), replace=False)]
    d2 = ((S[:, None, :] - S[None, :, :]) ** 2).sum(-1)
    d = np.sqrt(d2[np.triu_indices(len(S), 1)])
    med = float(np.median(d[d > 0])) if (d > 0).any() else 1.0
    return med


def nn_spacing(X: np.ndarray, seed: int, n: int = 1000) -> float:
    """Median distance from (at most) n rows to their nearest distinct row of X (> 0)."""
    rng = np.random.default_rng(seed)
    S = X[rng.choice(len(X), size=min(n, len(X)), replace=False)]
    best = np.full(len(S), np.inf)
    for s in range(0, len(X), 2000):
        d2 = ((S[:, None, :] - X[None, s : s + 2000, :]) ** 2).sum(-1)
        d2[d2 <= 0] = np.inf  # the row itself and exact duplicates
        best = np.minimum(best, d2.min(1))
    best = best[np.isfinite(best)]
    return float(np.sqrt(np.median(best))) if len(best) else 1.0


# -- methods ---------------------------------------------------------------------------------
class SkippedError(RuntimeError):
    """A method not run on this data set (recorded in the error column)."""


Scorer = Callable[[np.ndarray, np.ndarray, int], tuple[np.ndarray, dict]]


def _density_method(
    kind: str, kernel_name: str, n_features: int = 10_000, factors=LENGTH_FACTORS
) -> Scorer:
    def run(Xtr: np.ndarray, Xte: np.ndarray, seed: int) -> tuple[np.ndarray, dict]:
        import torch

        import density as dn

        # floor: the nn spacing, but not below 1/8 of the median pairwise distance (quantised
        # data such as shuttle or ALOI have near-ties that shrink the nn spacing to the
        # quantisation step, where exact kernels underflow at held-out points)
        r = max(nn_spacing(Xtr, seed), median_distance(Xtr, seed) / 8)
        ells = r * np.asarray(factors)
        d = Xtr.shape[1]
        tol = 1e-6
        if kernel_name == "SDO":
            m = dn.sdo_default_m(d)
            kernel = dn.SDOKernel(n_features=n_features, seed=seed, dtype=torch.float32)
            grid = ells ** (2 * m)
            tol = 1e-4  # float32 features: f(x_i) carries ~1e-6 relative rounding
        elif kernel_name == "Gauss":
            kernel, grid = dn.GaussianKernel(), ells
        else:
            kernel, grid = dn.LaplacianKernel(), ells
        # lr = 1/3: near the fixed point the error contracts by max(|1 - 2s|, |1 - s(1 + l)|)
        # per step (s = 2 lr, l in [0, 1] the spectrum of N diag(alpha) K diag(alpha)), which
        # s = 2/3 minimises (1/3 per step; lr = 0.1 gives 0.8): ~4x fewer steps, same alpha
        # (converged fits take 10-40 steps; a fit still unconverged after 150 is dropped from the
        # selection, and a final refit that does not converge is flagged in `info`)
        sos = dn.SOSREP(kernel, lr=1 / 3, max_iter=150, seed=seed, tol=tol)
        est = sos if kind == "SOSREP" else dn.KDE(kernel)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if len(grid) > 1:
                est = dn.select_bandwidth(est, Xtr, grid, validation_fraction=0.2, seed=seed)
            else:  # a fixed bandwidth: no selection
                param = est.kernel.bandwidth_param
                est = est.set_params(**{f"kernel__{param}": float(grid[0])}).fit(Xtr)
                est.bandwidth_, est.bandwidth_scores_ = float(grid[0]), np.array([np.nan])
        if kind == "KDE" and kernel_name == "SDO":
            # signed density without its constant factor exp(log_factor), which over- or
            # underflows for large d (d = 64, 100): same ranking, also where the estimate <= 0
            score = -est.expansion_.raw_value(est._check_X(Xte)).double().numpy()
        else:
            score = -est.score_samples(Xte).double().numpy()
        pick = int(np.flatnonzero(np.asarray(grid) == est.bandwidth_)[0])
        info = {
            "bandwidth": est.bandwidth_,
            "nn_spacing": r,
            "length_factor": factors[pick],
            "n_duplicates_excluded": getattr(est, "n_duplicates_excluded_", 0),
            "fisher": [None if not np.isfinite(v) else float(v) for v in est.bandwidth_scores_],
        }
        if kind == "SOSREP":
            info.update(n_iter=est.n_iter_, converged=bool(est.converged_))
        return score, info

    return run


def _pyod_method(name: str) -> Scorer:
    def run(Xtr: np.ndarray, Xte: np.ndarray, seed: int) -> tuple[np.ndarray, dict]:
        import pyod.models as _  # noqa: F401

        if name in ("COF", "SOD") and len(Xtr) > QUADRATIC_MAX_TRAIN:
            raise SkippedError(f"{name} skipped: {len(Xtr)} > {QUADRATIC_MAX_TRAIN} training rows")

        if name == "IForest":
            from pyod.models.iforest import IForest as C

            det = C(random_state=seed)
        elif name == "KNN":
            from pyod.models.knn import KNN as C

            det = C()
        elif name == "LOF":
            from pyod.models.lof import LOF as C

            det = C()
        elif name == "OCSVM":
            from pyod.models.ocsvm import OCSVM as C

            det = C()
        elif name == "ECOD":
            from pyod.models.ecod import ECOD as C

            det = C()
        elif name == "COPOD":
            from pyod.models.copod import COPOD as C

            det = C()
        elif name == "HBOS":
            from pyod.models.hbos import HBOS as C

            det = C()
        elif name == "PCA":
            from pyod.models.pca import PCA as C

            # PyOD's PCA standardises columns and divides by every component's variance: a
            # training-constant column (0/0) or a zero-variance component (collinear columns)
            # gives non-finite scores (cardio, optdigits, mnist). Such columns / components carry
            # no signal: drop them (n_components = rank of the standardised training data).
            keep = Xtr.std(0) > 0
            Xtr, Xte = Xtr[:, keep], Xte[:, keep]
            Z = (Xtr - Xtr.mean(0)) / Xtr.std(0)
            det = C(n_components=int(np.linalg.matrix_rank(Z)), random_state=seed)
        elif name == "CBLOF":
            from pyod.models.cblof import CBLOF as C

            det = C(random_state=seed)
        elif name == "LODA":
            from pyod.models.loda import LODA as C

            det = C()
            np.random.seed(seed)  # noqa: NPY002 - LODA draws its projections from the global generator
        elif name == "COF":
            from pyod.models.cof import COF as C

            det = C(method="memory")
        elif name == "SOD":
            from pyod.models.sod import SOD as C

            det = C()
        elif name == "DeepSVDD":
            import torch
            from pyod.models.deep_svdd import DeepSVDD as C

            torch.manual_seed(seed)
            det = C(n_features=Xtr.shape[1], epochs=20, random_state=seed, verbose=0)
        else:  # pragma: no cover
            raise KeyError(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            det.fit(Xtr)
            return np.asarray(det.decision_function(Xte), dtype=float), {}

    return run


METHODS: dict[str, Scorer] = {
    "SOSREP-SDO": _density_method("SOSREP", "SDO"),
    "SOSREP-Gauss": _density_method("SOSREP", "Gauss"),
    "SOSREP-Lap": _density_method("SOSREP", "Lap"),
    "KDE-SDO": _density_method("KDE", "SDO"),
    "KDE-Gauss": _density_method("KDE", "Gauss"),
}
#: PyOD detectors, cheapest first (COF and SOD are quadratic with Python loops).
PYOD = [
    "IForest",
    "ECOD",
    "COPOD",
    "HBOS",
    "PCA",
    "LODA",
    "KNN",
    "LOF",
    "CBLOF",
    "OCSVM",
    "DeepSVDD",
    "SOD",
    "COF",
]
METHODS.update({n: _pyod_method(n) for n in PYOD})
#: The methods of the default table: COF and SOD run only up to ``QUADRATIC_MAX_TRAIN``
#: training rows, and a table restricted to the data sets every method has would drop the
#: large ones (name them with ``--methods`` to see them).
TABLE_METHODS = [m for m in METHODS if m not in ("COF", "SOD")]

#: Fixed length factors of the bandwidth-sensitivity study (l = factor x r, no selection).
SENSITIVITY_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: The wide grid r x 2^-4 .. r x 2^5 on which the Fisher divergence selects in the study.
WIDE_FACTORS = tuple(2.0**k for k in range(-4, 6))


def _factor_tag(f: float) -> str:
    return f"{f:g}"


#: Diagnostic methods (run by name; not in the default run or table): every SDO density
#: method at each fixed length factor, and SOSREP-SDO selected on the wide grid.
DIAGNOSTIC_METHODS: dict[str, Scorer] = {
    f"{kind}-SDO@{_factor_tag(f)}": _density_method(kind, "SDO", factors=(f,))
    for kind in ("SOSREP", "KDE")
    for f in SENSITIVITY_FACTORS
}
DIAGNOSTIC_METHODS["SOSREP-SDO-wide"] = _density_method("SOSREP", "SDO", factors=WIDE_FACTORS)


def _clean(method: Scorer) -> Scorer:
    """The same method trained on the normal rows of the training part only (a clean-training
    protocol, outside ADBench's unsupervised one): ``run`` drops the training anomalies."""

    def run(Xtr: np.ndarray, Xte: np.ndarray, seed: int) -> tuple[np.ndarray, dict]:
        return method(Xtr, Xte, seed)

    run.train_on_normal = True
    return run


for _kind in ("SOSREP", "KDE"):
    DIAGNOSTIC_METHODS[f"{_kind}-SDO@1-clean"] = _clean(DIAGNOSTIC_METHODS[f"{_kind}-SDO@1"])
ALL_METHODS: dict[str, Scorer] = {**METHODS, **DIAGNOSTIC_METHODS}


# -- storage ---------------------------------------------------------------------------------
SCHEMA = """CREATE TABLE IF NOT EXISTS results (
    dataset TEXT, method TEXT, seed INTEGER, auc REAL, fit_score_s REAL,
    n_train INTEGER, n_test INTEGER, d INTEGER, error TEXT, info TEXT,
    git_rev TEXT, device TEXT, finished REAL,
    PRIMARY KEY (dataset, method, seed))"""


def open_db(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute(SCHEMA)
    return con


def git_rev() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def expand_methods(requested: list[str] | None) -> list[str]:
    """Method names, with the groups "main" (``METHODS``, the default) and "sensitivity"
    (``DIAGNOSTIC_METHODS``) expanded."""
    out: list[str] = []
    for m in requested or ["main"]:
        group = {"main": METHODS, "sensitivity": DIAGNOSTIC_METHODS}.get(m)
        out.extend(group if group is not None else [m])
    return list(dict.fromkeys(out))


def run(args) -> None:
    from sklearn.metrics import roc_auc_score
    from tqdm import tqdm

    data_dir = Path(args.data_dir)
    names = resolve_names(args.datasets, list_datasets(data_dir))
    methods = expand_methods(args.methods)
    for m in methods:
        if m not in ALL_METHODS:
            raise SystemExit(f"unknown method {m!r}; available: {', '.join(ALL_METHODS)}")
    con = open_db(Path(args.db))
    query = "SELECT dataset, method, seed FROM results"
    if args.retry_failed:
        query += " WHERE error IS NULL"
    done = {tuple(r) for r in con.execute(query)}
    todo = [(s, n, m) for s in args.seeds for n in names for m in methods if (n, m, s) not in done]
    rev, device = git_rev(), "cpu"
    import torch

    torch.set_num_threads(args.threads)
    bar = tqdm(todo, desc="adbench", unit="run", dynamic_ncols=True)
    cache: dict = {}
    for seed, name, method in bar:
        bar.set_postfix_str(f"{name} {method} s{seed}")
        key = (name, seed)
        if key not in cache:
            cache.clear()
            cache[key] = load_split(data_dir / f"{name}.npz", seed)
        Xtr, Xte, ytr, yte = cache[key]
        if getattr(ALL_METHODS[method], "train_on_normal", False):
            Xtr = Xtr[ytr == 0]
        t0 = time.perf_counter()
        auc, err, info = None, None, {}
        try:
            score, info = ALL_METHODS[method](Xtr, Xte, seed)
            if not np.all(np.isfinite(score)):
                raise FloatingPointError(f"{int((~np.isfinite(score)).sum())} non-finite scores")
            auc = float(roc_auc_score(yte, score))
        except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
            err = f"{type(exc).__name__}: {exc}"
            if args.verbose:
                traceback.print_exc()
        elapsed = time.perf_counter() - t0
        con.execute(
            "INSERT OR REPLACE INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                name,
                method,
                seed,
                auc,
                elapsed,
                len(Xtr),
                len(Xte),
                Xtr.shape[1],
                err,
                json.dumps(info),
                rev,
                device,
                time.time(),
            ),
        )
        con.commit()


# -- report ----------------------------------------------------------------------------------
def table(
    db: Path,
    methods: list[str] | None = None,
    complete_only: bool = True,
    seeds: list[int] | None = None,
):
    """(markdown text, mean AUC per method, mean rank per method) from the results file.

    ``methods``: default ``TABLE_METHODS`` (COF, SOD and the diagnostic ones only by name).
    ``seeds``: only these seeds (default all); a data set counts a method's mean over the seeds
    it has, and the "(Ns)" tag gives the fewest seeds any method has there."""
    methods = methods or TABLE_METHODS
    con = open_db(db)
    rows = con.execute(
        "SELECT dataset, method, seed, auc, fit_score_s FROM results WHERE auc IS NOT NULL"
    ).fetchall()
    if seeds is not None:
        rows = [r for r in rows if r[2] in seeds]
    if not rows:
        return "no results yet", {}, {}
    aucs: dict = {}
    times: dict = {}
    for ds, m, _s, auc, t in rows:
        if methods and m not in methods:
            continue
        aucs.setdefault((ds, m), []).append(auc)
        times.setdefault(m, []).append(t)
    ms = sorted({m for _, m in aucs}, key=lambda m: list(METHODS).index(m) if m in METHODS else 99)
    dss = sorted({d for d, _ in aucs}, key=lambda s: int(s.split("_")[0]))
    if complete_only:
        dss = [d for d in dss if all((d, m) in aucs for m in ms)]
    mean = {(d, m): float(np.mean(aucs[(d, m)])) for d in dss for m in ms if (d, m) in aucs}
    ranks: dict = {m: [] for m in ms}
    for d in dss:
        present = [m for m in ms if (d, m) in mean]
        vals = np.array([-mean[(d, m)] for m in present])
        from scipy.stats import rankdata

        for m, r in zip(present, rankdata(vals)):
            ranks[m].append(r)
    mean_auc = {
        m: float(np.mean([mean[(d, m)] for d in dss if (d, m) in mean]))
        for m in ms
        if any((d, m) in mean for d in dss)
    }
    mean_rank = {m: float(np.mean(ranks[m])) for m in ms if ranks[m]}
    lines = ["| data set | " + " | ".join(ms) + " |", "|---" * (len(ms) + 1) + "|"]
    for d in dss:
        cells = []
        best = max(mean[(d, m)] for m in ms if (d, m) in mean)
        for m in ms:
            if (d, m) not in mean:
                cells.append("-")
                continue
            v = f"{mean[(d, m)]:.3f}"
            cells.append(f"**{v}**" if mean[(d, m)] == best else v)
        nseeds = min(len(aucs[(d, m)]) for m in ms if (d, m) in aucs)
        lines.append(f"| {d} ({nseeds}s) | " + " | ".join(cells) + " |")
    lines.append(
        "| **mean AUC** | " + " | ".join(f"{mean_auc.get(m, float('nan')):.3f}" for m in ms) + " |"
    )
    lines.append(
        "| **mean rank** | "
        + " | ".join(f"{mean_rank.get(m, float('nan')):.2f}" for m in ms)
        + " |"
    )
    lines.append("| median s/run | " + " | ".join(f"{np.median(times[m]):.2f}" for m in ms) + " |")
    return "\n".join(lines), mean_auc, mean_rank


def _seed_means(db: Path, seeds: list[int] | None) -> dict:
    """{(data set, method): mean AUC over the given seeds} of the rows without error."""
    con = open_db(db)
    rows = con.execute("SELECT dataset, method, seed, auc FROM results WHERE auc IS NOT NULL")
    acc: dict = {}
    for ds, m, s, auc in rows:
        if seeds is None or s in seeds:
            acc.setdefault((ds, m), []).append(auc)
    return {k: float(np.mean(v)) for k, v in acc.items()}


def sensitivity_table(db: Path, seeds: list[int] | None = None) -> str:
    """Markdown summary of the bandwidth-sensitivity study (``DIAGNOSTIC_METHODS``).

    On the data sets where every fixed factor, the selected method and all main methods have
    results: mean AUC-ROC of SOSREP-SDO and KDE-SDO at each fixed length factor, with the
    Fisher-divergence selection on the default and on the wide grid, and the per-data-set best
    factor chosen *with the test labels* (an upper bound no valid selection rule reaches);
    the place each would take by mean AUC among the main methods; and SOSREP vs KDE per factor.
    """
    mean = _seed_means(db, seeds)
    dss = sorted({d for d, _ in mean}, key=lambda s: int(s.split("_")[0]))
    fixed = {
        k: [f"{k}-SDO@{_factor_tag(f)}" for f in SENSITIVITY_FACTORS] for k in ("SOSREP", "KDE")
    }
    needed = fixed["SOSREP"] + fixed["KDE"] + ["SOSREP-SDO-wide"]
    main = [m for m in TABLE_METHODS if any((d, m) in mean for d in dss)]
    dss = [d for d in dss if all((d, m) in mean for m in needed + main)]
    if not dss:
        return "no data set has every method of the study yet"
    main_auc = {m: float(np.mean([mean[(d, m)] for d in dss])) for m in main}

    def place(value: float, exclude: str) -> str:
        others = [v for m, v in main_auc.items() if m != exclude]
        return f"{1 + sum(v > value for v in others)} of {len(others) + 1}"

    lines = [
        f"{len(dss)} data sets, seeds {seeds if seeds is not None else 'all'}; place = rank by "
        f"mean AUC-ROC among the {len(main)} main methods with this variant in the method's stead.",
        "",
        "| variant | SOSREP-SDO | place | KDE-SDO | place | SOSREP > KDE on |",
        "|---|---|---|---|---|---|",
    ]

    def row(label: str, s_vals: list[float], k_vals: list[float]) -> str:
        ms, mk = float(np.mean(s_vals)), float(np.mean(k_vals))
        wins = sum(a > b for a, b in zip(s_vals, k_vals))
        return (
            f"| {label} | {ms:.3f} | {place(ms, 'SOSREP-SDO')} | {mk:.3f} | "
            f"{place(mk, 'KDE-SDO')} | {wins} of {len(dss)} |"
        )

    for f, ms_, mk_ in zip(SENSITIVITY_FACTORS, fixed["SOSREP"], fixed["KDE"]):
        lines.append(
            row(
                f"fixed l = {_factor_tag(f)} r",
                [mean[(d, ms_)] for d in dss],
                [mean[(d, mk_)] for d in dss],
            )
        )
    sel_s = [mean[(d, "SOSREP-SDO")] for d in dss]
    sel_k = [mean[(d, "KDE-SDO")] for d in dss]
    lines.append(row("Fisher divergence, grid r x {1, 2, 4, 8} (main)", sel_s, sel_k))
    wide = [mean[(d, "SOSREP-SDO-wide")] for d in dss]
    ms = float(np.mean(wide))
    lines.append(
        f"| Fisher divergence, grid r x 2^-4..2^5 | {ms:.3f} | {place(ms, 'SOSREP-SDO')} "
        "| - | - | - |"
    )
    if all((d, f"{k}-SDO@1-clean") in mean for d in dss for k in ("SOSREP", "KDE")):
        cs = [mean[(d, "SOSREP-SDO@1-clean")] for d in dss]
        ck = [mean[(d, "KDE-SDO@1-clean")] for d in dss]
        wins = sum(a > b for a, b in zip(cs, ck))
        lines.append(
            f"| fixed l = 1 r, trained on the normal rows only (not ADBench's protocol) "
            f"| {np.mean(cs):.3f} | - | {np.mean(ck):.3f} | - | {wins} of {len(dss)} |"
        )
    best_s = [max(mean[(d, m)] for m in fixed["SOSREP"]) for d in dss]
    best_k = [max(mean[(d, m)] for m in fixed["KDE"]) for d in dss]
    lines.append(row("best fixed factor per data set, chosen with test labels", best_s, best_k))
    top = sorted(main_auc, key=main_auc.get, reverse=True)[:4]
    lines += [
        "",
        "Main methods on these data sets: "
        + ", ".join(f"{m} {main_auc[m]:.3f}" for m in top)
        + ".",
    ]
    return "\n".join(lines)


def report(args) -> None:
    if args.sensitivity:
        text = sensitivity_table(Path(args.db), args.seeds)
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n")
        return
    text, mean_auc, mean_rank = table(
        Path(args.db), args.methods, not args.all_datasets, args.seeds
    )
    print(text)
    if mean_rank:
        order = sorted(mean_rank, key=mean_rank.get)
        print("\nby mean rank: " + ", ".join(f"{m} {mean_rank[m]:.2f}" for m in order))
    if args.out:
        Path(args.out).write_text(text + "\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m experiments adbench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="action")
    r = sub.add_parser("run", help="run (or resume) the evaluation")
    r.add_argument("--datasets", nargs="*", default=None)
    r.add_argument(
        "--methods",
        nargs="*",
        default=None,
        help='method names, or the groups "main" (default) and "sensitivity"',
    )
    r.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    r.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    r.add_argument("--db", default=str(DEFAULT_DB))
    r.add_argument("--threads", type=int, default=1, help="torch threads (1: the cores are shared)")
    r.add_argument("--retry-failed", action="store_true", help="recompute keys that errored")
    r.add_argument("--verbose", action="store_true")
    q = sub.add_parser("report", help="print the AUC-ROC table")
    q.add_argument("--db", default=str(DEFAULT_DB))
    q.add_argument("--methods", nargs="*", default=None)
    q.add_argument("--seeds", nargs="*", type=int, default=None)
    q.add_argument(
        "--all-datasets",
        action="store_true",
        help="include data sets where some method has no result yet",
    )
    q.add_argument("--out", default=None, help="also write the markdown table here")
    q.add_argument(
        "--sensitivity",
        action="store_true",
        help="summarise the bandwidth-sensitivity study (the diagnostic methods) instead",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.action == "run":
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, str(args.threads))
        run(args)
    elif args.action == "report":
        report(args)
    else:
        build_parser().print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
