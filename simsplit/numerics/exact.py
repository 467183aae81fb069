"""Exact sums of doubles as integers in units of 2^-1074, and their correctly rounded value.

Every finite double is an integer multiple of 2^-1074, so a sum of doubles is exactly an
integer in those units. GPU kernels accumulate it in 32-bit limbs (``kernels/md_sums.cuh``);
rounding the integer once gives the correctly rounded sum, the number ``math.fsum`` returns
for the same values in any order.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

#: the weight of one unit: the smallest subnormal double
UNIT_EXPONENT = -1074


def limbs_total(limbs: Iterable[int]) -> int:
    """The integer whose 32-bit limb ``i`` (a signed total, lowest first) weighs 2^(32 i)."""
    total = 0
    for i, limb in enumerate(limbs):
        total += int(limb) << (32 * i)
    return total


def to_float(total: int) -> float | None:
    """``total`` x 2^-1074 correctly rounded (half to even), or None when it overflows a double
    (the caller falls back to fsum, which raises its own error)."""
    try:
        return total / (1 << -UNIT_EXPONENT)  # int / int is correctly rounded in Python
    except OverflowError:
        return None


#: 32-bit limbs of one exact sum: a double's 53-bit mantissa shifted by up to 2046 bits spans
#: limbs 0..65; two more hold carries (kernels/exact_sum.cuh takes the same number)
EXACT_LIMBS = 68


def exact_limbs(values: np.ndarray, slots: np.ndarray, n_slots: int) -> np.ndarray:
    """Signed limb totals ``(n_slots, EXACT_LIMBS)`` (int64) of finite doubles ``values``, each
    added to the sum of its slot: what kernels/exact_sum.cuh accumulates, in any order.
    Non-finite values are left out; the caller checks for them."""
    out = np.zeros((n_slots, EXACT_LIMBS), np.int64)
    u = np.ascontiguousarray(values, np.float64).view(np.uint64)
    ex = ((u >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    m = u & np.uint64(0xFFFFFFFFFFFFF)
    normal = ex != 0
    m = np.where(normal, m | np.uint64(1 << 52), m)
    b = np.where(normal, ex - 1, 0)
    keep = (ex != 0x7FF) & (m != 0)
    s = (b & 31).astype(np.uint64)
    lo = m << s  # wraps modulo 2^64 as the device's shift does: the high part is kept below
    hi = np.where(s != 0, m >> (np.uint64(64) - np.where(s != 0, s, 1)), np.uint64(0))
    sign = np.where((u >> np.uint64(63)) != 0, -1, 1)
    for k, piece in enumerate((lo & np.uint64(0xFFFFFFFF), lo >> np.uint64(32), hi)):
        np.add.at(out, (slots[keep], (b >> 5)[keep] + k), sign[keep] * piece[keep].astype(np.int64))
    return out


def limb_sums(limbs: np.ndarray) -> np.ndarray:
    """The correctly rounded value of each row of signed limb totals ``(n, EXACT_LIMBS)``
    (rows of several slabs or devices added first: integer sums, exact in any order)."""
    return np.array([to_float(limbs_total(row.tolist())) for row in limbs], dtype=np.float64)
