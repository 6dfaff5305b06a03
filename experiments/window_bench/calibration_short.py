"""Flag share of pure-normal recordings when the normal data is short relative to the
ladder's longest member window (issue 32): 40 seeded recordings per setting, contamination
0.05. Usage: python -m experiments.window_bench.calibration_short [n_rec [b_min [gap]]]
(b_min: the member cap ``MEMBER_CAP_BLOCKS``, 4 the default; gap: ``CALIBRATION_GAP``,
"member" the rule before issue 32's short-data fix, "window" the default)"""

from __future__ import annotations

import sys
import time

import numpy as np

from novelty import WindowNoveltyDetector

SETTINGS = [  # (name, period, window, normal steps)
    ("auto, period 100, 1200 normal", 100, "auto", 1200),
    ("auto, period 100, 2400 normal", 100, "auto", 2400),
    ("window=100, period 25, 1200 normal", 25, 100, 1200),
]


def sine(T, period, seed, noise=0.2):
    rng = np.random.default_rng(seed)
    t = np.arange(T)
    return np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi)) + noise * rng.normal(size=T)


def flag_shares(period, window, T_fit, n_rec=40, T_new=1200, eps=0.05):
    out, info = [], None
    for r in range(n_rec):
        det = WindowNoveltyDetector(window=window, contamination=eps)
        det.fit(sine(T_fit, period, seed=1000 + 2 * r))
        out.append(float((det.predict(sine(T_new, period, seed=1001 + 2 * r)) == -1).mean()))
        info = (det.window_, det.member_windows_, det.n_folds_)
    return np.array(out), info


def main(n_rec=40, b_min=None, gap=None):
    from novelty.windows import _detector

    if b_min is not None:
        _detector.MEMBER_CAP_BLOCKS = b_min
    if gap is not None:
        _detector.CALIBRATION_GAP = gap
    print(
        f"MEMBER_CAP_BLOCKS = {_detector.MEMBER_CAP_BLOCKS}, "
        f"CALIBRATION_GAP = {_detector.CALIBRATION_GAP!r}"
    )
    for name, period, window, T_fit in SETTINGS:
        t0 = time.perf_counter()
        s, info = flag_shares(period, window, T_fit, n_rec)
        se = s.std(ddof=1) / np.sqrt(len(s))
        print(
            f"{name}: share {s.mean():.4f} +- {se:.4f} (sd {s.std(ddof=1):.4f}); window, "
            f"members, blocks {info}; {time.perf_counter() - t0:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40,
         int(sys.argv[2]) if len(sys.argv) > 2 else None,
         sys.argv[3] if len(sys.argv) > 3 else None)  # fmt: skip
