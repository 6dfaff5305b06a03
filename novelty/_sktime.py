"""sktime adapters: any ``tskernels`` kernel as an sktime pairwise panel transformer (a kernel).

sktime's numpy3D layout is (n, d, T) (channels before time); ours is (n, T, d): the adapter
transposes. Unequal-length panels arrive as lists of DataFrames (``df-list``) and are
accepted exactly when the wrapped kernel supports unequal lengths. Works for any kernel in
``tskernels.kernel_registry()``, so sktime's kernel- and distance-based estimators can use it.
"""

from __future__ import annotations

import numpy as np
from sktime.dists_kernels.base import BasePairwiseTransformerPanel

__all__ = ["SktimeKernelAdapter", "sktime_kernels"]


def _default_kernel():
    from tskernels import RBF, IntegralKernel

    return IntegralKernel(RBF(2.0))


class SktimeKernelAdapter(BasePairwiseTransformerPanel):
    """A ``tskernels.Kernel`` as an sktime ``BasePairwiseTransformerPanel`` (``pwtrafo_type``
    "kernel"): ``transform(X, X2)`` returns the Gram matrix, numpy array (n, m).

    Parameters
    ----------
    kernel : tskernels.Kernel, default ``IntegralKernel(RBF(2.0))``
    normalize : bool, default False; return K(x,y) / sqrt(K(x,x) K(y,y))

    Examples
    --------
    >>> import numpy as np
    >>> from novelty import SktimeKernelAdapter
    >>> from tskernels import FlattenedKernel, Linear
    >>> X = np.ones((2, 3, 4))  # sktime numpy3D: (n, d, T)
    >>> SktimeKernelAdapter(FlattenedKernel(Linear())).transform(X).tolist()
    [[12.0, 12.0], [12.0, 12.0]]
    """

    _tags = {
        "authors": "tskernels developers",
        "maintainers": "tskernels developers",
        "X_inner_mtype": ["numpy3D", "df-list"],
        "symmetric": True,
        "pwtrafo_type": "kernel",
        "capability:missing_values": False,
        "capability:multivariate": True,
        "capability:unequal_length": True,
        "python_dependencies": ["torch"],
    }

    def __init__(self, kernel=None, normalize: bool = False):
        self.kernel = kernel
        self.normalize = normalize
        super().__init__()
        unequal = bool(getattr(self._kernel, "supports_unequal_length", False))
        self.set_tags(
            **{
                "capability:unequal_length": unequal,
                "X_inner_mtype": ["numpy3D", "df-list"] if unequal else "numpy3D",
            }
        )

    @property
    def _kernel(self):
        return _default_kernel() if self.kernel is None else self.kernel

    @staticmethod
    def _to_ours(X):
        if isinstance(X, np.ndarray):
            return np.ascontiguousarray(X.transpose(0, 2, 1), dtype=np.float64)
        return [np.asarray(df.to_numpy(), dtype=np.float64) for df in X]

    def _transform(self, X, X2=None):
        """Gram matrix k(X[i], X2[j]), numpy array (n, m)."""
        K = self._kernel.gram(
            self._to_ours(X),
            None if X2 is None else self._to_ours(X2),
            normalize=bool(self.normalize),
        )
        return K.detach().cpu().numpy()

    @classmethod
    def get_test_params(cls, parameter_set: str = "default"):
        """One parameter set per registered kernel (its example instance)."""
        import tskernels

        params = [{"kernel": spec.example()} for spec in tskernels.kernel_registry().values()]
        params.append({"kernel": _default_kernel(), "normalize": True})
        return params


def sktime_kernels(normalize: bool = False) -> dict[str, SktimeKernelAdapter]:
    """An adapter around each registered kernel's example, by registry name."""
    import tskernels

    return {
        name: SktimeKernelAdapter(spec.example(), normalize=normalize)
        for name, spec in tskernels.kernel_registry().items()
    }
