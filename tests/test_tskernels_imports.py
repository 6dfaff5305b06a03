"""``import tskernels`` imports neither scikit-learn, scipy, numba, matplotlib, dask nor sktime
(issue 16, item 4: the numba cores and scipy load on first use), and ``import novelty``
resolves its public names on first use (PEP 562) while ``from novelty import X``,
``novelty.X`` and ``dir(novelty)`` behave as for eager imports. Checked by module, in a fresh
interpreter, not by the clock."""

from __future__ import annotations

import subprocess
import sys

from import_helpers import loaded

NOT_AT_IMPORT = [
    "sklearn",
    "scipy",
    "numba",
    "matplotlib",
    "dask",
    "distributed",
    "sktime",
    "pandas",
]


def _loaded(code: str) -> list[str]:
    return loaded(code, NOT_AT_IMPORT)


def test_import_tskernels_loads_none_of_the_heavy_packages():
    assert _loaded("import tskernels") == []
    assert _loaded("import tskernels, novelty") == []


def test_first_use_loads_what_it_needs():
    code = "import numpy as np, tskernels as tk\ntk.GAK(sigma=1.0).gram(np.zeros((2, 3, 1)))\n"
    assert "numba" in _loaded(code)
    assert "sklearn" in _loaded("import tskernels\ntskernels.transforms.Preprocessor")


def test_novelty_names_resolve_lazily():
    import novelty

    for name in novelty.__all__:
        assert name in dir(novelty)
    code = (
        "import novelty\n"
        "from novelty import KernelNoveltyDetector, VarianceNorm\n"
        "assert novelty.KernelNoveltyDetector is KernelNoveltyDetector\n"
        "assert novelty.VarianceNorm is VarianceNorm\n"
    )
    assert "sklearn" in _loaded(code)  # the detector needs it, on first use
    out = subprocess.run([sys.executable, "-c", "import novelty; novelty.nope"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode != 0 and "has no attribute 'nope'" in out.stderr
