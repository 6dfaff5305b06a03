"""Every ``python`` block of the README runs as a user would paste it, and prints what the
README says it prints.

Each block runs in a fresh interpreter in an empty folder (files it writes land there). A
block whose ``print(...)`` line carries a comment with the expected output is checked against
that output, the comment after ``# `` up to the first ``:`` (e.g. ``# [-1.89 -10.76]: log
f(x)^2`` promises ``[-1.89 -10.76]``): the numbers of the printed line, rounded to the decimals
the README shows, must be the promised numbers, and the promised words must be in the line. So
the README's figures cannot drift from what the code gives.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    """The contents of the README's fenced ```python blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def expected_prints(block: str) -> list[tuple[str, str]]:
    """(the print call, the output its comment promises) for each commented ``print`` line."""
    out = []
    for line in block.splitlines():
        m = re.match(r"\s*(print\(.*\))\s+#\s*(.+)$", line)
        if m:
            out.append((m.group(1), m.group(2).split(":")[0].strip()))
    return out


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def keeps_promise(line: str, promise: str) -> bool:
    """The printed ``line`` shows the ``promise``: each promised word is in it, and its last
    numbers equal the promised ones at the decimals the promise writes (``-1.88928763`` keeps
    ``-1.89``; ``31`` keeps only ``31``)."""
    words = [w for w in re.split(r"[\s\[\],]+", NUMBER.sub(" ", promise)) if w]
    if not all(w in line for w in words):
        return False
    want, got = NUMBER.findall(promise), NUMBER.findall(line)
    if len(got) < len(want):
        return False
    for w, g in zip(want, got[len(got) - len(want) :], strict=True):
        decimals = len(w.split(".")[1]) if "." in w and "e" not in w else None
        value = float(g) if decimals is None else round(float(g), decimals)
        if value != float(w):
            return False
    return True


def test_keeps_promise_can_fail():
    assert keeps_promise("[ -1.88928763 -10.76241821]", "[-1.89 -10.76]")
    assert not keeps_promise("[ -1.88928763 -10.76641821]", "[-1.89 -10.76]")
    assert keeps_promise("flagged 31 of 40", "31 of 40")
    assert not keeps_promise("flagged 30 of 40", "31 of 40")
    assert not keeps_promise("ROC-AUC 0.95", "1.0")
    assert not keeps_promise("31 of 40", "31 out of 40")


BLOCKS = python_blocks(README.read_text())


def test_the_readme_has_its_examples():
    assert len(BLOCKS) >= 6
    assert any(expected_prints(b) for b in BLOCKS)


@pytest.mark.parametrize("i", range(len(BLOCKS)), ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs_and_prints_what_it_says(i, tmp_path):
    block = BLOCKS[i]
    run = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, f"README block {i} failed:\n{block}\n{run.stderr[-3000:]}"
    printed = run.stdout.splitlines()
    promises = expected_prints(block)
    assert len(printed) >= len(promises)
    for (call, expected), line in zip(promises, printed, strict=False):
        assert keeps_promise(line, expected), (
            f"README block {i}: {call} printed {line!r}, not {expected!r}"
        )
