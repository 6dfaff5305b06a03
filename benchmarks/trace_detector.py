"""Run-time trace of the default detector: calls, project functions and modules, and the
crossings between numpy and torch, for ``fit`` and for ``score_samples``.

The detector (``KernelNoveltyDetector()``: MiniRocket + kNN and GAK + kNN) is fitted on 30
random walks of 40 steps and 3 channels, then scores 5 new ones, after one warm-up fit (numba
compiled, caches filled). cProfile counts the calls. "Project" means functions defined in
``novelty/`` or ``tskernels/``. A crossing is a call of ``torch.from_numpy`` or
``torch.as_tensor`` (numpy -> torch) or of ``Tensor.numpy`` (torch -> numpy), wherever it
is made (the compiled GAK and the sktime MiniRocket cores take numpy, so a kernel's own
backend crosses too; the table splits the crossings by the module that makes them).

To compare two checkouts (for example the commit before a change, in a git worktree):

    python benchmarks/trace_detector.py --repo . --repo /tmp/before

Each ``--repo`` runs in its own process with that checkout first on the import path.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter

_CROSSING = ("from_numpy", "as_tensor")


def trace() -> dict:
    """The figures of this process's checkout (module docstring)."""
    import cProfile
    import pstats

    import numpy as np

    from novelty import KernelNoveltyDetector

    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(30, 40, 3)), axis=1)
    Y = np.cumsum(rng.normal(size=(5, 40, 3)), axis=1)
    KernelNoveltyDetector().fit(X).score_samples(Y)  # warm-up
    det = KernelNoveltyDetector()
    out = {}
    for label, call in (
        ("fit", lambda: det.fit(X)),
        ("score_samples", lambda: det.score_samples(Y)),
    ):
        profile = cProfile.Profile()
        result = profile.runcall(call)
        stats = pstats.Stats(profile).stats
        project = {
            key: value for key, value in stats.items()
            if any(f"{os.sep}{p}{os.sep}" in key[0] for p in ("novelty", "tskernels"))
        }  # fmt: skip
        by_module: Counter = Counter()
        for (_, _, name), (_, _, _, _, callers) in stats.items():
            if any(c in name for c in _CROSSING) or name.startswith("<method 'numpy'"):
                for (file, _, _), caller_stats in callers.items():
                    by_module[os.path.basename(file)] += caller_stats[1]
        out[label] = {
            "calls": sum(value[1] for value in stats.values()) - 1,  # runcall's own
            "project calls": sum(value[1] for value in project.values()),
            "project functions": len(project),
            "project modules": len({key[0] for key in project}),
            "crossings": sum(by_module.values()),
            "crossings by module": dict(by_module.most_common()),
        }
        if label == "score_samples":
            out[label]["scores"] = [float(s) for s in result]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", action="append", help="a checkout to trace (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not args.repo:
        print(json.dumps(trace()))
        return
    results = {}
    for repo in args.repo:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(repo))
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__)],
            env=env, cwd=os.path.abspath(repo), capture_output=True, text=True, check=True,
        )  # fmt: skip
        results[repo] = json.loads(done.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(results, indent=2))
        return
    rows = ["calls", "project calls", "project functions", "project modules", "crossings"]
    for label in ("fit", "score_samples"):
        print(f"\n{label}")
        print("| figure | " + " | ".join(args.repo) + " |")
        print("| --- |" + " ---: |" * len(args.repo))
        for row in rows:
            print(
                f"| {row} | " + " | ".join(f"{results[r][label][row]:,}" for r in args.repo) + " |"
            )
        for r in args.repo:
            print(f"crossings by module, {r}: {results[r][label]['crossings by module']}")
    scores = [results[r]["score_samples"]["scores"] for r in args.repo]
    worst = (
        max(abs(a - b) for s in scores[1:] for a, b in zip(scores[0], s)) if len(scores) > 1 else 0
    )
    print(f"\nlargest difference of the scores between checkouts: {worst:.3g}")


if __name__ == "__main__":
    main()
