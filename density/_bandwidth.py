r"""Bandwidth selection by the Fisher divergence (Hyvarinen score) on held-out or given points.

For an unnormalised model :math:`q = |f|^p` (p = 2 for SOSREP's :math:`f^2`, p = 1 for KDE) the
Hyvarinen score of a point is

.. math::

    \Delta \log q + \tfrac12 |\nabla \log q|^2
    = p\,\frac{\Delta f}{f} + \Bigl(\frac{p^2}{2} - p\Bigr)\frac{|\nabla f|^2}{f^2},

which is :math:`2\,\Delta f / f` for SOSREP. Its mean over held-out points equals the Fisher
divergence to the data density up to a constant independent of the model, so the bandwidth
minimising it is chosen. The Laplacian is in closed form for every kernel here ("closed");
"hutchinson" estimates it by :math:`E_v[v^\top \nabla^2 f\, v]` with Rademacher probes v through
autograd (for kernels without a closed form, and as a check).

Two conditions of the identity behind the Hyvarinen score (integration by parts against a
continuous, twice-differentiable data density and model) are enforced:

* Ties. A held-out point that coincides with a fit point (an atom of the empirical law) has
  :math:`\Delta \log q \approx -p\,d/\sigma^2 \to -\infty` as the bandwidth shrinks, so a
  duplicated row makes the criterion prefer the smallest bandwidth without bound. Held-out
  points within ``1e-9 x`` (data scale) of a fit point are left out, for every kernel.
* Smoothness of the SDO kernel. With the default m = floor(d/2) + 1 the radial frequency
  density has tail :math:`r^{d-1-2m} \in \{r^{-2}, r^{-3}\}`: :math:`E|\omega|^2 = \infty`,
  so :math:`k_a` is not twice differentiable at x = y and the random-feature estimates of
  :math:`\nabla f` and :math:`\Delta f` (sums of :math:`\omega_j v_j`, :math:`|\omega_j|^2
  v_j`) have infinite variance: the raw criterion jumps by orders of magnitude between
  neighbouring bandwidths. For random-feature kernels the score is therefore taken of the
  mollified model :math:`f_h = f * N(0, h^2 I)` with :math:`h = c\,\ell` (``smoothing`` c,
  default 0.5; :math:`\ell` the kernel's length scale), i.e. feature weights
  :math:`v_j e^{-h^2|\omega_j|^2/2}`: finite variance, and scale-free across the grid.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import clone

from ._kde import KDE
from ._sosrep import SOSREP
from ._validation import SEED, Interval, IsInstance, StrOptions, as_data, validate_params

__all__ = [
    "FisherEstimate",
    "bandwidth_setter",
    "first_stable_minimum",
    "fisher_objective",
    "select_bandwidth",
]


@dataclass
class FisherEstimate:
    value: float  # mean Hyvarinen score over the points
    stderr: float  # Monte-Carlo standard error (0 for the closed form)
    n_points: int


#: The constraints of the functions' shared arguments.
_ESTIMATOR = [IsInstance((SOSREP, KDE), "a SOSREP or KDE estimator")]
_METHOD = [StrOptions(("closed", "hutchinson"))]
_N_PROBES = [Interval(Integral, 2, None, closed="left")]
_SMOOTHING = [None, Interval(Real, 0, None, closed="left")]  # finite, >= 0
_WINDOW = [Interval(Integral, 1, None, closed="left")]


def _power(estimator) -> int:
    """The power p of the model f^p: 2 for SOSREP, 1 for KDE (``estimator`` checked)."""
    return 2 if isinstance(estimator, SOSREP) else 1


#: Default mollification h / length scale for random-feature kernels (module docstring).
DEFAULT_SMOOTHING = 0.5


def _resolve_smoothing(kernel, smoothing: float | None) -> float:
    if smoothing is None:
        return DEFAULT_SMOOTHING if kernel.random_features else 0.0
    if smoothing > 0 and not kernel.random_features:
        raise ValueError("`smoothing` > 0 is implemented for random-feature kernels only")
    return float(smoothing)


def mollified_expansion(expansion, h: float):
    r"""The expansion of :math:`f_h = f * N(0, h^2 I)` for a random-feature expansion f.

    :math:`E_\varepsilon \cos(\omega^\top(x + h\varepsilon) + b) = e^{-h^2|\omega|^2/2}
    \cos(\omega^\top x + b)`, so the feature weights become :math:`v_j e^{-h^2|\omega_j|^2/2}`.
    """
    if not expansion.kernel.random_features:
        raise ValueError("mollification is implemented for random-feature kernels only")
    out = copy.copy(expansion)
    w2 = (expansion.kernel.omega_**2).sum(1)
    out.v = expansion.v * torch.exp(-0.5 * h * h * w2)
    return out


@validate_params(
    {
        "estimator": _ESTIMATOR,
        "method": _METHOD,
        "n_probes": _N_PROBES,
        "seed": SEED,
        "smoothing": _SMOOTHING,
    }
)
def fisher_objective(
    estimator,
    X,
    *,
    method: str = "closed",
    n_probes: int = 64,
    seed: int = 0,
    smoothing: float | None = None,
) -> FisherEstimate:
    r"""Mean Hyvarinen score of the fitted ``estimator`` (SOSREP or KDE) on points X (n, d).

    ``method="closed"``: exact :math:`\Delta f`; ``"hutchinson"``: :math:`\Delta f` estimated
    with ``n_probes`` Rademacher probes (gradient by autograd), standard error over probes.
    ``smoothing`` c: score of the mollified :math:`f_h`, :math:`h = c\,\ell` (random-feature
    kernels only; ``None`` = 0.5 for those, 0 otherwise; see the module docstring).
    """
    p = _power(estimator)
    X = estimator._check_X(X)
    e = estimator.expansion_
    c_smooth = _resolve_smoothing(e.kernel, smoothing)
    if c_smooth > 0:
        e = mollified_expansion(e, c_smooth * e.kernel.length_scale())
    c = p * p / 2.0 - p
    if method == "closed":
        if c == 0:
            f, lap = e.raw_value_and_laplacian(X)
            g2 = torch.zeros_like(f)
        else:
            f, g, lap = e.raw_value_grad_laplacian(X)
            g2 = (g * g).sum(1)
        if bool((f == 0).any()):
            raise FloatingPointError("f = 0 at a held-out point: the Hyvarinen score is undefined")
        scores = p * lap / f + c * g2 / (f * f)
        value = float(scores.mean())
        if value != value or abs(value) == float("inf"):
            raise FloatingPointError("the Hyvarinen score is not finite at this bandwidth")
        return FisherEstimate(value, 0.0, X.shape[0])
    gen = torch.Generator().manual_seed(seed)
    x = X.detach().clone().requires_grad_(True)
    f = e.raw_torch_value(x)
    (g,) = torch.autograd.grad(f.sum(), x, create_graph=True)
    fd, g2 = f.detach(), (g.detach() ** 2).sum(1)
    per_probe = []
    for _ in range(n_probes):
        v = (torch.randint(0, 2, X.shape, generator=gen) * 2 - 1).to(X)
        (hv,) = torch.autograd.grad((g * v).sum(), x, retain_graph=True)
        lap = (hv * v).sum(1)
        per_probe.append(float((p * lap / fd + c * g2 / (fd * fd)).mean()))
    arr = np.asarray(per_probe)
    return FisherEstimate(float(arr.mean()), float(arr.std(ddof=1) / np.sqrt(len(arr))), X.shape[0])


def bandwidth_setter(kernel, log_grid: bool = False):
    """``set(estimator, value)`` setting ``value`` as the bandwidth of ``estimator.kernel``:
    on the kernel's ``log_bandwidth_param`` with ``log_grid`` (a ValueError for a kernel
    without one), else on its ``bandwidth_param``; the other of the two (when the kernel has
    both) is reset to None so the two never contradict. The parameter's name is
    ``set.param``."""
    if log_grid:
        param, other = kernel.log_bandwidth_param, kernel.bandwidth_param
        if param is None:
            raise ValueError(
                f"`log_grid` needs a kernel with a log-space bandwidth (SDOKernel's log_a); "
                f"{type(kernel).__name__} takes `{kernel.bandwidth_param}` values (log_grid=False)"
            )
    else:
        param, other = kernel.bandwidth_param, kernel.log_bandwidth_param

    def set_bandwidth(estimator, value: float):
        params = {f"kernel__{param}": float(value)}
        if other is not None:
            params[f"kernel__{other}"] = None
        return estimator.set_params(**params)

    set_bandwidth.param = param
    return set_bandwidth


#: Selection rules of :func:`select_bandwidth`.
RULES = ("min", "first_stable")


@validate_params({"window": _WINDOW})
def first_stable_minimum(scores, window: int = 2) -> int | None:
    r"""Index of the first stable local minimum of a curve, or ``None`` when it has none.

    ``scores`` are the criterion values on a grid sorted by increasing bandwidth; ``nan``
    entries (dropped grid values) are removed first and the rule reads the remaining curve
    :math:`s_0, \dots, s_{L-1}`. Index i is a *stable local minimum* with window w
    (``window``) when it is the bottom of a basin at least w grid points wide on each side:

    .. math::

        s_{i-w} \ge \dots \ge s_{i-1} \ge s_i \le s_{i+1} \le \dots \le s_{i+w},
        \qquad s_{i-w} > s_i < s_{i+w}.

    So the ends of the curve (fewer than w points on one side) are never stable minima, a
    narrow dip (the curve falls again within w points of it) is not one, and a flat stretch is
    not one (the basin must rise on both sides). "First" is in the direction of decreasing
    bandwidth: the curve is read from its largest bandwidth down, as the criterion falls from
    the over-smoothed end, and the first stable minimum met (the largest-bandwidth one) is
    returned, before the small bandwidths where a kernel estimate memorises the sample and
    the criterion turns noisy (the SOSREP paper's released code also keeps the
    largest-bandwidth local minimum). ``None`` for a monotone, flat or too short
    (L < 2w + 1) curve. The position is returned in the input's indexing (``nan`` entries
    counted).
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1:
        raise ValueError(f"`scores` must be 1-D, got shape {s.shape}")
    pos = np.flatnonzero(np.isfinite(s))
    v = s[pos]
    w = int(window)
    for i in range(len(v) - 1 - w, w - 1, -1):
        left, right = v[i - w : i + 1], v[i : i + w + 1]
        if (
            np.all(np.diff(left) <= 0)
            and np.all(np.diff(right) >= 0)
            and left[0] > v[i]
            and right[-1] > v[i]
        ):
            return int(pos[i])
    return None


@validate_params(
    {
        "estimator": _ESTIMATOR,
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "seed": [None, *SEED],
        "rule": [StrOptions(RULES)],
        "window": _WINDOW,
        "method": _METHOD,
        "n_probes": _N_PROBES,
        "smoothing": _SMOOTHING,
        "log_grid": ["boolean"],
    }
)
def select_bandwidth(
    estimator,
    X,
    grid: Sequence[float],
    validation_fraction: float = 0.2,
    seed: int = 0,
    *,
    X_select=None,
    rule: str = "min",
    window: int = 2,
    method: str = "closed",
    n_probes: int = 64,
    smoothing: float | None = None,
    log_grid: bool = False,
):
    r"""Choose the kernel bandwidth of ``estimator`` (SOSREP or KDE) from ``grid``.

    For every grid value the estimator is fitted and the mean Hyvarinen score (module
    docstring) of the fitted model is computed on selection points; ``rule`` then picks a
    value from this curve. Two protocols:

    * **Inductive** (``X_select=None``, the default): X is split at random into a fit part
      and a held-out part (``validation_fraction``); the models are fitted on the fit part and
      scored on the held-out part, and the chosen one is refitted on all of X. Only X is used:
      valid for training data alone.
    * **Transductive** (``X_select`` given): the models are fitted on all of X and scored on
      the unlabelled points ``X_select`` (n_select, d), typically the very batch that will be
      ranked (the SOSREP paper's protocol: the test split's features, no labels).
      ``validation_fraction`` is not used and no refit is needed (the chosen grid fit is
      returned). Valid when named as such: the choice depends on the points being scored.

    ``rule="min"``: the grid value with the smallest score (ties: the first in ``grid``).
    ``rule="first_stable"``: the first stable local minimum met from the largest bandwidth
    down (:func:`first_stable_minimum` with ``window``: the bottom of a basin at least
    ``window`` grid points wide on each side, the ends of the grid excluded); where it has none
    (monotone, flat, too short) the rule falls back to the minimum (``bandwidth_fallback_``).

    A grid value whose fit does not converge or whose score is not finite is skipped (recorded
    as ``nan``). Selection points that duplicate a fit point (up to ``1e-9 x`` the data scale)
    are left out for every kernel (module docstring: the score is defined for continuous
    densities; for the Laplacian kernel it is also singular there). Random-feature kernels are
    scored on the mollified model (``smoothing``, module docstring). A choice at either end of
    the grid warns (extend the grid).

    ``log_grid``: the grid holds the *logs* of the bandwidths, set on the kernel's
    ``log_bandwidth_param`` (``log_a`` of :class:`SDOKernel`, whose :math:`a = \ell^{2m}`
    leaves the float64 range at large d: every value of a log grid is representable); kernels
    without one (Gaussian, Laplacian, whose sigma is always representable) raise. A grid of
    bandwidths (``log_grid=False``) must hold positive finite values.

    Returns a clone of ``estimator`` fitted on all of X with the chosen bandwidth, carrying
    ``bandwidth_`` (the chosen value, in the grid's units: a log with ``log_grid``),
    ``bandwidth_param_`` (the kernel parameter it was set on, e.g. "a" or "log_a"),
    ``bandwidth_grid_`` and ``bandwidth_scores_`` (the
    objective per grid value, in the order of ``grid``), ``bandwidth_protocol_``
    ("inductive" or "transductive"), ``bandwidth_rule_``, ``bandwidth_fallback_`` (True when
    "first_stable" found no stable minimum), ``n_duplicates_excluded_``,
    ``bandwidth_at_edge_`` and ``selection_time_`` (seconds, refit included).
    """
    t0 = time.perf_counter()
    grid = [float(g) for g in np.atleast_1d(np.asarray(grid, dtype=float))]
    if not grid:
        raise ValueError("`grid` is empty")
    set_bandwidth = bandwidth_setter(estimator.kernel, log_grid)
    if log_grid and not all(np.isfinite(g) for g in grid):
        raise ValueError(f"`grid` (log_grid=True) must hold finite log bandwidths, got {grid}")
    if not log_grid and not all(np.isfinite(g) and g > 0 for g in grid):
        raise ValueError(
            f"`grid` must hold positive finite bandwidths, got {grid}; a bandwidth outside the "
            "float64 range (SDO's a = l^(2m) at large d) is given by its log with log_grid=True"
        )
    transductive = X_select is not None
    if transductive:
        Xt = as_data(X, "X", min_samples=2)
        X_fit = Xt
        X_val = as_data(X_select, "X_select", min_samples=1)
        if X_val.shape[1] != Xt.shape[1]:
            raise ValueError(
                f"`X_select` has {X_val.shape[1]} features but `X` has {Xt.shape[1]}; "
                "the selection points must live in the space of the training data"
            )
    else:
        Xt = as_data(X, "X", min_samples=4)
        n = Xt.shape[0]
        n_val = max(1, int(round(validation_fraction * n)))
        if n - n_val < 2:
            raise ValueError(f"`X` has {n} rows: too few to hold out {n_val} for validation")
        perm = torch.from_numpy(np.random.default_rng(seed).permutation(n))
        X_fit, X_val = Xt[perm[n_val:]], Xt[perm[:n_val]]
    _resolve_smoothing(estimator.kernel, smoothing)
    scale = float((Xt.max(0).values - Xt.min(0).values).norm())
    tie_radius = 1e-9 * (scale if scale > 0 else 1.0)
    dup = torch.zeros(X_val.shape[0], dtype=torch.bool)
    for s in range(0, X_val.shape[0], 1024):
        dist = torch.cdist(X_val[s : s + 1024], X_fit, compute_mode="donot_use_mm_for_euclid_dist")
        dup[s : s + 1024] = (dist <= tie_radius).any(1)  # exact differences: no mm rounding
    n_dup = int(dup.sum())
    if n_dup:
        X_val = X_val[~dup]
        if X_val.shape[0] == 0:
            which = "`X_select` point" if transductive else "held-out point"
            raise ValueError(
                f"every {which} duplicates a fit point: the Hyvarinen score needs "
                "continuous data (deduplicate X)"
            )
    scores = []
    fitted = {}  # transductive: the grid fits are on all of X, the chosen one is kept
    for i, value in enumerate(grid):
        est = set_bandwidth(clone(estimator), value)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X_fit)
            if not getattr(est, "converged_", True):
                # not a solution of the SOSREP problem at this bandwidth (e.g. random features
                # too few to resolve a kernel much narrower than the point spacing)
                raise FloatingPointError("not converged")
            fe = fisher_objective(est, X_val, method=method, n_probes=n_probes, smoothing=smoothing)
            scores.append(fe.value)
            if transductive:
                fitted[i] = est
        except FloatingPointError:
            scores.append(float("nan"))
    arr = np.asarray(scores)
    if not np.isfinite(arr).any():
        raise FloatingPointError(f"no bandwidth in {grid} gave a finite Fisher divergence")
    i_best = int(np.nanargmin(arr))
    fallback = False
    if rule == "first_stable":
        order = np.argsort(grid, kind="stable")
        j = first_stable_minimum(arr[order], window=window)
        if j is None:
            fallback = True
        else:
            i_best = int(order[j])
    best = grid[i_best]
    finite = [g for g, v in zip(grid, arr) if np.isfinite(v)]
    at_edge = len(grid) > 1 and best in (min(finite), max(finite))
    if at_edge:
        warnings.warn(
            f"select_bandwidth: the Fisher divergence is smallest at the end of the grid "
            f"({best:g}); extend the grid",
            stacklevel=3,  # the caller's line: validate_params wraps this function
        )
    if transductive:
        final = fitted[i_best]
    else:
        final = set_bandwidth(clone(estimator), best).fit(Xt)
    final.n_duplicates_excluded_ = n_dup
    final.bandwidth_at_edge_ = at_edge
    final.bandwidth_ = best
    final.bandwidth_param_ = set_bandwidth.param
    final.bandwidth_grid_ = np.asarray(grid)
    final.bandwidth_scores_ = arr
    final.bandwidth_protocol_ = "transductive" if transductive else "inductive"
    final.bandwidth_rule_ = rule
    final.bandwidth_fallback_ = fallback
    final.selection_time_ = time.perf_counter() - t0
    return final
