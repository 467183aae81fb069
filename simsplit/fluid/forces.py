"""Forces on bodies by momentum exchange, and their drag and lift coefficients.

Every link from a fluid cell x to a cell x + c_q of a body carries, across one step, the
momentum of Wen et al. (2014, J. Comput. Phys. 266, 161), Galilean invariant:

    dP = (c_q - u_w) f*_q(x, t) - (c_qbar - u_w) f_qbar(x, t + 1),

f* the post-collision populations and f_qbar(x, t + 1) what bounce-back returns: f*_q(x, t)
- 6 w_q rho_w c_q.u_w for a wall moving at u_w. Bodies are at rest (u_w = 0) so far, where
it is the classical 2 c_q f*_q(x, t); the u_w terms are kept so moving bodies follow.
Links are found once on the whole grid; each slab sums the links of its own rows from its
post-collision populations, and the sum over all links is exactly rounded (``math.fsum``), so
the force does not depend on the split (nor on the order slabs report in).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simsplit.fluid.geometry import solid_and_ids
from simsplit.numerics.lattice import Lattice


def link_momentum(f_out: np.ndarray, c: np.ndarray, w: np.ndarray, u_wall: np.ndarray,
                  rho_wall: float = 1.0) -> np.ndarray:
    """Momentum (per link, shape ``(n, dim)``) that links with outgoing post-collision
    populations ``f_out`` (n,) along ``c`` (n, dim), weights ``w`` (n,), pass to a wall moving
    at ``u_wall`` (dim,) in one step (Wen et al. 2014)."""
    cu = c @ u_wall
    back = f_out - 6.0 * w * rho_wall * cu  # what bounce-back returns along -c
    rel_out = c - u_wall
    rel_back = -c - u_wall
    return rel_out * f_out[:, None] - rel_back * back[:, None]


class BodyLinks:
    """Every fluid-to-body link of the grid: fluid cell (j, i), direction q, body index."""

    def __init__(self, bodies: list[Any], grid: tuple[int, int], lattice: Lattice,
                 periodic: tuple[bool, bool]) -> None:
        """``periodic``: (y, x) wrap; a neighbour beyond a non-periodic face is no body."""
        self.lattice, self.names = lattice, [b.name for b in bodies]
        solid, ids = solid_and_ids(bodies, grid)
        ny, nx = grid
        jj, ii = np.nonzero(~solid)
        js, is_, qs, bs = [], [], [], []
        for q in range(1, lattice.q):
            cx, cy = (int(v) for v in lattice.c[q])
            tj, ti = jj + cy, ii + cx
            inside = np.ones(len(jj), dtype=bool)
            for t, n, wrap in ((tj, ny, periodic[0]), (ti, nx, periodic[1])):
                if wrap:
                    t %= n
                else:
                    inside &= (t >= 0) & (t < n)
            hit = np.zeros(len(jj), dtype=bool)
            hit[inside] = solid[tj[inside], ti[inside]]
            js.append(jj[hit])
            is_.append(ii[hit])
            qs.append(np.full(int(hit.sum()), q))
            bs.append(ids[tj[hit], ti[hit]])
        order = np.lexsort((np.concatenate(qs), np.concatenate(is_), np.concatenate(js)))
        self.j, self.i, self.q, self.body = (np.concatenate(a)[order]
                                             for a in (js, is_, qs, bs))

    def slab_momentum(self, f: np.ndarray, row0: int, u_wall: np.ndarray) -> np.ndarray:
        """Per link of rows ``[row0, row0 + layers)``: (body, momentum x, momentum y) from a
        slab's post-collision populations ``f`` (q, layers, nx)."""
        sel = (self.j >= row0) & (self.j < row0 + f.shape[1])
        q = self.q[sel]
        f_out = f[q, self.j[sel] - row0, self.i[sel]].astype(np.float64)
        dp = link_momentum(f_out, self.lattice.c[q].astype(np.float64), self.lattice.w[q],
                           u_wall)
        return np.column_stack([self.body[sel].astype(np.float64), dp])


def total_forces(pieces: list[np.ndarray], n_bodies: int) -> np.ndarray:
    """Force (n_bodies, 2) from every slab's links, each sum exactly rounded (any order)."""
    rows = np.concatenate(pieces) if pieces else np.zeros((0, 3))
    out = np.zeros((n_bodies, 2))
    for b in range(n_bodies):
        mine = rows[rows[:, 0] == b]
        out[b] = [math.fsum(mine[:, 1]), math.fsum(mine[:, 2])]
    return out


def measure_forces(solver: Any, links: BodyLinks) -> np.ndarray:
    """Force on each body (lattice units, per unit depth) from the solver's current
    post-collision populations (collective under MPI)."""
    u_wall = np.zeros(2)
    pieces = {k: links.slab_momentum(blk.populations(), blk.layer0, u_wall)
              for k, blk in solver.blocks.items()}
    got = solver.transport.gather(pieces)
    return total_forces([got[k] for k in sorted(got)], len(links.names))


def coefficients(force: np.ndarray, velocity: float | None, length: float,
                 direction: float = 1.0, density: float = 1.0
                 ) -> tuple[float | None, float | None]:
    """(drag, lift) coefficients 2 F / (rho U^2 L) of a force: drag along the flow
    (``direction`` +1: +x, -1: -x), lift along y; None without a reference velocity."""
    if not velocity:
        return None, None
    scale = 0.5 * density * velocity * velocity * length
    return float(direction * force[0] / scale), float(force[1] / scale)
