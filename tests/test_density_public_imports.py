"""Issue 13, item 2: ``density`` imports ``tskernels`` through public names only; the squared
distances it uses are the public ``tskernels.sqdist``."""

from __future__ import annotations

import re
from pathlib import Path

import torch

import tskernels as tk

DENSITY = Path(__file__).resolve().parents[1] / "density"


def test_density_imports_no_private_tskernels_module():
    for path in sorted(DENSITY.glob("*.py")):
        text = path.read_text()
        assert not re.search(r"\btskernels\._", text), f"{path.name} imports a private module"


def test_sqdist_is_public_and_is_the_squared_euclidean_distance():
    assert "sqdist" in tk.__all__
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, generator=g, dtype=torch.float64)
    y = torch.randn(2, 4, 3, generator=g, dtype=torch.float64)
    expected = ((x[:, :, None, :] - y[:, None, :, :]) ** 2).sum(-1)
    torch.testing.assert_close(tk.sqdist(x, y), expected, rtol=0, atol=1e-12)
    # length_scale picks the route, never scales: far from the origin, still exact
    torch.testing.assert_close(tk.sqdist(x + 1e6, y + 1e6, 0.5), expected, rtol=0, atol=1e-9)
