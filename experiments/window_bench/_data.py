"""The streams of the window benchmark: NAB files and streams built from UCR/UEA sets.

Every stream is ``Stream(name, normal (T_n, d), test (T, d), labels (T,), window)``:
``normal`` is what a detector is fitted on, ``test`` what it scores, ``labels`` 1 for the
anomalous steps, ``window`` the window given to the peers.

- **NAB** (``../shared/data/nab``): each file with at least one labelled window. Timestamps
  are put on a regular grid of the median step (mean per grid cell, NaN cells interpolated
  linearly); a step is anomalous when it lies in a labelled window of
  ``combined_windows.json``. Normal: the first 15 % of the grid (NAB's probationary period);
  test: the whole file. Peers' window: the dominant period of the normal part
  (:func:`novelty.windows._period.auto_window`).
- **Class streams** (UCR/UEA ``.ts``): the normal class is the class with the most training
  series (ties: the first in sorted order). Normal: its training series laid end to end (at
  most 4,000 steps); test: its test series in a seeded order (at most 6,000 steps), with
  ``max(1, n // 10)`` series of other classes (seeded) inserted between them, never two in a
  row, so that at most ~10 % of the steps are anomalous; steps are labelled by the series they
  come from. Peers' window: the series length, clipped to [16, T_normal / 4].

The sizes were capped for the compute at hand (2 shared cores): NAB files of at most 8,000 grid
steps (the ten Twitter files and TravelTime_387 are left out of the two halves; they are in
the fresh set below), class streams of at most 4,000 normal and 6,000 test steps.

**Split** (fixed before any result was seen): a stream belongs to the tuning half when the
first byte of ``sha256("window-bench-2026:" + name)`` is even, to the confirmation half
otherwise.

**The fresh set** (session 16; fixed before any result on it was seen): the confirmation half
had been looked at three times, so it could no longer judge a new design honestly. The fresh
set is a third group of 24 streams from data the benchmark had never used, built by the same
rules as above, and :func:`half_of` gives them the half ``"fresh"`` (the 58 streams above keep
their halves). The rule that chose it:

- the UEA sets of ``../shared/data/uea`` with equal lengths not used above (``FRESH_UEA_SETS``:
  Libras, StandWalkJump; JapaneseVowels has unequal lengths);
- UCR sets of equal length without missing values that are not a relabelling of a set already
  in the benchmark or of another fresh set (``FRESH_UCR_SETS``, eleven sets);
- every NAB file with a labelled window that the size rule above leaves out (more than
  ``MAX_NAB`` grid steps: the ten Twitter files and TravelTime_387), at full length, built as
  the other NAB files (first 15 % normal, the whole file scored).

All 24 build. Where a set has few test series of the normal class, the one inserted series
makes more than 10 % of the steps anomalous: StandWalkJump (2 normal test series of 2,500
steps, 1/3 anomalous) and ACSF1 (3 of 1,460 steps, 1/4); also Beef and Worms (14.3 %), Fungi
(12.5 %) and Adiac (11.1 %); TravelTime_387 has 11.3 % from NAB's labels. Fungi has one
training series per class, so its normal stretch is a single series of 201 steps.

:func:`stream_names` lists the 58 streams of the tuning and confirmation halves,
:func:`fresh_stream_names` the fresh ones.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
NAB = ROOT.parent / "shared" / "data" / "nab"
UEA = ROOT.parent / "shared" / "data" / "uea"
UCR = ROOT / "data" / "ucr"

#: the class-stream sets, fixed before any result (equal lengths, 24..640 steps)
UEA_SETS = ("BasicMotions", "Epilepsy", "UWaveGestureLibrary", "ERing", "RacketSports",
            "NATOPS", "ArticularyWordRecognition", "AtrialFibrillation")  # fmt: skip
UCR_SETS = ("ECGFiveDays", "GunPointOldVersusYoung", "Plane", "Strawberry", "SwedishLeaf",
            "CricketX", "InsectEPGRegularTrain", "ShapeletSim", "ArrowHead", "BME",
            "SyntheticControl", "Fish", "ItalyPowerDemand", "MoteStrain", "FaceAll",
            "ProximalPhalanxTW")  # fmt: skip
#: the fresh set's class streams (session 16), fixed before any result on them
FRESH_UEA_SETS = ("Libras", "StandWalkJump")
FRESH_UCR_SETS = ("ACSF1", "Adiac", "Beef", "BeetleFly", "Chinatown", "DiatomSizeReduction",
                  "FiftyWords", "Fungi", "MiddlePhalanxOutlineCorrect", "SonyAIBORobotSurface2",
                  "Worms")  # fmt: skip
MAX_NORMAL = 4_000
MAX_TEST = 6_000
MAX_NAB = 8_000
NAB_PROBATION = 0.15


@dataclass
class Stream:
    name: str
    normal: np.ndarray
    test: np.ndarray
    labels: np.ndarray
    window: int

    @property
    def d(self) -> int:
        return self.test.shape[1]


def half_of(name: str) -> str:
    """ "fresh" for a stream of the fresh set, otherwise "tuning" or "confirmation" by the hash
    rule (module docstring)."""
    if _is_fresh(name):
        return "fresh"
    h = hashlib.sha256(f"window-bench-2026:{name}".encode()).digest()
    return "tuning" if h[0] % 2 == 0 else "confirmation"


def _is_fresh(name: str) -> bool:
    kind, _, rest = name.partition("/")
    if kind == "uea":
        return rest in FRESH_UEA_SETS
    if kind == "ucr":
        return rest in FRESH_UCR_SETS
    if kind == "nab" and NAB.exists():
        return bool(_nab_windows().get(f"{rest}.csv")) and _nab_steps(f"{rest}.csv") > MAX_NAB
    return False


@cache
def _nab_windows() -> dict:
    return json.loads((NAB / "combined_windows.json").read_text())


def stream_names() -> list[str]:
    """The 58 streams of the tuning and confirmation halves (those whose data are present)."""
    names = []
    if NAB.exists():
        names += [
            f"nab/{k[:-4]}"
            for k, v in sorted(_nab_windows().items())
            if v and _nab_steps(k) <= MAX_NAB
        ]
    names += [f"uea/{s}" for s in UEA_SETS if (UEA / s).exists()]
    names += [f"ucr/{s}" for s in UCR_SETS if (UCR / s).exists()]
    return names


def fresh_stream_names() -> list[str]:
    """The streams of the fresh set (session 16; module docstring) whose data are present."""
    names = []
    if NAB.exists():
        names += [
            f"nab/{k[:-4]}"
            for k, v in sorted(_nab_windows().items())
            if v and _nab_steps(k) > MAX_NAB
        ]
    names += [f"uea/{s}" for s in FRESH_UEA_SETS if (UEA / s).exists()]
    names += [f"ucr/{s}" for s in FRESH_UCR_SETS if (UCR / s).exists()]
    return names


@cache
def _nab_steps(rel_csv: str) -> int:
    """Steps of a NAB file on its median-step grid (without reading the values)."""
    import pandas as pd

    t = pd.read_csv(NAB / rel_csv, usecols=["timestamp"], parse_dates=["timestamp"])["timestamp"]
    t = t.sort_values().drop_duplicates()
    return int((t.iloc[-1] - t.iloc[0]) / t.diff().median()) + 1


def load_stream(name: str) -> Stream:
    kind, rest = name.split("/", 1)
    if kind == "nab":
        return _nab(rest)
    return _class_stream(name, UEA / rest if kind == "uea" else UCR / rest, rest)


def _nab(rel: str) -> Stream:
    import pandas as pd

    from novelty.windows._period import auto_window

    df = pd.read_csv(NAB / f"{rel}.csv", parse_dates=["timestamp"])
    df = df.sort_values("timestamp").drop_duplicates("timestamp")
    step = df["timestamp"].diff().median()
    s = df.set_index("timestamp")["value"].astype(float)
    grid = s.resample(step, origin="start").mean().interpolate(limit_direction="both")
    x = grid.to_numpy()[:, None]
    labels = np.zeros(len(grid), dtype=np.int8)
    windows = json.loads((NAB / "combined_windows.json").read_text())[f"{rel}.csv"]
    t = grid.index
    for a, b in windows:
        labels[(t >= pd.Timestamp(a)) & (t <= pd.Timestamp(b))] = 1
    n = int(round(NAB_PROBATION * len(x)))
    normal = x[:n]
    sd = normal.std()
    w = auto_window([(normal - normal.mean()) / (sd if sd > 0 else 1.0)])
    return Stream(f"nab/{rel}", normal, x, labels, w)


def _load_ts(path: Path):
    from aeon.datasets import load_from_ts_file

    X, y = load_from_ts_file(str(path))
    X = np.asarray(X, dtype=np.float64).transpose(0, 2, 1)  # (n, T, d)
    return X, np.asarray(y).astype(str)


def _class_stream(name: str, folder: Path, set_name: str) -> Stream:
    Xtr, ytr = _load_ts(folder / f"{set_name}_TRAIN.ts")
    Xte, yte = _load_ts(folder / f"{set_name}_TEST.ts")
    classes, counts = np.unique(ytr, return_counts=True)
    c = classes[np.argmax(counts)]  # np.unique sorts: ties go to the first
    seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")
    rng = np.random.default_rng(seed)
    L = Xtr.shape[1]
    tr = Xtr[ytr == c][: max(1, MAX_NORMAL // L)]  # at least one series
    normal = np.concatenate(list(tr))
    norm_idx = rng.permutation(np.flatnonzero(yte == c))
    n_norm = min(len(norm_idx), max(1, int(0.9 * MAX_TEST) // L))
    norm_idx = norm_idx[:n_norm]
    n_anom = max(1, n_norm // 10)
    anom_idx = rng.choice(np.flatnonzero(yte != c), size=n_anom, replace=False)
    # anomalies go into distinct gaps between normal series (never first, never two in a row)
    gaps = np.sort(rng.choice(np.arange(1, n_norm), size=min(n_anom, n_norm - 1), replace=False))
    parts, labels = [], []
    j = 0
    for i in range(n_norm):
        if j < len(gaps) and gaps[j] == i:
            parts.append(Xte[anom_idx[j]])
            labels.append(np.ones(L, dtype=np.int8))
            j += 1
        parts.append(Xte[norm_idx[i]])
        labels.append(np.zeros(L, dtype=np.int8))
    test = np.concatenate(parts)
    w = int(np.clip(L, 16, len(normal) // 4))
    return Stream(name, normal, test, np.concatenate(labels), w)
