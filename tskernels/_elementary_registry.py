"""Registry entries of the flattened and integral kernels."""

from ._elementary import FlattenedKernel, IntegralKernel
from ._registry import KernelSpec, register
from ._static import RBF, Linear, Polynomial

register(
    KernelSpec(
        "flat_linear",
        FlattenedKernel,
        lambda: FlattenedKernel(Linear()),
        description="linear kernel on the flattened series",
    )
)
register(
    KernelSpec(
        "flat_rbf",
        FlattenedKernel,
        lambda: FlattenedKernel(RBF(10.0)),
        description="RBF on the flattened series",
    )
)
register(
    KernelSpec(
        "flat_poly",
        FlattenedKernel,
        lambda: FlattenedKernel(Polynomial(2, 1.0, 0.01)),
        description="polynomial kernel on the flattened series",
    )
)
register(
    KernelSpec(
        "integral_rbf",
        IntegralKernel,
        lambda: IntegralKernel(RBF(2.0)),
        description="time integral of a static RBF",
    )
)
register(
    KernelSpec(
        "integral_poly",
        IntegralKernel,
        lambda: IntegralKernel(Polynomial(2, 1.0, 0.2)),
        description="time integral of a static polynomial kernel",
    )
)
