"""The adapter layer between the experiments and the ``novelty`` scorers.

The scorers are those of ``novelty.scorer_registry()`` (one :class:`novelty.GramScorer`
class per name; its tags ``sweep_axis`` and ``rank_param`` say which hyper-parameter axis
and whether a rank axis the CV sweeps). Every scorer maps the normalised Grams of one fold
(corpus x corpus, others x corpus, the others' diagonal) to a *normality* score array of
shape (n_axis, n_rank, n_others), higher = more normal, for every value of its axis (alpha,
lambda) and every rank at once (``sweep``). Scorers of one family share one fit: conformance
and Mahalanobis share the eigendecomposition of the centred corpus Gram (the fitted
``VarianceNorm`` engine of the first, scoring both), SSE decomposes K / n once for every
lambda. A scorer missing from the registry is reported as unavailable and skipped.

Distances d are turned into scores by 1 / (d + 1e-3) (protocol section 4); the other
scorers' novelty scores by a sign change (SOSREP: its log-density).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "ScorerSpec",
    "SCORERS",
    "BASELINES",
    "RANK_RULES",
    "available_scorers",
    "expand_scorers",
    "pad_rank_metrics",
    "rank_rule",
    "score_fold",
]

DIST_EPS = 1e-3

#: The run config's values of each sweep axis (the registry's ``sweep_axis`` tag).
AXIS_VALUES = {"alpha": "alphas", "lam": "sse_lams"}


def _registry() -> dict:
    """``novelty.scorer_registry()`` as a dict ({} when novelty cannot be imported)."""
    try:
        import novelty
    except ImportError:
        return {}
    return dict(novelty.scorer_registry())


@dataclass(frozen=True)
class ScorerSpec:
    """How the experiments use a registered scorer: its family (scorers of a family share one
    fit) and a description; availability = registered in ``novelty.scorer_registry()``."""

    name: str
    family: str
    description: str

    def available(self) -> bool:
        return self.name in _registry()


SCORERS: dict[str, ScorerSpec] = {
    "conformance": ScorerSpec(
        "conformance", "variance_norm", "distance to the nearest corpus point in the variance norm",
    ),
    "mahalanobis": ScorerSpec(
        "mahalanobis", "variance_norm", "kernelised Mahalanobis distance to the corpus mean",
    ),
    "sse": ScorerSpec("sse", "sse", "spectral support estimation, Tikhonov filter (1 - F_n)"),
    "sosrep": ScorerSpec("sosrep", "sosrep", "SOSREP density f(x)^2 in the kernel's RKHS"),
}  # fmt: skip

#: The baseline scorers (expanded from "baselines" when registered).
BASELINES: dict[str, ScorerSpec] = {
    "knn": ScorerSpec("knn", "baseline", "feature-space distance to the nearest corpus point"),
    "mean_embedding": ScorerSpec("mean_embedding", "baseline", "RKHS distance to the mean"),
    "ocsvm": ScorerSpec("ocsvm", "baseline", "one-class SVM, nu = 0.1"),
}  # fmt: skip


def available_scorers() -> dict[str, bool]:
    """{scorer name: registered in ``novelty.scorer_registry()`` now}."""
    registered = _registry()
    return {name: name in registered for name in [*SCORERS, *BASELINES]}


def expand_scorers(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(usable scorer names in a fixed order, messages about skipped ones)."""
    registered = _registry()
    usable, messages = [], []
    for name in names:
        if name == "baselines":
            found = [b for b in BASELINES if b in registered]
            if not found:
                messages.append("scorer 'baselines': no baseline scorer in `novelty` yet, skipped")
            usable += [b for b in found if b not in usable]
            continue
        if name in BASELINES:
            if name in registered and name not in usable:
                usable.append(name)
            continue
        if name not in SCORERS:
            raise ValueError(
                f"unknown scorer {name!r}; choose from {', '.join(list(SCORERS) + ['baselines'])}"
            )
        if name not in registered:
            messages.append(f"scorer {name!r}: not in `novelty.scorer_registry()`, skipped")
        elif name not in usable:
            usable.append(name)
    return usable, messages


def scorer_axis(name: str, config: dict) -> list[float]:
    """The hyper-parameter axis values of scorer ``name`` under the run ``config`` (the
    registered class's ``sweep_axis``; [0.0] for a scorer without one)."""
    axis = _registry()[name].sweep_axis
    return [0.0] if axis is None else list(config[AXIS_VALUES[axis]])


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
    first = _registry()[names[0]](threshold=config["threshold"], max_rank=config["max_rank"])
    vn = first.fit(Kcc).variance_norm_
    out = {}
    for name in names:
        method = vn.conformance if name == "conformance" else vn.mahalanobis
        dist = method(Koc, list(config["alphas"]), rank="all")  # (n_alpha, M, n)
        if pad:
            dist = _pad_ranks(dist, config["max_rank"])
        out[name] = (1.0 / (dist + DIST_EPS)).cpu().numpy()
    return out


def _sse(names, Kcc, Koc, d_o, config, pad=True) -> dict[str, np.ndarray]:
    """Tikhonov SSE for every lambda from one eigendecomposition of K / n (``sweep``)."""
    lams = list(config["sse_lams"])
    sse = _registry()["sse"](filter="tikhonov", lam=lams[0]).fit(Kcc)
    return {"sse": -np.asarray(sse.sweep(Koc, d_o, lams), dtype=np.float64)}


def _sosrep(names, Kcc, Koc, d_o, config, pad=True) -> dict[str, np.ndarray]:
    with warnings.catch_warnings():
        # a Gram with negative entries (e.g. the normalised linear kernel) only warns; the
        # solver then either converges or raises, and a fit that did not converge is recorded
        # as this candidate's failure instead of being scored
        warnings.filterwarnings("ignore", message="the corpus Gram has negative entries")
        warnings.filterwarnings("ignore", message="SOSREP did not converge")
        scorer = _registry()["sosrep"](seed=config["seed"]).fit(Kcc)
    if not scorer.converged_:
        raise FloatingPointError(
            f"SOSREP did not converge in {scorer.n_iter_} steps (residual {scorer.residual_:.2e})"
        )
    s = torch.as_tensor(scorer.log_density(Koc)).reshape(-1)  # log f(x)^2, -inf allowed
    return {"sosrep": s[None, None, :].cpu().numpy()}


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
    by_family: dict[str, list[str]] = {}
    for name in names:
        family = SCORERS[name].family if name in SCORERS else "baseline"
        by_family.setdefault(family, []).append(name)
    out, failed = {}, {}
    for family, members in by_family.items():
        try:
            out.update(FAMILIES[family](members, Kcc, Koc, d_o, config, pad=pad))
        except errors as exc:
            failed.update({m: f"{type(exc).__name__}: {exc}" for m in members})
    return out, failed
