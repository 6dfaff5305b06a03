"""One method on one problem: fit on the corpus, score the test set, and the metrics of the
row (ROC-AUC and average precision with the anomaly as positive, false-alarm rate and its
nominal value, fit and score seconds, the detector's parameters)."""

from __future__ import annotations

import json
import time
import warnings

import numpy as np

from .inputs import Flattener, fill_missing, lengths, to_length
from .methods import Method
from .problems import Problem

__all__ = ["auc_ap", "evaluate", "nominal_rate"]


def auc_ap(y: np.ndarray, score: np.ndarray) -> tuple[float, float]:
    """(ROC-AUC, average precision) of anomaly scores against ``y`` (1 = anomaly); scores of
    the wrong shape or not finite raise."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    score = np.asarray(score, dtype=np.float64).ravel()
    if score.shape != y.shape:
        raise ValueError(f"{score.shape[0]} scores for {y.shape[0]} test series")
    if not np.isfinite(score).all():
        raise FloatingPointError(f"{int((~np.isfinite(score)).sum())} non-finite scores")
    return float(roc_auc_score(y, score)), float(average_precision_score(y, score))


def nominal_rate(det) -> float | None:
    """``contamination`` if the detector has a numeric one, else ``1 - quantile``, else None."""
    from numbers import Real

    c = getattr(det, "contamination", None)
    if isinstance(c, Real) and not isinstance(c, bool):
        return float(c)
    q = getattr(det, "quantile", None)
    if isinstance(q, Real) and not isinstance(q, bool):
        return 1.0 - float(q)
    return None


def evaluate(method: Method, prob: Problem) -> dict:
    """Fit on the corpus, score the test set: the metrics of one row (raises on failure)."""
    n = len(prob.corpus)
    normal = prob.y == 0
    far = nominal = None
    t0 = time.perf_counter()
    if method.family == "ours":
        det = method.build(prob.seed, n)
        det.fit(prob.corpus)
        t1 = time.perf_counter()
        score = -np.asarray(det.score_samples(prob.test), dtype=np.float64)
        pred = np.asarray(det.predict(prob.test))
        t2 = time.perf_counter()
        far = float(np.mean(pred[normal] == -1))
        nominal = nominal_rate(det)
    else:
        corpus, test = fill_missing(prob.corpus), fill_missing(prob.test)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            det = method.build(prob.seed, n)
            if method.family == "recipe":  # unequal lengths resampled, as for ROCKAD
                length = max(lengths(corpus))
                det.fit(to_length(corpus, length))
                t1 = time.perf_counter()
                score = -det.score_samples(to_length(test, length))
                t2 = time.perf_counter()
            elif method.family == "rockad":
                length = max(lengths(corpus))
                det.fit(to_length(corpus, length).transpose(0, 2, 1))
                t1 = time.perf_counter()
                score = det.predict(to_length(test, length).transpose(0, 2, 1))
                t2 = time.perf_counter()
            else:
                flat = Flattener().fit(corpus)
                det.fit(flat.transform(corpus))
                t1 = time.perf_counter()
                Ft = flat.transform(test)
                if method.one_by_one:
                    rows = [Ft[i : i + 1] for i in range(len(Ft))]
                    score = np.concatenate([det.decision_function(r) for r in rows])
                    pred = np.concatenate([det.predict(r) for r in rows])
                else:
                    score = det.decision_function(Ft)
                    pred = np.asarray(det.predict(Ft))
                t2 = time.perf_counter()
                far, nominal = float(np.mean(pred[normal] == 1)), float(det.contamination)
    if isinstance(score, list):  # several seeds: mean of the figures of those that scored
        finite = [s for s in score if np.isfinite(np.asarray(s, dtype=np.float64)).all()]
        figures = [auc_ap(prob.y, s) for s in (finite or score[:1])]  # none: raises
        auc, ap = (float(np.mean(v)) for v in zip(*figures))
        params = {
            "auc_per_seed": [round(a, 6) for a, _ in figures],
            "seeds_with_non_finite_scores": len(score) - len(finite),
        }
    else:
        auc, ap = auc_ap(prob.y, score)
        params = det.get_params(deep=False) if hasattr(det, "get_params") else {}
        table = getattr(det, "selection_", None)
        if table is not None and "score" in table:  # scorer="auto": the candidates' proxies
            keep = [c for c in ("kernel", "scorer", "params", "score", "z", "chosen") if c in table]
            params = {**params, "selection": table[keep].to_dict("records")}
    return dict(
        auc=auc,
        ap=ap,
        far=far,
        far_nominal=None if nominal is None else float(nominal),
        fit_s=t1 - t0,
        score_s=t2 - t1,
        params=json.dumps(
            {k: (v if k == "selection" else repr(v)) for k, v in params.items()}, default=repr
        ),
    )
