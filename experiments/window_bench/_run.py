"""Run and report the window benchmark (the tuning, confirmation and fresh halves), resumably.

Each (stream, method) cell writes ``<out>/<stream>/<method>.npz`` (the step novelty scores as
float32, the seconds, or the error) once it is done, so a run that stops resumes where it was.
The metrics are computed from those files by :func:`report`: average precision (AP) and
ROC-AUC of the anomalous steps (scikit-learn), and VUS-PR (aeon's ``range_pr_vus_score``,
``max_buffer_size=100``, cached beside the scores as ``<method>.vus``; it costs seconds per
cell, so it is computed only with ``vus=True``).

Ranks: per stream, methods ranked by AP (1 = best, ties averaged), over the methods that apply
to every stream of the half; the critical-difference diagram is aeon's
(``plot_critical_difference``, Wilcoxon signed-rank with Holm's correction, alpha 0.05).
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

import numpy as np

from ._data import fresh_stream_names, half_of, load_stream, stream_names
from ._methods import _applies, methods


def _names(half: str) -> list[str]:
    """The streams of ``half``: "tuning", "confirmation" or "fresh" (``_data``'s docstring)."""
    if half == "fresh":
        return fresh_stream_names()
    if half not in ("tuning", "confirmation"):
        raise ValueError(f"half must be 'tuning', 'confirmation' or 'fresh', got {half!r}")
    return [n for n in stream_names() if half_of(n) == half]


def _safe(name: str) -> str:
    return name.replace("/", "__")


def run(half: str, which: list[str], out: Path, log=print, only: list[str] | None = None):
    """Fill the missing cells of ``half`` for the methods ``which``."""
    table = methods()
    names = _names(half)
    if only:
        names = [n for n in names if any(o in n for o in only)]
    for name in names:
        folder = out / _safe(name)
        todo = [m for m in which if not (folder / f"{m}.npz").exists()]
        if not todo:
            continue
        s = load_stream(name)
        folder.mkdir(parents=True, exist_ok=True)
        for m in todo:
            if not _applies(m, s):
                np.savez(folder / f"{m}.npz", skipped=True)
                continue
            t0 = time.perf_counter()
            try:
                with np.errstate(all="ignore"):
                    sc = np.asarray(table[m](s), dtype=np.float64)
                if sc.shape != (len(s.test),):
                    raise ValueError(f"{m} returned shape {sc.shape}, expected ({len(s.test)},)")
                sc = np.where(
                    np.isfinite(sc), sc, np.nanmax(np.where(np.isfinite(sc), sc, -np.inf))
                )
                dt = time.perf_counter() - t0
                np.savez(folder / f"{m}.npz", scores=sc.astype(np.float32), seconds=dt,
                         labels=s.labels)  # fmt: skip
                log(f"{name} {m} {dt:.1f}s")
            except Exception as err:  # a failing peer is a recorded cell, not a crash
                np.savez(folder / f"{m}.npz", error=f"{type(err).__name__}: {err}")
                log(f"{name} {m} FAILED {err}\n{traceback.format_exc(limit=2)}")


def cells(half: str, which: list[str], out: Path, vus: bool = False) -> dict:
    """{(stream, method): {"ap", "roc", "vus", "seconds"}} of the finished cells."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    res = {}
    for name in _names(half):
        for m in which:
            f = out / _safe(name) / f"{m}.npz"
            if not f.exists():
                continue
            z = np.load(f)
            if "scores" not in z:
                res[(name, m)] = {"skipped": "skipped" in z, "error": str(z.get("error", ""))}
                continue
            y, sc = z["labels"].astype(int), z["scores"].astype(np.float64)
            cell = {
                "ap": float(average_precision_score(y, sc)),
                "roc": float(roc_auc_score(y, sc)),
                "seconds": float(z["seconds"]),
            }
            vf = f.with_suffix(".vus")
            if vf.exists():
                cell["vus"] = float(vf.read_text())
            elif vus:
                from aeon.benchmarking.metrics.anomaly_detection import range_pr_vus_score

                v = float(range_pr_vus_score(y, sc, max_buffer_size=100))
                vf.write_text(repr(v))
                cell["vus"] = v
            res[(name, m)] = cell
    return res


def census(half: str, which: list[str], out: Path) -> str:
    """Per method: finished, skipped, failed and missing cells, the cells whose scores are not
    all finite or are constant, and the median and largest seconds; no accuracy (the fresh set
    is judged blind)."""
    names = _names(half)
    lines = [f"## {half}: {len(names)} streams (cells, no accuracy)", "",
             "| method | done | skipped | failed | missing | non-finite | constant | median s |"
             " max s |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    errors = []
    for m in which:
        done = skipped = failed = missing = bad = flat = 0
        secs = []
        for n in names:
            f = out / _safe(n) / f"{m}.npz"
            if not f.exists():
                missing += 1
                continue
            z = np.load(f)
            if "scores" in z:
                done += 1
                sc = z["scores"]
                bad += int(not np.all(np.isfinite(sc)))
                flat += int(np.ptp(sc) == 0)
                secs.append(float(z["seconds"]))
            elif "skipped" in z:
                skipped += 1
            else:
                failed += 1
                errors.append(f"{n} {m}: {z['error']}")
        med = f"{np.median(secs):.1f}" if secs else "-"
        top = f"{max(secs):.1f}" if secs else "-"
        lines.append(f"| {m} | {done} | {skipped} | {failed} | {missing} | {bad} | {flat} | "
                     f"{med} | {top} |")  # fmt: skip
    return "\n".join(lines + ([""] + errors if errors else []))


def _ranks(M: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return np.vstack([rankdata(-row) for row in M])


def report(half: str, which: list[str], out: Path, cd: Path | None = None, vus=False) -> str:
    res = cells(half, which, out, vus=vus)
    names = _names(half)
    ok = lambda n, m: "ap" in res.get((n, m), {})  # noqa: E731
    everywhere = [m for m in which if all(ok(n, m) for n in names)]
    lines = [f"## {half} half: {len(names)} streams", ""]
    # summary
    M = np.array([[res[(n, m)]["ap"] for m in everywhere] for n in names]) if everywhere else None
    ranks = _ranks(M).mean(axis=0) if M is not None and len(everywhere) > 1 else None
    lines += ["| method | streams | mean AP | mean VUS-PR | mean ROC-AUC | mean rank (AP) | "
              "median s |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for m in which:
        got = [res[(n, m)] for n in names if ok(n, m)]
        if not got:
            continue
        vv = [c["vus"] for c in got if "vus" in c]
        rk = f"{ranks[everywhere.index(m)]:.2f}" if ranks is not None and m in everywhere else "-"
        lines.append(
            f"| {m} | {len(got)} | {np.mean([c['ap'] for c in got]):.3f} | "
            f"{np.mean(vv):.3f}{'' if len(vv) == len(got) else f' ({len(vv)})'} | "
            f"{np.mean([c['roc'] for c in got]):.3f} | {rk} | "
            f"{np.median([c['seconds'] for c in got]):.2f} |"
            if vv
            else f"| {m} | {len(got)} | {np.mean([c['ap'] for c in got]):.3f} | - | "
            f"{np.mean([c['roc'] for c in got]):.3f} | {rk} | "
            f"{np.median([c['seconds'] for c in got]):.2f} |"
        )
    lines += ["", f"Ranks over the {len(everywhere)} methods that apply to all {len(names)} "
              "streams (aeon-stomp and aeon-merlin are univariate, MERLIN on <= 6,000 steps).",
              "", "Per stream, AP:", "",
              "| stream | " + " | ".join(which) + " |",
              "|---" * (len(which) + 1) + "|"]  # fmt: skip
    for n in names:
        row = []
        vals = [res.get((n, m), {}).get("ap") for m in which]
        best = max((v for v in vals if v is not None), default=None)
        for v, m in zip(vals, which):
            c = res.get((n, m), {})
            if v is None:
                row.append("n/a" if c.get("skipped") else ("fail" if c.get("error") else "…"))
            else:
                row.append(f"**{v:.3f}**" if v == best else f"{v:.3f}")
        lines.append(f"| {n} | " + " | ".join(row) + " |")
    if cd is not None and M is not None and len(everywhere) > 1 and len(names) >= 5:
        import warnings

        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from aeon.visualisation import plot_critical_difference

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fig, _ = plot_critical_difference(M, everywhere, alpha=0.05, test="wilcoxon",
                                              correction="holm", width=7)  # fmt: skip
        fig.suptitle(f"AP of anomalous steps, {half} half: {len(names)} streams", fontsize=9,
                     y=1.02)  # fmt: skip
        Path(cd).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(cd, dpi=120, bbox_inches="tight")
        plt.close(fig)
        lines += ["", f"Critical-difference diagram: {cd}"]
    return "\n".join(lines)
