"""density: the SOSREP pre-density estimator and baselines on vector data (n, d).

Owns: vector kernels (Gaussian, Laplacian, SDO), the natural-gradient solver, Fisher-divergence
bandwidth selection and KDE. May import ``tskernels`` only (``novelty`` imports it, for its
SOSREP scorer).
"""

from importlib import import_module

# Every public name is imported on first use (PEP 562: ``from density import SOSREP`` and
# ``density.SOSREP`` work as usual), so ``import density`` imports neither torch nor
# scikit-learn; the map says which module holds each name.
_EXPORTS = {
    "FisherEstimate": "_bandwidth",
    "bandwidth_setter": "_bandwidth",
    "first_stable_minimum": "_bandwidth",
    "fisher_objective": "_bandwidth",
    "select_bandwidth": "_bandwidth",
    "KDE": "_kde",
    "Expansion": "_kernels",
    "GaussianKernel": "_kernels",
    "LaplacianKernel": "_kernels",
    "VectorKernel": "_kernels",
    "FeatureGram": "_natural_gradient",
    "SOSREPSolution": "_natural_gradient",
    "sosrep_solve": "_natural_gradient",
    "SDOKernel": "_sdo",
    "sdo_default_m": "_sdo",
    "sdo_log_envelope": "_sdo",
    "sdo_log_scale": "_sdo",
    "sdo_profile": "_sdo",
    "SOSREP": "_sosrep",
}

__all__ = [
    "Expansion",
    "FeatureGram",
    "FisherEstimate",
    "GaussianKernel",
    "KDE",
    "LaplacianKernel",
    "SDOKernel",
    "SOSREP",
    "SOSREPSolution",
    "VectorKernel",
    "bandwidth_setter",
    "first_stable_minimum",
    "fisher_objective",
    "sdo_default_m",
    "sdo_log_envelope",
    "sdo_log_scale",
    "sdo_profile",
    "select_bandwidth",
    "sosrep_solve",
]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # resolved once
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
