"""Which benchmark streams a member cap of ``total // b_min`` normal steps would change:
the ladder's member windows under the cap of 4 (before issue 32's fix) and of ``b_min``.
Usage: python -m experiments.window_bench.calibration_short_streams [b_min]"""

from __future__ import annotations

import sys

import numpy as np

from experiments.window_bench._data import half_of, load_stream, stream_names
from novelty.windows._detector import MEMBERS, _member_window
from novelty.windows._period import auto_window


def members(normal, b_min):
    z = (normal - normal.mean(0)) / np.where(normal.std(0) > 0, normal.std(0), 1.0)
    w, total = auto_window([z]), len(z)
    cap = min(total // b_min, total // 2)
    return w, total, [_member_window(m, w, cap) for m, _, _ in MEMBERS["ladder"]]


def main(b_min=8):
    for name in stream_names():
        s = load_stream(name)
        w, total, old = members(s.normal, 4)
        _, _, new = members(s.normal, b_min)
        tag = "CHANGED" if old != new else "same"
        print(
            f"{tag} {half_of(name)} {name} normal {total} window {w} blocks {total // max(new)}"
            f" old {old} new {new}",
            flush=True,
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
