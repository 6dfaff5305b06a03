"""The detection command line: ``tskernels-detect`` (or ``python -m novelty``).

::

    tskernels-detect fit normal.csv --model pump.model          # fit on normal series, save
    tskernels-detect score new.csv --model pump.model --out scores.csv [--fdr 0.1]
    tskernels-detect info --model pump.model

``fit`` reads normal series (a long CSV with columns named ``id``, ``time``, channels and an
optional ``label``; a folder of per-series CSVs; an ``.npz``; a ``.ts`` file:
:func:`novelty.adapters._io.read_series`), fits :class:`novelty.KernelNoveltyDetector` (the default
recipe, or ``--kernel auto``) and saves it with the channel names it was fitted on. ``score``
loads it, reads the channels *by name*, and writes one CSV row per series: ``id``,
``novelty`` (higher = more unusual), ``p_value`` (conformal), ``flagged`` (1 = flagged:
p-value <= contamination, or Benjamini-Hochberg at ``--fdr``), and ``label`` when the data
has one; ``--explain`` adds the channel and the time steps that raise the novelty most.

Errors (a file that cannot be read, a missing column, a channel mismatch) are one line on
stderr and exit status 2, before any output file exists; every output file is written
atomically (a temporary file, then renamed), so an error or an interrupt never leaves a
partial one. Arguments are parsed before anything heavy is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

PROG = "tskernels-detect"


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``tskernels-detect: error: message (see --help)``."""

    def error(self, message: str):
        self.exit(2, f"{PROG}: error: {message} (see --help)\n")


class CLIError(Exception):
    """An error to print as one line (exit status 2)."""


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {text}")
    return v


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return v


def _columns(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("columns of a long CSV (default: by their usual names)")
    g.add_argument("--id-col", help="series id column (default: id, series or series_id)")
    g.add_argument("--time-col", help="time column (default: time, t, timestamp or step)")
    g.add_argument("--label-col", help="label column (default: label, class or y; optional)")


def build_parser() -> Parser:
    parser = Parser(
        prog=PROG,
        description="Fit a novelty detector on normal series, score new series.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    fit = sub.add_parser("fit", help="fit on normal series and save the model")
    fit.add_argument("data", help="normal series: long .csv, folder of .csv, .npz or .ts")
    fit.add_argument("--model", required=True, help="where to save the fitted model")
    fit.add_argument(
        "--kernel",
        choices=("default", "auto"),
        default="default",
        help="the default recipe (MiniRocket + GAK, 1-NN) or auto selection (default: default)",
    )
    fit.add_argument(
        "--contamination",
        type=float,
        default=0.05,
        help="share of new normal series that may be flagged (default 0.05)",
    )
    fit.add_argument(
        "--normal-label",
        help="with a label column: fit on the series with this label only (required when "
        "the data holds several labels)",
    )
    fit.add_argument("--channels", nargs="+", help="channel columns to use, by name (CSV)")
    fit.add_argument(
        "--max-time", type=_positive, default=60.0, help="seconds for --kernel auto (default 60)"
    )
    fit.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    fit.add_argument("--force", action="store_true", help="overwrite an existing model file")
    _columns(fit)
    _progress(fit)

    score = sub.add_parser("score", help="score series with a saved model, write a CSV")
    score.add_argument("data", help="series to score: long .csv, folder of .csv, .npz or .ts")
    score.add_argument("--model", required=True, help="a model saved by `fit`")
    score.add_argument("--out", required=True, help="the CSV to write (one row per series)")
    score.add_argument(
        "--fdr",
        type=_fraction,
        help="flag by Benjamini-Hochberg at this false-discovery rate over the batch, instead "
        "of p-value <= contamination per series",
    )
    score.add_argument(
        "--explain",
        action="store_true",
        help="add the channel and time span that raise each series' novelty most",
    )
    score.add_argument("--force", action="store_true", help="overwrite an existing output file")
    _columns(score)
    _progress(score)

    info = sub.add_parser("info", help="what a saved model was fitted on")
    info.add_argument("--model", required=True, help="a model saved by `fit`")
    return parser


def _progress(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--progress",
        dest="progress",
        action="store_const",
        const=True,
        help="show progress bars (default: on a terminal)",
    )
    g.add_argument("--quiet", dest="progress", action="store_const", const=False)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import warnings

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                command = {"fit": _fit, "score": _score, "info": _info}[args.command]
                return command(args)
            finally:  # the library's warnings, one line each
                seen = set()
                for w in caught:
                    text = _one_line(w.message)
                    if text not in seen and not issubclass(w.category, DeprecationWarning):
                        seen.add(text)
                        print(f"{PROG}: warning: {text}", file=sys.stderr)
    except CLIError as err:
        return _fail(str(err))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted, nothing written", file=sys.stderr)
        return 130
    except (ValueError, OSError) as err:  # bad data or files: the library's one-line message
        return _fail(_one_line(err))


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__


def _show_progress(args) -> bool:
    return sys.stderr.isatty() if args.progress is None else args.progress


def _read(args, channels=None):
    from .adapters._io import read_series

    return read_series(
        args.data,
        id_col=args.id_col,
        time_col=args.time_col,
        label_col=args.label_col,
        channels=channels,
    )


def _check_new_file(path: str, force: bool, what: str) -> Path:
    p = Path(path)
    if p.exists() and not force:
        raise CLIError(f"{path} exists: pass --force to overwrite the {what}")
    if p.is_dir():
        raise CLIError(f"{path} is a folder, not a file")
    if not p.parent.exists():
        raise CLIError(f"{p.parent}: no such folder for the {what}")
    return p


def _fit(args) -> int:
    if not 0 < args.contamination <= 0.5:
        raise CLIError(f"--contamination must lie in (0, 0.5], got {args.contamination}")
    model = _check_new_file(args.model, args.force, "model")
    data = _read(args, args.channels)
    X = data.X
    if data.labels is not None:
        labels = sorted(set(data.labels.tolist()))
        if args.normal_label is None and len(labels) > 1:
            shown = ", ".join(labels[:6]) + (", ..." if len(labels) > 6 else "")
            raise CLIError(
                f"{data.source} holds {len(labels)} labels ({shown}): say which class is "
                "normal with --normal-label"
            )
        if args.normal_label is not None:
            keep = [i for i, v in enumerate(data.labels) if v == args.normal_label]
            if not keep:
                raise CLIError(
                    f"no series has the label {args.normal_label!r} (labels: {', '.join(labels)})"
                )
            X = X[keep] if hasattr(X, "shape") else [X[i] for i in keep]
    elif args.normal_label is not None:
        raise CLIError(f"--normal-label given but {data.source} has no label column")

    from .detector._detector import KernelNoveltyDetector

    det = KernelNoveltyDetector(
        kernel=None if args.kernel == "default" else "auto",
        contamination=args.contamination,
        max_time=args.max_time,
        random_state=args.seed,
        verbose=_show_progress(args),
    )
    det.fit(X)
    det.set_params(verbose=False)
    det.channel_names_ = list(data.channels)
    det.save(model)
    n = det.n_corpus_
    print(
        f"fitted on {n} normal series, {det.n_channels_} channel(s) "
        f"({', '.join(data.channels)}) in {det.fit_seconds_:.1f} s; saved {model}"
    )
    if hasattr(det, "selection_"):
        chosen = ", ".join(m.spec.label() for m in det.members_)
        print(f"auto selection: {chosen}")
    return 0


def _load(path: str):
    from .detector._detector import KernelNoveltyDetector

    if not Path(path).exists():
        raise CLIError(f"{path}: no such model file")
    return KernelNoveltyDetector.load(path)


def _score(args) -> int:
    out = _check_new_file(args.out, args.force, "output file")
    det = _load(args.model)
    names = getattr(det, "channel_names_", None)
    from .adapters._io import SeriesFileError

    try:
        data = _read(args, names if _is_csv(args.data) else None)
    except SeriesFileError as err:
        raise CLIError(_one_line(err)) from None
    if names is not None and not _is_csv(args.data) and len(data.channels) != len(names):
        raise CLIError(
            f"{data.source} has {len(data.channels)} channel(s), the model was fitted on "
            f"{len(names)} ({', '.join(names)})"
        )
    det.set_params(verbose=_show_progress(args))
    import numpy as np

    p = det.p_values(data.X)
    novelty = -det.score_samples(data.X)
    if args.fdr is not None:
        from .detector._calibration import benjamini_hochberg

        flagged = benjamini_hochberg(p, args.fdr)
    else:
        flagged = p <= det.contamination
    columns = {
        "id": data.ids,
        "novelty": novelty,
        "p_value": p,
        "flagged": flagged.astype(int),
    }
    if args.explain:
        columns.update(_explanation_columns(det, data, names))
    if data.labels is not None:
        columns["label"] = data.labels
    import pandas as pd

    _write_csv_atomically(pd.DataFrame(columns), out)
    rule = f"fdr={args.fdr}" if args.fdr is not None else f"contamination={det.contamination}"
    print(f"scored {len(data)} series: {int(np.sum(flagged))} flagged ({rule}); wrote {out}")
    return 0


def _explanation_columns(det, data, names) -> dict:
    """The top channel and the time span (first and last step of the steps whose attribution
    is at least half the series' largest) of each series."""
    import numpy as np

    ex = det.explain(data.X)
    channels = names or data.channels
    top, start, end = [], [], []
    for i in range(len(data)):
        top.append(channels[int(np.argmax(ex.channels[i]))])
        t = np.asarray(ex.times[i], dtype=float)
        peak = float(np.max(t)) if t.size else 0.0
        steps = np.flatnonzero(t >= 0.5 * peak) if peak > 0 else np.arange(0)
        start.append(int(steps[0]) if steps.size else -1)
        end.append(int(steps[-1]) if steps.size else -1)
    return {"top_channel": top, "span_start": start, "span_end": end}


def _is_csv(path: str) -> bool:
    p = Path(path)
    return p.is_dir() or p.suffix.lower() == ".csv"


def _write_csv_atomically(frame, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            frame.to_csv(f, index=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _info(args) -> int:
    det = _load(args.model)  # checked: a saved detector
    import joblib

    meta = {k: v for k, v in joblib.load(args.model).items() if k != "estimator"}
    names = getattr(det, "channel_names_", None) or [f"channel_{j}" for j in range(det.n_channels_)]
    members = ", ".join(m.spec.label() for m in det.members_)
    print(f"model: {args.model}")
    print(f"saved by tskernels {meta.get('package_version')} on {meta.get('created')}")
    print(f"corpus: {det.n_corpus_} normal series, channels: {', '.join(names)}")
    print(f"lengths accepted: {meta.get('contract', {}).get('lengths')}")
    print(f"members: {members}; contamination {det.contamination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
