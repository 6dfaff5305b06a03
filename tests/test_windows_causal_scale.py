"""``WindowNoveltyDetector(member_scale="causal")`` (docs/windows.md, "Seventh round"): each
member's scale at a step from its calibration novelties and its own past step novelties of the
recording. Against a brute-force per-block computation (with the history cap and the
calibration summary), chunked equal to one pass, causal (later steps do not change earlier
scores), a model file's round trip, ``update``, and the per-step flag rate on pure normal data
within the bounds the fixed scales meet."""

import numpy as np
import pytest

from novelty import WindowNoveltyDetector
from novelty.windows._detector import _tail_scale
from novelty.windows._engine import CausalScales
from tests.test_windows import _ar1, _assert_rate, _sine
from tests.window_helpers import streamed


def _brute(cal, nov, gap, every, history):
    """z (m, n): for step t in block b, the tail scale of the calibration (its ``history``
    evenly spaced order statistics when longer) and s[max(0, c - history):c], c = max(0,
    b * every - gap)."""
    m, n = nov.shape
    out = np.empty((m, n))
    for i in range(m):
        c = np.asarray(cal[i], float)
        if len(c) > history:
            s = np.sort(c)
            c = s[[int((k + 0.5) * len(s) / history) for k in range(history)]]
        for t in range(n):
            cut = max(0, (t // every) * every - gap)
            med, q = _tail_scale(np.concatenate([c, nov[i, max(0, cut - history) : cut]]))
            out[i, t] = (nov[i, t] - med) / q
    return out


@pytest.mark.parametrize("gap, every, history, n_cal", [(7, 5, 1000, 40), (3, 4, 9, 25),
                                                        (0, 1, 6, 3), (20, 8, 30, 60)])  # fmt: skip
def test_causal_scales_equal_a_brute_force_computation_in_any_chunks(gap, every, history, n_cal):
    rng = np.random.default_rng(gap + every + history)
    cal = [rng.gamma(2.0, size=n_cal), rng.gamma(3.0, size=n_cal + 5)]
    nov = np.abs(rng.normal(size=(2, 137))) * np.linspace(1, 3, 137)  # a drift
    want = _brute(cal, nov, gap, every, history)
    for sizes in ([137], [1] * 137, [10, 0, 50, 77], [64, 73]):
        cs = CausalScales(cal, _tail_scale, gap, every, history)
        parts, pos = [], 0
        for k in sizes:
            parts.append(cs.z(nov[:, pos : pos + k]))
            pos += k
        np.testing.assert_allclose(np.concatenate(parts, axis=1), want, rtol=1e-12, atol=1e-12)
        # the kept past never exceeds history + every + gap + the last chunk
        assert all(len(p) <= history + every + gap + max(sizes) for p in cs.past)


def _drifting(n, seed):
    x = _sine(n, period=25, seed=seed)
    return x + np.linspace(0, 1.5, n)[:, None]


@pytest.mark.parametrize("detector", ["ladder", "ladder+stats"])
def test_causal_streaming_equals_one_pass_and_later_steps_do_not_change_earlier(detector):
    normal = _sine(3000, period=25, seed=1)
    x = _drifting(2500, seed=2)
    det = WindowNoveltyDetector(window=25, detector=detector, member_scale="causal").fit(normal)
    whole = det.score_samples(x)
    chunks, _ = streamed(det, x, [5, 600, 1, 1300, 594])
    np.testing.assert_allclose(chunks, whole, rtol=0, atol=1e-12)
    y = x.copy()
    y[1800:] += 5.0  # a change late in the recording
    head = det.score_samples(y)[: 1800 - det.max_window_]
    np.testing.assert_array_equal(head, whole[: 1800 - det.max_window_])
    # and the scale does adapt: the drift's late steps score differently from the fixed scale
    fixed = WindowNoveltyDetector(window=25, detector=detector, member_scale="tail").fit(normal)
    assert not np.allclose(fixed.score_samples(x)[-500:], whole[-500:])
    np.testing.assert_array_equal(fixed.calibration_scores_, det.calibration_scores_)


def test_causal_model_file_round_trips_and_refuses_a_missing_calibration(tmp_path):
    normal, x = _sine(2000, period=25, seed=3), _drifting(900, seed=4)
    det = WindowNoveltyDetector(window=25, detector="ladder+stats", member_scale="causal")
    det.fit(normal)
    path = det.save(tmp_path / "m.npz")
    back = WindowNoveltyDetector.load(path)
    np.testing.assert_array_equal(back.score_samples(x), det.score_samples(x))
    np.testing.assert_array_equal(back.predict(x), det.predict(x))
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files if k != "member_calibration_2"}
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    with pytest.raises(ValueError, match="member 2's calibration novelties"):
        WindowNoveltyDetector.load(bad)


def test_causal_update_extends_each_members_calibration():
    a, b = _sine(1500, period=25, seed=5), 1.5 * _sine(1500, period=25, seed=6)
    det = WindowNoveltyDetector(window=25, member_scale="causal").fit(a)
    sizes = [len(c) for c in det.member_calibration_]
    n_cal = det.calibration_scores_.size
    det.update(b)
    assert [len(c) for c in det.member_calibration_] == [s + len(b) for s in sizes]
    assert det.calibration_scores_.size == n_cal + len(b)
    assert np.isfinite(det.score_samples(b)).all()


def _causal_rates(eps, n_rec, T_fit, T_new):
    rates = []
    for r in range(n_rec):
        det = WindowNoveltyDetector(window=20, contamination=eps, member_scale="causal")
        det.fit(_ar1(T_fit, seed=2 * r))
        rates.append(float((det.predict(_ar1(T_new, seed=2 * r + 1)) == -1).mean()))
    return np.array(rates)


def test_causal_pure_normal_ar1_is_flagged_at_contamination():
    _assert_rate(_causal_rates(0.05, 12, 1200, 1500), 0.05)


def test_a_lasting_change_scores_lower_as_it_goes_on_only_under_the_causal_scale():
    """The option's stated price and purpose: after a lasting level move the causal scores
    fall back towards normal (the fixed ones do not), and a short incident after it is still
    flagged."""
    t = np.arange(6000)
    rng = np.random.default_rng(0)
    normal = (np.sin(2 * np.pi * t[:3000] / 50) + 0.1 * rng.normal(size=3000))[:, None]
    x = (np.sin(2 * np.pi * t / 50) + 0.1 * rng.normal(size=6000))[:, None]
    x[1000:] += 0.5
    x[4000:4100] += 1.5 * np.sin(2 * np.pi * t[4000:4100] / 7)[:, None]
    out = {}
    for scale in ("tail", "causal"):
        det = WindowNoveltyDetector(detector="ladder+stats", member_scale=scale).fit(normal)
        out[scale] = (-det.score_samples(x), det.predict(x) == -1)
    for nov, _ in out.values():  # both: late in the move scores below early in it
        assert np.median(nov[3000:3900]) <= np.median(nov[1200:2100])
    tail, causal = out["tail"][1], out["causal"][1]
    assert tail[3000:3900].mean() == 1.0 and causal[3000:3900].mean() < 0.5
    assert causal[4000:4100].all() and tail[4000:4100].all()
    assert causal[:700].mean() < 0.1
