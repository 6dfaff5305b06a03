"""experiments: the one-versus-rest UEA benchmark, data loading, results and reports.

Owns: data loading (UEA .ts, the user's .npz/.csv/.ts), the protocol (plan, folds, grids), the
SQLite results store, reports and figures, the CLI and the ADBench harness. May import
``tskernels``, ``novelty`` and ``density``; nothing imports it.
"""

from ._grids import register_scorer_setup, scorer_setup
from .data import available_datasets, load_uea

__all__ = ["available_datasets", "load_uea", "register_scorer_setup", "scorer_setup"]
