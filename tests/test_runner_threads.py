"""The study runner gives each worker one thread unless --threads says otherwise.

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
