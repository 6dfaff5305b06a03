"""WindowNoveltyDetector matches DataFrame channels by name wherever it reads several frames:
fit on a list of recordings and update, not only scoring (before: the first frame's column
order was assumed for every other one, mixing channels silently)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from novelty import WindowNoveltyDetector


def _frame(T, seed, cols=("a", "b")):
    rng = np.random.default_rng(seed)
    t = np.arange(T)[:, None]
    x = np.sin(2 * np.pi * t / 25 + np.array([[0.0, 1.5]])) * np.array([[1.0, 5.0]])
    x = x + 0.2 * rng.normal(size=(T, 2))  # channel b: five times the scale of a
    return pd.DataFrame(x, columns=["a", "b"])[list(cols)]


def _det():
    return WindowNoveltyDetector(window=25, detector="knn")


def test_fit_on_frames_in_another_column_order_is_fit_on_the_same_data():
    one, two = _frame(400, 1), _frame(400, 2)
    x = _frame(200, 3)
    same = _det().fit([one, two]).score_samples(x)
    swapped = _det().fit([one, two[["b", "a"]]]).score_samples(x)
    np.testing.assert_array_equal(swapped, same)


def test_update_with_a_frame_in_another_column_order():
    x = _frame(200, 3)
    a = _det().fit(_frame(400, 1)).update(_frame(300, 2))
    b = _det().fit(_frame(400, 1)).update(_frame(300, 2)[["b", "a"]])
    np.testing.assert_array_equal(b.calibration_scores_, a.calibration_scores_)
    np.testing.assert_array_equal(b.score_samples(x), a.score_samples(x))


def test_frames_with_other_channels_are_refused():
    with pytest.raises(ValueError, match="channel"):
        _det().fit([_frame(400, 1), _frame(400, 2).rename(columns={"b": "c"})])
    det = _det().fit(_frame(400, 1))
    with pytest.raises(ValueError, match="channel"):
        det.update(_frame(300, 2).rename(columns={"b": "c"}))
