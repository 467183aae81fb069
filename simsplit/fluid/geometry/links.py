"""Interpolated bounce-back weights (Bouzidi, Firdaouss & Lallemand 2001, linear and
quadratic), per link from a fluid cell to a body cell, from the exact wall distance of the
body's shape.

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

Quadratic (``domain.bounce_back: quadratic``), from the same paper's second-order fits:

    delta < 1/2:   f_q = d (1 + 2d) f*_qbar(x) + (1 - 4 d^2) f*_qbar(x + c_q)
                         - d (1 - 2d) f*_qbar(x + 2 c_q)
    delta >= 1/2:  f_q = f*_qbar(x) / (d (2d + 1)) + (2d - 1) / d f*_q(x)
                         - (2d - 1) / (2d + 1) f*_q(x + c_q)

(d = delta). Three weights per link ``(w0, w1, w2)``, stored as ``(3 q, *grid)`` (weight s of
direction q at s q + q): ``f_q = |w0| f*_qbar(x) + w1 A + w2 B`` with (A, B) = (f*_qbar(x +
c_q), f*_qbar(x + 2 c_q)) where w0 >= 0 (delta < 1/2), (f*_q(x), f*_q(x + c_q)) where w0 < 0;
kernels skip the B term where w2 == 0. The fallbacks depend on the geometry alone (so on no
split): delta < 1/2 with x + c_q not fluid is halfway (-1, 0, 0); with x + c_q fluid but
x + 2 c_q not (a solid, or beyond a wall or an open face) the linear rule (2d, 1 - 2d, 0);
delta >= 1/2 with x + c_q not fluid the linear rule (-1 / (2d), 1 - 1 / (2d), 0).
"""

from __future__ import annotations

import numpy as np

from simsplit.fluid.geometry.body import Body
from simsplit.numerics.lattice import Lattice

HALFWAY = -1.0


def shifted_cells(cells: tuple[np.ndarray, ...], offset: tuple[int, ...], grid: tuple[int, ...],
                  periodic: tuple[bool, ...]) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Cells ``cells`` (index arrays in array order) moved by ``offset`` (array order), wrapped
    along ``periodic`` axes: (indices, clipped to 0 beyond a face; inside the grid)."""
    ok = np.ones(len(cells[0]), dtype=bool)
    out = []
    for idx, d, n, wrap in zip(cells, offset, grid, periodic, strict=True):
        t = idx + d
        if wrap:
            t %= n
        else:
            ok &= (t >= 0) & (t < n)
        out.append(t)
    return tuple(np.where(ok, t, 0) for t in out), ok


def _quadratic(delta: np.ndarray, near: np.ndarray, far: np.ndarray) -> np.ndarray:
    """(3, n) weights of quadratic links of wall fractions ``delta`` whose cells x + c_q
    (``near``) and x + 2 c_q (``far``) are fluid or not (the module's fallbacks)."""
    d = delta
    low = d < 0.5
    w = np.empty((3, len(d)))
    w[0] = np.where(low, d * (1.0 + 2.0 * d), -1.0 / (d * (2.0 * d + 1.0)))
    w[1] = np.where(low, (1.0 - 2.0 * d) * (1.0 + 2.0 * d), (2.0 * d - 1.0) / d)
    w[2] = np.where(low, -d * (1.0 - 2.0 * d), -(2.0 * d - 1.0) / (2.0 * d + 1.0))
    linear = np.stack([np.where(low, 2.0 * d, -1.0 / (2.0 * d)),
                       np.where(low, 1.0 - 2.0 * d, 1.0 - 1.0 / (2.0 * d)), np.zeros_like(d)])
    w = np.where(near & (far | ~low), w, linear)
    return np.where(low & ~near, np.array([[HALFWAY], [0.0], [0.0]]), w)


def link_weights(bodies: list[Body], solid: np.ndarray, lattice: Lattice,
                 periodic: tuple[bool, ...], quadratic: bool = False) -> np.ndarray:
    """``k`` of every (q, *cell) (array order; ``periodic`` per array axis, (y, x) in 2D,
    (z, y, x) in 3D): HALFWAY except on links from fluid cells to bodies with a shape.
    ``quadratic``: the three weights of every link, ``(3 q, *cell)`` (module docstring;
    halfway: (-1, 0, 0))."""
    grid = solid.shape
    out = np.full((lattice.q, *grid), HALFWAY)
    if quadratic:
        out = np.concatenate([out, np.zeros((2 * lattice.q, *grid))])
    fluid = np.nonzero(~solid)
    centres = np.column_stack([idx + 0.5 for idx in fluid[::-1]])  # (x, y(, z)) of each
    for q in range(1, lattice.q):
        c = np.array([int(v) for v in lattice.c[q]])
        src, s_ok = shifted_cells(fluid, tuple(-c[::-1]), grid, periodic)  # pull source x - c_q
        nbr, n_ok = shifted_cells(fluid, tuple(c[::-1]), grid, periodic)  # fluid side x + c_q
        far, f_ok = shifted_cells(fluid, tuple(2 * c[::-1]), grid, periodic)  # x + 2 c_q
        for body in bodies:
            if body.distance is None:
                continue
            hit = s_ok & body.cells[src]
            if not hit.any():
                continue
            d = np.tile(-c.astype(np.float64), (int(hit.sum()), 1))
            delta = np.clip(body.distance(centres[hit], d), 1e-6, 1.0)
            nb_fluid = n_ok[hit] & ~solid[tuple(t[hit] for t in nbr)]
            if quadratic:
                far_fluid = f_ok[hit] & ~solid[tuple(t[hit] for t in far)]
                w = _quadratic(delta, nb_fluid, far_fluid)
                for s in range(3):
                    out[(s * lattice.q + q, *(idx[hit] for idx in fluid))] = w[s]
                continue
            k = np.where(delta >= 0.5, -1.0 / (2.0 * delta),
                         np.where(nb_fluid, 2.0 * delta, HALFWAY))
            out[(q, *(idx[hit] for idx in fluid))] = k
    return out
