"""Compiled scalar helpers shared by the numba cores (GAK and the signature PDE): a
vectorisable exp for non-positive arguments and the bit cast that builds powers of two.
Isolated numba module."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["_bits_to_f64", "_exp_nonpos"]

_SHIFTER = 6755399441055744.0  # 1.5 * 2^52: (y + S) - S rounds y to the nearest integer
_FM = {"contract"}  # allow fused multiply-add only


@intrinsic
def _bits_to_f64(typingctx, v):
    """Reinterpret the bits of an int64 as a float64 (to build 2^k without a table)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


@njit(cache=True, inline="always", fastmath=_FM)
def _exp_nonpos(x):
    """exp(x) for x <= 0 to 1 ulp, vectorisable; inputs below -708 return ~3e-308 (such
    cells trip the underflow guard and the pair is redone in log space)."""
    x = max(x, -708.0)
    k = (x * 1.4426950408889634 + _SHIFTER) - _SHIFTER
    r = x - k * 6.93147180369123816490e-01 - k * 1.90821492927058770002e-10
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p * _bits_to_f64((np.int64(k) + 1023) << 52)
