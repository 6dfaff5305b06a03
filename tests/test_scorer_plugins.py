"""A scorer from an installed package (an entry point of the group ``novelty.scorers``) is
known in every process: the detector, ``python -m experiments`` (a one-cell run and ``list``)
and the registry, without any registration call; a broken one fails with a clear error."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("sktime")

PLUGIN = '''
import torch
from numbers import Real

from novelty import GramScorer
from novelty.scorers._gram_scorer import Interval


class NegMeanKernel(GramScorer):
    """Minus the mean kernel value against the corpus, plus an offset."""

    name = "neg_mean_kernel"
    description = "minus the mean kernel value against the corpus"
    _parameter_constraints = {"offset": [Interval(Real, None, None, closed="neither")]}
    requires_diag = False

    def __init__(self, offset=0.0):
        self.offset = offset

    def _fit(self, K):
        self.n_fit_ = K.shape[0]

    def _score(self, K_test, diag_test):
        return self.offset - K_test.mean(dim=1)


class NotAScorer:
    name = "not_a_scorer"
'''


def _install(root, entries: dict[str, str]):
    """A package ``toy_plugin`` and its metadata on ``root``: what pip install would leave."""
    (root / "toy_plugin.py").write_text(PLUGIN)
    info = root / "toy_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[novelty.scorers]\n{lines}")


def _run(root, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.getcwd()]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_an_installed_scorer_runs_in_the_detector_and_the_cli(tmp_path):
    _install(tmp_path, {"neg_mean_kernel": "toy_plugin:NegMeanKernel"})
    data, store = tmp_path / "tiny.csv", tmp_path / "s.sqlite"
    from tests.test_scorer_definition import _write_csv

    _write_csv(data)
    done = _run(
        tmp_path,
        f"""
        import sys
        import numpy as np
        import tskernels as tk
        from novelty import KernelNoveltyDetector, scorer_registry
        from novelty.scorers._scorer_registry import scorer_names

        assert "neg_mean_kernel" in scorer_names()
        assert "toy_plugin" not in sys.modules  # the name is read without importing it
        rng = np.random.default_rng(0)
        X = np.cumsum(rng.normal(size=(12, 15, 2)), axis=1)
        Y = np.cumsum(rng.normal(size=(3, 15, 2)), axis=1)
        kernel = tk.FlattenedKernel(tk.RBF(5.0))
        det = KernelNoveltyDetector(kernel=kernel, scorer="neg_mean_kernel").fit(X)
        print("scores", det.score_samples(Y).tolist())
        print("class", scorer_registry()["neg_mean_kernel"].__module__)
        from experiments.__main__ import main
        rc = main(["run", "--dataset", {str(data)!r}, "--preset", "quick", "--kernels",
                   "flat_rbf", "--scorers", "neg_mean_kernel", "--folds", "2",
                   "--time-channel", "no", "--max-rank", "3", "--store", {str(store)!r},
                   "--no-progress"])
        print("rc", rc)
        """,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["class"] == "toy_plugin" and lines["rc"] == "0"
    # the same scores as the class registered by hand in this process
    sys.path.insert(0, str(tmp_path))
    try:
        import toy_plugin

        import tskernels as tk
        from novelty import KernelNoveltyDetector, register_scorer, unregister_scorer

        register_scorer(toy_plugin.NegMeanKernel)
        try:
            rng = np.random.default_rng(0)
            X = np.cumsum(rng.normal(size=(12, 15, 2)), axis=1)
            Y = np.cumsum(rng.normal(size=(3, 15, 2)), axis=1)
            kernel = tk.FlattenedKernel(tk.RBF(5.0))
            det = KernelNoveltyDetector(kernel=kernel, scorer="neg_mean_kernel").fit(X)
            want = det.score_samples(Y)
        finally:
            unregister_scorer("neg_mean_kernel")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("toy_plugin", None)
    got = np.array(eval(lines["scores"]))
    np.testing.assert_array_equal(got, want)
    with sqlite3.connect(store) as con:
        rows = con.execute("SELECT scorer, roc_auc, error FROM test").fetchall()
    assert rows and all(s == "neg_mean_kernel" and e is None for s, _, e in rows), rows


def test_a_broken_or_clashing_entry_point_fails_clearly(tmp_path):
    _install(
        tmp_path,
        {"knn": "toy_plugin:NegMeanKernel",  # a built-in name: ignored, with a warning
         "missing_one": "toy_plugin:Nowhere",
         "not_a_scorer": "toy_plugin:NotAScorer"},
    )  # fmt: skip
    done = _run(
        tmp_path,
        """
        import warnings
        from novelty.scorers import _scorer_registry as r

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            names = r.scorer_names()
        print("names", names.count("knn"), "missing_one" in names)
        print("warned", any("'knn'" in str(w.message) for w in caught))
        for name in ("missing_one", "not_a_scorer"):
            try:
                r._load(name)
            except (ImportError, TypeError) as err:
                print(name, type(err).__name__, str(err).replace(chr(10), " "))
        """,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "names 1 True" in out and "warned True" in out
    assert "missing_one ImportError scorer 'missing_one' (entry point 'toy_plugin:Nowhere'" in out
    assert "not_a_scorer TypeError a registered scorer must be a GramScorer subclass" in out
