"""novelty.plot_scores: the picture of a fitted detector on new series."""

import math
import subprocess
import sys
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import novelty  # noqa: E402
from novelty import KernelNoveltyDetector, plot_scores  # noqa: E402
from tskernels import RBF, IntegralKernel  # noqa: E402


def _data(n=40, n_new=12, T=30, d=3, seed=0):
    rng = np.random.default_rng(seed)
    corpus = np.cumsum(rng.normal(size=(n, T, d)), axis=1) * 0.3
    new = np.cumsum(rng.normal(size=(n_new, T, d)), axis=1) * 0.3
    new[-3:] += 8.0 * np.sin(np.linspace(0, 6, T))[None, :, None]  # three novel series
    return corpus, new


def _detector(corpus, preprocess=True, **kw):
    kernel = IntegralKernel(RBF(sigma=1.0))
    return KernelNoveltyDetector(kernel=kernel, preprocess=preprocess, **kw).fit(corpus)


def _check_png(fig, path, min_w=400, min_h=300):
    fig.savefig(path, dpi=60)
    plt.close(fig)
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h
    assert float(np.var(img[..., :3])) > 1e-3, "blank picture"


def _drawn(axes) -> list[int]:
    """The series indices drawn in the first channel panel (from the line labels)."""
    labels = [ln.get_label() for ln in axes["channels"][0].get_lines()]
    return [int(s.split("#")[1].split(",")[0]) for s in labels if s.startswith("series #")]


@pytest.mark.parametrize("preprocess", [True, False])
def test_picture_and_flagged_series(tmp_path, preprocess):
    corpus, new = _data()
    det = _detector(corpus, preprocess=preprocess)
    fig, axes = plot_scores(det, new)
    flagged = np.flatnonzero(det.predict(new) == -1)
    assert set(flagged) >= {9, 10, 11}
    nov = -det.score_samples(new)
    expect = sorted(flagged, key=lambda i: -nov[i])[:5]
    assert _drawn(axes) == expect
    assert len(axes["channels"]) == 3
    # the threshold is drawn at threshold_
    xs = [ln.get_xdata()[0] for ln in axes["scores"].get_lines() if ln.get_linestyle() == "--"]
    assert xs == [pytest.approx(det.threshold_)]
    pre = "pre-processed" in fig._suptitle.get_text()
    assert pre == preprocess  # the band is in the space the detector kept
    _check_png(fig, tmp_path / "scores.png")


def test_method_delegates_and_corpus_argument(tmp_path):
    corpus, new = _data()
    det = _detector(corpus)
    fig, axes = det.plot_scores(new, corpus=corpus, max_flagged=1)
    assert "pre-processed" not in fig._suptitle.get_text()  # raw corpus given
    assert len(_drawn(axes)) == 1
    # the band is the raw corpus's 5-95 % quantiles
    band = axes["channels"][0].collections[0].get_paths()[0].vertices[:, 1]
    q = np.quantile(corpus[:, :, 0], [0.05, 0.95], axis=0)
    assert band.min() == pytest.approx(q[0].min()) and band.max() == pytest.approx(q[1].max())
    _check_png(fig, tmp_path / "m.png")
    with pytest.raises(ValueError, match="channels"):
        det.plot_scores(new, corpus=corpus[:, :, :2])


def test_infinite_threshold_gives_a_note_and_no_line(tmp_path):
    corpus, new = _data(n=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        det = _detector(corpus)
    assert math.isinf(det.threshold_)
    fig, axes = plot_scores(det, new)
    assert not [ln for ln in axes["scores"].get_lines() if ln.get_linestyle() == "--"]
    texts = " ".join(t.get_text() for t in axes["scores"].texts)
    assert "threshold +inf" in texts
    assert "nothing flagged" in fig._suptitle.get_text()
    assert len(_drawn(axes)) == 1  # the most novel series is drawn instead
    _check_png(fig, tmp_path / "inf.png")


def test_unequal_lengths_are_resampled(tmp_path):
    rng = np.random.default_rng(1)
    corpus = [np.cumsum(rng.normal(size=(T, 2)), axis=0) for T in rng.integers(20, 40, 30)]
    new = [np.cumsum(rng.normal(size=(T, 2)), axis=0) + 6 for T in (25, 33, 50)]
    det = _detector(corpus)
    fig, axes = plot_scores(det, new, corpus=corpus)
    assert "relative time" in axes["channels"][-1].get_xlabel()
    _check_png(fig, tmp_path / "u.png")
    fig, axes = plot_scores(det, new)  # pre-processed corpus, unequal too
    _check_png(fig, tmp_path / "u2.png")


def test_many_channels_keep_those_leaving_the_band():
    corpus, new = _data(d=8)
    new[-3:, :, :] -= 8.0 * np.sin(np.linspace(0, 6, new.shape[1]))[None, :, None]
    new[-3:, :, 5] += 20.0  # channel 5 leaves the band most
    det = _detector(corpus)
    fig, axes = plot_scores(det, new, max_channels=2)
    titles = [a.get_title() for a in axes["channels"]]
    assert len(titles) == 2 and "channel 5" in titles
    assert "of 8 channels" in fig._suptitle.get_text()
    plt.close(fig)


def test_bad_arguments():
    corpus, new = _data(n=20)
    det = _detector(corpus)
    with pytest.raises(ValueError, match="max_flagged"):
        plot_scores(det, new, max_flagged=0)
    with pytest.raises(ValueError, match="band"):
        plot_scores(det, new, band=(0.9, 0.1))
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        plot_scores(KernelNoveltyDetector(), new)


def test_import_novelty_does_not_import_matplotlib():
    code = "import sys, novelty; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert "plot_scores" in novelty.__all__
