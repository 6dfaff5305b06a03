"""The recording command line: ``tskernels-detect fit/score/info`` for one long recording.

::

    tskernels-detect fit normal.csv --window auto --model pump.model [--contamination 0.01]
    tskernels-detect score new.csv --model pump.model --out steps.csv [--explain]
    tskernels-detect info --model pump.model

``fit --window auto|<steps>`` reads a CSV of one recording (a time column and channels, no
id column; a column named ``id`` makes one recording per id) exactly as the series command
line reads a file (:mod:`novelty.adapters._io`: columns by name, the time column's grid, off-grid
rows resampled onto it, empty cells as gaps), fits :class:`novelty.WindowNoveltyDetector` and
saves it in its data-only format (:mod:`novelty.windows._persist`) with the channel names and
the time grid. ``score`` (which recognises such a model) reads the new recording on that grid
and writes one CSV row per time step: ``time``, ``novelty`` (higher = more unusual),
``p_value`` (per step, calibrated on held-out blocks of the normal data), ``flagged`` (1 when
``p_value <= contamination``); ``--explain`` adds ``channel``, the channel that contributes
most to the step's novelty. ``--fdr`` (a batch of series) does not apply to steps and is
refused. Errors are ValueErrors: the command line prints them as one line, exit status 2.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from ..adapters._outputs import Output, write_frame

__all__ = ["is_window_model", "run"]


def is_window_model(path) -> bool:
    from ._persist import is_window_model as check

    return check(path)


def run(args) -> int:
    """Run ``args.command`` for a window model (``fit`` with ``--window``, or ``score`` /
    ``info`` of a model for which :func:`is_window_model` holds)."""
    return {"fit": _fit, "score": _score, "info": _info}[args.command](args)


def _read(args, channels=None, grid=None):
    from ..adapters._io import TimeGrid, _read_csv

    if isinstance(grid, dict):
        grid = TimeGrid.from_dict(grid)

    path = Path(args.data)
    if path.suffix.lower() != ".csv" or not path.is_file():
        raise ValueError(f"{path}: --window reads one recording from a .csv file")
    label = getattr(args, "label_col", None)
    roles = {"id_col": args.id_col, "time_col": args.time_col, "label_col": label or False}
    opts = {"irregular": getattr(args, "irregular", "resample"), "on_error": "raise", "grid": grid}
    return _read_csv([path], str(path), roles, channels, opts, folder=True)


def _window(text: str):
    if text == "auto":
        return "auto"
    try:
        w = int(text)
    except ValueError:
        raise ValueError(
            f"--window must be 'auto' or a whole number of steps, got {text!r}"
        ) from None
    if w < 2:
        raise ValueError(f"--window must be at least 2 steps, got {w}")
    return w


def _progress(args) -> bool:
    return sys.stderr.isatty() if args.progress is None else bool(args.progress)


def _fit(args) -> int:
    import time

    from ._detector import WindowNoveltyDetector

    window = _window(args.window)
    if args.contamination is None:  # the window detector's default, not the series one's
        args.contamination = WindowNoveltyDetector().contamination
    if not 0 < args.contamination <= 0.5:
        raise ValueError(f"--contamination must lie in (0, 0.5], got {args.contamination}")
    with Output(args.model, args.force, "model") as model:
        data = _read(args, channels=args.channels)
        recs = [data.X[i] for i in range(len(data))]
        t0 = time.perf_counter()
        det = WindowNoveltyDetector(
            window=window, contamination=args.contamination, verbose=_progress(args)
        ).fit(recs)
        det.channel_names_ = list(data.channels)
        grid = data.grid.to_dict() if data.grid is not None else None
        model.write(lambda tmp: det.save(tmp, extra={"grid": grid}))
    steps = sum(len(r) for r in recs)
    print(
        f"fitted on {len(recs)} recording(s), {steps} steps, {det.n_channels_} channel(s) "
        f"({', '.join(det.channel_names_)}), window {det.window_} in "
        f"{time.perf_counter() - t0:.1f} s; saved {model.path}"
    )
    return 0


def _score(args) -> int:
    import numpy as np
    import pandas as pd

    from ._persist import load_window_model

    if getattr(args, "fdr", None) is not None:
        raise ValueError(
            "--fdr controls a batch of series; a window model flags each step by p_value <= "
            "contamination (leave --fdr out)"
        )
    to_stdout = args.out == "-"
    out = None if to_stdout else Output(args.out, args.force, "output file")
    with out or contextlib.nullcontext():
        from ._detector import WindowNoveltyDetector

        det, extra = load_window_model(args.model, WindowNoveltyDetector)
        det.set_params(verbose=_progress(args))
        data = _read(args, channels=det.channel_names_, grid=extra.get("grid"))
        if len(data) != 1:
            raise ValueError(
                f"{args.data} holds {len(data)} recordings (ids {', '.join(data.ids[:3])}"
                f"{', ...' if len(data) > 3 else ''}): score one recording per file"
            )
        x = data.X[0]
        ex = det.explain(x)
        times = data.time_values(0) if data.grid is not None else np.arange(len(x))
        df = pd.DataFrame(
            {
                "time": times,
                "novelty": ex.novelty,
                "p_value": ex.p_values,
                "flagged": ex.flagged.astype(int),
            }
        )
        if args.explain:
            df["channel"] = ex.channel
        write_frame(df, out, sys.stdout)
    wrote = "" if to_stdout else f"; wrote {out.path}"
    print(
        f"scored {len(x)} steps: {int(ex.flagged.sum())} flagged (contamination="
        f"{det.contamination}, window {det.window_}){wrote}",
        file=sys.stderr if to_stdout else sys.stdout,
    )
    return 0


def _info(args) -> int:
    from ._detector import WindowNoveltyDetector
    from ._persist import load_window_model

    det, extra = load_window_model(args.model, WindowNoveltyDetector)
    windows, strides = det._member_windows(), det._member_strides()
    members = ""
    if len(windows) > 1:  # e.g. "multiscale": each member's own window and stride
        members = (
            f" (members: windows {', '.join(map(str, windows))}; strides "
            f"{', '.join(map(str, strides))})"
        )
    print(
        f"window model: {det.n_channels_} channel(s) ({', '.join(det.channel_names_)}), "
        f"window {det.window_}, stride {det.stride_}{members}, detector {det.detector_}, aggregate "
        f"{det.aggregate_}, member scale {det.member_scale_}, {det.n_normal_steps_} normal "
        f"steps, {len(det.reference_)} reference windows, {det.calibration_scores_.size} "
        f"calibration steps, contamination {det.contamination}, grid {extra.get('grid')}"
    )
    return 0
