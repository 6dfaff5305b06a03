"""tskernels: exact, blockwise Gram matrices of kernels on multivariate time series.

Series are (n, T, d) numpy/torch arrays, or lists of (T_i, d) arrays for unequal lengths.
Every kernel returns a float64 torch Tensor from ``gram(X, Y=None, *, normalize=False)``.

Owns: the kernels on series and on points (static), their registry and capability tags, the
pre-processing (``transforms``, imported on first use: it needs scikit-learn, the kernels do
not), the public input checks (``validation``), the random-convolution features and
``sqdist``, the squared Euclidean distances of the radial static kernels (``density`` uses it
too). Imports no other package of this project (the bottom floor: ``novelty``, ``density`` and
``experiments`` import it).
"""

from . import (
    _elementary_registry,  # noqa: F401  (registers the kernels)
    validation,
)
from ._base import DEFAULT_MAX_MEMORY, Kernel, NonFiniteKernelError
from ._dask_gram import compute_gram, gram_tiles  # dask is imported on first call
from ._elementary import FlattenedKernel, IntegralKernel
from ._gak import GAK, GlobalAlignmentKernel
from ._random_convolution import RandomConvolutionKernel
from ._randomized_signature import RandomizedSignatureKernel
from ._registry import KernelSpec, kernel_registry, make_kernel, register
from ._reservoir import VolterraReservoirKernel
from ._signature_pde import SignaturePDEKernel
from ._signature_truncated import TruncatedSignatureKernel
from ._static import RBF, Laplacian, Linear, Polynomial, StaticKernel, sqdist
from .validation import SeriesBatch, as_series_batch

__all__ = [
    "DEFAULT_MAX_MEMORY",
    "FlattenedKernel",
    "GAK",
    "GlobalAlignmentKernel",
    "IntegralKernel",
    "Kernel",
    "KernelSpec",
    "Laplacian",
    "Linear",
    "NonFiniteKernelError",
    "Polynomial",
    "RBF",
    "RandomConvolutionKernel",
    "RandomizedSignatureKernel",
    "SeriesBatch",
    "SignaturePDEKernel",
    "StaticKernel",
    "VolterraReservoirKernel",
    "TruncatedSignatureKernel",
    "as_series_batch",
    "compute_gram",
    "gram_tiles",
    "kernel_registry",
    "make_kernel",
    "register",
    "sqdist",
    "transforms",
    "validation",
]


def __getattr__(name: str):
    # the pre-processing (scikit-learn transformers) is imported on first use, so that
    # ``import tskernels`` does not import scikit-learn
    if name == "transforms":
        import importlib

        return importlib.import_module(f"{__name__}.transforms")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
