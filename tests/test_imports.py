"""Light imports (issue 16, item 4): ``import tskernels, novelty`` loads neither matplotlib,
dask, distributed nor sktime, and does not need pandas; ``python -m experiments list``
imports none of the heavy packages. Checked by module, not by the clock (timings are
flaky on shared machines)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from import_helpers import loaded

HEAVY = ["matplotlib", "dask", "distributed", "sktime"]

# pandas is loaded by scikit-learn itself when installed (sklearn.utils.fixes), so its
# presence in sys.modules says nothing about our code: it is blocked instead, as if it were
# not installed, and the packages must still import
_BLOCK_PANDAS = """
import importlib.abc, sys
class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas blocked by the test")
sys.meta_path.insert(0, _NoPandas())
"""


def _loaded(code: str) -> list[str]:
    return loaded(code, HEAVY)


def test_import_tskernels_novelty_loads_no_heavy_package():
    assert _loaded("import tskernels, novelty") == []


def test_import_tskernels_novelty_does_not_need_pandas():
    assert _loaded(_BLOCK_PANDAS + "import tskernels, novelty, experiments") == []


def test_the_blocker_blocks():
    # the pandas check above can fail: importing pandas under the blocker raises
    out = subprocess.run([sys.executable, "-c", _BLOCK_PANDAS + "import pandas"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode != 0 and "pandas blocked by the test" in out.stderr


def test_experiments_list_imports_nothing_heavy(tmp_path):
    code = (
        "import sys\nfrom experiments.__main__ import main\n"
        f"assert main(['list', '--data-dir', {str(tmp_path)!r}]) == 0\n"
        "print('torch' in sys.modules, 'sklearn' in sys.modules)\n"
    )
    heavy = _loaded(_BLOCK_PANDAS + code)
    assert heavy == []
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "multivariate classification" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "False False"  # neither torch nor sklearn


# ---------------------------------------------------------------- start fast (issue 22, item 4)
def test_detector_import_defers_torch_numba_scipy_linalg():
    # scikit-learn is the one cost of the estimator class (it subclasses BaseEstimator)
    mods = ["torch", "numba", "tskernels", "sktime", "matplotlib"]
    assert loaded("from novelty import KernelNoveltyDetector", mods) == []


def test_import_density_loads_neither_torch_nor_sklearn():
    assert loaded("import density", ["torch", "sklearn", "numba", "scipy"]) == []
    assert loaded("from density import SOSREP", ["torch"]) == ["torch"]  # names still resolve


def _import_seconds(code: str) -> float:
    """Cumulative import time (s) of ``code`` by ``python -X importtime`` (min of 3 runs)."""
    best = float("inf")
    for _ in range(3):
        out = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert out.returncode == 0, out.stderr
        total = 0
        for line in out.stderr.splitlines():
            parts = line.split("|")
            top = len(parts) == 3 and not parts[2][1:2].isspace()  # one-space indent
            if top and parts[1].strip().isdigit():
                total += int(parts[1])  # top-level imports: their cumulative microseconds
        best = min(best, total / 1e6)
    return best


@pytest.mark.slow
@pytest.mark.parametrize(
    "code", ["from novelty import KernelNoveltyDetector", "import tskernels", "import density"]
)
def test_start_fast_importtime(code):
    # the target, on a quiet machine: at most 1.5 s of imports
    assert _import_seconds(code) <= 1.5


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--kernels", "nope", "--store", "x.sqlite"],
        ["run", "--scorers", "nope", "--store", "x.sqlite"],
        ["run", "--dataset", "missing/nothing.csv", "--store", "x.sqlite"],
    ],
)
def test_experiments_option_errors_come_before_heavy_imports(argv, tmp_path):
    # a mistyped option is answered in well under a second: neither torch nor sklearn loads
    code = (
        "import os\nfrom experiments.__main__ import main\n"
        f"os.chdir({str(tmp_path)!r})\nassert main({argv!r}) == 2\n"
    )
    # the scorer names come from novelty's registry, which names its classes without
    # importing them: the light package and that module load, no scorer module does
    heavy = [
        "torch", "sklearn", "tskernels", "novelty.scorers._gram_scorer",
        "novelty.scorers._baselines",
    ]  # fmt: skip
    assert loaded(code, heavy) == []
    assert not (tmp_path / "x.sqlite").exists()
