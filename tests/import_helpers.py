"""Which modules a piece of code loads: run in a fresh interpreter, read back from sys.modules
(by module, not by the clock: timings are flaky on shared machines)."""

from __future__ import annotations

import json
import subprocess
import sys


def loaded(code: str, modules: list[str]) -> list[str]:
    """Those of ``modules`` in sys.modules after ``code`` runs in a fresh interpreter."""
    script = code + (
        f"\nimport json, sys\nprint(json.dumps([m for m in {modules!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
