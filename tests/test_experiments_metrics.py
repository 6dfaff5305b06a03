"""The vectorised ROC-AUC / average precision against scikit-learn, ties included."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from experiments._metrics import average_precision, roc_auc, roc_auc_and_average_precision


def _pairwise_auc(s, y):
    """ROC-AUC by its definition: P(score of a positive > score of a negative), ties 1/2."""
    pos, neg = s[..., y][..., :, None], s[..., ~y][..., None, :]
    return ((pos > neg) + 0.5 * (pos == neg)).mean(axis=(-2, -1))


def _ap_by_definition(s, y):
    """Average precision as scikit-learn defines it: sum over the distinct thresholds t
    (descending) of (R(t) - R(t_prev)) P(t), a threshold flagging every score >= t."""
    ap, r_prev = 0.0, 0.0
    for t in np.unique(s)[::-1]:
        flagged = s >= t
        tp = (flagged & y).sum()
        r = tp / y.sum()
        ap += (r - r_prev) * tp / flagged.sum()
        r_prev = r
    return ap


@pytest.mark.parametrize("ties", [False, True])
def test_equals_sklearn_on_every_ranking(ties):
    # every ranking against the definitions; two per draw against scikit-learn itself (its
    # input validation costs ~1 ms a call: 1,800 calls were most of this test's time)
    rng = np.random.default_rng(1 + ties)
    for _ in range(60):
        n = int(rng.integers(2, 50))
        y = rng.random(n) < rng.uniform(0.1, 0.9)
        if y.all() or not y.any():
            continue
        shape = (3, 5, n)
        s = rng.integers(0, 4, size=shape).astype(float) if ties else rng.normal(size=shape)
        auc, ap = roc_auc_and_average_precision(s, y)
        assert auc.shape == ap.shape == (3, 5)
        np.testing.assert_allclose(auc, _pairwise_auc(s, y), rtol=0, atol=1e-12)
        for i in range(3):
            for j in range(5):
                assert ap[i, j] == pytest.approx(_ap_by_definition(s[i, j], y), abs=1e-12)
        for i, j in ((0, 0), tuple(rng.integers(0, (3, 5)))):
            assert auc[i, j] == pytest.approx(roc_auc_score(y, s[i, j]), abs=1e-12)
            assert ap[i, j] == pytest.approx(average_precision_score(y, s[i, j]), abs=1e-12)


def test_the_definitions_equal_sklearn():
    """The two oracles above against scikit-learn, ties and no ties."""
    rng = np.random.default_rng(7)
    for ties in (False, True):
        for _ in range(20):
            n = int(rng.integers(4, 40))
            y = np.r_[True, False, rng.random(n - 2) < 0.5]
            s = rng.integers(0, 4, size=n).astype(float) if ties else rng.normal(size=n)
            assert _pairwise_auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
            assert _ap_by_definition(s, y) == pytest.approx(
                average_precision_score(y, s), abs=1e-12
            )


def test_all_tied_and_perfect_and_reversed():
    y = np.array([1, 0, 1, 0, 0], dtype=bool)
    s = np.stack([np.ones(5), y * 1.0, -(y * 1.0)])
    auc, ap = roc_auc_and_average_precision(s, y)
    np.testing.assert_allclose(auc, [0.5, 1.0, 0.0])
    np.testing.assert_allclose(ap, [average_precision_score(y, r) for r in s])
    assert ap[0] == pytest.approx(0.4)  # all tied: precision = prevalence


def test_infinite_scores_rank_last_and_single_functions():
    y = np.array([True, True, False, False])
    s = np.array([0.0, -np.inf, 1.0, -np.inf])
    finite = np.array([0.0, -1e300, 1.0, -1e300])
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, finite))
    assert average_precision(s, y) == pytest.approx(average_precision_score(y, finite))


def test_torch_input_and_errors():
    torch = pytest.importorskip("torch")
    y = np.array([0, 1, 1, 0])
    s = torch.tensor([0.1, 0.4, 0.35, 0.8], dtype=torch.float64)
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s.numpy()))
    with pytest.raises(ValueError, match="both classes"):
        roc_auc(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="last axis"):
        roc_auc(np.ones((2, 4)), np.array([0, 1, 0]))
    with pytest.raises(ValueError, match="NaN"):
        roc_auc(np.array([np.nan, 1.0]), np.array([0, 1]))
    with pytest.raises(ValueError, match="0/1"):
        roc_auc(np.ones(2), np.array([0, 2]))
