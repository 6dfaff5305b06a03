"""Input checks for the density estimators: vector data (n, d) and scalar parameters.

Data come in as a numpy array or torch tensor of shape (n, d) and leave as a torch tensor on
the estimator's device and dtype. NaN/inf, empty arrays, d = 0 and 1-D input raise.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
import torch

from tskernels._validation import (  # noqa: F401  (re-exported)
    check_int,
    check_positive,
    resolve_device,
    resolve_dtype,
)

__all__ = [
    "as_data",
    "check_positive",
    "check_int",
    "check_fraction",
    "resolve_device",
    "resolve_dtype",
    "check_finite_tensor",
]


def check_fraction(value, name: str) -> float:
    """A float strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value < 1:
        raise ValueError(f"`{name}` must be a float in (0, 1), got {value!r}")
    return float(value)


def as_data(
    X,
    name: str = "X",
    *,
    min_samples: int = 1,
    dtype: torch.dtype = torch.float64,
    device: torch.device | None = None,
    n_features: int | None = None,
) -> torch.Tensor:
    """Validated (n, d) torch tensor: real, finite, n >= ``min_samples``, d >= 1.

    ``n_features`` (when given) is the d seen at fit; a different d raises.
    """
    if isinstance(X, torch.Tensor):
        t = X.detach()
    else:
        arr = np.asarray(X)
        if arr.dtype == object or not (
            np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
        ):
            raise TypeError(f"`{name}` must be a numeric array, got dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.is_complex():
        raise TypeError(f"`{name}` must be real-valued, got {t.dtype}")
    if t.ndim != 2:
        raise ValueError(
            f"`{name}` must be a 2-D array (n_samples, n_features), got shape {tuple(t.shape)}"
        )
    n, d = t.shape
    if d == 0:
        raise ValueError(f"`{name}` has d = 0 features; need at least one column")
    if n < min_samples:
        raise ValueError(f"`{name}` has {n} sample(s); need at least {min_samples}")
    if n_features is not None and d != n_features:
        raise ValueError(f"`{name}` has {d} features but the estimator was fitted on {n_features}")
    t = t.to(dtype=dtype, device=device if device is not None else t.device)
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        i, j = (int(v) for v in torch.nonzero(bad)[0].tolist())
        raise ValueError(
            f"`{name}` contains NaN or infinite values ({int(bad.sum())} entries, first at row "
            f"{i}, column {j}); impute or drop them first"
        )
    return t


def check_finite_tensor(t: torch.Tensor, what: str, remedy: str) -> torch.Tensor:
    """Raise FloatingPointError when ``t`` holds NaN/inf (never replaced)."""
    if not bool(torch.isfinite(t).all()):
        raise FloatingPointError(f"{what} contains NaN or infinite values; {remedy}")
    return t
