"""Interpolated bounce-back weights (Bouzidi, Firdaouss & Lallemand 2001, linear), one per
link from a fluid cell to a body cell, from the exact wall distance of the body's shape.

For a fluid cell x whose pull source x - c_q is in a body, let delta in (0, 1] be where the
wall cuts the link from x towards x - c_q, as a fraction of it (1/2: halfway), and qbar the
direction opposite q. The population coming back is

    delta < 1/2:   f_q(x, t+1) = 2 delta f*_qbar(x) + (1 - 2 delta) f*_qbar(x + c_q)
    delta >= 1/2:  f_q(x, t+1) = f*_qbar(x) / (2 delta) + (1 - 1 / (2 delta)) f*_q(x)

(f* post-collision at t). Kernels take one number per link, ``k``, computed here in float64
and rounded to the run's precision once, so that no kernel divides: k = 2 delta >= 0 for the
first form (weight k on f*_qbar(x), 1 - k on the neighbour x + c_q), k = -1 / (2 delta) < 0
for the second (weight -k on f*_qbar(x), 1 + k on f*_q(x)). k = -1 is exactly halfway
bounce-back: every link that is not to a body with a shape (channel walls, masks), and a
delta < 1/2 link whose neighbour x + c_q is not fluid, keeps it.
"""

from __future__ import annotations

import numpy as np

from simsplit.fluid.geometry.body import Body
from simsplit.numerics.lattice import Lattice

HALFWAY = -1.0


def link_weights(bodies: list[Body], solid: np.ndarray, lattice: Lattice,
                 periodic: tuple[bool, bool]) -> np.ndarray:
    """``k`` of every (q, j, i) (array order; ``periodic`` = (y, x) wrap): HALFWAY except on
    links from fluid cells to bodies with a shape."""
    ny, nx = solid.shape
    out = np.full((lattice.q, ny, nx), HALFWAY)
    jj, ii = np.nonzero(~solid)

    def shifted(dj: int, di: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, columns, inside the grid) of the cells (jj + dj, ii + di), wrapped."""
        tj, ti = jj + dj, ii + di
        ok = np.ones(len(jj), dtype=bool)
        for t, n, wrap in ((tj, ny, periodic[0]), (ti, nx, periodic[1])):
            if wrap:
                t %= n
            else:
                ok &= (t >= 0) & (t < n)
        return np.where(ok, tj, 0), np.where(ok, ti, 0), ok

    for q in range(1, lattice.q):
        cx, cy = (int(v) for v in lattice.c[q])
        sj, si, s_ok = shifted(-cy, -cx)  # the pull source x - c_q
        nj, ni, n_ok = shifted(cy, cx)  # the neighbour x + c_q on the fluid side
        for body in bodies:
            if body.distance is None:
                continue
            hit = s_ok & body.cells[sj, si]
            if not hit.any():
                continue
            p = np.column_stack([ii[hit] + 0.5, jj[hit] + 0.5])
            d = np.tile(-np.array([cx, cy], dtype=np.float64), (len(p), 1))
            delta = np.clip(body.distance(p, d), 1e-6, 1.0)
            nb_fluid = n_ok[hit] & ~solid[nj[hit], ni[hit]]
            k = np.where(delta >= 0.5, -1.0 / (2.0 * delta),
                         np.where(nb_fluid, 2.0 * delta, HALFWAY))
            out[q, jj[hit], ii[hit]] = k
    return out
