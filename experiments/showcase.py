"""``make run``'s first part: the default detector on BasicMotions beside ROCKAD's recipe.

BasicMotions ships with sktime (6 channels, 100 steps, 4 activities, 10 training and 10 test
recordings each). Each activity in turn is normal: both detectors are fitted on its 10
training recordings and score the 40 test recordings (10 normal, 30 anomalies). Printed per
activity: the test ROC-AUC (anomaly positive) and the flag counts, normal test series flagged
(false alarms, of 10) and anomalies flagged (of 30), at the same ``contamination``.

- ``KernelNoveltyDetector()``: the default recipe; flags by its conformal p-values.
- ROCKAD's recipe (:func:`rockad_recipe`): MiniRocket features (sktime, 10,000), standardised
  on the corpus, novelty = mean Euclidean distance to the 5 nearest corpus series. It has no
  threshold of its own; it is given the same conformal rule (:func:`conformal_flags`) on its
  leave-one-out corpus scores, so the flag counts compare the scores, not two rules.

The default ``contamination`` is 0.1, not the detector's 0.05: a corpus of n series can only
flag at a level >= 1 / (n + 1), and 10 normal series need 0.1 (at 0.05 nothing is flagged).

    python -m experiments.showcase [--activities walking running] [--contamination 0.1]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

__all__ = ["conformal_flags", "rockad_recipe", "showcase", "format_table", "main"]


def rockad_recipe(train: np.ndarray, test: np.ndarray, seed: int = 0, k: int = 5):
    """ROCKAD's recipe on (n, T, d) arrays (:class:`experiments.peers.RocketRecipe`): (test
    novelty, leave-one-out corpus novelty). MiniRocket (10,000 features) fitted on ``train``,
    features standardised by the corpus' mean and standard deviation, novelty of a test series
    = mean distance to its ``min(k, n)`` nearest corpus series; of a corpus series = mean
    distance to its ``min(k, n - 1)`` nearest *other* corpus series (its held-out score)."""
    from .peers import RocketRecipe

    recipe = RocketRecipe(random_state=seed, n_neighbors=k).fit(train)
    return -recipe.score_samples(test), recipe.held_out_novelty()


def conformal_flags(novelty: np.ndarray, calibration: np.ndarray, level: float) -> np.ndarray:
    """Flag where the conformal p-value (1 + #{calibration >= s}) / (n + 1) is <= ``level``
    (the detector's own :func:`novelty.detector._calibration.conformal_p_values`)."""
    from novelty.detector._calibration import conformal_p_values

    return conformal_p_values(calibration, novelty) <= level


def _basic_motions():
    from sktime.datasets import load_basic_motions

    out = []
    for split in ("train", "test"):
        X, y = load_basic_motions(split=split, return_type="numpy3D")
        out += [np.ascontiguousarray(X.transpose(0, 2, 1), dtype=np.float64), np.asarray(y)]
    return out


def showcase(activities=None, contamination: float = 0.1, verbose: bool = True) -> list[dict]:
    """One row per normal activity: ROC-AUCs, flag counts and fit seconds of both detectors."""
    import warnings

    from sklearn.metrics import roc_auc_score

    from novelty import KernelNoveltyDetector

    X_train, y_train, X_test, y_test = _basic_motions()
    names = sorted(set(y_train))
    for a in activities or []:
        if a not in names:
            raise ValueError(f"unknown activity {a!r}; BasicMotions has {', '.join(names)}")
    rows = []
    for a in activities or names:
        anomaly = y_test != a
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sktime / numba notices, not the result
            det = KernelNoveltyDetector(contamination=contamination).fit(X_train[y_train == a])
            novelty = -det.score_samples(X_test)
            flags = det.predict(X_test) == -1
        t1 = time.process_time()
        r_nov, r_cal = rockad_recipe(X_train[y_train == a], X_test)
        r_flags = conformal_flags(r_nov, r_cal, contamination)
        t2 = time.process_time()
        row = {
            "activity": a,
            "n_normal": int((~anomaly).sum()),
            "n_anomalies": int(anomaly.sum()),
            "detector_roc_auc": float(roc_auc_score(anomaly, novelty)),
            "detector_flagged_normal": int(flags[~anomaly].sum()),
            "detector_flagged_anomalies": int(flags[anomaly].sum()),
            "detector_cpu_s": t1 - t0,
            "rockad_roc_auc": float(roc_auc_score(anomaly, r_nov)),
            "rockad_flagged_normal": int(r_flags[~anomaly].sum()),
            "rockad_flagged_anomalies": int(r_flags[anomaly].sum()),
            "rockad_cpu_s": t2 - t1,
        }
        rows.append(row)
        if verbose:
            print(f"  {a}: fitted and scored ({t2 - t0:.1f} CPU-s)", file=sys.stderr, flush=True)
    return rows


def format_table(rows: list[dict], contamination: float) -> str:
    """The rows as a markdown table, with a mean row when there are several."""
    head = (
        f"BasicMotions (sktime), one activity normal: fit on its 10 training recordings, score "
        f"the 40 test recordings.\nflags at contamination={contamination}: normal flagged / "
        "anomalies flagged (false alarms / detections)\n\n"
        "| normal activity | detector ROC-AUC | ROCKAD ROC-AUC | detector flags | "
        "ROCKAD flags | detector CPU-s | ROCKAD CPU-s |\n|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['activity']} | {r['detector_roc_auc']:.3f} | {r['rockad_roc_auc']:.3f} | "
            f"{r['detector_flagged_normal']}/{r['n_normal']}, "
            f"{r['detector_flagged_anomalies']}/{r['n_anomalies']} | "
            f"{r['rockad_flagged_normal']}/{r['n_normal']}, "
            f"{r['rockad_flagged_anomalies']}/{r['n_anomalies']} | "
            f"{r['detector_cpu_s']:.1f} | {r['rockad_cpu_s']:.1f} |"
        )
    if len(rows) > 1:
        m = {k: np.mean([r[k] for r in rows]) for k in rows[0] if k != "activity"}
        lines.append(
            f"| mean | {m['detector_roc_auc']:.3f} | {m['rockad_roc_auc']:.3f} | "
            f"{m['detector_flagged_normal']:.1f}, {m['detector_flagged_anomalies']:.1f} | "
            f"{m['rockad_flagged_normal']:.1f}, {m['rockad_flagged_anomalies']:.1f} | "
            f"{m['detector_cpu_s']:.1f} | {m['rockad_cpu_s']:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.showcase", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--activities", nargs="+", default=None, help="default: all four in turn")
    ap.add_argument("--contamination", type=float, default=0.1)
    args = ap.parse_args(argv)
    if not 0 < args.contamination <= 0.5:
        ap.error(f"--contamination {args.contamination}: must be in (0, 0.5]")
    print("KernelNoveltyDetector() beside ROCKAD's recipe on BasicMotions", file=sys.stderr)
    start = time.perf_counter()
    try:
        rows = showcase(args.activities, args.contamination)
    except ValueError as exc:
        ap.error(str(exc))
    print(format_table(rows, args.contamination))
    print(f"\n{len(rows)} activities in {time.perf_counter() - start:.0f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
