"""What the design rounds of the window detector share (issue 32; :mod:`._fourth`,
:mod:`._fifth`, :mod:`._sixth`): a stream's base window as the rounds clip their members', and
the candidate table with the adoption rule, on the TUNING half.

The table: per candidate its mean AP over the tuning streams, its mean rank by AP among itself
and the seven peers of :data:`._explore.RANK_PEERS` (1 = best of 8), the best peer's mean rank
beside it, the streams won and lost against Sub-kNN and against the offline ladder, and the
rule: a candidate passes only if its mean AP >= the ladder's + ``margin``, it beats the ladder
on at least ``wins`` streams and its mean rank is not worse than the ladder's. Then one row per
stream.
"""

from __future__ import annotations

import numpy as np


def base_window(normal: np.ndarray) -> int:
    """The automatic window of a normal stretch (T, d), standardised per channel as
    :func:`._explore._windows` takes it."""
    from ._explore import _windows

    sd = normal.std(0)
    w0, _ = _windows([(normal - normal.mean(0)) / np.where(sd > 0, sd, 1)])
    return w0


def member_window(normal: np.ndarray, multiple: float, w0: int) -> int:
    """``multiple`` x the base window, clipped to [16, T_normal / 4]."""
    return int(np.clip(round(float(multiple) * w0), 16, len(normal) // 4))


def cache_members(members, score, log=print) -> None:
    """Fill the missing one-member cells ``kind:multiple[:segments]`` of the TUNING half
    (resumable): ``score(stream, kind, window, segments)`` gives (test step novelty,
    held-out calibration step novelties); the window is :func:`member_window`."""
    import time

    from ._data import half_of, load_stream, stream_names
    from ._explore import OUT, _file

    OUT.mkdir(parents=True, exist_ok=True)
    for name in [n for n in stream_names() if half_of(n) == "tuning"]:
        assert half_of(name) == "tuning", name  # never a confirmation stream
        s = None
        for c in members:
            f = _file(OUT, name, c, "mean")
            if f.exists():
                continue
            kind, mult, *seg = c.split(":")
            if s is None:
                s = load_stream(name)
                w0 = base_window(s.normal)
            w = member_window(s.normal, mult, w0)
            t0 = time.process_time()
            nov, cal = score(s, kind, w, seg[0] if seg else None)
            np.savez(f, nov=nov, cal=cal, labels=s.labels, w=w, cpu=time.process_time() - t0)
            log(f"{name} {c} window {w} {time.process_time() - t0:.1f}s")


def candidate_table(names, labels, ladder_scores, candidates, rule, log=print,
                    not_eligible=()) -> None:  # fmt: skip
    """Log the candidate table (module docstring). ``ladder_scores(n)`` and each
    ``candidates[name](n)`` give a stream's step novelty; ``rule`` is ``(margin, wins)``."""
    from scipy.stats import rankdata
    from sklearn.metrics import average_precision_score as ap

    from ._third import _peer_ap

    peers = _peer_ap()
    P = np.array([peers[n] for n in names])
    lad = np.array([ap(labels[n], ladder_scores(n)) for n in names])

    def summary(aps):
        R = np.vstack([rankdata(-np.r_[a, p]) for a, p in zip(aps, P)]).mean(0)
        return aps.mean(), R[0], R[1:].min()

    lad_ap, lad_rank, lad_peer = summary(lad)
    log(f"{len(names)} tuning streams; peers' mean AP {np.round(P.mean(0), 3)} (Sub-kNN first)")
    log("| candidate | mean AP | rank | best peer's rank | W/L vs Sub-kNN | W/L vs ladder | "
        "rule |")  # fmt: skip
    log("|---|---|---|---|---|---|---|")
    log(f"| ladder (offline) | {lad_ap:.3f} | {lad_rank:.2f} | {lad_peer:.2f} | "
        f"{(lad > P[:, 0]).sum()}/{(lad < P[:, 0]).sum()} | - | - |")  # fmt: skip
    per, passed = {}, []
    for name, score in candidates.items():
        aps = np.array([ap(labels[n], score(n)) for n in names])
        per[name] = aps
        m, r, b = summary(aps)
        wins = int((aps > lad).sum())
        ok = m >= lad_ap + rule[0] and wins >= rule[1] and r <= lad_rank
        ok = ok and name not in not_eligible
        if ok:
            passed.append((m, name))
        log(f"| {name} | {m:.3f} | {r:.2f} | {b:.2f} | {(aps > P[:, 0]).sum()}/"
            f"{(aps < P[:, 0]).sum()} | {wins}/{(aps < lad).sum()} | "
            f"{'PASS' if ok else 'fail'} |")  # fmt: skip
    log("")
    log(f"recommended: {max(passed)[1] if passed else 'none'}")
    log("")
    cols = list(candidates)
    log("| stream | ladder | sub-knn | " + " | ".join(cols) + " |")
    log("|---" * (len(cols) + 3) + "|")
    for i, n in enumerate(names):
        log(f"| {n} | {lad[i]:.3f} | {P[i, 0]:.3f} | "
            + " | ".join(f"{per[c][i]:.3f}" for c in cols) + " |")  # fmt: skip
