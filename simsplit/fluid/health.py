"""Health of a running lattice: every block's density and velocity finite and in bounds, or a
:class:`~simsplit.errors.DivergenceError` naming the step, slab and cell of the first bad one."""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.errors import DivergenceError

#: physical bounds in lattice units: density near 1, speed below the lattice speed of sound
RHO_BOUNDS = (0.5, 1.5)
MAX_SPEED = 3**-0.5


def check_blocks(blocks: dict[int, Any], step: int) -> None:
    """Raise :class:`DivergenceError` for the first block (slab order) with a bad value."""
    for k, blk in blocks.items():
        be = blk.backend
        if all(be.all_finite(a) for a in (blk.rho, *blk.u)):
            rho_lo, rho_hi = be.minmax(blk.rho)
            speed = max(be.max_abs(u) for u in blk.u)
            if RHO_BOUNDS[0] < rho_lo and rho_hi < RHO_BOUNDS[1] and speed < MAX_SPEED:
                continue
        raise_divergence(k, blk, step)


def raise_divergence(k: int, blk: Any, step: int) -> None:
    rho = blk.backend.to_host(blk.rho)
    u = [blk.backend.to_host(a) for a in blk.u]
    bad = ~np.isfinite(rho) | (rho <= RHO_BOUNDS[0]) | (rho >= RHO_BOUNDS[1])
    for c in u:
        bad |= ~np.isfinite(c) | (np.abs(c) >= MAX_SPEED)
    cell = tuple(int(v) for v in np.argwhere(bad)[0])
    index = cell[::-1]  # (i, j[, k]); the split axis is the last
    names = "ijk"[:len(index)]
    where = ", ".join(f"{n}={v + (blk.layer0 if n == names[-1] else 0)}"
                      for n, v in zip(names, index, strict=True))
    vel = ", ".join(f"{c[cell]:.4g}" for c in u)
    raise DivergenceError(
        step, k, f"cell ({where}) has density {rho[cell]:.4g}, velocity ({vel}) in lattice units",
    )
