"""The adapter layer between the experiments and the ``novelty`` scorers.

Every scorer maps the normalised Grams of one fold (corpus x corpus, others x corpus, the
others' diagonal) to a *normality* score tensor of shape (n_axis, n_rank, n_others), higher =
more normal, for every value of its hyper-parameter axis (alpha, lambda, ...) and every rank
at once. Scorers of one family share one fit (conformance and Mahalanobis share the
eigendecomposition). A scorer whose implementation is not importable is reported as
unavailable and skipped by the runner.

Distances d are turned into scores by 1 / (d + 1e-3) (protocol section 4).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["ScorerSpec", "SCORERS", "available_scorers", "expand_scorers", "score_fold"]

DIST_EPS = 1e-3


@dataclass(frozen=True)
class ScorerSpec:
    """name, family (scorers of a family share one fit), the axis name and availability."""

    name: str
    family: str
    axis_name: str
    module: str
    attribute: str
    description: str

    def available(self) -> bool:
        try:
            mod = importlib.import_module(self.module)
        except ImportError:
            return False
        return hasattr(mod, self.attribute)


SCORERS: dict[str, ScorerSpec] = {
    "conformance": ScorerSpec(
        "conformance", "variance_norm", "alpha", "novelty", "VarianceNorm",
        "distance to the nearest corpus point in the variance norm",
    ),
    "mahalanobis": ScorerSpec(
        "mahalanobis", "variance_norm", "alpha", "novelty", "VarianceNorm",
        "kernelised Mahalanobis distance to the corpus mean",
    ),
    "sse": ScorerSpec(
        "sse", "sse", "lam", "novelty", "SpectralSupport",
        "spectral support estimation, Tikhonov filter (1 - F_n)",
    ),
    "sosrep": ScorerSpec(
        "sosrep", "sosrep", "none", "novelty", "SOSREPScorer",
        "SOSREP density f(x)^2 in the kernel's RKHS",
    ),
}  # fmt: skip

#: The baseline scorers of ``novelty`` (expanded from "baselines" when available).
BASELINES: dict[str, tuple[str, str]] = {
    "knn": ("novelty", "KNNScorer"),  # feature-space distance to the nearest corpus point
    "mean_embedding": ("novelty", "MeanEmbeddingScorer"),  # RKHS distance to the mean
    "ocsvm": ("novelty", "OCSVMScorer"),  # one-class SVM, nu = 0.1
}


def available_scorers() -> dict[str, bool]:
    """{scorer name: importable now}."""
    out = {name: spec.available() for name, spec in SCORERS.items()}
    out.update({name: _baseline_available(name) for name in BASELINES})
    return out


def _baseline_available(name: str) -> bool:
    module, attr = BASELINES[name]
    try:
        return hasattr(importlib.import_module(module), attr)
    except ImportError:
        return False


def expand_scorers(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(usable scorer names in a fixed order, messages about skipped ones)."""
    usable, messages = [], []
    for name in names:
        if name == "baselines":
            found = [b for b in BASELINES if _baseline_available(b)]
            if not found:
                messages.append("scorer 'baselines': no baseline scorer in `novelty` yet, skipped")
            usable += [b for b in found if b not in usable]
            continue
        if name in BASELINES:
            if _baseline_available(name) and name not in usable:
                usable.append(name)
            continue
        if name not in SCORERS:
            raise ValueError(
                f"unknown scorer {name!r}; choose from {', '.join(list(SCORERS) + ['baselines'])}"
            )
        if not SCORERS[name].available():
            attr = SCORERS[name].attribute
            messages.append(f"scorer {name!r}: `novelty.{attr}` not found, skipped")
        elif name not in usable:
            usable.append(name)
    return usable, messages


def scorer_axis(name: str, config: dict) -> list[float]:
    """The hyper-parameter axis values of scorer ``name`` under the run ``config``."""
    if name in ("conformance", "mahalanobis"):
        return list(config["alphas"])
    if name == "sse":
        return list(config["sse_lams"])
    return [0.0]


def n_ranks(name: str, config: dict) -> int:
    return int(config["max_rank"]) if name in ("conformance", "mahalanobis") else 1


# ---------------------------------------------------------------------------- families
def _pad_ranks(t: torch.Tensor, n_rank: int) -> torch.Tensor:
    """(n_axis, M, n) -> (n_axis, n_rank, n): rank r > M means all M components."""
    M = t.shape[1]
    if M >= n_rank:
        return t[:, :n_rank]
    return torch.cat([t, t[:, -1:].expand(-1, n_rank - M, -1)], dim=1)


def _variance_norm(names, Kcc, Koc, d_o, config) -> dict[str, np.ndarray]:
    from novelty import VarianceNorm

    vn = VarianceNorm(threshold=config["threshold"], max_rank=config["max_rank"]).fit(Kcc)
    out = {}
    for name in names:
        method = vn.conformance if name == "conformance" else vn.mahalanobis
        dist = method(Koc, list(config["alphas"]), rank="all")  # (n_alpha, M, n)
        out[name] = (1.0 / (_pad_ranks(dist, config["max_rank"]) + DIST_EPS)).cpu().numpy()
    return out


def _sse(names, Kcc, Koc, d_o, config) -> dict[str, np.ndarray]:
    from novelty import SpectralSupport

    rows = []
    for lam in config["sse_lams"]:
        novelty = SpectralSupport(filter="tikhonov", lam=lam).fit(Kcc).score(Koc, d_o)
        rows.append(-torch.as_tensor(novelty).reshape(-1))
    return {"sse": torch.stack(rows)[:, None, :].cpu().numpy()}


def _sosrep(names, Kcc, Koc, d_o, config) -> dict[str, np.ndarray]:
    from novelty import SOSREPScorer

    with warnings.catch_warnings():
        # a Gram with negative entries (e.g. the normalised linear kernel) only warns; the
        # solver then either converges or raises, and a fit that did not converge is recorded
        # as this candidate's failure instead of being scored
        warnings.filterwarnings("ignore", message="the corpus Gram has negative entries")
        warnings.filterwarnings("ignore", message="SOSREP did not converge")
        scorer = SOSREPScorer(seed=config["seed"]).fit(Kcc)
    if not scorer.converged_:
        raise FloatingPointError(
            f"SOSREP did not converge in {scorer.n_iter_} steps (residual {scorer.residual_:.2e})"
        )
    s = torch.as_tensor(scorer.log_density(Koc)).reshape(-1)  # log f(x)^2, -inf allowed
    return {"sosrep": s[None, None, :].cpu().numpy()}


def _baseline(names, Kcc, Koc, d_o, config) -> dict[str, np.ndarray]:
    import novelty

    out = {}
    for name in names:
        module, attr = BASELINES[name]
        scorer = getattr(novelty, attr)().fit(Kcc)
        s = -torch.as_tensor(scorer.score(Koc, d_o)).reshape(-1)
        out[name] = s[None, None, :].cpu().numpy()
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
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Normality scores {scorer: array (n_axis, n_rank, n_others)} of every scorer in
    ``names`` from the normalised Grams of one fold (one fit per family), and
    {scorer: message} for the families that raised one of ``errors``."""
    by_family: dict[str, list[str]] = {}
    for name in names:
        family = SCORERS[name].family if name in SCORERS else "baseline"
        by_family.setdefault(family, []).append(name)
    out, failed = {}, {}
    for family, members in by_family.items():
        try:
            out.update(FAMILIES[family](members, Kcc, Koc, d_o, config))
        except errors as exc:
            failed.update({m: f"{type(exc).__name__}: {exc}" for m in members})
    return out, failed
