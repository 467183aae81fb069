"""Exact sums of doubles as integers in units of 2^-1074, and their correctly rounded value.

Every finite double is an integer multiple of 2^-1074, so a sum of doubles is exactly an
integer in those units. GPU kernels accumulate it in 32-bit limbs (``kernels/md_sums.cuh``);
rounding the integer once gives the correctly rounded sum, the number ``math.fsum`` returns
for the same values in any order.
"""

from __future__ import annotations

from typing import Iterable

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
