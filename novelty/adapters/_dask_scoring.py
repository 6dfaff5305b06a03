"""Batch scoring of a large test set on Dask: the test set is cut into partitions of
``batch`` series, each scored by the fitted detector in one task.

With a ``distributed.Client`` the fitted detector is scattered to every worker once
(``broadcast=True``) and each partition to one worker; without one, dask's default scheduler
runs the partitions (threads). The scores equal the detector's own ``score_samples`` on the
whole set (each series is scored against the fitted corpus alone). Dask is imported inside
the function, never at ``import novelty``.
"""

from __future__ import annotations

import uuid
from numbers import Integral

import numpy as np
import torch

from tskernels.validation import DaskClient

from .._constraints import Interval, StrOptions, validate_arguments

__all__ = ["score_in_partitions"]

_METHODS = ("score_samples", "decision_function", "predict", "p_values")


def _score_part(estimator, part, method: str):
    return getattr(estimator, method)(part)


def _as_partitionable(X):
    """numpy arrays, torch tensors and lists are sliced as given (so a 2-D input stays 2-D);
    other layouts (pandas, sktime) become the detector's own collection first."""
    if isinstance(X, (np.ndarray, torch.Tensor)):
        if X.ndim == 0:
            raise ValueError("`X` must be a collection of series, got a 0-d array")
        return X
    if isinstance(X, (list, tuple)):
        return list(X)
    from .._layouts import as_series_collection

    return as_series_collection(X, name="X")


@validate_arguments(
    {
        "batch": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions(set(_METHODS))],
        "client": [None, DaskClient()],
    }
)
def score_in_partitions(
    estimator, X, *, client=None, batch: int = 1000, method: str = "score_samples"
):
    """``getattr(estimator, method)(X)`` computed on partitions of ``batch`` series of ``X``,
    in parallel on ``client``'s cluster (or dask's default scheduler), and concatenated.

    Parameters
    ----------
    estimator : a fitted detector (``KernelNoveltyDetector`` or any fitted estimator whose
        ``method`` scores each series independently of the others)
    X : the test series, any layout the estimator accepts: (n, T, d) array, list of
        (T_i, d) arrays, sktime/pandas containers
    client : None or ``distributed.Client``
    batch : int, series per partition
    method : {"score_samples", "decision_function", "predict", "p_values"}

    Returns the concatenated result, array (n,) (a tensor if the method returns tensors),
    equal to the method on the whole of ``X``.
    """
    from sklearn.utils.validation import check_is_fitted

    if not callable(getattr(estimator, method, None)):
        raise TypeError(f"{type(estimator).__name__} has no method `{method}`")
    check_is_fitted(estimator)
    Xp = _as_partitionable(X)
    n = len(Xp)
    if n == 0:
        raise ValueError("`X` is empty: expected at least one series")
    parts = [Xp[i : i + batch] for i in range(0, n, batch)]
    if client is not None:
        est = client.scatter([estimator], broadcast=True, hash=False)[0]
        part_futures = client.scatter(parts, hash=False)  # each partition to one worker
        futures = client.map(
            _score_part, [est] * len(parts), part_futures, [method] * len(parts), pure=False
        )
        results = client.gather(futures)
    else:
        import dask

        token = uuid.uuid4().hex  # keys named, not hashed from the detector and the data
        est = dask.delayed(estimator, name=f"detector-{token}", traverse=False)
        task = dask.delayed(_score_part, pure=True)
        results = dask.compute(
            *[
                task(est, dask.delayed(p, name=f"part-{k}-{token}", traverse=False), method)
                for k, p in enumerate(parts)
            ]
        )
    if all(isinstance(r, torch.Tensor) for r in results):
        return torch.cat(list(results))
    return np.concatenate([np.asarray(r) for r in results])
