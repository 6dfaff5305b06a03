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
    "CellScorers",
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


def _converged_sosrep(fit: Callable):
    """The SOSREP scorer ``fit()`` returns, fitted with its two warnings silenced: a Gram with
    negative entries (e.g. the normalised linear kernel) only warns, and the solver fits with
    signs free (same fixed point); a fit that did not converge raises FloatingPointError, so
    it is recorded as this candidate's failure instead of being scored."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="the corpus Gram has negative entries")
        warnings.filterwarnings("ignore", message="SOSREP did not converge")
        scorer = fit()
    if not scorer.converged_:
        raise FloatingPointError(
            f"SOSREP did not converge in {scorer.n_iter_} steps (residual {scorer.residual_:.2e})"
        )
    return scorer


def _sosrep(names, Kcc, Koc, d_o, config, pad=True) -> dict[str, np.ndarray]:
    (name,) = names  # one SOSREP scorer
    scorer = _converged_sosrep(lambda: _registry()[name](seed=config["seed"]).fit(Kcc))
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


# ---------------------------------------------------------------------------- the fast path
class CellScorers:
    """:func:`score_fold` for the many folds of one cell, the same arrays and messages bit for
    bit, without the fixed cost that the public scorer API pays per call.

    ``score_fold`` fits each scorer through its public ``fit``/``score``/``sweep``, so every
    fold of every cell checks the scorers' parameters (scikit-learn's ``get_params`` and
    constraints), the corpus Gram (finite, symmetric, symmetrised: once per scorer, six times
    a fold with the seven scorers) and the others' Gram and diagonal again, and the mean-
    embedding and one-class SVM scorers compute the eigenvalues of the same corpus Gram twice
    for their positive semi-definiteness check. Here, for the built-in scorers:

    - the parameters (and the axis values: alphas, lambdas) are checked once, at the first
      fold, with the checks of the public methods; a family whose check fails (or whose
      scorer classes are not the built-in ones) runs through ``score_fold``'s own function at
      every fold, with its messages;
    - a fold's Grams are checked once (:func:`~novelty.scorers._validation.check_corpus_gram`,
      ``check_cross_gram``, ``check_test_diag``: the checks every public fit and score makes,
      with the same outputs), and every family fits and scores those checked tensors through
      the scorers' internal entry points (``_fit_checked``, ``_score_checked``, ``_sweep``,
      ``VarianceNorm._distances``): the same computation the public methods run after their
      checks. A fold whose Grams fail a check runs through :func:`score_fold` (its messages);
    - the positive semi-definiteness check of one corpus Gram is computed once per fold
      (:func:`~novelty.scorers._validation.psd_checks_shared`), and scikit-learn's own checks
      of the one-class SVM's inputs (finite, parameters: checked above) are skipped through
      its public ``config_context``.
    """

    def __init__(self, names: Sequence[str], config: dict):
        self.names = list(names)
        self.config = config
        self._families: dict[str, list[str]] | None = None
        self._prepared: dict[str, dict | None] = {}

    def _prepare(self) -> None:
        """The families in ``score_fold``'s order, each with its checked state (None: the
        family runs through ``score_fold``'s function)."""
        registered = _registry()
        families: dict[str, list[str]] = {}
        for name in self.names:
            family = scorer_setup(registered[name]).family
            if family not in FAMILIES:  # score_fold's message, at the same fold
                raise ValueError(
                    f"scorer {name!r} is set up with family {family!r} (SCORER_SETUPS of "
                    f"experiments._grids); the experiments know {', '.join(FAMILIES)}"
                )
            families.setdefault(family, []).append(name)
        for family, members in families.items():
            try:
                self._prepared[family] = _PREPARE[family](
                    [registered[m] for m in members], self.config
                )
            except Exception:  # noqa: BLE001 - any failure: the family keeps the public path
                self._prepared[family] = None
        self._families = families

    def score(
        self,
        Kcc: torch.Tensor,
        Koc: torch.Tensor,
        d_o: torch.Tensor,
        errors: tuple[type[BaseException], ...] = (),
        *,
        pad: bool = True,
    ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """``score_fold(names, Kcc, Koc, d_o, config, errors, pad=pad)``, the same result."""
        if self._families is None:
            self._prepare()
        if d_o is None or all(state is None for state in self._prepared.values()):
            return score_fold(self.names, Kcc, Koc, d_o, self.config, errors, pad=pad)
        from novelty.scorers._validation import (
            check_corpus_gram,
            check_cross_gram,
            check_test_diag,
        )

        try:
            Kc = check_corpus_gram(Kcc, "K_corpus", min_points=2)
            Kt = check_cross_gram(Koc, Kc.shape[0], "K_test_corpus", Kc.device)
            dt = check_test_diag(d_o, Kt.shape[0], "k_test_diag", Kc.device)
        except Exception:  # noqa: BLE001 - each scorer then checks, and reports, itself
            return score_fold(self.names, Kcc, Koc, d_o, self.config, errors, pad=pad)
        out, failed = {}, {}
        for family, members in self._families.items():
            state = self._prepared[family]
            try:
                if state is None:
                    out.update(FAMILIES[family](members, Kcc, Koc, d_o, self.config, pad=pad))
                else:
                    out.update(_FAST[family](state, members, Kc, Kt, dt, self.config, pad))
            except errors as exc:
                failed.update({m: f"{type(exc).__name__}: {exc}" for m in members})
        return out, failed


def _builtin(classes: list[type], *names: str) -> None:
    """Raise unless every class is one of the built-in scorer classes ``names`` (the fast
    path trusts their internal entry points; another class keeps the public path)."""
    import novelty

    allowed = {getattr(novelty, n) for n in names}
    if not all(c in allowed for c in classes):
        raise TypeError("not a built-in scorer class")


def _prepare_variance_norm(classes, config) -> dict:
    from novelty._constraints import ALPHAS, RANK, validate_params
    from novelty.scorers._validation import as_alphas
    from novelty.scorers._variance_norm import VarianceNorm
    from tskernels.validation import validate_params as validate_arguments

    _builtin(classes, "ConformanceScorer", "MahalanobisScorer")
    first = classes[0](threshold=config["threshold"], max_rank=config["max_rank"])
    validate_params(first)  # fit's check
    alphas = list(config["alphas"])
    # the checks of VarianceNorm.conformance / mahalanobis(Koc, alphas, rank="all")
    validate_arguments({"alpha": ALPHAS, "rank": RANK})(lambda alpha, rank: None)(alphas, "all")
    validate_params(VarianceNorm(threshold=first.threshold, max_rank=first.max_rank))
    return {"first": classes[0], "alphas": as_alphas(alphas)[0]}


def _variance_norm_fast(state, names, Kc, Kt, dt, config, pad) -> dict[str, np.ndarray]:
    registered = _registry()
    first = state["first"](threshold=config["threshold"], max_rank=config["max_rank"])
    vn = first._fit_checked(Kc).variance_norm_
    out = {}
    for name in names:
        dist = vn._distances(Kt, state["alphas"], vn.n_components_, registered[name]._conformance)
        if pad:
            dist = _pad_ranks(dist, config["max_rank"])
        out[name] = (1.0 / (dist + DIST_EPS)).cpu().numpy()
    return out


def _prepare_sse(classes, config) -> dict:
    from novelty._constraints import check_values, validate_params

    _builtin(classes, "SpectralSupport")
    lams = list(config["sse_lams"])
    for cls in classes:
        scorer = cls(filter="tikhonov", lam=lams[0])
        validate_params(scorer)  # fit's and sweep's check
        check_values(scorer, "lam", lams)  # sweep's check of the axis values
    return {"lams": lams}


def _sse_fast(state, names, Kc, Kt, dt, config, pad) -> dict[str, np.ndarray]:
    from novelty.scorers._gram_scorer import as_numpy

    lams, registered, out = state["lams"], _registry(), {}
    for name in names:
        sse = registered[name](filter="tikhonov", lam=lams[0])._fit_checked(Kc)
        out[name] = -np.asarray(as_numpy(sse._sweep(Kt, dt, list(lams), None)), dtype=np.float64)
    return out


def _prepare_sosrep(classes, config) -> dict:
    from novelty._constraints import validate_params

    _builtin(classes, "SOSREPScorer")
    (cls,) = classes
    validate_params(cls(seed=config["seed"]))  # fit's and log_density's check
    return {}


def _sosrep_fast(state, names, Kc, Kt, dt, config, pad) -> dict[str, np.ndarray]:
    (name,) = names
    scorer = _converged_sosrep(lambda: _registry()[name](seed=config["seed"])._fit_checked(Kc))
    s = torch.as_tensor(scorer._log_density(Kt)).reshape(-1)
    return {name: s[None, None, :].cpu().numpy()}


def _prepare_baseline(classes, config) -> dict:
    from novelty._constraints import validate_params

    _builtin(classes, "KNNScorer", "MeanEmbeddingScorer", "OCSVMScorer")
    for cls in classes:
        validate_params(cls())  # fit's and score's check
    return {}


def _baseline_fast(state, names, Kc, Kt, dt, config, pad) -> dict[str, np.ndarray]:
    from sklearn import config_context

    from novelty.scorers._gram_scorer import as_numpy
    from novelty.scorers._validation import psd_checks_shared

    registered, out = _registry(), {}
    # the inputs are checked (finite) and the one-class SVM's nu by its own constraint
    with psd_checks_shared(), config_context(assume_finite=True, skip_parameter_validation=True):
        for name in names:
            scores = registered[name]()._fit_checked(Kc)._score_checked(Kt, dt)
            novelty = np.asarray(as_numpy(scores), dtype=np.float64)
            out[name] = -novelty.reshape(-1)[None, None, :]
    return out


_PREPARE: dict[str, Callable] = {
    "variance_norm": _prepare_variance_norm, "sse": _prepare_sse, "sosrep": _prepare_sosrep,
    "baseline": _prepare_baseline,
}  # fmt: skip
_FAST: dict[str, Callable] = {
    "variance_norm": _variance_norm_fast, "sse": _sse_fast, "sosrep": _sosrep_fast,
    "baseline": _baseline_fast,
}  # fmt: skip
