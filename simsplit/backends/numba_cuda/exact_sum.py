"""Exact sums of doubles in Numba CUDA: kernels/exact_sum.cuh's limb accumulation (see
:mod:`simsplit.numerics.exact`), for the MD thermo and the forces on bodies."""

from __future__ import annotations

import numpy as np
from numba import cuda

_U32 = np.uint64(0xFFFFFFFF)
_U64 = np.uint64(0xFFFFFFFFFFFFFFFF)


@cuda.jit(device=True)
def _add_piece(acc, index, piece, neg):
    if piece != np.uint64(0):
        # -piece in two's complement, written so that no step wraps (the simulator warns)
        cuda.atomic.add(acc, index, (_U64 - piece) + np.uint64(1) if neg else piece)


@cuda.jit(device=True)
def exact_add(acc, base, u, nonfinite):
    """Add the double with bits ``u`` (uint64) into the limbs ``acc[base:]`` of one sum;
    inf or nan set ``nonfinite[0]`` instead."""
    ex = int((u >> np.uint64(52)) & np.uint64(0x7FF))
    if ex == 0x7FF:
        nonfinite[0] = 1
        return
    m = u & np.uint64(0xFFFFFFFFFFFFF)
    b = 0
    if ex != 0:
        m = m | (np.uint64(1) << np.uint64(52))
        b = ex - 1
    if m == np.uint64(0):
        return
    s = b & 31
    lo = (m << np.uint64(s)) & _U64
    hi = (m >> np.uint64(64 - s)) if s != 0 else np.uint64(0)
    neg = (u >> np.uint64(63)) != np.uint64(0)
    limb = base + (b >> 5)
    _add_piece(acc, limb, lo & _U32, neg)
    _add_piece(acc, limb + 1, lo >> np.uint64(32), neg)
    _add_piece(acc, limb + 2, hi, neg)
