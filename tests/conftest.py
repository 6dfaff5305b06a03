"""Shared fixtures: the shared data folder and the `slow` marker (skipped unless --runslow)."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run slow tests")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def uea_dir() -> Path:
    path = SHARED_DATA / "uea"
    if not path.is_dir():
        pytest.skip(f"shared UEA data not found at {path}")
    return path


@pytest.fixture(scope="session")
def adbench_dir() -> Path:
    path = SHARED_DATA / "adbench"
    if not path.is_dir():
        pytest.skip(f"shared ADBench data not found at {path}")
    return path
