"""Input checks for the density estimators: the data (n, d), and the parameters in the
project's one dialect.

Data come in as a numpy array or torch tensor of shape (n, d) and leave as a torch tensor on
the estimator's device and dtype (:func:`as_data`). NaN/inf, empty arrays, d = 0 and 1-D input
raise.

Parameters: each class declares ``_parameter_constraints`` (checked at ``fit`` by
:func:`tskernels.validation.validate_estimator`) and each public function declares its
arguments with :func:`tskernels.validation.validate_params`; the constraint objects are
re-exported here, with the two lists the package repeats (:data:`DEVICE`, :data:`DTYPE`).
"""

from __future__ import annotations

from numbers import Integral, Real

import torch

from tskernels.validation import (  # noqa: F401  (re-exported)
    Interval,
    IsInstance,
    Options,
    StrOptions,
    TorchDevice,
    as_points,
    resolve_device,
    resolve_dtype,
    validate_estimator,
    validate_params,
)

__all__ = [
    "DEVICE",
    "DTYPE",
    "COUNT",
    "POSITIVE",
    "SEED",
    "as_data",
    "resolve_device",
    "resolve_dtype",
    "validate_estimator",
    "validate_params",
]

#: ``device``: None (the CPU, or the kernel's) or a torch device or its name.
DEVICE = [None, TorchDevice()]
#: ``dtype``: None (float64), "float32"/"float64" or the torch dtype.
DTYPE = [
    None,
    StrOptions({"float32", "float64"}),
    Options(torch.dtype, {torch.float32, torch.float64}),
]
#: A positive finite float; an integer >= 1; an integer >= 0 (a seed).
POSITIVE = [Interval(Real, 0, None, closed="neither")]
COUNT = [Interval(Integral, 1, None, closed="left")]
SEED = [Interval(Integral, 0, None, closed="left")]


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
