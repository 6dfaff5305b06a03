"""The selection's baseline with given kernels is the first kernel with the 1-NN scorer, found
by its position (issue 33), also when two kernels share a class name (their labels are equal;
a match by label took the last one)."""

import numpy as np

import tskernels as tk
from novelty.detector._auto import select_members


def _walks(n, seed):
    return np.cumsum(np.random.default_rng(seed).normal(size=(n, 30, 2)), axis=1)


def _knn_proxy(table) -> float:
    return float(table.loc[table.candidate == "FlattenedKernel+knn", "score"].iloc[0])


def test_baseline_is_the_first_kernel_even_with_equal_labels():
    X = _walks(10, 3)
    wide, narrow = tk.FlattenedKernel(tk.RBF(3.0)), tk.FlattenedKernel(tk.RBF(0.3))
    # each kernel alone: the same folds and anomalies (the draws do not depend on the kernels)
    first = _knn_proxy(select_members(X, kernels=[wide], max_time=600)[1])
    second = _knn_proxy(select_members(X, kernels=[narrow], max_time=600)[1])
    assert first != second  # the data tell the two kernels apart
    _, table = select_members(X, kernels=[wide, narrow], max_time=600)
    baseline = table.loc[table.candidate == "baseline"]
    assert len(baseline) == 1 and baseline.score.iloc[0] == first
    assert baseline.vs_baseline.iloc[0] == 0.0


def test_top_averages_two_kernels_of_one_class():
    # "top" averages the best scorer of each of the two best kernels: two kernels of one
    # class are two kernels (a match by class name found one kernel and left "top" out)
    X = _walks(10, 3)
    wide, narrow = tk.FlattenedKernel(tk.RBF(3.0)), tk.FlattenedKernel(tk.RBF(0.3))
    _, table = select_members(X, kernels=[wide, narrow], max_time=600)
    top = table.loc[table.candidate == "top"]
    assert len(top) == 1 and len(top.scorer.iloc[0].split(" + ")) == 2
