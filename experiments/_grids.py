"""Hyper-parameter grids of the protocol (section 5) and the kernels' scalings, keyed by the
``tskernels`` registry name; presets ``quick`` and ``paper``.

A grid point is a dict of the *grid* values (the factors before scaling, e.g. ``sigma=1``
means sigma = sqrt(d T) for the flattened RBF). :func:`build_kernel` turns a grid point into a
kernel instance for data with ``d`` channels and ``T`` steps (counted after the basepoint and
the time channel are added, as in the protocol; for unequal lengths, the longest series of
the corpus). The integral kernels integrate every series on one grid of ``T`` points
(``n_grid=T``: the series of that length are taken as they are, the shorter ones resampled),
so their Grams are positive semi-definite on unequal-length data too. Kernels that compute
several grid values in one pass (every truncation level of the signature kernels) declare them
as *pass levels*: one Gram computation yields a stack, one entry per level.

The truncated signature kernels come in two variants: ``trunc_sig_linear`` / ``trunc_sig_rbf``
(``levels="cumulative"``, the standard kernel: the sum of the levels 0..n) and
``trunc_sig_linear_single`` / ``trunc_sig_rbf_single`` (``levels="single"``: 1 + the level-n
term alone, what the reference study's code computed). The ``_single`` grids are run only
when named in ``--kernels``; :data:`REGISTRY_NAME` maps a grid name to its registered kernel.

The random-convolution kernels ``rocket_linear`` and ``rocket_rbf`` (MiniRocket features,
Yeo-Johnson power transform; a linear kernel / F, or an RBF of bandwidth ``sigma`` sqrt(F) on
the F standardised features, whose squared distances are about 2F) learn their features from
the corpus (the ``needs_fit`` tag): the protocol fits them on each fold's normal training
series (:func:`experiments._protocol.fold_grams`), never on validation or test series.

Presets: ``paper`` (the protocol's grids, 4 x 10 CV), ``quick`` (one value per axis: a smoke
test, no tuning) and ``own`` (the default for the user's own data: the paper's grids of the
cheap kernels, trimmed grids of the costly ones, the detector's MiniRocket kernels, 3 x 1 CV).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BUILDERS",
    "KernelGrid",
    "REGISTRY_NAME",
    "PRESETS",
    "Preset",
    "REFERENCE_KERNELS",
    "SCORER_SETUPS",
    "ScorerSetup",
    "register_scorer_setup",
    "scorer_names",
    "scorer_setup",
    "build_kernel",
    "kernel_grid_points",
]

E = math.e
SIGMAS = [E**-2, E**-1, 1.0, E, E**2]
POLY_P = [2, 3, 4]
POLY_C = [0.25, 0.5, 1.0, 2.0, 4.0]
GAK_FACTORS = [E**-2, E**-1, 1.0, E, E**2]
VRK_TAU = [1.0, 0.5, 0.25, 0.125]
VRK_LAM = [float(v) for v in np.log(np.linspace(1000**0.25, 1000**0.999, 10)) / np.log(1000)]
SIG_SCALES = [0.25, 0.5, 1.0, 2.0, 4.0]
SIG_LEVELS = list(range(1, 8))
PDE_SCALES = [0.125, 0.25, 0.5, 1.0]
RAND_FEATURES = [10, 25, 50, 100, 200]
RAND_VARIANCES = [float(v) for v in np.geomspace(1e-5, 1.0, 8)]
RAND_SEEDS = [0, 1, 2, 3, 4]
ALPHAS = [1e-8, 1e-5, 1e-2]
MAX_RANK = 50
ROCKET_KERNELS = 10_000  # MiniRocket's F, the detector's (``novelty.detector._auto``)


def scorer_names(*, word: bool = True) -> list[str]:
    """The scorer names of the CLI: those of ``novelty.scorer_registry()`` (read without
    importing a scorer module, so neither torch nor scikit-learn), then the word "baselines"
    (expanded to the registered baseline-family scorers) unless ``word=False``."""
    from novelty.scorers._scorer_registry import scorer_names as registered

    return [*registered(), *(["baselines"] if word else [])]


@dataclass(frozen=True)
class ScorerSetup:
    """How the study runs a scorer (run configuration, not part of the scorer's definition).

    family: the scorers of one family share one fit in a fold (:mod:`experiments._scorers`):
        "variance_norm", "sse", "sosrep", or "baseline" (fitted on its own; what the CLI word
        "baselines" expands to);
    cli_grid: the key of the run config holding the values the CV sweeps along the scorer's
        ``sweep_axis`` ("alphas", "sse_lams"), or None for a scorer without an axis.
    """

    family: str = "baseline"
    cli_grid: str | None = None


#: The study's setup of the scorers, keyed by class ("module:qualname", so that reading the
#: table imports no scorer module); a class not listed (nor any of its bases) is a "baseline"
#: scorer without an axis. :func:`register_scorer_setup` adds a line for a scorer of one's own.
SCORER_SETUPS: dict[str, ScorerSetup] = {
    "novelty.scorers._variance_norm:ConformanceScorer": ScorerSetup("variance_norm", "alphas"),
    "novelty.scorers._variance_norm:MahalanobisScorer": ScorerSetup("variance_norm", "alphas"),
    "novelty.scorers._spectral_support:SpectralSupport": ScorerSetup("sse", "sse_lams"),
    "novelty.scorers._sosrep:SOSREPScorer": ScorerSetup("sosrep"),
}


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def scorer_setup(cls: type) -> ScorerSetup:
    """The :class:`ScorerSetup` of the scorer class ``cls``: its own line of
    :data:`SCORER_SETUPS`, else its nearest listed base class's, else the baseline default."""
    for klass in cls.__mro__:
        setup = SCORER_SETUPS.get(_class_path(klass))
        if setup is not None:
            return setup
    return ScorerSetup()


def register_scorer_setup(cls: type, family: str = "baseline", cli_grid: str | None = None):
    """Run the scorer class ``cls`` in the study with this ``family`` (one of
    ``experiments._scorers.FAMILIES``) and ``cli_grid`` (:class:`ScorerSetup`); returns the
    setup. A class listed with another setup raises ValueError."""
    from ._scorers import FAMILIES

    setup = ScorerSetup(family, cli_grid)
    if not isinstance(family, str) or family not in FAMILIES:
        raise ValueError(f"`family` must be one of {', '.join(FAMILIES)}, got {family!r}")
    if cli_grid is not None and (not isinstance(cli_grid, str) or not cli_grid):
        raise ValueError(f"`cli_grid` must be None or a run-config key, got {cli_grid!r}")
    taken = SCORER_SETUPS.get(_class_path(cls))
    if taken is not None and taken != setup:
        raise ValueError(f"{cls.__qualname__} is already set up as {taken}")
    SCORER_SETUPS[_class_path(cls)] = setup
    return setup


def _r(x: float) -> float:
    """Grid values rounded to 12 significant digits: stable JSON keys across platforms."""
    return float(f"{x:.12g}")


@dataclass(frozen=True)
class KernelGrid:
    """The grid of one registered kernel (plain data, so tasks pickle).

    axes: grid axis name -> values (the Cartesian product is the grid);
    levels: values of a pass axis computed in one Gram pass (``gram_levels``), or None;
    default: whether a run without ``--kernels`` includes this grid.
    The kernel for a grid point is built by ``BUILDERS[name]`` (see :func:`build_kernel`).
    """

    axes: dict[str, list]
    levels: list[int] | None = None
    level_name: str = "level"
    default: bool = True


def _flat_linear(g, d, T):
    from tskernels import Linear, make_kernel

    return make_kernel("flat_linear", static=Linear(scale=1.0 / (d * T)))


def _flat_rbf(g, d, T):
    from tskernels import RBF, make_kernel

    return make_kernel("flat_rbf", static=RBF(sigma=g["sigma"] * math.sqrt(d * T)))


def _flat_poly(g, d, T):
    from tskernels import Polynomial, make_kernel

    return make_kernel("flat_poly", static=Polynomial(degree=g["p"], c=g["c"], scale=1.0 / (d * T)))


def _integral_rbf(g, d, T):
    from tskernels import RBF, make_kernel

    return make_kernel("integral_rbf", static=RBF(sigma=g["sigma"] * math.sqrt(d)), n_grid=T)


def _integral_poly(g, d, T):
    from tskernels import Polynomial, make_kernel

    return make_kernel(
        "integral_poly", static=Polynomial(degree=g["p"], c=g["c"], scale=1.0 / d), n_grid=T
    )


def _gak(g, d, T):
    from tskernels import make_kernel

    return make_kernel("gak", sigma_factor=g["factor"])


def _reservoir(g, d, T):
    from tskernels import make_kernel

    # clip_inputs: shrink points into the admissible ball |x| < 1/tau - 0.1, as the reference
    # study clamped its inputs (kernel values themselves are never clipped)
    return make_kernel("reservoir", tau=g["tau"] / math.sqrt(d), lam=g["lam"], clip_inputs=True)


def _trunc_sig(name: str, levels: str = "cumulative"):
    def build(g, d, T):
        from tskernels import make_kernel

        return make_kernel(name, scale=g["scale"] / math.sqrt(d), level=g["level"], levels=levels)

    return build


def _trunc_sig_linear_order1(g, d, T):
    from tskernels import Linear, make_kernel

    # the reference's linear lift Linear(scale = s / d) on the unscaled points
    return make_kernel(
        "trunc_sig_linear_order1", static=Linear(scale=g["scale"] / d), scale=1.0,
        level=g["level"], levels="single",
    )  # fmt: skip


def _trunc_sig_rbf_order1(g, d, T):
    from tskernels import RBF, make_kernel

    # the reference's RBF lift: RBF(sigma sqrt(d)) times the amplitude s
    return make_kernel(
        "trunc_sig_rbf_order1", static=RBF(sigma=g["sigma"] * math.sqrt(d)), scale=1.0,
        amplitude=g["scale"], level=g["level"], levels="single",
    )  # fmt: skip


def _pde_sig(name: str):
    def build(g, d, T):
        from tskernels import make_kernel

        return make_kernel(name, scale=g["scale"] / math.sqrt(d), dyadic_order=2)

    return build


#: The floating-point precision (bits) in which the randomized signature's controlled ODE is
#: solved: the grid axis ``precision`` of the paper preset's ``rand_sig_tanh`` grids. 32: the
#: inputs, random map, Euler buffers and ``tanh`` in float32, the features then widened to
#: float64 and the Gram formed from them in float64
#: (:class:`experiments._rand_sig32.Float32RandomizedSignature`); 64, or a point without the
#: axis: the kernel in float64.
RAND_PRECISIONS = (32, 64)


def _rand_sig(activation_first: bool = False):
    def build(g, d, T):
        from tskernels import make_kernel

        precision = g.get("precision", 64)
        if isinstance(precision, bool) or precision not in RAND_PRECISIONS:
            raise ValueError(
                f"rand_sig_tanh: `precision` must be one of {', '.join(map(str, RAND_PRECISIONS))}"
                f" (bits of the floats the ODE is solved in), got {precision!r}"
            )
        # the kernel's ``scale`` is the variance of the random matrices A_i
        kernel = make_kernel(
            "rand_sig_tanh", n_features=g["features"], scale=g["variance"], seed=g["seed"],
            activation_first=activation_first,
        )  # fmt: skip
        if int(precision) == 64:
            return kernel
        from ._rand_sig32 import Float32RandomizedSignature

        return Float32RandomizedSignature(**{**kernel.get_params(), "dtype": "float32"})

    return build


def _rocket(rbf: bool):
    def build(g, d, T):
        from tskernels import RBF, RandomConvolutionKernel

        # F = n_kernels rounded down to a multiple of 84 (sktime), at least 84
        n = int(g["n_kernels"])
        F = max(84, n - n % 84)
        static = RBF(sigma=g["sigma"] * math.sqrt(F)) if rbf else None
        # "native": a validation or test series of another length than the fold's corpus gets
        # the same fitted features at its own length (as in the detector)
        return RandomConvolutionKernel(
            transform="minirocket", n_kernels=n, static=static, power_transform=True, seed=0,
            other_lengths="native",
        )  # fmt: skip

    return build


#: Grid names that build a registered kernel of another name (the single-level variants).
REGISTRY_NAME: dict[str, str] = {
    "trunc_sig_linear_single": "trunc_sig_linear",
    "trunc_sig_rbf_single": "trunc_sig_rbf",
    "rand_sig_tanh_first": "rand_sig_tanh",
}

BUILDERS: dict[str, Callable[[dict, int, int], object]] = {
    "flat_linear": _flat_linear,
    "flat_rbf": _flat_rbf,
    "flat_poly": _flat_poly,
    "integral_rbf": _integral_rbf,
    "integral_poly": _integral_poly,
    "gak": _gak,
    "reservoir": _reservoir,
    "trunc_sig_linear": _trunc_sig("trunc_sig_linear"),
    "trunc_sig_rbf": _trunc_sig("trunc_sig_rbf"),
    "trunc_sig_linear_single": _trunc_sig("trunc_sig_linear", "single"),
    "trunc_sig_rbf_single": _trunc_sig("trunc_sig_rbf", "single"),
    "pde_sig_rbf": _pde_sig("pde_sig_rbf"),
    "pde_sig_linear": _pde_sig("pde_sig_linear"),
    "rand_sig_tanh": _rand_sig(),
    "trunc_sig_linear_order1": _trunc_sig_linear_order1,
    "trunc_sig_rbf_order1": _trunc_sig_rbf_order1,
    "rand_sig_tanh_first": _rand_sig(activation_first=True),
    "rocket_linear": _rocket(rbf=False),
    "rocket_rbf": _rocket(rbf=True),
}

#: The reference study's kernels (protocol section 2), for ``--rank-rule reference`` runs:
#: the order-1 single-level truncated signature kernels with the reference's lifts and the
#: randomized signature with the activation first; the other kernels are the default ones.
REFERENCE_KERNELS: dict[str, str] = {
    "flat linear": "flat_linear", "flat rbf": "flat_rbf", "flat poly": "flat_poly",
    "integral rbf": "integral_rbf", "integral poly": "integral_poly", "gak": "gak",
    "reservoir": "reservoir", "trunc sig linear": "trunc_sig_linear_order1",
    "trunc sig rbf": "trunc_sig_rbf_order1", "pde sig rbf": "pde_sig_rbf",
    "rand sig tanh": "rand_sig_tanh_first",
}  # fmt: skip


def _paper_grids() -> dict[str, KernelGrid]:
    return {
        "flat_linear": KernelGrid({}),
        "flat_rbf": KernelGrid({"sigma": SIGMAS}),
        "flat_poly": KernelGrid({"p": POLY_P, "c": POLY_C}),
        "integral_rbf": KernelGrid({"sigma": SIGMAS}),
        "integral_poly": KernelGrid({"p": POLY_P, "c": POLY_C}),
        "gak": KernelGrid({"factor": GAK_FACTORS}),
        "reservoir": KernelGrid({"tau": VRK_TAU, "lam": VRK_LAM}),
        # the exact signature kernel of the piecewise-linear path: opt-in. The order-1 kernels
        # below (the reference study's) replace it in the default zoo: better on Epilepsy and
        # RacketSports and 10-100x cheaper a cell (docs/results_uea_reference.md, "defaults")
        "trunc_sig_linear": KernelGrid({"scale": SIG_SCALES}, SIG_LEVELS, default=False),
        "trunc_sig_rbf": KernelGrid({"scale": SIG_SCALES}, SIG_LEVELS, default=False),
        # the reference study's variant (1 + the level-n term only); opt-in
        "trunc_sig_linear_single": KernelGrid({"scale": SIG_SCALES}, SIG_LEVELS, default=False),
        "trunc_sig_rbf_single": KernelGrid({"scale": SIG_SCALES}, SIG_LEVELS, default=False),
        "pde_sig_rbf": KernelGrid({"scale": PDE_SCALES}),
        # beyond the reference study: the PDE signature kernel of the un-lifted path
        "pde_sig_linear": KernelGrid({"scale": PDE_SCALES}),
        # the randomized signature in float32 (``precision``: half the CPU time of its cells;
        # docs/results_study_scale.md, "in float32"); ``--grid rand_sig_tanh.precision=64``
        # runs it in float64
        "rand_sig_tanh": KernelGrid(
            {
                "features": RAND_FEATURES,
                "variance": RAND_VARIANCES,
                "seed": RAND_SEEDS,
                "precision": [32],
            }
        ),
        # the reference study's kernels (REFERENCE_KERNELS); the order-1 signature kernels are
        # in the default zoo, the activation-first randomized signature is opt-in
        "trunc_sig_linear_order1": KernelGrid({"scale": SIG_SCALES}, SIG_LEVELS),
        "trunc_sig_rbf_order1": KernelGrid({"sigma": SIGMAS, "scale": SIG_SCALES}, SIG_LEVELS),
        "rand_sig_tanh_first": KernelGrid(
            {
                "features": RAND_FEATURES,
                "variance": RAND_VARIANCES,
                "seed": RAND_SEEDS,
                "precision": [32],
            },
            default=False,
        ),
        # the detector's MiniRocket kernels (opt-in here; in the default zoo of ``own``)
        "rocket_linear": KernelGrid({"n_kernels": [ROCKET_KERNELS]}, default=False),
        "rocket_rbf": KernelGrid({"n_kernels": [ROCKET_KERNELS], "sigma": SIGMAS}, default=False),
    }


def _quick_grids() -> dict[str, KernelGrid]:
    paper = _paper_grids()
    small = {
        "flat_linear": {},
        "flat_rbf": {"sigma": [1.0]},
        "flat_poly": {"p": [2], "c": [1.0]},
        "integral_rbf": {"sigma": [1.0]},
        "integral_poly": {"p": [2], "c": [1.0]},
        "gak": {"factor": [1.0]},
        "reservoir": {"tau": [0.5], "lam": [VRK_LAM[7]]},
        "trunc_sig_linear": {"scale": [1.0]},
        "trunc_sig_rbf": {"scale": [1.0]},
        "trunc_sig_linear_single": {"scale": [1.0]},
        "trunc_sig_rbf_single": {"scale": [1.0]},
        "pde_sig_rbf": {"scale": [0.5]},
        "pde_sig_linear": {"scale": [0.5]},
        "rand_sig_tanh": {"features": [50], "variance": [RAND_VARIANCES[6]], "seed": [0]},
        "trunc_sig_linear_order1": {"scale": [1.0]},
        "trunc_sig_rbf_order1": {"sigma": [1.0], "scale": [1.0]},
        "rand_sig_tanh_first": {"features": [50], "variance": [RAND_VARIANCES[6]], "seed": [0]},
        "rocket_linear": {"n_kernels": [ROCKET_KERNELS]},
        "rocket_rbf": {"n_kernels": [ROCKET_KERNELS], "sigma": [1.0]},
    }
    # levels from one pass; the RBF-lifted recursion costs ~ level^2 per pair, so fewer
    levels = {"trunc_sig_linear": [1, 2, 3, 4], "trunc_sig_rbf": [1, 2],
              "trunc_sig_linear_single": [1, 2, 3, 4], "trunc_sig_rbf_single": [1, 2],
              "trunc_sig_linear_order1": [1, 2, 3, 4], "trunc_sig_rbf_order1": [1, 2]}  # fmt: skip
    return {
        name: KernelGrid(small[name], levels.get(name), default=paper[name].default)
        for name in paper
    }


def _own_grids() -> dict[str, KernelGrid]:
    """The default grids for the user's own data: every axis of a cheap kernel as in the
    paper (the flattened and integral kernels, GAK, the order-1 truncated linear signature,
    the PDE signature kernels, MiniRocket); the costly or large grids trimmed: the reservoir's
    lambda to 4 of its 10 values, the order-1 RBF signature kernel to its bandwidth axis
    (scale 1, levels 1..4), the randomized signature to 100 features and seed 0 (its 8
    variances). The default zoo is the paper's plus ``rocket_linear`` and ``rocket_rbf``."""
    paper = _paper_grids()
    trimmed = {
        "reservoir": KernelGrid({"tau": VRK_TAU, "lam": [VRK_LAM[i] for i in (0, 3, 6, 9)]}),
        "trunc_sig_rbf_order1": KernelGrid({"sigma": SIGMAS, "scale": [1.0]}, [1, 2, 3, 4]),
        "rand_sig_tanh": KernelGrid({"features": [100], "variance": RAND_VARIANCES, "seed": [0]}),
        "rocket_linear": KernelGrid({"n_kernels": [ROCKET_KERNELS]}),
        "rocket_rbf": KernelGrid({"n_kernels": [ROCKET_KERNELS], "sigma": SIGMAS}),
    }
    return {name: trimmed.get(name, grid) for name, grid in paper.items()}


@dataclass(frozen=True)
class Preset:
    """Everything a run needs besides the data sets, kernels and scorers."""

    name: str
    grids: dict[str, KernelGrid]
    folds: int
    repeats: int
    time_channel: tuple[bool, ...]
    alphas: tuple[float, ...] = tuple(ALPHAS)
    max_rank: int = MAX_RANK
    sse_lams: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1)
    datasets: tuple[str, ...] = ("BasicMotions",)


PRESETS: dict[str, Preset] = {
    "quick": Preset("quick", _quick_grids(), folds=3, repeats=1, time_channel=(False, True)),
    # the user's own data (no data set of its own: ``--dataset`` names the data)
    "own": Preset(
        "own", _own_grids(), folds=3, repeats=1, time_channel=(False, True), datasets=()
    ),  # fmt: skip
    "paper": Preset(
        "paper",
        _paper_grids(),
        folds=4,
        repeats=10,
        time_channel=(False, True),
        datasets=("Epilepsy", "RacketSports"),
    ),
}


def kernel_grid_points(grid: KernelGrid) -> list[dict]:
    """The grid points (dicts of rounded grid values) in a fixed order."""
    names = sorted(grid.axes)
    points = []
    for values in itertools.product(*(grid.axes[n] for n in names)):
        points.append({n: (_r(v) if isinstance(v, float) else v) for n, v in zip(names, values)})
    return points or [{}]


def build_kernel(
    name: str, point: dict, d: int, T: int, levels: list[int] | None = None, device=None
):
    """The kernel ``name`` at grid ``point`` for data with ``d`` channels and ``T`` steps; a
    pass kernel is built at its highest level (its ``gram_levels`` gives every level)."""
    if name not in BUILDERS:
        raise ValueError(f"no grid for kernel {name!r}; grids exist for {', '.join(BUILDERS)}")
    if levels is not None:
        point = {**point, "level": max(levels)}
    kernel = BUILDERS[name](point, d, T)
    if device is not None:
        kernel.set_params(device=device)
    return kernel
