r"""Torch (GPU) path of the signature PDE kernel: a wavefront over anti-diagonals.

All cells on an anti-diagonal :math:`i + j = s` of the refined grid depend only on the two
previous anti-diagonals, so one step updates a whole diagonal for a whole block of pairs in
a few vectorised tensor operations (:math:`M_1 + M_2 - 1` steps in all). Runs on any torch
device; on the CPU it serves as an independent check of the compiled solver.
"""

from __future__ import annotations

import torch

__all__ = ["pde_wavefront", "double_difference"]


def double_difference(E: torch.Tensor) -> torch.Tensor:
    """Increment inner products of lifted paths from their point Gram ``E`` (..., T1, T2):

    ``E[a+1, b+1] - E[a, b+1] - E[a+1, b] + E[a, b]``, shape (..., T1 - 1, T2 - 1).
    """
    return torch.diff(torch.diff(E, dim=-2), dim=-1)


def pde_wavefront(G: torch.Tensor, lam1: int, lam2: int) -> torch.Tensor:
    r"""Solve the Goursat PDE for a batch of pairs from increment inner products.

    ``G``: Tensor (P, L1, L2), the increment inner products of each pair's lifted paths on
    the original grid. Returns Tensor (P,), :math:`K` at the end of the refined
    :math:`(L_1 2^{\lambda_1}) \times (L_2 2^{\lambda_2})` grid, with the second-order
    explicit scheme :math:`K_{i+1,j+1} = (K_{i+1,j} + K_{i,j+1}) A - K_{i,j} B`,
    :math:`A = 1 + g/2 + g^2/12`, :math:`B = 1 - g^2/12`, :math:`g = G / 2^{\lambda_1+\lambda_2}`.
    """
    P, L1, L2 = G.shape
    g = G * (1.0 / float(2 ** (lam1 + lam2)))
    g2 = g * g * (1.0 / 12.0)
    A = (1.0 + 0.5 * g + g2).reshape(P, L1 * L2)
    B = (1.0 - g2).reshape(P, L1 * L2)
    M1, M2 = L1 << lam1, L2 << lam2
    dev = G.device
    prev2 = torch.ones((P, M1 + 1), dtype=G.dtype, device=dev)  # diagonal s - 2
    prev1 = torch.ones((P, M1 + 1), dtype=G.dtype, device=dev)  # diagonal s - 1
    for s in range(2, M1 + M2 + 1):
        lo, hi = max(1, s - M2), min(M1, s - 1)
        i = torch.arange(lo, hi + 1, device=dev)
        idx = ((i - 1) >> lam1) * L2 + ((s - 1 - i) >> lam2)  # original cell of (i-1, s-i-1)
        a = A.index_select(1, idx)
        b = B.index_select(1, idx)
        cur = torch.ones((P, M1 + 1), dtype=G.dtype, device=dev)  # boundary values are 1
        # diagonal arrays are indexed by the row i: d_s[i] = K[i, s - i]
        cur[:, lo : hi + 1] = (prev1[:, lo : hi + 1] + prev1[:, lo - 1 : hi]) * a - prev2[
            :, lo - 1 : hi
        ] * b
        prev2, prev1 = prev1, cur
    return prev1[:, M1]
