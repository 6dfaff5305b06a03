r"""ROC-AUC and average precision for a whole tensor of scores at once.

Scores are "higher = more positive" along the last axis; every leading axis (alpha, rank,
...) is a separate ranking of the same labelled points. Ties are handled exactly as in
scikit-learn:

- ROC-AUC is the Mann-Whitney statistic with mid-ranks,
  :math:`\mathrm{AUC} = (\sum_{i \in P} r_i - |P|(|P|+1)/2) / (|P|\,|N|)`,
  which equals the trapezoidal area under the ROC curve, ties counting one half.
- Average precision is :math:`\mathrm{AP} = \sum_k (R_k - R_{k-1}) P_k` over the distinct
  thresholds in decreasing order; equivalently the mean over positives of the precision
  at the end of the positive's tie group, :math:`\mathrm{AP} = \frac{1}{|P|}\sum_{i\in P}
  \mathrm{TP}(s_i) / \#\{j: s_j \ge s_i\}`.

One sort per ranking; no Python loop over rankings. Scores may be +-inf (a log-density of a
point with zero density ranks last); NaN is an error.
"""

from __future__ import annotations

import numpy as np

__all__ = ["roc_auc", "average_precision", "roc_auc_and_average_precision"]


def _check(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    if hasattr(scores, "detach"):
        scores = scores.detach().cpu().numpy()
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"`labels` must be 1-D, got shape {y.shape}")
    if s.ndim < 1 or s.shape[-1] != y.shape[0]:
        raise ValueError(
            f"the last axis of `scores` ({s.shape}) must match the {y.shape[0]} labels"
        )
    if y.dtype != bool:
        if not np.isin(y, (0, 1)).all():
            raise ValueError("`labels` must be boolean or 0/1")
        y = y.astype(bool)
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == y.size:
        raise ValueError(f"need both classes among the labels, got {n_pos} positives of {y.size}")
    if np.isnan(s).any():
        raise ValueError("`scores` contain NaN values")
    return s, y


def _sorted_groups(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Descending sort of the last axis; for each sorted position the first and last
    (inclusive) position of its tie group."""
    order = np.argsort(-s, axis=-1, kind="stable")
    ss = np.take_along_axis(s, order, axis=-1)
    n = s.shape[-1]
    pos = np.broadcast_to(np.arange(n), ss.shape)
    new = np.ones(ss.shape, dtype=bool)
    new[..., 1:] = ss[..., 1:] != ss[..., :-1]
    start = np.maximum.accumulate(np.where(new, pos, 0), axis=-1)
    last = np.ones(ss.shape, dtype=bool)
    last[..., :-1] = new[..., 1:]
    end_rev = np.minimum.accumulate(np.where(last, pos, n - 1)[..., ::-1], axis=-1)
    end = end_rev[..., ::-1]
    return order, start, end


def roc_auc_and_average_precision(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """(ROC-AUC, average precision) of every ranking in ``scores`` (..., n) against the
    boolean ``labels`` (n,) (True = positive); arrays of shape ``scores.shape[:-1]``."""
    s, y = _check(scores, labels)
    n = y.size
    order, start, end = _sorted_groups(s)
    ys = y[order]  # labels in descending score order
    n_pos = int(y.sum())
    n_neg = n - n_pos
    # mid-rank in ascending order (1-based): descending positions p -> ascending n - p
    mid_rank = n - (start + end) / 2.0
    auc = ((mid_rank * ys).sum(-1) - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
    tp = np.cumsum(ys, axis=-1)
    tp_end = np.take_along_axis(tp, end, axis=-1)
    precision_end = tp_end / (end + 1.0)
    ap = (precision_end * ys).sum(-1) / n_pos
    return auc, ap


def roc_auc(scores, labels) -> np.ndarray:
    """ROC-AUC of every ranking in ``scores`` (..., n); see the module docstring."""
    return roc_auc_and_average_precision(scores, labels)[0]


def average_precision(scores, labels) -> np.ndarray:
    """Average precision of every ranking in ``scores`` (..., n); see the module docstring."""
    return roc_auc_and_average_precision(scores, labels)[1]
