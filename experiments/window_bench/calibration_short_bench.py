"""The window benchmark's default ("ladder", mean, tail) under a member cap of
``total // b_min`` normal steps (issue 32, short normal data), as the method
``ours:ladder-bmin<b_min>``, beside the cached ``ours:ladder-mean-tail`` (the cap of 4).

    python -m experiments.window_bench.calibration_short_bench tuning 8 10 12 [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.window_bench import _run
from experiments.window_bench._methods import methods as _methods

BASE = "ours:ladder-mean-tail"


def variant(b_min, gap=None):
    """The default with the member cap ``total // b_min`` and the calibration gap ``gap``
    ("window" when None; "member": each member's own window, the rule before the fix)."""

    def run(s):
        from novelty import WindowNoveltyDetector
        from novelty.windows import _detector

        old = _detector.MEMBER_CAP_BLOCKS, _detector.CALIBRATION_GAP
        _detector.MEMBER_CAP_BLOCKS = b_min
        _detector.CALIBRATION_GAP = gap or "window"
        try:
            det = WindowNoveltyDetector(detector="ladder", aggregate="mean", member_scale="tail")
            return -det.fit(s.normal).score_samples(s.test)
        finally:
            _detector.MEMBER_CAP_BLOCKS, _detector.CALIBRATION_GAP = old

    return run


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("half", choices=["tuning", "confirmation"])
    p.add_argument(
        "b_min",
        nargs="+",
        help="4, 8, ... (member cap) or gap<b_min> (the "
        "calibration gap of at most the window, with the member cap b_min)",
    )
    p.add_argument("--out", default="results/window_bench/h7")
    p.add_argument("--only", default=None, help="comma-separated substrings of stream names")
    a = p.parse_args(argv)
    names, extra = [], {}
    for b in a.b_min:
        if b.startswith("gap"):
            name, fn = f"ours:ladder-gapw-bmin{b[3:]}", variant(int(b[3:]))
        else:
            name, fn = f"ours:ladder-bmin{b}", variant(int(b), gap="member")
        names.append(name)
        extra[name] = fn
    _run.methods = lambda: {**_methods(), **extra}
    out = Path(a.out) / a.half
    only = a.only.split(",") if a.only else None
    _run.run(a.half, [BASE, *names], out, log=lambda s: print(s, flush=True), only=only)
    print(_run.report(a.half, [BASE, *names], out))


if __name__ == "__main__":
    main()
