"""A registry of the kernels of the zoo, iterated by the CLI, the sktime adapters and the
contract tests.

Each kernel module registers its kernels with :func:`register`, giving a factory for an
example instance (sensible parameters for z-scored data) used by tests and the demo. What a
kernel can do is not repeated here: a spec reads the tags of its class
(:meth:`tskernels.Kernel.get_tag`), e.g. ``spec.unequal_length`` is
``spec.cls.get_tag("unequal_length")``. A kernel whose ``fit`` is not empty (tag
``fit_is_empty`` False: data-dependent features, ``needs_fit``, or a data-dependent
parameter such as GAK's median-heuristic bandwidth) is fitted on a corpus before use:
``spec.fitted_example(corpus)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ._base import Kernel

__all__ = ["KernelRegistry", "KernelSpec", "register", "kernel_registry", "make_kernel"]


@dataclass(frozen=True)
class KernelSpec:
    """name, the class, an example factory and a description; capabilities from the tags."""

    name: str
    cls: type[Kernel]
    example: Callable[..., Kernel]
    description: str = ""

    @property
    def tags(self) -> dict[str, object]:
        """The tags of ``cls`` (a copy)."""
        return self.cls.get_tags()

    def get_tag(self, name: str, default=None):
        return self.cls.get_tag(name, default)

    @property
    def unequal_length(self) -> bool:
        """Whether the kernel accepts unequal-length batches (tag ``unequal_length``)."""
        return bool(self.cls.get_tag("unequal_length"))

    @property
    def needs_fit(self) -> bool:
        """Whether the kernel must be fitted on a corpus before ``gram`` (tag ``needs_fit``)."""
        return bool(self.cls.get_tag("needs_fit"))

    def fitted_example(self, corpus) -> Kernel:
        """The example instance, fitted on ``corpus`` unless its ``fit`` is empty (tag
        ``fit_is_empty``)."""
        kernel = self.example()
        return kernel if kernel.get_tag("fit_is_empty") else kernel.fit(corpus)


class KernelRegistry:
    """The registered kernels by name, in the order of registration (one object per process,
    :data:`REGISTRY`; the module's functions are its methods)."""

    def __init__(self):
        self._specs: dict[str, KernelSpec] = {}

    def register(self, spec: KernelSpec) -> KernelSpec:
        """:func:`register`."""
        if not (isinstance(spec.cls, type) and issubclass(spec.cls, Kernel)):
            raise TypeError(f"KernelSpec.cls must be a Kernel subclass, got {spec.cls!r}")
        if spec.name in self._specs and self._specs[spec.name].cls is not spec.cls:
            raise ValueError(f"kernel name {spec.name!r} is already registered")
        self._specs[spec.name] = spec
        return spec

    def specs(self) -> dict[str, KernelSpec]:
        """All registered kernels, by name (a copy)."""
        return dict(self._specs)

    def make(self, name: str, **params) -> Kernel:
        """:func:`make_kernel`."""
        try:
            spec = self._specs[name]
        except KeyError:
            raise ValueError(
                f"unknown kernel {name!r}; available: {', '.join(sorted(self._specs))}"
            ) from None
        return spec.example().set_params(**params)


#: The one kernel registry of the process.
REGISTRY = KernelRegistry()


def register(spec: KernelSpec) -> KernelSpec:
    """Register ``spec`` under ``spec.name`` (each kernel module registers its kernels at
    import); returns it. A name taken by another class raises ValueError; registering the same
    class again replaces its spec."""
    return REGISTRY.register(spec)


def kernel_registry() -> dict[str, KernelSpec]:
    """All registered kernels, by name (a copy)."""
    return REGISTRY.specs()


def make_kernel(name: str, **params) -> Kernel:
    """An instance of the registered kernel ``name``: the example with ``params`` set."""
    return REGISTRY.make(name, **params)
