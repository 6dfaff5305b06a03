"""Memory of a symmetric Gram (issue 14, item 6) and the blocked explicit-signature path of the
truncated signature kernel under a small ``max_memory`` (item 7)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import tskernels as tk
from tskernels._base import mirror_upper_, normalize_gram_

# One child process computes each Gram after a warm-up that loads every code path, resetting
# its peak resident set (VmHWM, Linux) before each one: the peak growth is the memory of
# that computation. Large torch allocations are mmap'ed and given back on free.
_CASES = [
    ("tk.FlattenedKernel(tk.Linear(), max_memory=64 * 2**20)", False),
    ("tk.FlattenedKernel(tk.Linear(), max_memory=64 * 2**20)", True),
    ("tk.FlattenedKernel(tk.Linear(), max_memory=2**40)", False),  # one block
    ("tk.RandomizedSignatureKernel(n_features=8)", False),
    ("tk.TruncatedSignatureKernel(level=2)", True),
]
_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import torch
    torch.set_num_threads(1)
    import tskernels as tk

    def rss(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

    spec = json.loads(sys.argv[1])
    X = np.random.default_rng(0).normal(size=(spec["n"], 3, 2))
    out = []
    for source, normalize in spec["cases"]:
        kernel = eval(source, {"tk": tk})
        kernel.gram(X[:50], normalize=normalize)  # warm-up: imports, code paths
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak resident set to the current one
        before = rss("VmRSS:")
        K = kernel.gram(X, normalize=normalize)
        grown = rss("VmHWM:") - before
        out.append({"grown": grown, "output": K.numel() * K.element_size(),
                    "symmetric": bool(torch.equal(K, K.T))})
        del K
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def peak_growth():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pytest.skip("needs Linux /proc/self/clear_refs to reset the peak resident set")
    spec = json.dumps({"n": 6000, "cases": _CASES})
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, spec], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", range(len(_CASES)), ids=[f"{k}-{n}" for k, n in _CASES])
def test_symmetric_gram_peak_at_most_1_5x_output(peak_growth, case):
    r = peak_growth[case]
    assert r["symmetric"]
    # the peak grows by the output (288 MB) plus at most half of it (was 3-4x)
    assert r["grown"] <= 1.5 * r["output"], (r["grown"] / r["output"], r)


def test_mirror_upper_in_place_matches_triu_formula():
    rng = np.random.default_rng(0)
    for n in (1, 5, 255, 256, 257, 600):
        A = torch.from_numpy(rng.normal(size=(2, n, n)))
        expected = torch.triu(A) + torch.triu(A, 1).transpose(1, 2)
        got = A.clone()
        assert mirror_upper_(got) is not None
        assert torch.equal(got, expected)
        sub = A[0].clone()
        mirror_upper_(sub)
        assert torch.equal(sub, expected[0])


def test_normalize_in_place_matches_formula():
    rng = np.random.default_rng(1)
    F = rng.normal(size=(6, 3))
    G = torch.from_numpy(rng.normal(size=(4, 3)) @ F.T)
    dx = torch.from_numpy(rng.uniform(1, 2, size=4))
    dy = torch.from_numpy(rng.uniform(1, 2, size=6))
    expected = G / torch.sqrt(dx[:, None] * dy[None, :])
    torch.testing.assert_close(normalize_gram_(G.clone(), dx, dy), expected, rtol=1e-15, atol=0)


# -------------------------------------------------------------- item 7: blocked features
def _count_recursion(monkeypatch):
    from tskernels import _signature_truncated as mod

    calls = {"n": 0}
    original = mod.signature_kernel_levels

    def counting(*args, **kwargs):
        calls["n"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(mod, "signature_kernel_levels", counting)
    return calls


@pytest.mark.parametrize("levels", ["cumulative", "single"])
def test_truncated_linear_small_max_memory_uses_blocked_features(monkeypatch, levels):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 20, 3)) * 0.3
    Y = rng.normal(size=(37, 20, 3)) * 0.3
    ref = tk.TruncatedSignatureKernel(level=4, scale=0.5, levels=levels)
    K_ref, K_ref_xy = ref.gram(X), ref.gram(X, Y)
    L_ref = ref.gram_levels(X, Y, normalize=True)
    small = tk.TruncatedSignatureKernel(level=4, scale=0.5, levels=levels, max_memory=2**16)
    calls = _count_recursion(monkeypatch)
    t0 = time.perf_counter()
    K = small.gram(X)
    elapsed = time.perf_counter() - t0
    assert calls["n"] == 0  # never the recursion (was 57 s at N = 200)
    assert elapsed < 10.0  # ~0.1-1 s; generous for shared machines
    assert torch.equal(K, K.T)
    torch.testing.assert_close(K, K_ref, rtol=1e-12, atol=0)
    torch.testing.assert_close(small.gram(X, Y), K_ref_xy, rtol=1e-12, atol=0)
    torch.testing.assert_close(small.diag(X), torch.diagonal(K_ref), rtol=1e-12, atol=0)
    torch.testing.assert_close(small.gram_levels(X, Y, normalize=True), L_ref, rtol=1e-12, atol=0)
    Ls = small.gram_levels(X[:50])
    torch.testing.assert_close(Ls, ref.gram_levels(X[:50]), rtol=1e-12, atol=0)
    assert torch.equal(Ls, Ls.transpose(1, 2))
    assert calls["n"] == 0


def test_truncated_linear_huge_features_still_use_the_recursion(monkeypatch):
    # d = 6, level 7: 335922 features per series, far beyond a 1 MiB budget: the recursion
    X = np.random.default_rng(3).normal(size=(4, 5, 6)) * 0.2
    k = tk.TruncatedSignatureKernel(level=7, max_memory=2**20)
    calls = _count_recursion(monkeypatch)
    K = k.gram(X)
    assert calls["n"] > 0
    torch.testing.assert_close(
        K, tk.TruncatedSignatureKernel(level=7, algorithm="features").gram(X), rtol=1e-10, atol=0
    )
