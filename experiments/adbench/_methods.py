"""The methods of the ADBench evaluation: SOSREP and KDE with a Fisher-selected bandwidth,
and the PyOD detectors, as tables.

A *method* maps (training rows, test rows, seed, device) to (anomaly scores of the test rows,
higher = more anomalous; a dict of diagnostics stored with the row). :data:`METHODS` holds
the main ones (the default run and table), :data:`DIAGNOSTIC_METHODS` the bandwidth study
(run by name or as the group ``sensitivity``).

Adding a method. :func:`register_method` puts a :class:`Method` into one of the two
tables; its name then works with ``--methods`` and in ``report``::

    from experiments.adbench import Method, register_method

    def my_scores(Xtr, Xte, seed, device=None):
        ...  # fit on Xtr, score Xte
        return scores, {"bandwidth": h}

    register_method("SOSREP-transductive", Method(my_scores, uses_device=True),
                    diagnostic=True)

A module that registers methods is imported before ``main`` runs (a small script that
imports it and calls ``experiments.adbench.main``), so the worker processes of
``--workers`` find them too only when they import it as well; with one worker (the default)
nothing more is needed.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._data import median_distance, nn_spacing

__all__ = [
    "ALL_METHODS",
    "DIAGNOSTIC_METHODS",
    "METHODS",
    "Method",
    "PROTOCOLS",
    "PYOD",
    "PyODEntry",
    "QUADRATIC_MAX_TRAIN",
    "SENSITIVITY_FACTORS",
    "SkippedError",
    "TABLE_METHODS",
    "TRANSDUCTIVE_FACTORS",
    "TRANSDUCTIVE_METHODS",
    "WIDE_FACTORS",
    "bandwidth_grid",
    "density_anomaly_scores",
    "density_estimator",
    "expand_methods",
    "fit_density",
    "length_floor",
    "register_method",
    "under_protocol",
]

#: COF and SOD (quadratic, Python loops) are skipped above this many training rows.
QUADRATIC_MAX_TRAIN = 2000


class SkippedError(RuntimeError):
    """A method not run on this data set (recorded in the error column)."""


Scorer = Callable[..., tuple[np.ndarray, dict]]


@dataclass(frozen=True)
class Method:
    """``score(Xtr, Xte, seed, device=None) -> (anomaly scores, info)``; ``train_on_normal``:
    trained on the normal training rows only (a clean-training variant, outside ADBench's
    unsupervised protocol); ``uses_device``: computes on ``--device`` (else on the CPU)."""

    score: Scorer
    train_on_normal: bool = False
    uses_device: bool = False

    def __call__(self, Xtr: np.ndarray, Xte: np.ndarray, seed: int, device=None):
        return self.score(Xtr, Xte, seed, device)


# -- SOSREP and KDE --------------------------------------------------------------------------
#: The bandwidth-selection protocols of the density methods (``--protocol``).
PROTOCOLS = ("inductive", "transductive")
#: Length factors l / r of the inductive protocol (held-out 20 % of the training part).
LENGTH_FACTORS = (1.0, 2.0, 4.0, 8.0)
INDUCTIVE_FACTORS = LENGTH_FACTORS
#: Length factors l / r of the transductive protocol (the SOSREP paper's: r x 2^-3 .. r x 2^4).
TRANSDUCTIVE_FACTORS = tuple(2.0**k for k in range(-3, 5))
#: Suffix of a density method's name under the transductive protocol ("SOSREP-SDO/T").
TRANSDUCTIVE_SUFFIX = "/T"
DENSITY_KINDS = ("SOSREP", "KDE")
DENSITY_KERNELS = ("SDO", "Gauss", "Lap")


def length_floor(Xtr: np.ndarray, seed: int, *, max_memory: int | None = None) -> float:
    """r = max(median nearest-neighbour distance, median pairwise distance / 8) of the
    training rows (memory-bounded helpers of ``_data``): the smallest length scale the sample
    resolves; the floor guards quantised data (shuttle, ALOI), whose near-ties shrink the
    nearest-neighbour spacing to the quantisation step, where exact kernels underflow."""
    return max(
        nn_spacing(Xtr, seed, max_memory=max_memory),
        median_distance(Xtr, seed, max_memory=max_memory) / 8,
    )


def density_estimator(kind: str, kernel_name: str, seed: int, device=None,
                      n_features: int = 10_000):  # fmt: skip
    """The unfitted SOSREP or KDE of the harness with kernel ``kernel_name`` (SDO, Gauss,
    Lap). SDO: ``n_features`` float32 random features (SOSREP tol 1e-4, float32 resolution);
    SOSREP: lr = 1/3, at most 150 steps (the fastest linearised contraction: near the fixed
    point the error contracts by max(|1 - 2s|, |1 - s(1 + l)|) per step, s = 2 lr, l in
    [0, 1] the spectrum of N diag(alpha) K diag(alpha), which s = 2/3 minimises; converged
    fits take 10-40 steps, an unconverged grid fit is dropped from the selection and an
    unconverged final fit is flagged in ``info``)."""
    import torch

    import density as dn

    if kind not in DENSITY_KINDS or kernel_name not in DENSITY_KERNELS:
        raise ValueError(f"unknown density method {kind}-{kernel_name}")
    tol = 1e-6
    if kernel_name == "SDO":
        kernel = dn.SDOKernel(n_features=n_features, seed=seed, dtype=torch.float32)
        tol = 1e-4  # float32 features: f(x_i) carries ~1e-6 relative rounding
    elif kernel_name == "Gauss":
        kernel = dn.GaussianKernel()
    else:
        kernel = dn.LaplacianKernel()
    if kind == "SOSREP":
        return dn.SOSREP(kernel, lr=1 / 3, max_iter=150, seed=seed, tol=tol, device=device)
    return dn.KDE(kernel, device=device)


def bandwidth_grid(kernel_name: str, d: int, ells) -> tuple[np.ndarray, bool]:
    r"""(grid, log_grid) for length scales ``ells`` in d dimensions: sigma = l for the exact
    kernels; for SDO the grid of :math:`\log a = 2m \log l` (``log_grid`` True), in log space
    because :math:`a = l^{2m}` leaves the float64 range at large d (l = 4, d = 1,555:
    :math:`4^{1556}`)."""
    ells = np.asarray(ells, dtype=float)
    if kernel_name == "SDO":
        import density as dn

        return 2 * dn.sdo_default_m(d) * np.log(ells), True
    return ells, False


def fit_density(kind: str, kernel_name: str, Xtr: np.ndarray, Xte: np.ndarray, seed: int,
                device=None, *, protocol: str = "inductive", factors=None,
                n_features: int = 10_000):  # fmt: skip
    """The density method's fit: (fitted estimator, grid, log_grid, factors, r).

    The bandwidth is chosen by the Fisher divergence (``density.select_bandwidth``) over
    length scales l = r x ``factors`` (r: :func:`length_floor`):

    * ``protocol="inductive"`` (default factors :data:`INDUCTIVE_FACTORS`, rule "min"):
      scored on a held-out 20 % of the training part, refitted on all of it; only the
      training rows are used.
    * ``protocol="transductive"`` (the SOSREP paper's; default factors
      :data:`TRANSDUCTIVE_FACTORS`, rule "first_stable" with window 2): fitted on the
      training part, scored on the test part's features ``Xte`` (no labels).

    One factor: that length scale, fitted without selection (both protocols alike)."""
    import density as dn

    if protocol not in PROTOCOLS:
        raise ValueError(f"`protocol` must be one of {PROTOCOLS}, got {protocol!r}")
    if factors is None:
        factors = TRANSDUCTIVE_FACTORS if protocol == "transductive" else INDUCTIVE_FACTORS
    r = length_floor(Xtr, seed)
    grid, log_grid = bandwidth_grid(kernel_name, Xtr.shape[1], r * np.asarray(factors))
    est = density_estimator(kind, kernel_name, seed, device, n_features)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if len(grid) == 1:  # a fixed bandwidth: no selection
            est = dn.bandwidth_setter(est.kernel, log_grid)(est, float(grid[0])).fit(Xtr)
            est.bandwidth_, est.bandwidth_scores_ = float(grid[0]), np.array([np.nan])
            est.bandwidth_fallback_ = False
        elif protocol == "transductive":
            est = dn.select_bandwidth(est, Xtr, grid, X_select=Xte, rule="first_stable",
                                      log_grid=log_grid)  # fmt: skip
        else:
            est = dn.select_bandwidth(est, Xtr, grid, validation_fraction=0.2, seed=seed,
                                      log_grid=log_grid)  # fmt: skip
    return est, grid, log_grid, tuple(factors), r


def density_anomaly_scores(est, kind: str, kernel_name: str, Xte: np.ndarray) -> np.ndarray:
    """Anomaly scores (higher = more anomalous) of a fitted density method on Xte: minus the
    log (pre-)density; for KDE-SDO minus the signed estimate without its constant factor
    (which over- or underflows at large d): the same ranking, also where the estimate <= 0."""
    if kind == "KDE" and kernel_name == "SDO":
        return -est.expansion_.raw_value(est._check_X(Xte)).double().cpu().numpy()
    return -est.score_samples(Xte)


def _density_method(kind: str, kernel_name: str, n_features: int = 10_000,
                    factors=None, protocol: str = "inductive") -> Method:  # fmt: skip
    """SOSREP or KDE with the kernel ``kernel_name`` (SDO, Gauss, Lap), the bandwidth chosen
    by :func:`fit_density` under ``protocol`` (one factor: fixed)."""

    def run(Xtr: np.ndarray, Xte: np.ndarray, seed: int, device=None) -> tuple[np.ndarray, dict]:
        est, grid, log_grid, facs, r = fit_density(
            kind, kernel_name, Xtr, Xte, seed, device, protocol=protocol, factors=factors,
            n_features=n_features,
        )  # fmt: skip
        score = density_anomaly_scores(est, kind, kernel_name, Xte)
        pick = int(np.flatnonzero(np.asarray(grid) == est.bandwidth_)[0])
        log_bw = float(est.bandwidth_) if log_grid else math.log(est.bandwidth_)
        info = {
            # the kernel's bandwidth (SDO: a), None where it is outside float64 (large d)
            "bandwidth": math.exp(log_bw) if -700 < log_bw < 700 else None,
            "log_bandwidth": log_bw,
            "nn_spacing": r,
            "length_factor": facs[pick],
            "protocol": protocol,
            "n_duplicates_excluded": getattr(est, "n_duplicates_excluded_", 0),
            "fisher": [None if not np.isfinite(v) else float(v) for v in est.bandwidth_scores_],
        }
        if protocol == "transductive":
            info["fallback"] = bool(est.bandwidth_fallback_)
        if kind == "SOSREP":
            info.update(n_iter=est.n_iter_, converged=bool(est.converged_))
        return score, info

    return Method(run, uses_device=True)


# -- PyOD ------------------------------------------------------------------------------------
def _pca(Xtr: np.ndarray, seed: int):
    from pyod.models.pca import PCA

    # PyOD's PCA divides by every component's variance: a zero-variance component (collinear
    # columns) gives non-finite scores (cardio, optdigits, mnist); keep the rank's worth
    Z = (Xtr - Xtr.mean(0)) / Xtr.std(0)
    return PCA(n_components=int(np.linalg.matrix_rank(Z)), random_state=seed)


def _loda(Xtr: np.ndarray, seed: int):
    from pyod.models.loda import LODA

    np.random.seed(seed)  # noqa: NPY002 - LODA draws its projections from the global generator
    return LODA()


def _deep_svdd(Xtr: np.ndarray, seed: int):
    import torch
    from pyod.models.deep_svdd import DeepSVDD

    torch.manual_seed(seed)
    return DeepSVDD(n_features=Xtr.shape[1], epochs=20, random_state=seed, verbose=0)


def _plain(module: str, cls: str, seeded: bool = False, **kw):
    """A constructor of ``pyod.models.<module>.<cls>(**kw)`` (``random_state=seed`` if seeded)."""

    def build(Xtr: np.ndarray, seed: int):
        import importlib

        C = getattr(importlib.import_module(f"pyod.models.{module}"), cls)
        return C(**kw, **({"random_state": seed} if seeded else {}))

    return build


@dataclass(frozen=True)
class PyODEntry:
    """``build(Xtr, seed)`` -> an unfitted PyOD detector; ``max_train``: skipped above this
    many training rows; ``drop_constant``: training-constant columns removed first."""

    build: Callable[[np.ndarray, int], object]
    max_train: int | None = None
    drop_constant: bool = False


#: The PyOD detectors, cheapest first (COF and SOD are quadratic with Python loops).
PYOD: dict[str, PyODEntry] = {
    "IForest": PyODEntry(_plain("iforest", "IForest", seeded=True)),
    "ECOD": PyODEntry(_plain("ecod", "ECOD")),
    "COPOD": PyODEntry(_plain("copod", "COPOD")),
    "HBOS": PyODEntry(_plain("hbos", "HBOS")),
    # a training-constant column standardises to 0/0 in PyOD's PCA: dropped first
    "PCA": PyODEntry(_pca, drop_constant=True),
    "LODA": PyODEntry(_loda),
    "KNN": PyODEntry(_plain("knn", "KNN")),
    "LOF": PyODEntry(_plain("lof", "LOF")),
    "CBLOF": PyODEntry(_plain("cblof", "CBLOF", seeded=True)),
    "OCSVM": PyODEntry(_plain("ocsvm", "OCSVM")),
    "DeepSVDD": PyODEntry(_deep_svdd),
    "SOD": PyODEntry(_plain("sod", "SOD"), max_train=QUADRATIC_MAX_TRAIN),
    "COF": PyODEntry(_plain("cof", "COF", method="memory"), max_train=QUADRATIC_MAX_TRAIN),
}


def _pyod_method(name: str) -> Method:
    entry = PYOD[name]

    def run(Xtr: np.ndarray, Xte: np.ndarray, seed: int, device=None) -> tuple[np.ndarray, dict]:
        if entry.max_train is not None and len(Xtr) > entry.max_train:
            raise SkippedError(f"{name} skipped: {len(Xtr)} > {entry.max_train} training rows")
        if entry.drop_constant:
            keep = Xtr.std(0) > 0
            Xtr, Xte = Xtr[:, keep], Xte[:, keep]
        det = entry.build(Xtr, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            det.fit(Xtr)
            return np.asarray(det.decision_function(Xte), dtype=float), {}

    return Method(run)


METHODS: dict[str, Method] = {
    "SOSREP-SDO": _density_method("SOSREP", "SDO"),
    "SOSREP-Gauss": _density_method("SOSREP", "Gauss"),
    "SOSREP-Lap": _density_method("SOSREP", "Lap"),
    "KDE-SDO": _density_method("KDE", "SDO"),
    "KDE-Gauss": _density_method("KDE", "Gauss"),
}
METHODS.update({n: _pyod_method(n) for n in PYOD})
#: The methods of the default table: COF and SOD run only up to ``QUADRATIC_MAX_TRAIN``
#: training rows, and a table restricted to the data sets every method has would drop the
#: large ones (name them with ``--methods`` to see them).
TABLE_METHODS = [m for m in METHODS if m not in ("COF", "SOD")]

#: Fixed length factors of the bandwidth-sensitivity study (l = factor x r, no selection).
SENSITIVITY_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: The wide grid r x 2^-4 .. r x 2^5 on which the Fisher divergence selects in the study.
WIDE_FACTORS = tuple(2.0**k for k in range(-4, 6))


def _factor_tag(f: float) -> str:
    return f"{f:g}"


#: Diagnostic methods (run by name; not in the default run or table): every SDO density
#: method at each fixed length factor, SOSREP-SDO selected on the wide grid, and the
#: clean-training variants at factor 1.
DIAGNOSTIC_METHODS: dict[str, Method] = {
    f"{kind}-SDO@{_factor_tag(f)}": _density_method(kind, "SDO", factors=(f,))
    for kind in ("SOSREP", "KDE")
    for f in SENSITIVITY_FACTORS
}
DIAGNOSTIC_METHODS["SOSREP-SDO-wide"] = _density_method("SOSREP", "SDO", factors=WIDE_FACTORS)
for _kind in ("SOSREP", "KDE"):
    _fixed = DIAGNOSTIC_METHODS[f"{_kind}-SDO@1"]
    DIAGNOSTIC_METHODS[f"{_kind}-SDO@1-clean"] = Method(
        _fixed.score, train_on_normal=True, uses_device=True
    )
#: The density methods of :data:`METHODS` under the transductive protocol (``--protocol
#: transductive``; named with the suffix "/T", so both protocols share one store).
TRANSDUCTIVE_METHODS: dict[str, Method] = {
    f"{kind}-{kern}{TRANSDUCTIVE_SUFFIX}": _density_method(kind, kern, protocol="transductive")
    for kind, kern in (("SOSREP", "SDO"), ("SOSREP", "Gauss"), ("SOSREP", "Lap"),
                       ("KDE", "SDO"), ("KDE", "Gauss"))
}  # fmt: skip
ALL_METHODS: dict[str, Method] = {**METHODS, **DIAGNOSTIC_METHODS, **TRANSDUCTIVE_METHODS}


def register_method(name: str, method: Method, *, diagnostic: bool = False) -> None:
    """Add ``method`` under ``name`` to :data:`METHODS` (the default run and table) or, with
    ``diagnostic``, to :data:`DIAGNOSTIC_METHODS`; a name already taken is a ValueError."""
    if not isinstance(method, Method):
        raise TypeError(f"`method` must be a Method, got {type(method).__name__}")
    if name in ALL_METHODS:
        raise ValueError(f"a method named {name!r} exists already")
    (DIAGNOSTIC_METHODS if diagnostic else METHODS)[name] = method
    ALL_METHODS[name] = method
    if not diagnostic:
        TABLE_METHODS.append(name)


def under_protocol(name: str, protocol: str = "inductive") -> str:
    """The name of method ``name`` under ``protocol``: a density method with a transductive
    variant ("SOSREP-SDO") becomes "SOSREP-SDO/T" under "transductive"; every other method
    (PyOD, the fixed-bandwidth diagnostics, a name already ending in "/T") is itself."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"`protocol` must be one of {PROTOCOLS}, got {protocol!r}")
    t = name + TRANSDUCTIVE_SUFFIX
    return t if protocol == "transductive" and t in TRANSDUCTIVE_METHODS else name


def expand_methods(requested: list[str] | None, protocol: str = "inductive") -> list[str]:
    """Method names, with the groups "main" (``METHODS``, the default) and "sensitivity"
    (``DIAGNOSTIC_METHODS``) expanded, each under ``protocol`` (:func:`under_protocol`)."""
    out: list[str] = []
    for m in requested or ["main"]:
        group = {"main": METHODS, "sensitivity": DIAGNOSTIC_METHODS}.get(m)
        out.extend(group if group is not None else [m])
    return list(dict.fromkeys(under_protocol(m, protocol) for m in out))
