"""A registry of the kernels of the zoo, iterated by the CLI, the sktime adapters and the
contract tests.

Each kernel module registers its kernels with :func:`register`, giving a factory for an
example instance (sensible parameters for z-scored data) used by tests and the demo. A kernel
with ``needs_fit`` (data-dependent features) is fitted on a corpus before use:
``spec.fitted_example(corpus)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ._base import Kernel

__all__ = ["KernelSpec", "register", "kernel_registry", "make_kernel"]


@dataclass(frozen=True)
class KernelSpec:
    """name, the class, an example factory and the kernel's capabilities."""

    name: str
    cls: type[Kernel]
    example: Callable[..., Kernel]
    unequal_length: bool
    gpu: bool = True
    description: str = ""

    @property
    def needs_fit(self) -> bool:
        """Whether the kernel must be fitted on a corpus before ``gram`` (``cls.needs_fit``)."""
        return bool(self.cls.needs_fit)

    def fitted_example(self, corpus) -> Kernel:
        """The example instance, fitted on ``corpus`` when the kernel needs fitting."""
        kernel = self.example()
        return kernel.fit(corpus) if self.needs_fit else kernel


_REGISTRY: dict[str, KernelSpec] = {}


def register(spec: KernelSpec) -> KernelSpec:
    if spec.name in _REGISTRY and _REGISTRY[spec.name].cls is not spec.cls:
        raise ValueError(f"kernel name {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def kernel_registry() -> dict[str, KernelSpec]:
    """All registered kernels, by name (a copy)."""
    return dict(_REGISTRY)


def make_kernel(name: str, **params) -> Kernel:
    """An instance of the registered kernel ``name``: the example with ``params`` set."""
    try:
        spec = _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown kernel {name!r}; available: {', '.join(sorted(_REGISTRY))}"
        ) from None
    return spec.example().set_params(**params)
