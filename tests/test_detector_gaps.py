"""Small gaps a new user met (issue 22, item 8): what a fitted detector's repr says, one name
per selection candidate, a warning when the corpus itself is scored, and GridSearchCV without
``scoring=`` (the detector's ``score`` is a ROC-AUC on labelled series)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold

from novelty import KernelNoveltyDetector
from tskernels import GAK, RBF, FlattenedKernel, IntegralKernel


def _series(n, T=12, d=2, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, T)
    base = np.stack([np.sin(t + k) for k in range(d)], axis=1)
    return base[None] + 0.2 * rng.normal(size=(n, T, d))


def test_repr_says_what_was_fitted():
    det = KernelNoveltyDetector(FlattenedKernel(RBF(3.0)))
    assert repr(det) == "KernelNoveltyDetector(kernel=FlattenedKernel(static=RBF(sigma=3.0)))"
    det.fit(_series(10))
    assert "# fitted" not in repr(det)  # one member, as asked: nothing to add
    # several members (the default recipe): their labels
    default = KernelNoveltyDetector().fit(_series(8))
    assert repr(default) == (
        "KernelNoveltyDetector()  # fitted: minirocket_std+knn(k=5) + minirocket+knn + gak+knn"
    )
    # scorer="auto": the member and what the selection chose
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = KernelNoveltyDetector(GAK(), scorer="auto", max_time=30).fit(_series(8, seed=1))
    chosen = auto.selection_.loc[auto.selection_["chosen"], "candidate"].iloc[0]
    text = repr(auto)
    assert text.startswith(
        "KernelNoveltyDetector(kernel=GlobalAlignmentKernel(), max_time=30, scorer='auto')  "
        "# fitted: "
    )
    assert f"(auto chose {chosen})" in text
    assert " + ".join(m.spec.label() for m in auto.members_) in text
    # one name per candidate: knn and the mean of 5-NN apart
    names = auto.selection_["candidate"]
    assert names.is_unique
    assert {"GlobalAlignmentKernel+knn", "GlobalAlignmentKernel+knn(k=5)"} <= set(names)


def test_scoring_the_corpus_warns_that_scores_are_in_sample():
    X = _series(15, seed=2)
    det = KernelNoveltyDetector(FlattenedKernel(RBF(3.0))).fit(X)
    with pytest.warns(UserWarning, match="3 of 4 scored series are exact copies of corpus"):
        s = det.score_samples(np.concatenate([X[:3], _series(1, seed=3)]))
    assert np.allclose(s[:3], 0.0, atol=1e-6)  # 1-NN novelty of a corpus series: its copy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        det.score_samples(_series(3, seed=4))  # new series: no warning
        det.score_samples(X[:2] + 1e-9)  # not exact copies: no warning


def test_grid_search_without_scoring_uses_roc_auc():
    odd = _series(8, seed=5)
    odd[:, 4:8, 0] += 0.8
    X = np.concatenate([_series(24, seed=6), odd])
    y = np.r_[np.ones(24), -np.ones(8)]  # scikit-learn's +1 inlier / -1 outlier
    det = KernelNoveltyDetector(IntegralKernel(RBF(1.0)), normal_label=1)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = GridSearchCV(det, {"kernel__static__sigma": [0.5, 2.0]}, cv=cv).fit(X, y)
    assert grid.best_score_ > 0.7
    # score is the ROC-AUC of score_samples, normal = positive
    best = grid.best_estimator_
    assert best.score(X, y) == pytest.approx(roc_auc_score(y == 1, best.score_samples(X)))
    # without normal_label, y == 1 is normal
    plain = KernelNoveltyDetector(IntegralKernel(RBF(1.0))).fit(X[:24])
    assert plain.score(X, y) == pytest.approx(roc_auc_score(y == 1, plain.score_samples(X)))
    with pytest.raises(ValueError, match="needs labels y"):
        plain.score(X)
    with pytest.raises(ValueError, match="holds no normal series"):
        plain.score(X, np.where(y == 1, "ok", "bad"))
