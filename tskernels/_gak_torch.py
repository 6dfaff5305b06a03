"""Global alignment kernel in torch: a log-space wavefront over anti-diagonals (GPU path).

All pairs of a block (n_X x n_Y) advance together, one anti-diagonal s = i + j of the
(T_X + 1) x (T_Y + 1) dynamic-programming table at a time; the local kernel of the cells of a
diagonal is computed on the fly from the two series (memory O(n_X n_Y T d), not O(T^2)).
Log-space recursion (log-sum-exp of the three predecessors), so it neither overflows nor
underflows. Series are forward-fill padded to T_max: the padded table agrees with the true
table on cells (i <= L_x, j <= L_y), so each pair's value is read on the diagonal
s = L_x + L_y at row L_x.
"""

from __future__ import annotations

import torch


def log_gak_wavefront(
    VX: torch.Tensor,
    LX: torch.Tensor,
    VY: torch.Tensor,
    LY: torch.Tensor,
    inv2s2: float,
    log_w: torch.Tensor,
    band: int,
    paired: bool = False,
) -> torch.Tensor:
    """log K between every series of VX (n, Tx, d) and VY (m, Ty, d), Tensor (n, m);
    ``paired=True`` (needs n = m): log K(VX[p], VY[p]) only, Tensor (n,).

    ``log_w``: log of the per-offset weight, indexed by |i - j| (length >= max(Tx, Ty));
    ``band``: 0 for no band, else cells with |i - j| >= band are excluded.
    """
    n, Tx, _ = VX.shape
    m, Ty, _ = VY.shape
    dev, dt = VX.device, VX.dtype
    ninf = torch.tensor(float("-inf"), dtype=dt, device=dev)
    # Diagonal arrays indexed by the row i = 0..Tx: prev1 = diagonal s-1, prev2 = s-2.
    shape = (n,) if paired else (n, m)
    prev2 = torch.full((*shape, Tx + 1), float("-inf"), dtype=dt, device=dev)
    prev2[..., 0] = 0.0  # s = 0: M[0, 0] = 1
    prev1 = torch.full_like(prev2, float("-inf"))  # s = 1: boundary cells only
    if paired:
        target, row = (LX + LY).to(dev), LX.to(dev)
    else:
        target = (LX[:, None] + LY[None, :]).to(dev)  # diagonal where each pair ends
        row = LX[:, None].expand(n, m).to(dev)
    out = torch.full(shape, float("-inf"), dtype=dt, device=dev)
    ends = set(target.unique().tolist())  # host-side, so the loop never syncs
    for s in range(2, Tx + Ty + 1):
        ilo, ihi = max(1, s - Ty), min(Tx, s - 1)
        i = torch.arange(ilo, ihi + 1, device=dev)
        j = s - i
        xs = VX[:, i - 1]  # (n, L, d)
        ys = VY[:, j - 1]  # (m, L, d)
        diff = xs - ys if paired else xs[:, None] - ys[None, :]
        sq = (diff * diff).sum(-1)  # (*shape, L)
        off = (i - j).abs()
        le = log_w[off] - sq * inv2s2
        loc = le - torch.log(2.0 - torch.exp(le))
        if band > 0:
            loc = torch.where(off < band, loc, ninf)
        stacked = torch.stack(
            (prev2[..., ilo - 1 : ihi], prev1[..., ilo - 1 : ihi], prev1[..., ilo : ihi + 1])
        )
        new = torch.full_like(prev1, float("-inf"))
        new[..., ilo : ihi + 1] = torch.logsumexp(stacked, dim=0) + loc
        if s in ends:
            val = new.gather(-1, row.unsqueeze(-1)).squeeze(-1)
            out = torch.where(target == s, val, out)
        prev2, prev1 = prev1, new
    return out
