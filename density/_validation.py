"""Input checks for the density estimators: vector data (n, d) and scalar parameters.

Data come in as a numpy array or torch tensor of shape (n, d) and leave as a torch tensor on
the estimator's device and dtype. NaN/inf, empty arrays, d = 0 and 1-D input raise.
"""

from __future__ import annotations

from numbers import Real

import torch

from tskernels.validation import (  # noqa: F401  (re-exported)
    as_points,
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
    """Validated (n, d) torch tensor: real, finite, n >= ``min_samples``, d >= 1
    (:func:`tskernels.validation.as_points`); ``device=None`` keeps a tensor's device.

    ``n_features`` (when given) is the d seen at fit; a different d raises.
    """
    return as_points(
        X, name=name, dtype=dtype, device=device, min_samples=min_samples, n_features=n_features
    )
