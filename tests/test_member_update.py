"""Members and scorers own their update (issue 33, item 1): ``GramScorer.extend`` equals a fit
on the union Gram (every registered scorer; kNN without the corpus Gram), ``Member.update``
returns an updated copy, ``MemberSpec.adapt_to_corpus`` replaces the hidden ``name != ""``
rule (specs of tskernels 0.1 files read it from the name), the approximate member is a sibling of
the exact one, and fit and update set the calibration by one rule."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch

import tskernels as tk
from novelty import KernelNoveltyDetector, KNNScorer, scorer_registry
from novelty.detector._approx_member import ApproximateMember
from novelty.detector._members import BaseMember, Member, MemberSpec, duplicate_groups
from novelty.detector._update import concat_series
from novelty.scorers._gram_scorer import union_gram


def _gram(rng, n, dim=3):
    """A normalised RBF Gram of n random points, float64 tensor."""
    Z = rng.normal(size=(n, dim))
    d2 = ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    return torch.from_numpy(np.exp(-d2 / dim))


def _scorer(name):
    cls = scorer_registry()[name]
    return cls(n_neighbors=2) if cls is KNNScorer else cls()


@pytest.mark.parametrize("name", sorted(scorer_registry()))
def test_extend_equals_a_fit_on_the_union_gram(name):
    rng = np.random.default_rng(0)
    K = _gram(rng, 14)
    N = 10
    K_aa, K_ba, K_bb = K[:N, :N].clone(), K[N:, :N].clone(), K[N:, N:].clone()
    old = _scorer(name).fit(K_aa)
    before = old.get_params(), old.n_corpus_
    ext = old.extend(K_ba, K_bb, K_corpus=K_aa)
    oracle = _scorer(name).fit(K)
    Kt = _gram(rng, 20)[:6, :14]  # any cross values: the scorers must agree bit for bit
    diag = torch.ones(6, dtype=torch.float64)
    assert np.array_equal(ext.score(Kt, diag), oracle.score(Kt, diag))
    assert ext.n_corpus_ == 14 and ext is not old
    assert (old.get_params(), old.n_corpus_) == before  # the fitted scorer is not changed
    fresh = _scorer(name).fit(K_aa)
    assert np.array_equal(old.score(Kt[:, :N], diag), fresh.score(Kt[:, :N], diag))


def test_knn_extend_needs_no_corpus_gram_and_takes_the_union_parameters():
    rng = np.random.default_rng(1)
    K = _gram(rng, 9)
    old = KNNScorer(n_neighbors=3).fit(K[:5, :5])
    ext = old.extend(K[5:, :5], K[5:, 5:], params={"n_neighbors": 7})  # no K_corpus
    oracle = KNNScorer(n_neighbors=7).fit(K)
    assert torch.equal(ext.corpus_diag_, oracle.corpus_diag_) and ext.n_neighbors == 7
    Kt, d = K[:4], torch.ones(4, dtype=torch.float64)
    assert np.array_equal(ext.score(Kt, d), oracle.score(Kt, d))
    with pytest.raises(ValueError, match="exceeds the corpus size N=9"):
        old.extend(K[5:, :5], K[5:, 5:], params={"n_neighbors": 10})
    with pytest.raises(ValueError, match=r"`K_new_corpus` must be \(m, N\) = \(m, 5\)"):
        old.extend(K[5:, :4], K[5:, 5:])


def test_extend_without_the_corpus_gram_is_an_error_naming_it():
    rng = np.random.default_rng(2)
    K = _gram(rng, 8)
    old = scorer_registry()["mahalanobis"]().fit(K[:5, :5])
    with pytest.raises(ValueError, match="needs the corpus Gram `K_corpus`"):
        old.extend(K[5:, :5], K[5:, 5:])


def test_union_gram_assembles_the_blocks():
    rng = np.random.default_rng(3)
    K = _gram(rng, 7)
    assert torch.equal(union_gram(K[:4, :4], K[4:, :4], K[4:, 4:]), K)


# ------------------------------------------------------------------ members
def _batch(X):
    return tk.as_series_batch(X)


def test_adapt_to_corpus_lowers_k_at_fit_and_raises_it_back_at_update():
    rng = np.random.default_rng(4)
    A, B = _batch(rng.normal(size=(3, 12, 2))), _batch(rng.normal(size=(4, 12, 2)))
    kernel = tk.FlattenedKernel(tk.RBF(4.0))
    params = {"n_neighbors": 5}
    spec = MemberSpec(kernel, "knn", scorer_params=params, preprocess=False, adapt_to_corpus=True)
    member = Member(spec).fit(A, {})
    assert member.scorer_.n_neighbors == 3  # lowered to N
    raw = concat_series(A, B)
    new = member.update(B, raw, duplicate_groups(raw))
    assert new is not member and member.scorer_.n_neighbors == 3  # the member is not changed
    assert new.scorer_.n_neighbors == 5 and len(new.calibration_) == 7
    oracle = Member(spec).fit(raw, {})  # nothing fitted on data: the update is this fit
    Y = _batch(rng.normal(size=(5, 12, 2)))
    np.testing.assert_allclose(new.novelty(Y), oracle.novelty(Y), rtol=0, atol=1e-10)
    np.testing.assert_allclose(new.calibration_, oracle.calibration_, rtol=0, atol=1e-10)
    fixed = MemberSpec(kernel, "knn", scorer_params=params, preprocess=False)
    with pytest.raises(ValueError, match="exceeds the corpus size N=3"):
        Member(fixed).fit(A, {})  # without adaptation k=5 on 3 series is an error


def test_update_of_a_plain_member_equals_a_fit_on_the_union():
    rng = np.random.default_rng(5)
    A, B = _batch(rng.normal(size=(6, 12, 2))), _batch(rng.normal(size=(5, 12, 2)))
    spec = MemberSpec(tk.FlattenedKernel(tk.RBF(4.0)), "conformance", preprocess=False)
    raw = concat_series(A, B)
    new = Member(spec).fit(A, {}).update(B, raw, duplicate_groups(raw))
    oracle = Member(spec).fit(raw, {})
    Y = _batch(rng.normal(size=(4, 12, 2)))
    np.testing.assert_allclose(new.calibration_, oracle.calibration_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(new.novelty(Y), oracle.novelty(Y), rtol=0, atol=1e-10)


def test_a_new_spec_keeps_its_field_through_pickle():
    for adapt in (True, False):
        spec = MemberSpec(tk.GAK(), name="x", adapt_to_corpus=adapt)
        assert pickle.loads(pickle.dumps(spec)).adapt_to_corpus is adapt


def test_a_0_1_file_without_the_field_loads_as_0_1_behaved(tmp_path):
    """A tskernels 0.1 file (format 1, loaded with trust_pickle=True) whose specs and detector
    predate ``adapt_to_corpus``, ``layout`` and ``verbose``: a named spec adapts, an unnamed
    one does not (the rule the field replaced), the parameters get their defaults, and the
    scores are those of the saved detector."""
    import joblib

    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(12, 10, 2)), rng.normal(size=(4, 10, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name, adapt in [("gak+knn", True), ("", False)]:
            det = KernelNoveltyDetector(kernel=tk.GAK()).fit(X)
            expected = det.score_samples(Y)
            spec = det.members_[0].spec
            spec.__dict__.update(name=name, adapt_to_corpus=not adapt)
            del spec.__dict__["adapt_to_corpus"]  # ...saved before the field
            del det.__dict__["layout"], det.__dict__["verbose"]  # ...and these parameters
            path = tmp_path / f"old{adapt}.joblib"
            joblib.dump(
                {"format": "tskernels-detector", "format_version": 1, "estimator": det}, path
            )
            loaded = KernelNoveltyDetector.load(path, trust_pickle=True)
            assert loaded.members_[0].spec.adapt_to_corpus is adapt
            assert loaded.layout is None and loaded.verbose is False
            assert np.array_equal(loaded.score_samples(Y), expected)


def test_the_approximate_member_is_a_sibling_without_a_gram():
    assert issubclass(ApproximateMember, BaseMember) and issubclass(Member, BaseMember)
    assert not issubclass(ApproximateMember, Member)
    assert not hasattr(ApproximateMember, "grams")


def test_fit_and_update_warn_alike_when_nothing_can_be_flagged():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(20, 10, 2))
    kernel = tk.FlattenedKernel(tk.RBF(4.0))
    with pytest.warns(UserWarning, match=r"^with 5 corpus series no series can be flagged"):
        det = KernelNoveltyDetector(kernel).fit(X[:5])
    with pytest.warns(UserWarning, match=r"^after update: with 8 corpus series no series can"):
        det.update(X[5:8])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 20 series: flaggable, no warning
        det.update(X[8:])
    assert det.n_corpus_ == 20 and np.isfinite(det.threshold_)


def test_a_scorer_keeping_no_update_state_is_refused_by_update_before_any_work():
    """A scorer whose extension_state keeps neither the Gram nor kNN's nearest distances: update
    cannot recompute the held-out scores; a clear error (was an AttributeError deep inside),
    the detector unchanged, and update(refit=True) still works."""
    from novelty import MeanEmbeddingScorer

    class KeepsNothing(MeanEmbeddingScorer):
        def extension_state(self, K, groups=None, *, held_out=True):
            return {}

    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(25, 30, 2)), axis=1)
    kernel = tk.FlattenedKernel(tk.RBF(10.0))
    det = KernelNoveltyDetector(kernel=kernel, scorer=KeepsNothing()).fit(X)
    before = det.score_samples(X[:5] + 0.5)
    with pytest.raises(ValueError, match="KeepsNothing.extension_state keeps neither"):
        det.update(X[:3] + 0.1)
    np.testing.assert_array_equal(det.score_samples(X[:5] + 0.5), before)
    assert det.update(X[:3] + 0.1, refit=True).n_corpus_ == 28
