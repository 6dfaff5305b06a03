"""Shared helpers of the signature-kernel tests: random-walk paths and a relative error."""

import numpy as np


def random_paths(seed: int, n: int, T: int, d: int, step: float = 0.3) -> np.ndarray:
    """n random-walk paths (n, T, d) with Gaussian increments of standard deviation `step`."""
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)) * step, axis=1)


def max_rel_error(a, b) -> float:
    """max |a - b| / max |b| (relative to the largest reference entry)."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / np.abs(b).max())
