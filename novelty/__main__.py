"""The detection command line: ``tskernels-detect`` (or ``python -m novelty``).

::

    tskernels-detect fit normal.csv --model pump.model          # fit on normal series, save
    tskernels-detect score new.csv --model pump.model --out scores.csv [--fdr 0.1]
    tskernels-detect info --model pump.model

``fit`` reads normal series (a long CSV with columns named ``id``, ``time``, channels and an
optional ``label``; a folder of per-series CSVs; an ``.npz``; a ``.ts`` file:
:func:`novelty.adapters._io.read_series`), fits :class:`novelty.KernelNoveltyDetector` (the default
recipe; ``--kernel auto`` was retired with ``kernel="auto"``: a one-line error) and saves it
with the channel names it was fitted on. ``score`` loads it, reads the channels *by name*,
and writes one CSV row per series: ``id``, ``novelty`` (higher = more unusual), ``p_value``
(conformal), ``flagged`` (1 = flagged: p-value <= contamination, or Benjamini-Hochberg at
``--fdr``), and ``label`` when the data has one; ``--explain`` adds the channel and the time
steps that raise the novelty most.

Errors (a file that cannot be read, a missing column, a channel mismatch) are one line on
stderr and exit status 2, before any output file exists. Outputs (:class:`Output`):

- the model and the ``--out`` file are checked and *reserved* before any work: a lock file
  ``.<name>.lock`` beside the path, created exclusively, so a folder that cannot be written
  is reported at once (naming the path given), and a second run writing the same path is
  refused while the first one works;
- each is written to a temporary file in the same folder, then moved onto its path: an
  error, a full disk or Ctrl-C never leaves a partial file, and the lock is removed;
- a path is never overwritten without ``--force``, including a file that appeared while the
  work ran (the new result is then kept beside it, under a name the error gives);
- files get the permissions of the umask (``0666 & ~umask``), as ``touch`` would;
- text cells of ``scores.csv`` (``id``, ``label``, ``top_channel``) that a spreadsheet would
  read as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, and
  not a number) get a leading ``'`` (OWASP's advice on CSV injection);
- ``--out -`` writes the CSV to standard output (the summary line then goes to stderr).

Arguments are parsed before anything heavy is imported; ``score`` checks its data file before
the model loads.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from .adapters._outputs import PROG, CLIError, Output, neutralise_formula, write_frame

__all__ = ["main", "build_parser", "CLIError", "Output", "neutralise_formula"]


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``tskernels-detect: error: message (see --help)``."""

    def error(self, message: str):
        self.exit(2, f"{PROG}: error: {message} (see --help)\n")


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked."""

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("tskernels")
        except PackageNotFoundError:
            v = "unknown (not installed)"
        print(f"{PROG} {v}")
        parser.exit(0)


def _kernel_choice(text: str) -> str:
    """``--kernel``: "default" only (``auto`` was retired with ``kernel="auto"``)."""
    if text == "auto":
        raise argparse.ArgumentTypeError(
            "'auto' was retired: it did not beat the default on the benchmark's tuning half "
            "(docs/results_detector.md); leave --kernel out to use the default"
        )
    if text != "default":
        raise argparse.ArgumentTypeError(f"the one choice is 'default', got {text!r}")
    return text


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {text}")
    return v


def _columns(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("columns of a long CSV (default: by their usual names)")
    g.add_argument("--id-col", help="series id column (default: id, series or series_id)")
    g.add_argument("--time-col", help="time column (default: time, t, timestamp or step)")
    g.add_argument(
        "--label-col",
        help="label column (default: the column named label, if any; a column "
        "named class or y is a channel unless named here)",
    )
    g.add_argument(
        "--no-label", action="store_true", help="no label column: a column named label is a channel"
    )
    _reading(p)


def _reading(p: argparse.ArgumentParser) -> None:
    """Options of the reader (issue 31): off-grid time values, series that cannot be read."""
    g = p.add_argument_group("reading (time grid, unreadable series)")
    g.add_argument(
        "--irregular",
        choices=("resample", "error"),
        default="resample",
        help="series whose time values are off the grid (the median step of the fitted "
        "corpus): resample them linearly onto it, with a warning (default), or refuse them",
    )
    g.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="a series that cannot be read (a channel without values, a cell that is not a "
        "number, ...): stop with its error (default), or leave it out and list it",
    )


#: The trust model of a model file, in --help (README: "Command line").
TRUST = (
    "A model file holds only data (numbers, text, arrays) and the names of tskernels' own "
    "classes, under a SHA-256 checksum: it is loaded without running any code from it, and a "
    "damaged file is refused. Models saved by tskernels 0.1 are pickle files, which run code "
    "when loaded: they load only with --trust-pickle, for files you trust."
)


def _trust_pickle(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trust-pickle",
        action="store_true",
        help="also load a model saved by tskernels 0.1: a pickle file, which runs any code it "
        "holds when loaded (only for files you trust; `fit` again to get the safe format)",
    )


def build_parser() -> Parser:
    parser = Parser(
        prog=PROG,
        description="Fit a novelty detector on normal series, score new series. " + TRUST,
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the package version and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    fit = sub.add_parser(
        "fit",
        help="fit on normal series and save the model",
        description="Fit a novelty detector on normal series and save it. " + TRUST,
    )
    fit.add_argument("data", help="normal series: long .csv, folder of .csv, .npz or .ts")
    fit.add_argument(
        "--model",
        required=True,
        help="where to save the fitted model (data only: loading it runs no code from it)",
    )
    fit.add_argument(
        "--kernel",
        type=_kernel_choice,
        default="default",
        metavar="{default}",
        help="the default recipe, the one choice: ROCKAD's MiniRocket 5-NN with MiniRocket "
        "1-NN (and GAK 1-NN for several channels); 'auto' was retired (default: default)",
    )
    fit.add_argument(
        "--contamination",
        type=float,
        default=None,
        help="share of new normal series that may be flagged (default 0.05); with --window, "
        "the share of steps (default 0.01, as WindowNoveltyDetector's)",
    )
    fit.add_argument(
        "--normal-label",
        help="with a label column: fit on the series with this label only (required when "
        "the data holds several labels)",
    )
    fit.add_argument("--channels", nargs="+", help="channel columns to use, by name (CSV)")
    fit.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    fit.add_argument(
        "--window",
        help="one long recording: score each time step by windows of this many steps, or "
        "'auto' (novelty.windows; score then writes one row per step)",
    )
    fit.add_argument(
        "--force",
        action="store_true",
        help="overwrite the model file if it exists (or appears while the fit runs)",
    )
    _columns(fit)
    _progress(fit)

    score = sub.add_parser(
        "score",
        help="score series with a saved model, write a CSV",
        description="Score series with a model saved by `fit`, write a CSV. " + TRUST,
    )
    score.add_argument("data", help="series to score: long .csv, folder of .csv, .npz or .ts")
    score.add_argument(
        "--model", required=True, help="a model saved by `fit` (loaded without running code)"
    )
    _trust_pickle(score)
    score.add_argument(
        "--out", required=True, help="the CSV to write (one row per series); - for stdout"
    )
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
    score.add_argument(
        "--force",
        action="store_true",
        help="overwrite the output file if it exists (or appears while scoring runs)",
    )
    _columns(score)
    _progress(score)

    info = sub.add_parser(
        "info",
        help="what a saved model was fitted on",
        description="What a saved model was fitted on, its versions and lengths. " + TRUST,
    )
    info.add_argument(
        "--model", required=True, help="a model saved by `fit` (loaded without running code)"
    )
    _trust_pickle(info)
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
                if _windowed(args):  # one long recording (issue 32): novelty.windows._cli
                    from .windows._cli import run as command
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


def _windowed(args) -> bool:
    """``fit --window``, or a model saved by it (score, info)."""
    if args.command == "fit":
        return args.window is not None
    from .windows._cli import is_window_model

    return is_window_model(args.model)


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__


def _show_progress(args) -> bool:
    return sys.stderr.isatty() if args.progress is None else args.progress


def _read(args, channels=None, grid=None):
    """The series of ``args.data``; with ``--on-error skip`` a warning names each series left
    out. ``grid``: the fitted corpus's time grid (scoring reads on it)."""
    import warnings

    from .adapters._io import read_series

    if args.no_label and args.label_col is not None:
        raise CLIError("--no-label and --label-col contradict each other: give one")
    data = read_series(
        args.data,
        id_col=args.id_col,
        time_col=args.time_col,
        label_col=False if args.no_label else args.label_col,
        channels=channels,
        grid=grid,
        irregular=args.irregular,
        on_error=args.on_error,
    )
    for _, why in data.skipped:
        warnings.warn(f"skipped (--on-error skip) {why}", UserWarning, stacklevel=2)
    return data


def _fit(args) -> int:
    from .detector._detector import KernelNoveltyDetector

    if args.contamination is None:  # the series detector's default
        args.contamination = KernelNoveltyDetector().contamination
    if not 0 < args.contamination <= 0.5:
        raise CLIError(f"--contamination must lie in (0, 0.5], got {args.contamination}")
    with Output(args.model, args.force, "model") as model:
        _check_data(args.data)
        data = _read(args, args.channels)
        y = None
        if data.labels is not None:
            labels = sorted(set(data.labels.tolist()))
            if args.normal_label is None and len(labels) > 1:
                shown = ", ".join(labels[:6]) + (", ..." if len(labels) > 6 else "")
                raise CLIError(
                    f"{data.source} holds {len(labels)} labels ({shown}): say which class is "
                    "normal with --normal-label"
                )
            y = data.labels if args.normal_label is not None else None
        elif args.normal_label is not None:
            raise CLIError(f"--normal-label given but {data.source} has no label column")

        from .detector._detector import KernelNoveltyDetector

        det = KernelNoveltyDetector(
            contamination=args.contamination,
            normal_label=args.normal_label,  # the detector keeps the series of that label
            random_state=args.seed,
            verbose=_show_progress(args),
        )
        det.fit(data.X, y)
        det.set_params(verbose=False)
        det.channel_names_ = list(data.channels)
        if data.grid is not None:  # scoring reads new series on this grid
            det.time_grid_ = data.grid.to_dict()
        model.write(det.save)
    n = det.n_corpus_
    print(
        f"fitted on {n} normal series, {det.n_channels_} channel(s) "
        f"({', '.join(data.channels)}) in {det.fit_seconds_:.1f} s; saved {model.path}"
    )
    return 0


def _check_data(path: str) -> None:
    """The data file or folder exists, can be read and has a format ``read_series`` reads:
    checked before a model loads or a fit starts."""
    p = Path(path)
    if p.is_dir():
        try:
            os.listdir(p)
        except OSError as err:
            raise CLIError(f"{p}: cannot read the folder ({err.strerror})") from None
        return
    if not p.exists():
        raise CLIError(f"{p}: no such file or folder")
    if p.suffix.lower() not in (".csv", ".npz", ".ts"):
        raise CLIError(
            f"{p}: unknown format {p.suffix or '(no suffix)'!r}; give a long .csv, a folder of "
            "per-series .csv files, an .npz or a .ts file"
        )
    try:
        with open(p, "rb") as f:
            empty = not f.read(1)
    except OSError as err:
        raise CLIError(f"{p}: cannot read it ({err.strerror})") from None
    if empty:
        raise CLIError(f"{p}: empty file")


def _load(path: str, trust_pickle: bool = False, metadata: bool = False):
    """The detector saved at ``path`` (and, with ``metadata=True``, its file's metadata), read
    once, without running code from the file (a 0.1 pickle only with ``trust_pickle``)."""
    from .detector._detector import KernelNoveltyDetector
    from .detector._persistence import read_model, warn_other_version

    if not Path(path).exists():
        raise CLIError(f"{path}: no such model file")
    det, meta = read_model(path, KernelNoveltyDetector, trust_pickle=trust_pickle)
    warn_other_version(path, meta)
    return (det, meta) if metadata else det


def _score(args) -> int:
    to_stdout = args.out == "-"
    out = None if to_stdout else Output(args.out, args.force, "output file")
    with out or contextlib.nullcontext():
        _check_data(args.data)
        det = _load(args.model, args.trust_pickle)
        names = getattr(det, "channel_names_", None)
        from .adapters._io import SeriesFileError

        try:
            grid = getattr(det, "time_grid_", None)
            data = _read(args, names if _is_csv(args.data) else None, grid)
        except SeriesFileError as err:
            raise CLIError(_one_line(err)) from None
        det.set_params(verbose=_show_progress(args))
        import numpy as np

        # one scoring pass (the detector's warnings included); --explain adds its occlusions
        novelty, p, flagged = det._assess(data.X, fdr=args.fdr)
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

        write_frame(pd.DataFrame(columns), out, sys.stdout)
    rule = f"fdr={args.fdr}" if args.fdr is not None else f"contamination={det.contamination}"
    where = "standard output" if to_stdout else out.path
    print(
        f"scored {len(data)} series: {int(np.sum(flagged))} flagged ({rule}); wrote {where}",
        file=sys.stderr if to_stdout else sys.stdout,
    )
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
        if getattr(data, "starts", None) is not None:  # in the time column's units (issue 31)
            tv = data.time_values(i)
            ok = steps.size and len(tv) == t.size  # one attribution per row of the series
            start.append(_time_text(tv[steps[0]]) if ok else None)
            end.append(_time_text(tv[steps[-1]]) if ok else None)
            continue
        start.append(int(steps[0]) if steps.size else -1)
        end.append(int(steps[-1]) if steps.size else -1)
    return {"top_channel": top, "span_start": start, "span_end": end}


def _time_text(value):
    """A time value as written in scores.csv: a number, or an ISO 8601 date-time (UTC)."""
    import numpy as np

    if isinstance(value, np.datetime64):
        import pandas as pd

        return pd.Timestamp(value).isoformat()
    v = float(value)
    return int(v) if v.is_integer() and abs(v) < 2**53 else v


def _is_csv(path: str) -> bool:
    p = Path(path)
    return p.is_dir() or p.suffix.lower() == ".csv"


def _info(args) -> int:
    det, meta = _load(args.model, args.trust_pickle, metadata=True)  # the file, read once
    from .detector._persistence import _lengths_rule, calibrated_lengths

    names = getattr(det, "channel_names_", None) or [f"channel_{j}" for j in range(det.n_channels_)]
    members = ", ".join(m.spec.label() for m in det.members_)
    lo, hi = calibrated_lengths(det)
    accepted = _lengths_rule(det)
    if accepted == "any":
        accepted = "other lengths are scored, with a warning: their p-values are not calibrated"
    else:
        shown = accepted if isinstance(accepted, int) else f"{accepted[0]} to {accepted[1]}"
        accepted = f"the kernels accept only {shown} steps"
    versions = meta.get("versions")
    print(f"model: {args.model} (format {meta.get('format_version')})")
    print(f"saved by tskernels {meta.get('package_version')} on {meta.get('created')}")
    if versions:
        print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    else:
        print("versions: not recorded (a file of tskernels 0.1)")
    print(f"corpus: {det.n_corpus_} normal series, channels: {', '.join(names)}")
    grid = getattr(det, "time_grid_", None)
    if grid:  # the time grid new series are read on (issue 31)
        from .adapters._io import TimeGrid

        g = TimeGrid.from_dict(grid)
        print(f"time grid: {g.describe()} ({'dates' if g.kind == 'datetime' else 'numbers'})")
    print(f"lengths calibrated: {lo if lo == hi else f'{lo} to {hi}'} steps; {accepted}")
    print(f"members: {members}; contamination {det.contamination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
