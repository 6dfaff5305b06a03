"""experiments: the one-versus-rest UEA benchmark, data loading, results and reports."""

from .data import available_datasets, load_uea

__all__ = ["available_datasets", "load_uea"]
