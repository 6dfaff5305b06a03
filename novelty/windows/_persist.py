"""Saving and loading a fitted :class:`WindowNoveltyDetector`: data only, no pickle.

The file is numpy's ``.npz`` (a zip of ``.npy`` arrays): the reference features, their start
positions, the calibration scores and the channel standardisation as float64/int64 arrays, and
one ``window_meta`` array holding a JSON text (the parameters, the fitted scalars, the channel
names and ``extra``: what the command line stores, e.g. the time grid). It is read with
``allow_pickle=False``, so loading runs no code from the file.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from pathlib import Path

import numpy as np

FORMAT = "tskernels-window-model/2"
_SCALARS = ("window_", "stride_", "reference_stride_", "detector_", "aggregate_", "n_channels_",
            "n_normal_steps_", "n_folds_", "threshold_", "_from_frame", "fit_seconds_")  # fmt: skip


def is_window_model(path) -> bool:
    """Whether ``path`` is a file written by :func:`save_window_model`."""
    try:
        with zipfile.ZipFile(path) as z:
            return "window_meta.npy" in z.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def save_window_model(det, path, extra: dict | None = None) -> Path:
    """Write ``det`` to ``path`` (atomically: a temporary file, then renamed)."""
    path = Path(path)
    meta = {
        "format": FORMAT,
        "params": det.get_params(),
        "channel_names_": list(det.channel_names_),
        "member_scales_": det.member_scales_,
        "n_members": len(det.references_),
        "member_windows_": [int(w) for w in det._member_windows()],
        "member_scale_": getattr(det, "member_scale_", "iqr"),
        "combine_": getattr(det, "combine_", det.combine),
        "extra": extra or {},
    }
    for k in _SCALARS:
        v = getattr(det, k)
        meta[k] = v.item() if hasattr(v, "item") else v
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            np.savez(
                f,
                window_meta=np.array(json.dumps(meta)),
                mean=det.mean_,
                scale=det.scale_,
                calibration=det.calibration_scores_,
                **{f"ref_F_{i}": r.F for i, r in enumerate(det.references_)},
                **{f"ref_gstart_{i}": r.gstart for i, r in enumerate(det.references_)},
                **_statistics_arrays(det),
                **{f"member_calibration_{i}": c
                   for i, c in enumerate(getattr(det, "member_calibration_", None) or [])},
            )  # fmt: skip
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _statistics_arrays(det) -> dict:
    """The statistics members' standardisation (location and scale of each window statistic,
    fitted on the normal windows), by member index."""
    from ._engine import StatsFeaturizer

    out = {}
    for i, f in enumerate(det._featurizers):
        if isinstance(f, StatsFeaturizer):
            out[f"stats_loc_{i}"], out[f"stats_scale_{i}"] = f.loc, f.scale
    return out


def load_window_model(path, cls):
    """The detector saved at ``path`` and its ``extra`` dict; ValueError for another file, a
    damaged one (a missing entry or parameter) or one with a compressed member, and for
    arrays that :func:`save_window_model` cannot have written: the channel standardisation
    not ``d`` finite means and positive scales, a member's reference not finite float
    features of its featurizer's width with one integer start per row, the calibration
    scores (or a causal member's calibration novelties) not a non-empty finite 1-D float
    array (non-negative where they are novelties), ``member_scales_`` not one finite (median,
    positive scale) pair per member, or ``threshold_`` NaN."""
    if not is_window_model(path):
        raise ValueError(f"{path} is not a window model (saved by WindowNoveltyDetector.save)")
    with zipfile.ZipFile(path) as z:  # np.savez stores: a compressed member could inflate
        packed = [i.filename for i in z.infolist() if i.compress_type != zipfile.ZIP_STORED]
    if packed:
        raise ValueError(
            f"{path}: member {packed[0]} is compressed, which WindowNoveltyDetector.save never "
            "writes (it could inflate far beyond the file): not loaded"
        )
    try:
        return _load(path, cls)
    except (KeyError, TypeError, IndexError, AttributeError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(
            f"window model {path} is damaged or was not written by WindowNoveltyDetector.save "
            f"({type(e).__name__}: {e})".replace("\n", " ")
        ) from e


def _load(path, cls):
    from ._engine import Reference

    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["window_meta"]))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: unknown window-model format {meta.get('format')!r}")
        det = cls(**meta["params"])
        try:  # a file's parameters are checked as the constructor's are at fit
            det._check_params()
        except ValueError as e:
            raise ValueError(f"{path}: not loaded: {e}") from e
        for k in _SCALARS:
            setattr(det, k, meta[k])
        det.channel_names_ = list(meta["channel_names_"])
        det.mean_, det.scale_ = _standardisation(path, z["mean"], z["scale"], det.n_channels_)
        scales = meta["member_scales_"]
        det.member_scales_ = None if scales is None else [tuple(v) for v in scales]
        if scales is not None and not (
            len(scales) == meta["n_members"]
            and all(
                len(v) == 2
                and all(isinstance(a, (int, float)) and math.isfinite(a) for a in v)
                and v[1] > 0
                for v in det.member_scales_
            )
        ):
            raise ValueError(
                f"{path}: not loaded: member_scales_ must be one (finite median, positive "
                f"scale) pair per member ({meta['n_members']}), got {scales!r}"
            )
        det.calibration_scores_ = _novelties(path, z["calibration"], "the calibration scores",
                                             signed=len(scales or []) > 1)  # fmt: skip
        # files written before members had their own windows: every member at window_
        det.member_windows_ = meta.get("member_windows_", [det.window_] * meta["n_members"])
        # files written before the member scale was a choice: the IQR
        det.member_scale_ = meta.get("member_scale_", "iqr")
        # files written before the fitted combination was kept: the parameter's
        det.combine_ = meta.get("combine_", det.combine)
        if det.combine_ not in ("mean", "max"):
            raise ValueError(
                f"{path}: not loaded: combine_ {det.combine_!r} is not 'mean' or 'max'"
            )
        if det.member_scale_ not in ("iqr", "tail", "causal"):
            raise ValueError(
                f"{path}: not loaded: member_scale_ {det.member_scale_!r} is not one the "
                "detector writes ('iqr', 'tail' or 'causal')"
            )
        det.member_calibration_ = None
        if det.member_scale_ == "causal" and det.member_scales_ is not None:
            cals = []
            for i in range(meta["n_members"]):
                what = f"member {i}'s calibration novelties (needed by member_scale='causal')"
                key = f"member_calibration_{i}"
                if key not in z.files:
                    raise ValueError(f"{path}: not loaded: {what} are missing")
                cals.append(_novelties(path, z[key], what, signed=False))
            det.member_calibration_ = cals
        if not isinstance(det.threshold_, (int, float)) or math.isnan(det.threshold_):
            raise ValueError(f"{path}: not loaded: threshold_ {det.threshold_!r} is not a number")
        det.offset_ = -det.threshold_
        det._featurizers = det._make_featurizers()
        det.references_ = [
            _reference(path, i, z[f"ref_F_{i}"], z[f"ref_gstart_{i}"], f, Reference)
            for i, f in enumerate(det._featurizers)
        ]
        if len(det.references_) != meta["n_members"]:
            raise ValueError(
                f"{path}: not loaded: {meta['n_members']} members in the file, detector "
                f"{det.detector_!r} has {len(det.references_)}"
            )
        from ._engine import StatsFeaturizer

        for i, f in enumerate(det._featurizers):
            if isinstance(f, StatsFeaturizer):
                f.loc, f.scale = _standardisation(
                    path, z[f"stats_loc_{i}"], z[f"stats_scale_{i}"], f.dim,
                    f"member {i}'s statistics standardisation",
                )  # fmt: skip
    det._budget = int(det.max_memory or 256 * 2**20)
    return det, meta["extra"]


def _real_1d(a: np.ndarray) -> bool:
    """A non-empty 1-D array of finite floats (the dtype save writes: float64)."""
    return a.dtype.kind == "f" and a.ndim == 1 and len(a) > 0 and bool(np.isfinite(a).all())


def _novelties(path, a: np.ndarray, what: str, signed: bool) -> np.ndarray:
    """``a`` as step novelties: a non-empty finite 1-D float array (non-negative for one
    member, whose novelties are distances; several members' are z-scores)."""
    if not _real_1d(a) or (not signed and (a < 0).any()):
        sign = "" if signed else ", non-negative"
        raise ValueError(
            f"{path}: not loaded: {what} must be a non-empty 1-D array of finite{sign} floats, "
            f"got dtype {a.dtype}, shape {a.shape}"
        )
    return a.astype(np.float64)


def _standardisation(path, mean: np.ndarray, scale: np.ndarray, d: int,
                     what: str = "the channel standardisation"):  # fmt: skip
    """A standardisation (the channels', or a statistics member's): ``d`` finite locations
    and ``d`` finite positive scales, floats."""
    if not (
        mean.shape == scale.shape == (d,)
        and mean.dtype.kind == scale.dtype.kind == "f"
        and np.isfinite(mean).all()
        and np.isfinite(scale).all()
        and (scale > 0).all()
    ):
        raise ValueError(
            f"{path}: not loaded: {what} must be {d} finite locations and {d} finite positive "
            f"scales (floats), got shapes {mean.shape} and {scale.shape}"
        )
    return mean.astype(np.float64), scale.astype(np.float64)


def _reference(path, i: int, F: np.ndarray, gstart: np.ndarray, featurizer, Reference):
    """Member ``i``'s reference: at least one row of finite float features, as many columns
    as its featurizer writes, one integer start per row."""
    cols = featurizer.dim + int(bool(getattr(featurizer, "cid", False)))
    if not (
        F.ndim == 2
        and F.shape[0] > 0
        and F.shape[1] == cols
        and F.dtype.kind == "f"
        and np.isfinite(F).all()
        and gstart.shape == (F.shape[0],)
        and gstart.dtype.kind in "iu"
    ):
        raise ValueError(
            f"{path}: not loaded: member {i}'s reference must be finite float features of "
            f"{cols} columns with one integer start per row, got shapes {F.shape} "
            f"({F.dtype}) and {gstart.shape} ({gstart.dtype})"
        )
    return Reference(F.astype(np.float64), gstart.astype(np.int64))
