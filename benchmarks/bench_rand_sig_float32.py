"""The paper preset's randomized signature in float32 against float64 (issue 34, item 1,
session 13): CPU seconds and what changes in the results.

Three variants of the ``rand_sig_tanh`` grid's kernels, swapped into
``experiments._grids.BUILDERS`` for the run (the protocol's own code path: ``run_cv_cell``,
``select``, ``run_test_cell`` with ``--share fold``, 4 x 10 folds):

- ``f64``: the kernel in float64 (the protocol as it was);
- ``f32``: the kernel in float32 (``dtype=torch.float32``): inputs, random map, Euler buffers,
  ``tanh`` and the Gram's product in float32; the Gram cast to float64 by ``fold_grams``;
- ``f32g64``: the features in float32 as above, the Gram and diagonal formed in float64 from
  them (``Z.double() @ Z.double().T``);
- ``f64ref``: float64 solved by the step-by-step reference ``_euler`` instead of the CPU path
  ``_euler_cpu`` (the same products summed in another order): how far float64 itself moves
  under a rounding-level change (the ODE is sensitive at the large variances).

``--timing``: in one process, the variants alternately (order rotated each round), per data set
(its first class, time channel on, the middle variance and seed at each feature count):
(a) the feature solve alone (every fold's corpus and validation series in one solve, as
``_protocol._solve_ahead`` does), (b) whole CV cells (``run_cv_cell``); CPU seconds
(``time.process_time``, one thread).

``--accuracy``: every point of the paper grid (5 feature counts x 8 variances x 5 seeds) x both
time channels, per data set and class: features and normalised Grams of the first fold
(relative differences against float64), every CV cell's ROC/PR arrays, the CV selections over
the whole grid (and, for a larger sample of CV choices, the (features, variance) selection at
each (seed, time channel)), and the test cells' ROC-AUCs.

    python benchmarks/bench_rand_sig_float32.py --timing --datasets BasicMotions Epilepsy \\
        ArticularyWordRecognition --rounds 3
    python benchmarks/bench_rand_sig_float32.py --accuracy --datasets BasicMotions \\
        --classes 1 --out /tmp/acc.json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import time
from pathlib import Path

import numpy as np
import torch

UEA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "uea"
SCORERS = ["conformance", "mahalanobis"]
VARIANTS = ("f64", "f32", "f32g64", "f64ref")


def _config() -> dict:
    from experiments._runner import cell_config

    return cell_config("paper", share="fold")


def _gram64_class():
    from tskernels import RandomizedSignatureKernel
    from tskernels._base import mirror_upper_

    class Float32FeaturesFloat64Gram(RandomizedSignatureKernel):
        """Features in the kernel's dtype (float32), Gram and diagonal in float64."""

        def _assemble(self, X, Y):
            ZX = self._features(X).double()
            if Y is None:
                return mirror_upper_(torch.mm(ZX, ZX.T).div_(int(self.n_features)))
            return torch.mm(ZX, self._features(Y).double().T).div_(int(self.n_features))

        def _gram_block(self, X, Y, symmetric):
            return self._features(X).double() @ self._features(Y).double().T / self.n_features

        def _diag(self, X):
            Z = self._features(X).double()
            return (Z * Z).sum(1) / int(self.n_features)

    return Float32FeaturesFloat64Gram


def _reference_class():
    from tskernels import RandomizedSignatureKernel

    class ReferenceEuler(RandomizedSignatureKernel):
        """float64 by the step-by-step scheme (``_euler``) on the CPU too."""

        def _euler_cpu(self, X, A, b, z0):
            return self._euler(X, A, b, z0)

    return ReferenceEuler


def _builder(variant: str):
    g64 = {"f32g64": _gram64_class, "f64ref": _reference_class}.get(variant, lambda: None)()

    def build(g, d, T):
        from tskernels import make_kernel

        dtype = torch.float64 if variant.startswith("f64") else torch.float32
        k = make_kernel("rand_sig_tanh", n_features=g["features"], scale=g["variance"],
                        seed=g["seed"], dtype=dtype)  # fmt: skip
        if g64 is not None:
            k = g64(**k.get_params())
        return k

    return build


def use(variant: str) -> None:
    """Build the ``rand_sig_tanh`` grid's kernels as ``variant`` from now on."""
    from experiments import _grids

    _grids.BUILDERS["rand_sig_tanh"] = _builder(variant)


def _folds(data, cls, config):
    from experiments._protocol import cv_splits

    y = data.y_train
    out = []
    for tr, va in cv_splits(y, config["folds"], config["repeats"], config["seed"]):
        corpus = tr[y[tr] == cls]
        labels = y[va] == cls
        if len(corpus) < 2 or labels.all() or not labels.any():
            continue
        out.append((corpus, va, labels))
    return out


def _fold_batches(data, cls, tc, config):
    from experiments._protocol import _fold_inputs

    return [
        _fold_inputs(data, cls, corpus, va, tc, config)
        for corpus, va, _ in _folds(data, cls, config)
    ]


def _solve(point, inputs, config):
    """CPU s of the one solve of every fold's C and V (as ``_solve_ahead``), and the dtype."""
    from experiments._grids import build_kernel
    from experiments._protocol import _shape, _threads

    d, T = _shape(inputs[0][0])
    kernel = build_kernel("rand_sig_tanh", point, d, T)
    with _threads(1):
        batches = [kernel._check_input(X, "X") for pair in inputs for X in pair]
        c0 = time.process_time()
        Z = kernel._features_of_batches(batches)
        cpu = time.process_time() - c0
    return cpu, Z[0].dtype


def _point(features, grid):
    from experiments._grids import kernel_grid_points

    mine = [p for p in kernel_grid_points(grid) if p["features"] == features]
    return mine[len(mine) // 2]


def timing(args) -> None:
    from experiments._grids import PRESETS
    from experiments._protocol import load_dataset, run_cv_cell

    config = _config()
    grid = PRESETS["paper"].grids["rand_sig_tanh"]
    variants = list(args.variants)
    print(f"uptime: {os.popen('uptime').read().strip()}", flush=True)
    totals = {v: {"solve": {}, "cell": {}} for v in variants}
    for name in args.datasets:
        data = load_dataset(name, args.data_dir)
        cls = data.classes[0]
        other = data.classes[1]
        inputs = _fold_batches(data, cls, True, config)
        for v in variants:  # warm-up: imports, compilation, the fold memo of another class
            use(v)
            warm = dict(config, folds=2, repeats=1)
            cell = {"cls": other, "kernel": "rand_sig_tanh", "point": _point(10, grid),
                    "levels": None, "time_channel": True, "scorers": SCORERS}  # fmt: skip
            run_cv_cell(cell, data, warm)
        for r in range(args.rounds):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for v in order:
                use(v)
                for F in args.solve_features:
                    cpu, dt = _solve(_point(F, grid), inputs, config)
                    totals[v]["solve"].setdefault((name, F), []).append(cpu)
                    print(f"{name} {v} solve F={F}: {cpu:.3f} CPU s ({dt})", flush=True)
                for F in args.cell_features:
                    cell = {"cls": cls, "kernel": "rand_sig_tanh", "point": _point(F, grid),
                            "levels": None, "time_channel": True, "scorers": SCORERS}  # fmt: skip
                    c0 = time.process_time()
                    rows = run_cv_cell(cell, data, config)
                    cpu = time.process_time() - c0
                    err = {r_["error"] for r_ in rows if r_["error"]}
                    totals[v]["cell"].setdefault((name, F), []).append(cpu)
                    print(f"{name} {v} cell F={F}: {cpu:.3f} CPU s{' ' + str(err) if err else ''}; "
                          f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    print(f"uptime: {os.popen('uptime').read().strip()}")
    base = variants[0]
    for what in ("solve", "cell"):
        print(f"\n{what}: mean CPU s over rounds; ratio to {base}")
        keys = list(totals[base][what])
        for key in keys:
            m = {v: float(np.mean(totals[v][what][key])) for v in variants}
            print(f"| {key[0]} | {key[1]} | "
                  + " | ".join(f"{v} {m[v]:.3f} ({m[v] / m[base]:.3f})" for v in variants)
                  + " |")  # fmt: skip
        for v in variants:
            s = sum(float(np.mean(totals[v][what][k])) for k in keys)
            b = sum(float(np.mean(totals[base][what][k])) for k in keys)
            print(f"sum {what} {v}: {s:.3f} CPU s, ratio {s / b:.3f}")
    with open(args.out or "/tmp/rs32_timing.pkl", "wb") as f:
        pickle.dump(totals, f)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max over rows of max |a - b| / max |b| (b the float64 reference)."""
    a, b = a.double(), b.double()
    scale = b.abs().amax(dim=-1).clamp_min(1e-300)
    return float(((a - b).abs().amax(dim=-1) / scale).max())


def accuracy(args) -> None:
    from experiments._grids import PRESETS, build_kernel, kernel_grid_points
    from experiments._protocol import (
        _shape,
        fold_grams,
        load_dataset,
        params_key,
        run_cv_cell,
        run_test_cell,
        select,
    )

    config = _config()
    grid = PRESETS["paper"].grids["rand_sig_tanh"]
    points = kernel_grid_points(grid)[:: args.stride]
    variants = list(args.variants)
    print(f"uptime: {os.popen('uptime').read().strip()}", flush=True)
    out = []
    for name in args.datasets:
        data = load_dataset(name, args.data_dir)
        for cls in data.classes[args.first_class : args.first_class + args.classes]:
            rec = {"dataset": name, "cls": cls, "cv": {}, "feat": {}, "gram": {}, "test": {},
                   "sel": {}, "cpu": {}}  # fmt: skip
            first = {tc: _fold_batches(data, cls, tc, config)[0] for tc in (False, True)}
            for v in variants:
                use(v)
                c0 = time.process_time()
                cv = {}
                for tc in (False, True):
                    C, V = first[tc]
                    d, T = _shape(C)
                    for p in points:
                        kernel = build_kernel("rand_sig_tanh", p, d, T)
                        Z = kernel.features(C)
                        assert Z.dtype == (torch.float64 if v.startswith("f64") else torch.float32)
                        try:
                            Kcc, Kvc, _ = fold_grams(kernel, C, V)
                            grams = (Kcc[0], Kvc[0])
                        except Exception as exc:  # noqa: BLE001 - recorded
                            grams = repr(exc)
                        rec["feat"][(v, params_key(p), tc)] = Z
                        rec["gram"][(v, params_key(p), tc)] = grams
                        cell = {"cls": cls, "kernel": "rand_sig_tanh", "point": p,
                                "levels": None, "time_channel": tc, "scorers": SCORERS}  # fmt: skip
                        for row in run_cv_cell(cell, data, config):
                            cv[(row["scorer"], row["params"], tc)] = row
                rec["cv"][v] = {k: {"axis": json.loads(r["axis"]), "roc": r["roc"],
                                    "pr": r["pr"], "error": r["error"]}
                                for k, r in cv.items()}  # fmt: skip
                cands = [(params_key(p), tc) for p in points for tc in (False, True)]
                sels = {}
                for s in SCORERS:
                    rows = {(k[1], k[2]): r for k, r in rec["cv"][v].items() if k[0] == s}
                    sels[s] = select(rows, cands)
                    for seed in grid.axes["seed"]:
                        for tc in (False, True):
                            sub = [c for c in cands if json.loads(c[0])["seed"] == seed
                                   and c[1] == tc]  # fmt: skip
                            rec["sel"][(v, s, seed, tc)] = select(rows, sub)
                rec["sel"][(v, "all")] = sels
                tcell = {"cls": cls, "kernel": "rand_sig_tanh", "grid": "paper",
                         "levels": None, "selections": sels}  # fmt: skip
                rec["test"][v] = {r["scorer"]: r for r in run_test_cell(tcell, data, config)}
                rec["cpu"][v] = time.process_time() - c0
                print(f"{name} class {cls} {v}: {rec['cpu'][v]:.1f} CPU s; selections "
                      + "; ".join(f"{s}: {sels[s].get('params')} tc={sels[s].get('time_channel')}"
                                  f" a={sels[s].get('alpha')} r={sels[s].get('rank')} test "
                                  f"{rec['test'][v][s].get('roc_auc')}" for s in SCORERS)
                      + f"; load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
            out.append(rec)
            with open(args.out, "wb") as f:
                pickle.dump(out, f)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    summarise(out, variants)


def summarise(out, variants) -> None:
    base = variants[0]
    for v in variants[1:]:
        feat, gram, roc, obj = [], [], [], []
        changed_all = changed_sub = changed_full = n_all = n_sub = 0
        test = []
        for rec in out:
            for key, Z in rec["feat"].items():
                if key[0] != v:
                    continue
                Zb = rec["feat"][(base, *key[1:])]
                feat.append(_rel(Z, Zb))
                g, gb = rec["gram"][key], rec["gram"][(base, *key[1:])]
                if isinstance(g, tuple) and isinstance(gb, tuple):
                    gram.append(max(float((a - b).abs().max()) for a, b in zip(g, gb)))
            for key, r in rec["cv"][v].items():
                rb = rec["cv"][base][key]
                if r["roc"] is None or rb["roc"] is None:
                    continue
                roc.append(float(np.abs(r["roc"] - rb["roc"]).max()))
                obj.append(abs(float((r["roc"] + r["pr"]).max() - (rb["roc"] + rb["pr"]).max())))
            for key, sel in rec["sel"].items():
                if key[0] != v:
                    continue
                sb = rec["sel"][(base, *key[1:])]
                pairs = sel.items() if key[1] == "all" else [(None, sel)]
                for s, one in pairs:
                    ob = sb[s] if key[1] == "all" else sb
                    same = (one.get("params"), one.get("time_channel")) == (
                        ob.get("params"), ob.get("time_channel"))  # fmt: skip
                    full = same and (one.get("alpha"), one.get("rank")) == (
                        ob.get("alpha"), ob.get("rank"))  # fmt: skip
                    if key[1] == "all":
                        n_all += 1
                        changed_all += not same
                        changed_full += not full
                    else:
                        n_sub += 1
                        changed_sub += not same
            for s, r in rec["test"][v].items():
                rb = rec["test"][base][s]
                test.append((rec["dataset"], rec["cls"], s, rb.get("roc_auc"), r.get("roc_auc")))

        def dist(x):
            x = np.asarray(x)
            return f"max {x.max():.3g}, 99th pct {np.percentile(x, 99):.3g}, median {np.median(x):.3g} (n {x.size})"  # noqa: E501

        print(f"\n== {v} against {base} ==")
        print(f"features, relative: {dist(feat)}")
        print(f"normalised Grams (first fold), abs: {dist(gram)}")
        print(f"CV cells' ROC arrays, abs: {dist(roc)}")
        print(f"CV cells' objective (max ROC + PR), abs: {dist(obj)}")
        print(f"selections over the whole grid changed: {changed_all} of {n_all} (kernel point "
              f"and time channel); {changed_full} of {n_all} with alpha and rank")  # fmt: skip
        print(f"(features, variance) selections per (seed, tc) changed: {changed_sub} of {n_sub}")
        for t in test:
            d = None if t[3] is None or t[4] is None else t[4] - t[3]
            print(f"test {t[0]} class {t[1]} {t[2]}: {t[3]} -> {t[4]} (diff {d})")
        print("| variance | features rel. diff, median / max | Gram abs diff, max | CV cells "
              "with a changed ROC entry | CV ROC abs diff, max |")  # fmt: skip
        print("|---|---|---|---|---|")
        for var in sorted({json.loads(k[1])["variance"] for rec in out for k in rec["feat"]}):
            f_, g_, n_, c_, r_ = [], [], 0, 0, [0.0]
            for rec in out:
                for key, Z in rec["feat"].items():
                    if key[0] != v or json.loads(key[1])["variance"] != var:
                        continue
                    f_.append(_rel(Z, rec["feat"][(base, *key[1:])]))
                    g, gb = rec["gram"][key], rec["gram"][(base, *key[1:])]
                    if isinstance(g, tuple) and isinstance(gb, tuple):
                        g_.append(max(float((a - b).abs().max()) for a, b in zip(g, gb)))
                for key, r in rec["cv"][v].items():
                    rb = rec["cv"][base][key]
                    if json.loads(key[1])["variance"] != var or r["roc"] is None:
                        continue
                    if rb["roc"] is None:
                        continue
                    n_ += 1
                    d = np.abs(r["roc"] - rb["roc"]).max()
                    c_ += bool(d > 0)
                    r_.append(float(d))
            gmax = max(g_) if g_ else float("nan")
            print(f"| {var:.3g} | {np.median(f_):.2g} / {max(f_):.2g} | {gmax:.2g} | "
                  f"{c_} of {n_} | {max(r_):.3g} |")  # fmt: skip
        cpu = {w: sum(rec["cpu"][w] for rec in out) for w in variants}
        print(f"CPU s of the runs (incl. feature/Gram checks): {cpu}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--timing", action="store_true")
    p.add_argument("--accuracy", action="store_true")
    p.add_argument("--summarise", default=None, help="a pickle of --accuracy")
    p.add_argument("--datasets", nargs="+", default=["BasicMotions"])
    p.add_argument("--data-dir", default=str(UEA))
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--solve-features", type=int, nargs="*", default=[50, 200])
    p.add_argument("--cell-features", type=int, nargs="*", default=[10, 25, 50, 100, 200])
    p.add_argument("--classes", type=int, default=1, help="the first N classes of each set")
    p.add_argument("--first-class", type=int, default=0, help="the index of the first class")
    p.add_argument(
        "--stride", type=int, default=1, help="every STRIDE-th grid point (a smoke test)"
    )
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if args.summarise:
        with open(args.summarise, "rb") as f:
            return summarise(pickle.load(f), list(args.variants))
    if args.timing:
        timing(args)
    if args.accuracy:
        args.out = args.out or "/tmp/rs32_accuracy.pkl"
        accuracy(args)


if __name__ == "__main__":
    main()
