"""The runnable toys of docs/architecture.md ("Adding a kernel", "Adding a scorer", "Adding a
detector member kind"): each is the page's code, checked against a brute-force computation by
hand."""

import contextlib
import io
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import tskernels as tk
from novelty import (
    GramScorer,
    KernelNoveltyDetector,
    register_scorer,
    scorer_registry,
    unregister_scorer,
)
from novelty.detector._members import BaseMember


# ---------------------------------------------------------------- a kernel (docs: step 1)
class MeanLinear(tk.Kernel):
    """k(x, y) = <mean_t x_t, mean_t y_t>: the linear kernel of the series' channel means."""

    _parameter_constraints = {}

    def _gram_block(self, X, Y, symmetric):
        return X.values.mean(dim=1) @ Y.values.mean(dim=1).T

    def _diag(self, X):
        m = X.values.mean(dim=1)
        return (m * m).sum(dim=1)


# ---------------------------------------------------------------- a scorer (docs: step 1)
class MeanKernel(GramScorer):
    """Novelty = minus the mean kernel value against the corpus (higher = more novel)."""

    name = "toy_mean_kernel"
    description = "minus the mean kernel value against the corpus"
    requires_diag = False

    def _fit(self, K):  # K: the corpus Gram, a checked float64 tensor (N, N)
        self.n_fit_ = K.shape[0]

    def _score(self, K_test, diag_test):  # K_test: (n, N), new series against the corpus
        return -K_test.mean(dim=1)


@pytest.fixture
def toy_scorer():
    register_scorer(MeanKernel)  # the one registry line (here undone after the test)
    yield MeanKernel
    unregister_scorer(MeanKernel.name)


def _walks(seed, n, T=20, d=2):
    return np.cumsum(np.random.default_rng(seed).normal(size=(n, T, d)), axis=1)


def test_toy_kernel_is_a_kernel_and_equals_brute_force():
    X, Y = _walks(0, 5), _walks(1, 3)
    K = MeanLinear().gram(X, Y, normalize=False).numpy()
    brute = np.array([[x.mean(axis=0) @ y.mean(axis=0) for y in Y] for x in X])
    np.testing.assert_allclose(K, brute, rtol=1e-12, atol=1e-12)
    diag = [x.mean(axis=0) @ x.mean(axis=0) for x in X]
    np.testing.assert_allclose(MeanLinear().diag(X).numpy(), diag, rtol=1e-12)
    Kn = MeanLinear().gram(X, normalize=True).numpy()  # cosine of the means
    np.testing.assert_allclose(np.diag(Kn), 1.0, rtol=1e-12)


def test_toy_scorer_in_the_detector_equals_brute_force(toy_scorer):
    assert scorer_registry()["toy_mean_kernel"] is MeanKernel
    X, Y = _walks(0, 40), _walks(1, 4)
    det = KernelNoveltyDetector(
        kernel=MeanLinear(), scorer="toy_mean_kernel", preprocess=False
    ).fit(X)
    # by hand: cosine of the channel means, minus its mean over the corpus
    mx, my = X.mean(axis=1), Y.mean(axis=1)
    mx /= np.linalg.norm(mx, axis=1, keepdims=True)
    my /= np.linalg.norm(my, axis=1, keepdims=True)
    novelty = -(my @ mx.T).mean(axis=1)
    np.testing.assert_allclose(-det.score_samples(Y), novelty, rtol=1e-10, atol=1e-12)
    # calibration: leave-one-out scores of the corpus (a refit without each series)
    Kc = mx @ mx.T
    held_out = np.array([-np.delete(Kc[i], i).mean() for i in range(len(X))])
    np.testing.assert_allclose(np.sort(det.calibration_scores_), np.sort(held_out), rtol=1e-10)
    # the conformal p-values from those by hand
    p = [(1 + np.sum(held_out >= s)) / (len(X) + 1) for s in novelty]
    np.testing.assert_allclose(det.p_values(Y), p, rtol=1e-12)


def test_toy_scorer_instance_equals_the_registered_name(toy_scorer):
    X, Y = _walks(2, 30), _walks(3, 5)
    by_name = KernelNoveltyDetector(kernel=MeanLinear(), scorer="toy_mean_kernel").fit(X)
    by_instance = KernelNoveltyDetector(kernel=MeanLinear(), scorer=MeanKernel()).fit(X)
    np.testing.assert_array_equal(by_name.score_samples(Y), by_instance.score_samples(Y))
    np.testing.assert_array_equal(by_name.calibration_scores_, by_instance.calibration_scores_)


# ------------------------------------------------------- a member kind (docs: step 1)
class MeanShiftMember(BaseMember):
    """Novelty = squared distance of a series' time-mean to the corpus's mean of time-means;
    calibration: each corpus series against the mean of the others (leave-one-out)."""

    def fit(self, X, preprocessors):  # X: the checked corpus, a SeriesBatch
        M = X.values.mean(dim=1).double()  # (N, d) time-means (equal lengths here)
        n = M.shape[0]
        self.corpus_, self.duplicate_groups_ = X, None
        self.mean_ = M.mean(dim=0)
        loo = (M.sum(dim=0) - M) / (n - 1)  # the mean without each series
        self.calibration_ = ((M - loo) ** 2).sum(dim=1).numpy()
        return self

    def novelty_tensor(self, X):
        return ((X.values.mean(dim=1).double() - self.mean_) ** 2).sum(dim=1)

    def check_updatable(self):
        raise NotImplementedError("MeanShiftMember has no update; refit the detector")

    def update(self, X_new, raw, groups):
        self.check_updatable()


class MeanShiftDetector(KernelNoveltyDetector):
    def _new_member(self, spec, n):  # the detector's one member factory (private hook)
        return MeanShiftMember(spec)


def test_toy_member_kind_in_the_detector_equals_brute_force():
    X, Y = _walks(4, 30), _walks(5, 6) + 3.0
    det = MeanShiftDetector(kernel=MeanLinear(), preprocess=False).fit(X)
    mx, my = X.mean(axis=1), Y.mean(axis=1)
    novelty = ((my - mx.mean(axis=0)) ** 2).sum(axis=1)
    np.testing.assert_allclose(-det.score_samples(Y), novelty, rtol=1e-12)
    held_out = [((mx[i] - np.delete(mx, i, axis=0).mean(axis=0)) ** 2).sum() for i in range(30)]
    np.testing.assert_allclose(det.calibration_scores_, held_out, rtol=1e-10)
    p = [(1 + np.sum(np.asarray(held_out) >= s)) / 31 for s in novelty]
    np.testing.assert_allclose(det.p_values(Y), p, rtol=1e-12)
    assert torch.is_tensor(det.members_[0].mean_)
    with pytest.raises(NotImplementedError, match="no update"):
        det.update(_walks(6, 2))


def test_member_kind_table_is_what_the_detector_builds_and_model_files_may_name():
    from novelty.detector import _member_kinds, _persistence

    for kind, (module, name) in _member_kinds.MEMBER_KINDS.items():
        assert issubclass(_member_kinds.member_class(kind), BaseMember)
        assert (module, name) in _persistence.SAFE_GLOBALS
    with pytest.raises(ValueError, match="unknown member kind 'nope': the kinds are 'gram'"):
        _member_kinds.member_class("nope")


def test_a_built_in_member_kind_is_one_module_and_one_table_line(monkeypatch, tmp_path):
    """The two files of a built-in kind: its module (here MeanShiftMember of this file) and its
    line in MEMBER_KINDS; the detector then builds it from a spec's ``kind`` and a model file
    holding it loads without trust_pickle (SAFE_GLOBALS is built from the table at import:
    rebuilt here as the import would)."""
    from novelty.detector import _auto, _member_kinds, _persistence
    from novelty.detector._members import MemberSpec

    kinds = {**_member_kinds.MEMBER_KINDS, "mean_shift": (__name__, "MeanShiftMember")}
    monkeypatch.setattr(_member_kinds, "MEMBER_KINDS", kinds)
    monkeypatch.setattr(
        _persistence, "SAFE_GLOBALS", _persistence.SAFE_GLOBALS | _member_kinds.member_globals()
    )
    spec = MemberSpec(kernel=tk.FlattenedKernel(tk.Linear()), preprocess=False, kind="mean_shift")
    monkeypatch.setattr(_auto, "default_members", lambda Xs: [spec])
    X, Y = _walks(4, 30), _walks(5, 6) + 3.0
    det = KernelNoveltyDetector().fit(X)
    assert type(det.members_[0]) is MeanShiftMember
    mx = X.mean(axis=1)
    novelty = ((Y.mean(axis=1) - mx.mean(axis=0)) ** 2).sum(axis=1)
    np.testing.assert_allclose(-det.score_samples(Y), novelty, rtol=1e-12)
    det.save(tmp_path / "m.knd")
    loaded = KernelNoveltyDetector.load(tmp_path / "m.knd")  # no trust_pickle needed
    np.testing.assert_array_equal(loaded.score_samples(Y), det.score_samples(Y))


# ------------------------------------------------------- the page itself runs as written
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _blocks(text: str) -> list[tuple[str, str]]:
    """(code, the output shown after it) of each python block followed by "Output:"."""
    pattern = r"```python\n(.*?)```\s*\nOutput:\s*\n\s*```\n(.*?)```"
    return re.findall(pattern, text, flags=re.S)


def test_the_architecture_page_runs_and_prints_what_it_shows():
    import tskernels._registry as kernel_registry_module

    blocks = _blocks(DOC.read_text())
    assert len(blocks) == 3  # kernel, scorer, member kind
    kernels = dict(kernel_registry_module.REGISTRY._specs)  # the page registers a kernel
    namespace: dict = {}
    try:
        for code, shown in blocks:
            out = io.StringIO()
            with contextlib.redirect_stdout(out), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(code, str(DOC), "exec"), namespace)
            assert out.getvalue().strip() == shown.strip()
    finally:
        kernel_registry_module.REGISTRY._specs.clear()
        kernel_registry_module.REGISTRY._specs.update(kernels)
        if "mean_kernel" in scorer_registry():
            unregister_scorer("mean_kernel")
    assert "mean_linear" not in kernels and "mean_kernel" not in scorer_registry()
