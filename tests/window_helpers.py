"""Shared helper of the window tests: a recording scored through a stream in chunks."""

import numpy as np


def streamed(det, x, sizes) -> tuple[np.ndarray, object]:
    """``det.stream()`` fed ``x`` in chunks of ``sizes`` (summing to ``len(x)``) and finished:
    the concatenated step scores and the stream (to inspect its buffers)."""
    st = det.stream()
    parts, pos = [], 0
    for n in sizes:
        parts.append(st.push(x[pos : pos + n]))
        pos += n
    assert pos == len(x)
    parts.append(st.finish())
    return np.concatenate(parts), st
