"""density: the SOSREP pre-density estimator and baselines on vector data (n, d).

Owns: vector kernels (Gaussian, Laplacian, SDO), the natural-gradient solver, Fisher-divergence
bandwidth selection and KDE. May import ``tskernels`` only (``novelty`` imports it, for its
SOSREP scorer).
"""

from ._bandwidth import FisherEstimate, first_stable_minimum, fisher_objective, select_bandwidth
from ._kde import KDE
from ._kernels import Expansion, GaussianKernel, LaplacianKernel, VectorKernel
from ._natural_gradient import FeatureGram, SOSREPSolution, sosrep_solve
from ._sdo import SDOKernel, sdo_default_m, sdo_log_scale
from ._sosrep import SOSREP

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
    "first_stable_minimum",
    "fisher_objective",
    "sdo_default_m",
    "sdo_log_scale",
    "select_bandwidth",
    "sosrep_solve",
]
