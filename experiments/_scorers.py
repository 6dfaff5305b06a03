"""The adapter layer between the experiments and the ``novelty`` scorers.

The scorers are those of ``novelty.scorer_registry()`` (one :class:`novelty.GramScorer`
class per name, which declares its ``description`` and the tags ``sweep_axis`` and
``rank_param``). How the study runs each class, its ``family`` and ``cli_grid`` (the run-config
key of the axis values the CV sweeps), is the study's table
(:func:`experiments._grids.scorer_setup`). A scorer registered with
``novelty.register_scorer`` is a CLI scorer too (a "baseline" without an axis unless
:func:`experiments._grids.register_scorer_setup` says otherwise).

Every scorer maps the normalised Grams of one fold (corpus x corpus, others x corpus, the
others' diagonal) to a *normality* score array of shape (n_axis, n_rank, n_others), higher =
more normal, for every value of its axis (alpha, lambda) and every rank at once (``sweep``).
Scorers of one family share one fit: conformance and Mahalanobis share the eigendecomposition
of the centred corpus Gram (the fitted ``VarianceNorm`` engine of the first, scoring both),
SSE decomposes K / n once for every lambda; a "baseline" scorer (the default family, what the
CLI word "baselines" expands to) is fitted on its own.

Distances d are turned into scores by 1 / (d + 1e-3) (protocol section 4); the other
scorers' novelty scores by a sign change (SOSREP: its log-density).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ._grids import scorer_setup

__all__ = [
    "RANK_RULES",
    "baseline_names",
    "expand_scorers",
    "pad_rank_metrics",
    "rank_rule",
    "score_fold",
]

DIST_EPS = 1e-3


def _registry() -> dict:
    """``novelty.scorer_registry()`` as a dict (name -> class)."""
    import novelty

    return dict(novelty.scorer_registry())


def baseline_names() -> list[str]:
    """The registered scorers of the "baseline" family (the CLI word "baselines")."""
    return [name for name, cls in _registry().items() if scorer_setup(cls).family == "baseline"]


def expand_scorers(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(usable scorer names in the order given, "baselines" expanded to
    :func:`baseline_names`; messages about skipped ones). An unknown name raises ValueError."""
    registered = _registry()
    usable, messages = [], []
    for name in names:
        if name == "baselines":
            found = baseline_names()
            if not found:
                messages.append("scorer 'baselines': no baseline scorer registered, skipped")
            usable += [b for b in found if b not in usable]
            continue
        if name not in registered:
            raise ValueError(
                f"unknown scorer {name!r}; choose from {', '.join([*registered, 'baselines'])}"
            )
        if name not in usable:
            usable.append(name)
    return usable, messages


def scorer_axis(name: str, config: dict) -> list[float]:
    """The hyper-parameter axis values of scorer ``name`` under the run ``config`` (the values
    under the ``cli_grid`` key of its class's :func:`experiments._grids.scorer_setup`; [0.0]
    for a scorer without one)."""
    key = scorer_setup(_registry()[name]).cli_grid
    return [0.0] if key is None else list(config[key])


def n_ranks(name: str, config: dict) -> int:
    """``max_rank`` for a scorer with a rank axis (``rank_param``), else 1."""
    return int(config["max_rank"]) if _registry()[name].rank_param is not None else 1


#: The rank rules of the CV (``config["rank_rule"]``, default "ours").
RANK_RULES = ("ours", "reference")


def rank_rule(config: dict) -> str:
    """The run's rank rule: "ours" (default) or "reference".

    - "ours": in a fold, a rank r above the fold's component count M scores with all M
      components (its ROC-AUC and PR-AUC are those of rank M), and a CV optimum on the
      plateau up to ``max_rank`` selects ``max_rank`` (every component at the refit too).
    - "reference" (the reference study): the fold's ROC-AUC and PR-AUC are 0 for r > M, and
      the CV optimum's rank (the first on ties) is kept exactly at the refit.
    """
    rule = config.get("rank_rule", "ours")
    if rule not in RANK_RULES:
        raise ValueError(f"`rank_rule` must be one of {', '.join(RANK_RULES)}, got {rule!r}")
    return rule


def pad_rank_metrics(metric: np.ndarray, n_rank: int, rule: str) -> np.ndarray:
    """A fold's metric array (..., M) over ranks 1..M, padded to (..., n_rank) by ``rule``:
    the rank-M value repeated ("ours", = the metric of the all-components scores) or zeros
    ("reference"). M >= n_rank: the first n_rank ranks."""
    M = metric.shape[-1]
    if M >= n_rank:
        return metric[..., :n_rank]
    if rule == "ours":
        fill = np.repeat(metric[..., -1:], n_rank - M, axis=-1)
    else:
        fill = np.zeros((*metric.shape[:-1], n_rank - M), dtype=metric.dtype)
    return np.concatenate([metric, fill], axis=-1)


# ---------------------------------------------------------------------------- families
def _pad_ranks(t: torch.Tensor, n_rank: int) -> torch.Tensor:
    """(n_axis, M, n) -> (n_axis, n_rank, n): rank r > M means all M components."""
    M = t.shape[1]
    if M >= n_rank:
        return t[:, :n_rank]
    return torch.cat([t, t[:, -1:].expand(-1, n_rank - M, -1)], dim=1)


def _variance_norm(names, Kcc, Koc, d_o, config, pad=True) -> dict[str, np.ndarray]:
    """One fit of the first scorer's class; its ``VarianceNorm`` engine (one
    eigendecomposition of the centred corpus Gram) scores both, every alpha and every rank
    1..M by cumulative sums."""
    registered = _registry()
    first = registered[names[0]](threshold=config["threshold"], max_rank=config["max_rank"])
    vn = first.fit(Kcc).variance_norm_
    out = {}
    for name in names:
        method = vn.conformance if registered[name]._conformance else vn.mahalanobis
        dist = method(Koc, list(config["alphas"]), rank="all")  # (n_alpha, M, n)
        if pad:
            dist = _pad_ranks(dist, config["max_rank"])
        out[name] = (1.0 / (dist + DIST_EPS)).cpu().numpy()
    return out


def _sse(names, Kcc, Koc, d_o, config, pad=True) -> dict[str, np.ndarray]:
    """Tikhonov SSE for every lambda from one eigendecomposition of K / n (``sweep``)."""
    lams = list(config["sse_lams"])
    registered, out = _registry(), {}
    for name in names:
        sse = registered[name](filter="tikhonov", lam=lams[0]).fit(Kcc)
        out[name] = -np.asarray(sse.sweep(Koc, d_o, lams), dtype=np.float64)
    return out


def _sosrep(names, Kcc, Koc, d_o, config, pad=True) -> dict[str, np.ndarray]:
    (name,) = names  # one SOSREP scorer
    with warnings.catch_warnings():
        # a Gram with negative entries (e.g. the normalised linear kernel) only warns, and the
        # solver fits with signs free (same fixed point); a fit that did not converge is
        # recorded as this candidate's failure instead of being scored
        warnings.filterwarnings("ignore", message="the corpus Gram has negative entries")
        warnings.filterwarnings("ignore", message="SOSREP did not converge")
        scorer = _registry()[name](seed=config["seed"]).fit(Kcc)
    if not scorer.converged_:
        raise FloatingPointError(
            f"SOSREP did not converge in {scorer.n_iter_} steps (residual {scorer.residual_:.2e})"
        )
    s = torch.as_tensor(scorer.log_density(Koc)).reshape(-1)  # log f(x)^2, -inf allowed
    return {name: s[None, None, :].cpu().numpy()}


def _baseline(names, Kcc, Koc, d_o, config, pad=True) -> dict[str, np.ndarray]:
    registered = _registry()
    out = {}
    for name in names:
        novelty = np.asarray(registered[name]().fit(Kcc).score(Koc, d_o), dtype=np.float64)
        out[name] = -novelty.reshape(-1)[None, None, :]
    return out


FAMILIES: dict[str, Callable] = {
    "variance_norm": _variance_norm, "sse": _sse, "sosrep": _sosrep, "baseline": _baseline,
}  # fmt: skip


def score_fold(
    names: Sequence[str],
    Kcc: torch.Tensor,
    Koc: torch.Tensor,
    d_o: torch.Tensor,
    config: dict,
    errors: tuple[type[BaseException], ...] = (),
    *,
    pad: bool = True,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Normality scores {scorer: array (n_axis, n_rank, n_others)} of every scorer in
    ``names`` from the normalised Grams of one fold (one fit per family), and
    {scorer: message} for the families that raised one of ``errors``.

    ``pad=True``: a rank r above the fold's component count M scores with all M components
    (``n_rank`` = :func:`n_ranks`). ``pad=False``: the variance-norm scores stop at rank M
    (n_rank = M); the CV pads the *metrics* instead, by the run's rank rule
    (:func:`pad_rank_metrics`)."""
    registered = _registry()
    by_family: dict[str, list[str]] = {}
    for name in names:
        family = scorer_setup(registered[name]).family
        if family not in FAMILIES:
            raise ValueError(
                f"scorer {name!r} is set up with family {family!r} (SCORER_SETUPS of "
                f"experiments._grids); the experiments know {', '.join(FAMILIES)}"
            )
        by_family.setdefault(family, []).append(name)
    out, failed = {}, {}
    for family, members in by_family.items():
        try:
            out.update(FAMILIES[family](members, Kcc, Koc, d_o, config, pad=pad))
        except errors as exc:
            failed.update({m: f"{type(exc).__name__}: {exc}" for m in members})
    return out, failed
