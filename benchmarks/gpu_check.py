"""The GPU check (issue 34, item 4): one command to spend a lent GPU on, a JSON report.

    python benchmarks/gpu_check.py --out docs/gpu_check.json        # make gpu-check
    python benchmarks/gpu_check.py --device cpu --n 12 --T 20 --out /tmp/dry.json  # dry run

Without a CUDA device (``torch.cuda.is_available()`` False) and ``--device cuda`` (the
default) it prints one line, "no CUDA device: gpu-check skipped", writes nothing and exits 0.
With one it runs, within ``--budget`` seconds (default 420; a section that would start after
the budget is recorded as skipped, so the whole stays under 8 minutes):

1. ``tests``: the tests marked ``gpu`` (``pytest -m gpu``, tests/conftest.py; a test whose
   parametrisation id contains "cuda" is marked too), counts and the failures' first lines.
2. ``grams``: symmetric Grams of ``--n`` random walks (T, d; float64) on the device, median
   of ``--repeats`` synchronised runs after a warm-up, for the PDE signature kernel (linear
   lift, dyadic order 0; RBF lift, dyadic order 2), the level-4 truncated signature kernel
   and GAK; beside pysiglib on the same device tensors (where its build has CUDA,
   ``pysiglib.BUILT_WITH_CUDA``; GAK has no pysiglib peer) and our CPU Gram (one run, all
   cores). Exactness: max |K_device - K_cpu| / max |K_cpu| <= 1e-10.
3. ``detector``: ``KernelNoveltyDetector()``'s default recipe with its members' kernels on
   the device (the detector has no device parameter: each member's kernel gets
   ``device=...``), fitted on ``--n`` normal random walks and scoring 2 x 25 normal /
   anomalous ones, beside the same detector on the CPU: fit and scoring seconds, max
   |score difference| <= 1e-10 and the same flags.

``ok`` in the report is True when every section ran and passed; the exit status is 0 then, 1
otherwise (the report is written either way). ``--device cpu`` runs the same code with the
CPU as the "device" (a dry run of the script and its report: exactness is then trivial, the
``gpu`` tests are run on the CPU through ``TSKERNELS_GPU_TESTS_DEVICE=cpu``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

SKIPPED = "no CUDA device: gpu-check skipped"
TOLERANCE = 1e-10
ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- helpers
def _device_tools():
    """benchmarks/_device.py (imports torch: loaded only once a device is in use)."""
    try:  # run as a script: benchmarks/ is on sys.path
        import _device
    except ImportError:  # imported from the repository root
        from benchmarks import _device
    return _device


def _sync(device: str) -> None:
    _device_tools().synchronize(device)


def _timed(fn, device: str, repeats: int) -> tuple[list[float], object]:
    """``repeats`` synchronised timings of ``fn`` (after one untimed warm-up call)."""
    return _device_tools().timed(fn, repeats, device, warmup=True)


def _np(K):
    import numpy as np
    import torch

    return K.detach().cpu().numpy() if isinstance(K, torch.Tensor) else np.asarray(K)


def rel_diff(a, b) -> float:
    """max |a - b| / max |b| (0 when both are zero)."""
    import numpy as np

    a, b = _np(a), _np(b)
    scale = float(np.abs(b).max()) if b.size else 0.0
    diff = float(np.abs(a - b).max()) if b.size else 0.0
    return diff / scale if scale > 0 else diff


def make_paths(n: int, T: int, d: int, seed: int = 0):
    """Random walks with N(0, 0.3^2 / d) steps (as benchmarks/bench_signature.py)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, T, d)) * 0.3 / np.sqrt(d), axis=1)


def environment(device: str) -> dict:
    import numba
    import torch

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "numba": numba.__version__,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
    }
    try:
        import pysiglib

        env["pysiglib"] = getattr(pysiglib, "__version__", "?")
        env["pysiglib_cuda"] = bool(pysiglib.BUILT_WITH_CUDA)
    except ImportError:
        env["pysiglib"] = None
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        env["gpu"] = props.name
        env["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
    try:
        env["git"] = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        env["git"] = None
    return env


# ----------------------------------------------------------------------------- 1. tests
def junit_summary(path: Path) -> dict:
    """Counts and failures (test id, first line of the message) of a pytest JUnit XML file."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors")}
    counts["skipped"] = sum(int(s.get("skipped", 0)) for s in suites)
    failed = []
    for case in root.iter("testcase"):
        for bad in (*case.findall("failure"), *case.findall("error")):
            msg = (bad.get("message") or bad.text or "").strip().splitlines()
            failed.append(
                {"test": f"{case.get('classname')}::{case.get('name')}", "message": msg[0][:300]}
            )
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    counts["failed"] = failed
    return counts


def run_gpu_tests(device: str, timeout: float) -> dict:
    env = dict(os.environ)
    if not device.startswith("cuda"):
        env["TSKERNELS_GPU_TESTS_DEVICE"] = "cpu"  # the dry run: gpu tests on the CPU
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "gpu.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider"]
        cmd += [f"--junitxml={xml}", str(ROOT / "tests")]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": f"pytest -m gpu ran past {timeout:.0f} s"}
        out = {"seconds": round(time.perf_counter() - t0, 2), "returncode": proc.returncode}
        if not xml.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            return {**out, "ok": False, "error": " | ".join(tail)}
        out.update(junit_summary(xml))
    # 5: no test collected (a run with every gpu test deselected is no check)
    out["ok"] = proc.returncode == 0 and out["passed"] > 0
    return out


# ----------------------------------------------------------------------------- 2. grams
def _workloads(d: int):
    """(name, our kernel on a device, pysiglib's Gram of a tensor or None)."""
    import math

    import tskernels as tk

    def pde_peer(lam, static=None):
        def peer(Xt):
            import pysiglib

            kw = {} if static is None else {"static_kernel": static()}
            return pysiglib.sig_kernel_gram(Xt, Xt, dyadic_order=lam, **kw)

        return peer

    def trunc_peer(Xt):
        import pysiglib

        S = pysiglib.sig(Xt, 4, scalar_term=True)
        return S @ S.T

    def rbf_static():
        import pysiglib

        return pysiglib.RBFKernel(2 * 1.0**2)  # pysiglib: exp(-|x - y|^2 / sigma)

    return [
        (
            "PDE linear, dyadic 0",
            lambda dev: tk.SignaturePDEKernel(tk.Linear(), 1.0, 0, device=dev),
            pde_peer(0),
        ),
        (
            "PDE RBF(1), dyadic 2",
            lambda dev: tk.SignaturePDEKernel(tk.RBF(1.0), 1.0, 2, device=dev),
            pde_peer(2, rbf_static),
        ),
        (
            "truncated linear, level 4",
            lambda dev: tk.TruncatedSignatureKernel(tk.Linear(), 4, device=dev),
            trunc_peer,
        ),
        (
            "GAK, sigma 2 sqrt(d)",
            lambda dev: tk.GAK(sigma=2.0 * math.sqrt(d), device=dev),
            None,
        ),
    ]


def _peer_runs_on(device: str) -> bool:
    try:
        import pysiglib
    except ImportError:
        return False
    return not device.startswith("cuda") or bool(pysiglib.BUILT_WITH_CUDA)


def gram_checks(device: str, n: int, T: int, d: int, repeats: int, deadline: float) -> list:
    import numpy as np
    import torch

    X = make_paths(n, T, d)
    Xd = torch.as_tensor(X, device=device)
    rows = []
    for name, make, peer in _workloads(d):
        if time.perf_counter() > deadline:
            rows.append({"workload": name, "skipped": "time budget spent"})
            continue
        row = {"workload": name, "n": n, "T": T, "d": d}
        try:
            if device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats(device)
            kernel = make(device)
            times, K = _timed(lambda kernel=kernel: kernel.gram(Xd), device, repeats)
            row["ours_device_s"] = float(np.median(times))
            if device.startswith("cuda"):
                row["ours_device_peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
            t0 = time.perf_counter()
            K_cpu = make("cpu").gram(X)
            row["ours_cpu_s"] = time.perf_counter() - t0
            row["rel_diff_to_cpu"] = rel_diff(K, K_cpu)
            row["exact"] = row["rel_diff_to_cpu"] <= TOLERANCE
            if peer is not None and _peer_runs_on(device):
                times, P = _timed(lambda peer=peer: peer(Xd), device, repeats)
                row["pysiglib_device_s"] = float(np.median(times))
                row["rel_diff_to_pysiglib"] = rel_diff(K, P)
            else:
                row["pysiglib_device_s"] = None
                row["peer_note"] = (
                    "no pysiglib peer" if peer is None else "pysiglib has no CUDA build"
                )
        except Exception as exc:  # recorded, the other workloads still run
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            row["exact"] = False
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- 3. detector
def detector_on(device: str):
    """``KernelNoveltyDetector`` whose default recipe puts each member's kernel on
    ``device`` (a subclass: the detector itself has no device parameter)."""
    from novelty import KernelNoveltyDetector

    class DeviceDetector(KernelNoveltyDetector):
        def _member_specs(self, Xs, start):
            specs = super()._member_specs(Xs, start)
            return [
                dataclasses.replace(s, kernel=s.kernel.set_params(device=device)) for s in specs
            ]

    return DeviceDetector()


def detector_check(device: str, n: int, T: int, d: int) -> dict:
    import numpy as np

    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(1)
    corpus = make_paths(n, T, d, seed=2)
    normal = make_paths(25, T, d, seed=3)
    walks = make_paths(25, T, d, seed=4)
    anomalies = walks + 0.5 * np.sin(np.linspace(0, 6 * np.pi, T))[None, :, None]
    anomalies[:, T // 2 :, rng.integers(d)] *= 3.0
    test = np.concatenate([normal, anomalies])
    out = {"n": n, "T": T, "d": d, "n_test": len(test)}
    scores, flags = {}, {}
    for where, det in (("cpu", KernelNoveltyDetector()), ("device", detector_on(device))):
        with warnings.catch_warnings():  # warm-up: compilation, CUDA start (5 series)
            warnings.simplefilter("ignore")
            det.fit(corpus[:5]).score_samples(test[:2])
        _sync(device)
        t0 = time.perf_counter()
        det.fit(corpus)
        _sync(device)
        out[f"fit_{where}_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        scores[where] = det.score_samples(test)
        flags[where] = det.predict(test)
        out[f"score_{where}_s"] = time.perf_counter() - t0
        if where == "device":
            out["members"] = [
                {"member": getattr(m.spec, "name", "") or type(m.kernel_).__name__,
                 "kernel_device": str(m.kernel_.device)}
                for m in det.members_
            ]  # fmt: skip
    out["max_abs_score_diff"] = float(np.abs(scores["device"] - scores["cpu"]).max())
    out["same_flags"] = bool((flags["device"] == flags["cpu"]).all())
    out["flagged_normal_of_25"] = int((flags["device"][:25] == -1).sum())
    out["flagged_anomalies_of_25"] = int((flags["device"][25:] == -1).sum())
    out["ok"] = out["max_abs_score_diff"] <= TOLERANCE and out["same_flags"]
    return out


# ----------------------------------------------------------------------------- main
def write_report(report: dict, out: Path) -> None:
    """The report as indented JSON, written atomically (a temporary file, then a rename)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, default=str) + "\n")
    os.replace(tmp, out)


def _summary(report: dict) -> str:
    lines = [f"gpu-check on {report['device']} ({report['environment'].get('gpu', 'CPU')}):"]
    t = report["sections"].get("tests", {})
    if "passed" in t:
        lines.append(
            f"  tests marked gpu: {t['passed']} passed, {t['failures'] + t['errors']} failed, "
            f"{t['skipped']} skipped ({t['seconds']:.0f} s)"
        )
    elif t:
        lines.append(f"  tests marked gpu: {t.get('error') or t.get('skipped')}")
    for r in report["sections"].get("grams", []):
        if "ours_device_s" in r:
            peer = r.get("pysiglib_device_s")
            peer = f"{peer:.4f} s" if peer is not None else r.get("peer_note", "-")
            lines.append(
                f"  {r['workload']}: ours {r['ours_device_s']:.4f} s, pysiglib {peer}, "
                f"our CPU {r['ours_cpu_s']:.3f} s, rel. diff to CPU {r['rel_diff_to_cpu']:.1e}"
            )
        else:
            lines.append(f"  {r['workload']}: {r.get('error') or r.get('skipped')}")
    det = report["sections"].get("detector", {})
    if "fit_device_s" in det:
        lines.append(
            f"  detector: fit {det['fit_device_s']:.2f} s on the device, {det['fit_cpu_s']:.2f} "
            f"s on the CPU; max |score diff| {det['max_abs_score_diff']:.1e}, same flags "
            f"{det['same_flags']}"
        )
    elif det:
        lines.append(f"  detector: {det.get('error') or det.get('skipped')}")
    lines.append(f"  ok: {report['ok']} ({report['wall_s']:.0f} s)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/gpu_check.json", help="the JSON report")
    ap.add_argument(
        "--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a dry run of the script"
    )
    ap.add_argument("--n", type=int, default=400, help="series per Gram / detector corpus")
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--d", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for all sections")
    ap.add_argument("--no-tests", action="store_true", help="leave out the gpu tests")
    args = ap.parse_args(argv)
    for name in ("n", "T", "d", "repeats"):
        if getattr(args, name) < (2 if name != "repeats" else 1):
            ap.error(f"--{name} {getattr(args, name)}: too small")

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(SKIPPED)
        return 0
    start = time.perf_counter()
    deadline = start + args.budget
    report = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": args.device,
        "tolerance": TOLERANCE,
        "environment": environment(args.device),
        "sections": {},
    }
    sections = report["sections"]
    if args.no_tests:
        sections["tests"] = {"skipped": "--no-tests", "ok": True}
    else:  # at most half the budget: the timings and the detector still run
        sections["tests"] = run_gpu_tests(args.device, timeout=args.budget / 2)
    try:
        sections["grams"] = gram_checks(args.device, args.n, args.T, args.d, args.repeats, deadline)
    except Exception:
        sections["grams"] = [{"workload": "all", "error": traceback.format_exc(limit=3)}]
    if time.perf_counter() > deadline:
        sections["detector"] = {"skipped": "time budget spent", "ok": False}
    else:
        try:
            sections["detector"] = detector_check(args.device, args.n, args.T, args.d)
        except Exception as exc:
            sections["detector"] = {"error": f"{type(exc).__name__}: {exc}"[:300], "ok": False}
    report["ok"] = bool(
        sections["tests"].get("ok")
        and all(r.get("exact") for r in sections["grams"])
        and sections["detector"].get("ok")
    )
    report["wall_s"] = time.perf_counter() - start
    write_report(report, Path(args.out))
    print(_summary(report))
    print(f"wrote {args.out}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
