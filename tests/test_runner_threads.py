"""The study runner gives each worker one thread unless --threads says otherwise; the
configuration its cells read equals ``cell_config``.

Measured (docs/results_study_scale.md): two threads per worker cost about twice the wall
time of one on 2 cores, so the default is one whatever the number of workers or cores.
"""

from __future__ import annotations

import pytest

from experiments._options import RunOptions
from experiments._runner import _effective


@pytest.mark.parametrize("workers", [1, 2])
def test_default_is_one_thread_per_worker(workers, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 16)  # many cores: still one thread
    eff = _effective(RunOptions(datasets=["BasicMotions"], workers=workers))
    assert eff.config["threads"] == 1


def test_explicit_threads_kept():
    eff = _effective(RunOptions(datasets=["BasicMotions"], threads=3))
    assert eff.config["threads"] == 3


CASES = [("paper", "fold"), ("paper", "class"), ("quick", "fold")]


@pytest.mark.parametrize("preset, share", CASES)
def test_cell_config_is_the_configuration_a_run_builds(preset, share):
    """``cell_config`` (benchmarks' and tests' cells outside a run) equals the configuration
    ``python -m experiments run --preset P --share S`` gives its cells."""
    from experiments._runner import cell_config

    eff = _effective(RunOptions(datasets=["BasicMotions"], preset=preset, share=share))
    assert cell_config(preset, share=share) == eff.config
    changed = cell_config(preset, share=share, folds=2, repeats=3, threads=2, rank_rule="x")
    assert (changed["folds"], changed["repeats"], changed["threads"]) == (2, 3, 2)
    assert changed["rank_rule"] == "x" and changed != eff.config
