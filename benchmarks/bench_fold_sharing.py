"""Before/after CPU seconds of per-fold CV cells (issue 34, item 1, fourth pass).

Runs each case in a fresh subprocess for each code tree (an export of a commit each, put first
on the subprocess's ``PYTHONPATH``), the trees alternately, ``--rounds`` times, and prints the
CPU seconds (``time.process_time``, one thread) of each case's cells, with the load average,
and a NATOPS flat_rbf reference cell in every subprocess (how much the load inflates CPU
seconds). A case is the cells a run computes one after another in one process, after a
warm-up cell of another class (numba compilation, imports):

- ``rs:DATASET:F``: one randomized-signature cell (F features, the middle variance, seed 2);
- ``o1rbf:DATASET``: the order-1 RBF signature's cells of two bandwidths (e^-1, 1), both time
  channels, all five amplitudes, in the plan's order (amplitude by amplitude);
- ``o1lin:DATASET``: one order-1 linear signature cell (scale 1); ``o1lin5:DATASET``: its
  cells of all five scales, both time channels, in the plan's order.

    git archive <before> | (mkdir -p /tmp/before && tar -x -C /tmp/before)
    python benchmarks/bench_fold_sharing.py --root before=/tmp/before --root after=. \\
        --case rs:NATOPS:200 o1rbf:NATOPS --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

UEA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "uea"
E = 2.718281828459045


def _config() -> dict:
    from experiments._runner import cell_config

    return cell_config("paper", share="fold")


def _cells(case: str, data) -> tuple[list[dict], dict]:
    """The timed cells of ``case`` and the warm-up cell."""
    from experiments._grids import PRESETS, RAND_VARIANCES, _r

    kind, _, rest = case.partition(":")
    cls = data.classes[0]
    base = {"cls": cls, "time_channel": True, "scorers": ["conformance", "mahalanobis"]}
    if kind == "rs":
        F = int(rest.split(":")[1])
        point = {"features": F, "seed": 2, "variance": _r(RAND_VARIANCES[4])}
        cells = [dict(base, kernel="rand_sig_tanh", point=point, levels=None)]
    elif kind == "o1rbf":
        levels = list(PRESETS["paper"].grids["trunc_sig_rbf_order1"].levels)
        cells = [
            dict(
                base,
                kernel="trunc_sig_rbf_order1",
                levels=levels,
                time_channel=tc,
                point={"scale": a, "sigma": _r(s)},
            )  # fmt: skip
            for a in (0.25, 0.5, 1.0, 2.0, 4.0)
            for s in (E**-1, 1.0)
            for tc in (True, False)
        ]
    elif kind in ("o1lin", "o1lin5"):
        levels = list(PRESETS["paper"].grids["trunc_sig_linear_order1"].levels)
        scales = (1.0,) if kind == "o1lin" else (0.25, 0.5, 1.0, 2.0, 4.0)
        tcs = (True,) if kind == "o1lin" else (True, False)
        cells = [
            dict(
                base,
                kernel="trunc_sig_linear_order1",
                levels=levels,
                time_channel=tc,
                point={"scale": a},
            )  # fmt: skip
            for a in scales
            for tc in tcs
        ]
    else:
        raise SystemExit(f"unknown case {case!r}")
    warm = dict(cells[0], cls=data.classes[1])
    return cells, warm


def one(case: str, data_dir: str) -> None:
    """Run one case in this process; print a JSON line."""
    import experiments
    from experiments._protocol import load_dataset, run_cv_cell

    config = _config()
    name = case.split(":")[1]
    data = load_dataset(name, data_dir)
    cells, warm = _cells(case, data)
    run_cv_cell(warm, data, dict(config, folds=2, repeats=1))
    cpu, errors = [], set()
    for cell in cells:
        c0 = time.process_time()
        rows = run_cv_cell(cell, data, config)
        cpu.append(time.process_time() - c0)
        errors |= {r["error"] for r in rows if r["error"]}
    nat = load_dataset("NATOPS", data_dir)
    ref = {"cls": nat.classes[0], "kernel": "flat_rbf", "point": {"sigma": 1.0}, "levels": None,
           "time_channel": True, "scorers": ["conformance", "mahalanobis"]}  # fmt: skip
    run_cv_cell(ref, nat, config)
    c0 = time.process_time()
    run_cv_cell(ref, nat, config)
    ref_cpu = time.process_time() - c0
    print(json.dumps({"code": str(Path(experiments.__file__).parents[1]), "cpu": cpu,
                      "reference": ref_cpu, "errors": sorted(errors)}))  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--root", action="append", required=False, default=[], metavar="NAME=PATH")
    p.add_argument("--case", nargs="+", default=["rs:NATOPS:200"])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--data-dir", default=str(UEA))
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        return one(args.one, args.data_dir)
    roots = [r.split("=", 1) for r in args.root]
    print("| case | code | round | cells | CPU s (sum) | CPU s a cell | reference cell CPU s "
          "| load 1 min before / after |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for case in args.case:
        for rnd in range(args.rounds):
            order = roots if rnd % 2 == 0 else roots[::-1]
            for name, path in order:
                env = dict(os.environ, PYTHONPATH=str(Path(path).resolve()))
                load0 = os.getloadavg()[0]
                out = subprocess.run(
                    [sys.executable, __file__, "--one", case, "--data-dir", args.data_dir],
                    env=env, capture_output=True, text=True, check=True,
                ).stdout  # fmt: skip
                res = json.loads(out.strip().splitlines()[-1])
                assert Path(res["code"]) == Path(path).resolve(), (res["code"], path)
                cpu = res["cpu"]
                note = f" (errors: {res['errors']})" if res["errors"] else ""
                print(f"| {case} | {name} | {rnd + 1} | {len(cpu)} | {sum(cpu):.2f} | "
                      f"{sum(cpu) / len(cpu):.3f} | {res['reference']:.3f} | "
                      f"{load0:.1f} / {os.getloadavg()[0]:.1f} |{note}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
