"""density: the SOSREP pre-density estimator and baselines."""

from ._natural_gradient import SOSREPSolution, sosrep_solve

__all__ = ["SOSREPSolution", "sosrep_solve"]
