"""experiments._grids.scorer_setup / register_scorer_setup: how the study runs a scorer class
(family, CLI grid), read from the experiments' table by class and its bases."""

from __future__ import annotations

import pytest

import experiments._grids as grids
from experiments._grids import ScorerSetup, register_scorer_setup, scorer_setup
from novelty import KNNScorer, MahalanobisScorer, SpectralSupport


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(grids, "SCORER_SETUPS", dict(grids.SCORER_SETUPS))
    return grids.SCORER_SETUPS


def test_listed_classes_their_bases_and_the_default(table):
    assert scorer_setup(MahalanobisScorer) == ScorerSetup("variance_norm", "alphas")
    assert scorer_setup(SpectralSupport) == ScorerSetup("sse", "sse_lams")
    assert scorer_setup(KNNScorer) == ScorerSetup()  # not listed: a baseline without an axis

    class Sub(SpectralSupport):
        pass

    assert scorer_setup(Sub) == ScorerSetup("sse", "sse_lams")  # the nearest listed base


def test_register_adds_a_line_and_refuses_a_conflict(table):
    class Mine(KNNScorer):
        pass

    assert register_scorer_setup(Mine, "variance_norm", "alphas") == scorer_setup(Mine)
    assert register_scorer_setup(Mine, "variance_norm", "alphas").family == "variance_norm"
    with pytest.raises(ValueError, match="already set up as"):
        register_scorer_setup(Mine, "sse")
    with pytest.raises(ValueError, match="`family` must be one of variance_norm, sse, sosrep"):
        register_scorer_setup(Mine, "varience_norm")
    with pytest.raises(ValueError, match="`cli_grid` must be None or a run-config key"):
        register_scorer_setup(Mine, "baseline", "")
