"""sktime adapters: any ``tskernels`` kernel as an sktime pairwise panel transformer, as a kernel
(:class:`SktimeKernelAdapter`) or as the distance it induces in feature space
(:class:`SktimeDistanceAdapter`).

sktime converts every input to the adapter's ``X_inner_mtype``. With a list of mtypes it keeps
an input whose mtype is in the list and converts any other to the FIRST entry, so the list is
``["df-list", "numpy3D"]``: numpy3D arrays (n, d, T), sktime's layout, are transposed to ours
(n, T, d), and every pandas container (pd-multiindex, nested_univ, equal or unequal lengths)
arrives as a list of DataFrames (a conversion to numpy3D would fail on unequal lengths).
``capability:unequal_length`` follows the wrapped kernel, so sktime estimators refuse unequal
lengths for kernels that need equal ones (and the kernel itself raises a clear error when
``transform`` is called directly). Works for every kernel in ``tskernels.kernel_registry()``.
"""

from __future__ import annotations

import numpy as np
from sktime.dists_kernels.base import BasePairwiseTransformerPanel

__all__ = ["SktimeKernelAdapter", "SktimeDistanceAdapter", "sktime_kernels"]

#: Relative tolerance of a negative squared feature-space distance (round-off) before the
#: kernel is declared not positive semi-definite.
PSD_TOLERANCE = 1e-8


def _default_kernel():
    from tskernels import RBF, IntegralKernel

    return IntegralKernel(RBF(2.0))


def _to_ours(X) -> np.ndarray | list[np.ndarray]:
    """sktime numpy3D (n, d, T) -> (n, T, d); df-list -> (n, T, d) when the lengths are equal,
    else a list of (T_i, d) arrays."""
    if isinstance(X, np.ndarray):
        return np.ascontiguousarray(X.transpose(0, 2, 1), dtype=np.float64)
    series = [np.asarray(df.to_numpy(), dtype=np.float64) for df in X]
    if len({s.shape for s in series}) == 1:
        return np.stack(series)
    return series


class _TskernelsPairwise(BasePairwiseTransformerPanel):
    """Shared tags and inner-mtype logic of the two adapters (see the module docstring)."""

    _tags = {
        "authors": "tskernels developers",
        "maintainers": "tskernels developers",
        "X_inner_mtype": ["df-list", "numpy3D"],
        "symmetric": True,
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
        self.set_tags(**{"capability:unequal_length": unequal})

    @property
    def _kernel(self):
        return _default_kernel() if self.kernel is None else self.kernel

    def _needs_fitting(self) -> bool:
        """Whether the kernel's ``fit`` is not empty (tag ``fit_is_empty``: data-dependent
        features, or a data-dependent parameter such as GAK's median-heuristic bandwidth)
        and it is not fitted yet."""
        from sklearn.exceptions import NotFittedError
        from sklearn.utils.validation import check_is_fitted

        if self._kernel.get_tag("fit_is_empty"):
            return False
        try:
            check_is_fitted(self._kernel)
        except NotFittedError:
            return True
        return False

    def _fitted_kernel(self, reference):
        """The kernel; one with ``needs_fit`` that is not fitted yet is fitted, as a copy, on
        ``reference``: X2, or X when X2 is None (sktime's estimators pass their training
        panel there: ``transform(X_train)``, then ``transform(X_new, X_train)``)."""
        from sklearn.base import clone

        return clone(self._kernel).fit(reference) if self._needs_fitting() else self._kernel

    def transform_diag(self, X):
        """k(X[i], X[i]) (or d = 0), np.array (n,). sktime's default transforms each series
        alone, which would fit a kernel with ``needs_fit`` on one series: such a kernel, not
        fitted yet, gives the diagonal of ``transform(X)`` (fitted on X, as there)."""
        if self._needs_fitting():
            return np.diag(self.transform(X)).copy()
        return super().transform_diag(X)

    @classmethod
    def get_test_params(cls, parameter_set: str = "default"):
        """One parameter set per registered kernel (its example instance)."""
        import tskernels

        params = [{"kernel": spec.example()} for spec in tskernels.kernel_registry().values()]
        params.append({"kernel": _default_kernel(), "normalize": True})
        return params


class SktimeKernelAdapter(_TskernelsPairwise):
    """A ``tskernels.Kernel`` as an sktime ``BasePairwiseTransformerPanel`` (``pwtrafo_type``
    "kernel"): ``transform(X, X2)`` returns the Gram matrix, numpy array (n, m).

    For sktime's kernel estimators (``TimeSeriesSVC(kernel=...)``). Distance-based estimators
    (``KNeighborsTimeSeriesClassifier(distance=...)``) need :class:`SktimeDistanceAdapter`: a
    kernel is a similarity, and used as a distance it ranks the farthest series first.

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

    _tags = {"pwtrafo_type": "kernel"}

    def _transform(self, X, X2=None):
        """Gram matrix k(X[i], X2[j]), numpy array (n, m)."""
        Xo = _to_ours(X)
        Y = None if X2 is None or X2 is X else _to_ours(X2)  # sktime passes X2 = X
        kernel = self._fitted_kernel(Xo if Y is None else Y)
        K = kernel.gram(Xo, Y, normalize=bool(self.normalize))
        return K.detach().cpu().numpy()


class SktimeDistanceAdapter(_TskernelsPairwise):
    r"""The feature-space distance of a ``tskernels.Kernel`` as an sktime
    ``BasePairwiseTransformerPanel`` (``pwtrafo_type`` "distance"):

    .. math:: d(x, y) = \sqrt{\max\big(k(x, x) + k(y, y) - 2\,k(x, y),\ 0\big)}
              = \|\phi(x) - \phi(y)\|_{\mathcal H}

    (with ``normalize=True``, :math:`k` is the cosine-normalised kernel and
    :math:`d = \sqrt{2 - 2 k(x, y)}`). One Gram call plus the diagonals; the diagonals are the
    ones the kernel uses to normalise that Gram call. Round-off may make the squared distance
    slightly negative, which is clipped to 0; below ``-1e-8 (k(x,x) + k(y,y))`` the kernel is
    not positive semi-definite and ``transform`` raises ValueError.

    For sktime's distance estimators, e.g.
    ``KNeighborsTimeSeriesClassifier(distance=SktimeDistanceAdapter(GAK()))``.

    Parameters
    ----------
    kernel : tskernels.Kernel, default ``IntegralKernel(RBF(2.0))``
    normalize : bool, default False; use K(x,y) / sqrt(K(x,x) K(y,y))

    Examples
    --------
    >>> import numpy as np
    >>> from novelty import SktimeDistanceAdapter
    >>> from tskernels import FlattenedKernel, Linear
    >>> X = np.stack([np.zeros((1, 4)), np.ones((1, 4))])  # sktime numpy3D: (n, d, T)
    >>> SktimeDistanceAdapter(FlattenedKernel(Linear())).transform(X).tolist()  # |x - y|
    [[0.0, 2.0], [2.0, 0.0]]
    """

    _tags = {"pwtrafo_type": "distance"}

    def _transform(self, X, X2=None):
        """Distance matrix d(X[i], X2[j]), numpy array (n, m)."""
        normalize = bool(self.normalize)
        Xo = _to_ours(X)
        if X2 is None or X2 is X:  # sktime passes X2 = X: symmetric Gram
            kernel = self._fitted_kernel(Xo)
            K = kernel.gram(Xo, normalize=normalize).detach().cpu().numpy()
            dx = dy = np.diag(K).copy()
        else:
            Yo = _to_ours(X2)
            kernel = self._fitted_kernel(Yo)
            K = kernel.gram(Xo, Yo, normalize=normalize).detach().cpu().numpy()
            if normalize:
                dx, dy = np.ones(K.shape[0]), np.ones(K.shape[1])
            else:
                # the diagonals gram() itself normalises with: a kernel whose values depend on
                # the call (IntegralKernel's common grid for unequal lengths) overrides them
                bx = kernel._check_input(Xo, "X")
                by = kernel._check_input(Yo, "X2")
                dx, dy = (d.detach().cpu().numpy() for d in kernel._normalizing_diags(bx, by))
        return _squared_to_distance(dx[:, None] + dy[None, :] - 2.0 * K, dx, dy)


def _squared_to_distance(sq: np.ndarray, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``sqrt(max(sq, 0))`` for the squared feature-space distances ``sq`` (n, m), after
    checking that none is below ``-PSD_TOLERANCE * (dx_i + dy_j)`` (ValueError otherwise)."""
    scale = np.abs(dx)[:, None] + np.abs(dy)[None, :]
    bad = sq < -PSD_TOLERANCE * scale
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(
            f"k(x,x) + k(y,y) - 2 k(x,y) = {sq[i, j]:.3g} < 0 for the pair ({i}, {j}) "
            f"(k(x,x) = {dx[i]:.3g}, k(y,y) = {dy[j]:.3g}): the kernel is not positive "
            "semi-definite, so it induces no distance; use a PSD kernel (e.g. GAK with "
            "triangular_weights=True instead of a hard band)"
        )
    return np.sqrt(np.maximum(sq, 0.0))


def sktime_kernels(normalize: bool = False) -> dict[str, SktimeKernelAdapter]:
    """An adapter around each registered kernel's example, by registry name."""
    import tskernels

    return {
        name: SktimeKernelAdapter(spec.example(), normalize=normalize)
        for name, spec in tskernels.kernel_registry().items()
    }
