"""Forces on bodies by momentum exchange, and their drag and lift coefficients.

Every link from a fluid cell x to a cell x + c_q of a body carries, across one step, the
momentum of Wen et al. (2014, J. Comput. Phys. 266, 161), Galilean invariant:

    dP = (c_q - u_w) f*_q(x, t) - (c_qbar - u_w) f_qbar(x, t + 1),

f* the post-collision populations and f_qbar(x, t + 1) what bounce-back returns: f*_q(x, t)
- 6 w_q rho_w c_q.u_w for a wall moving at u_w. Bodies are at rest (u_w = 0) so far, where
it is the classical 2 c_q f*_q(x, t); the u_w terms are kept so moving bodies follow. With
interpolated bounce-back the returned f_qbar(x, t + 1) is the interpolated one (the kernels'
weights, simsplit/fluid/geometry/links.py), which may mix in the neighbour x - c_q.
Links are found once on the whole grid; each slab sums the links of its own rows from its
post-collision populations, and the sum over all links is exactly rounded, so the force does
not depend on the split (nor on the order slabs report in). Runs use :class:`DeviceForces`
(each slab's backend sums exactly into integer limbs where its populations live; a few numbers
per body reach the host); :func:`measure_forces` gathers the per-link values to the host and
takes ``math.fsum``: the same bits, kept as the reference and the fallback.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simsplit.fluid.deep_halo import far_source
from simsplit.fluid.geometry import solid_and_ids
from simsplit.fluid.geometry.links import shifted_cells
from simsplit.numerics.exact import limb_sums
from simsplit.numerics.lattice import Lattice
from simsplit.numerics.momentum_exchange import (
    SlabLinkTable,
    link_momentum,
    returned_population,
)

__all__ = ["BodyLinks", "DeviceForces", "link_momentum", "measure_forces", "moving_wall_return",
           "total_forces"]


def moving_wall_return(f_out: np.ndarray, c: np.ndarray, w: np.ndarray, u_wall: np.ndarray,
                       rho_wall: float = 1.0) -> np.ndarray:
    """What halfway bounce-back at a wall moving at ``u_wall`` returns (Ladd)."""
    return f_out - 6.0 * w * rho_wall * (c @ u_wall)


class BodyLinks:
    """Every fluid-to-body link of the grid: fluid cell ``cell`` (index arrays in array order,
    the first along the split axis), direction q pointing into the body, body index, and the
    interpolated bounce-back weight k of the returning population
    (simsplit/fluid/geometry/links.py; -1: halfway)."""

    def __init__(self, bodies: list[Any], grid: tuple[int, ...], lattice: Lattice,
                 periodic: tuple[bool, ...], weights: np.ndarray | None = None) -> None:
        """``periodic``: wrap per array axis ((y, x) in 2D, (z, y, x) in 3D); a neighbour
        beyond a non-periodic face is no body. ``weights``: the kernels' link weights
        (q, *grid), as rounded for them; (3 q, *grid) quadratic ones."""
        self.lattice, self.names = lattice, [b.name for b in bodies]
        self.grid, self.periodic = grid, periodic
        solid, ids = solid_and_ids(bodies, grid)
        fluid = np.nonzero(~solid)
        cells: list[list[np.ndarray]] = [[] for _ in grid]
        qs, bs = [], []
        for q in range(1, lattice.q):
            c = tuple(int(v) for v in lattice.c[q][::-1])  # array order
            target, inside = shifted_cells(fluid, c, grid, periodic)
            hit = inside & solid[target]
            for axis, idx in enumerate(fluid):
                cells[axis].append(idx[hit])
            qs.append(np.full(int(hit.sum()), q))
            bs.append(ids[tuple(t[hit] for t in target)])
        flat = [np.concatenate(a) for a in cells]
        order = np.lexsort((np.concatenate(qs), *flat[::-1]))
        self.cell = tuple(a[order] for a in flat)
        self.q, self.body = np.concatenate(qs)[order], np.concatenate(bs)[order]
        self.q_in = lattice.opp[self.q]  #: the direction the wall returns
        w = np.zeros((3, len(self.q)))
        w[0] = -1.0
        if weights is not None:
            for s in range(weights.shape[0] // lattice.q):
                w[s] = weights[(s * lattice.q + self.q_in, *self.cell)].astype(np.float64)
        self.k, self.w2 = w[0], w[2]
        self.w1 = w[1] if weights is not None and weights.shape[0] > lattice.q \
            else 1 - np.abs(self.k)
        # the neighbour x - c_q that a weight k >= 0 mixes in (fluid wherever k >= 0); quadratic
        # links also read x - 2 c_q (k >= 0) or f*_q_in(x - c_q) (k < 0) where w2 != 0
        back = -lattice.c[self.q][:, ::-1]  # array order
        self.nbr = self._moved(back, grid, periodic)
        self.far = tuple(np.where(self.k >= 0, a, b) for a, b in
                         zip(self._moved(2 * back, grid, periodic), self.nbr, strict=True))
        self.q_far = np.where(self.k >= 0, self.q, self.q_in)

    def _moved(self, by: np.ndarray, grid: tuple[int, ...], periodic: tuple[bool, ...]
               ) -> tuple[np.ndarray, ...]:
        """Each link's cell moved by ``by`` (n, axes in array order), wrapped where periodic."""
        return tuple((idx + by[:, a]) % n if wrap else idx + by[:, a]
                     for a, (idx, n, wrap) in enumerate(zip(self.cell, grid, periodic,
                                                            strict=True)))

    def slab_values(self, f: np.ndarray, row0: int) -> np.ndarray:
        """What one slab knows from its post-collision populations ``f`` (q, layers, *cross),
        as rows (link, part, value): part 0 f*_q(x), part 1 f*_q_in(x) (links of its layers),
        part 2 f*_q(x - c_q) (links whose neighbour is in its layers and whose weight is
        >= 0), part 3 the quadratic term's population (where w2 != 0 and its cell is in its
        layers)."""
        lo, hi = row0, row0 + f.shape[1]
        own = np.flatnonzero((self.cell[0] >= lo) & (self.cell[0] < hi))
        nb = np.flatnonzero((self.k >= 0) & (self.nbr[0] >= lo) & (self.nbr[0] < hi))
        far = np.flatnonzero((self.w2 != 0) & (self.far[0] >= lo) & (self.far[0] < hi))

        def at(cells: tuple[np.ndarray, ...], sel: np.ndarray) -> tuple[np.ndarray, ...]:
            return (cells[0][sel] - row0, *(c[sel] for c in cells[1:]))

        parts = [
            (own, 0, f[(self.q[own], *at(self.cell, own))]),
            (own, 1, f[(self.q_in[own], *at(self.cell, own))]),
            (nb, 2, f[(self.q[nb], *at(self.nbr, nb))]),
            (far, 3, f[(self.q_far[far], *at(self.far, far))]),
        ]
        return np.concatenate([np.column_stack([idx.astype(np.float64),
                                                np.full(len(idx), float(part)),
                                                vals.astype(np.float64)])
                               for idx, part, vals in parts])

    def momentum(self, values: list[np.ndarray], u_wall: np.ndarray) -> np.ndarray:
        """Per link (n, dim): the momentum passed in one step, from every slab's values."""
        got = np.zeros((4, len(self.q)))
        for rows in values:
            got[rows[:, 1].astype(int), rows[:, 0].astype(int)] = rows[:, 2]
        f_out, own_in, nb, far = got
        f_back = returned_population(f_out, own_in, nb, self.k, self.w1, self.w2, far)
        return link_momentum(f_out, f_back, self.lattice.c[self.q].astype(np.float64), u_wall)


    def slab_table(self, layer0: int, layers: int, storage: Any, depth: int = 1
                   ) -> SlabLinkTable:
        """The links of layers ``[layer0, layer0 + layers)`` in the coordinates of that
        slab's population array (``depth`` ghost planes, one ghost cell across); f*_q(x - c_q)
        (and x - 2 c_q) beyond the slab is read from its ghost planes, which hold the
        neighbour's planes after a step."""
        own = np.flatnonzero((self.cell[0] >= layer0) & (self.cell[0] < layer0 + layers))
        lat, q, q_in = self.lattice, self.q[own], self.q_in[own]
        k, w2 = self.k[own], self.w2[own]
        cell = (self.cell[0][own] - layer0 + depth, *(c[own] + 1 for c in self.cell[1:]))
        # the neighbour: along the split axis a plane away (ghosts hold it), across the slab
        # the whole grid's (wrapped where periodic); where k < 0 it is never read
        nb_split = cell[0] - lat.c[q][:, -1]
        nb = (np.where(k >= 0, nb_split, cell[0]),
              *(np.where(k >= 0, n[own] + 1, c) for n, c in zip(self.nbr[1:], cell[1:],
                                                                 strict=True)))
        # the quadratic term: x - 2 c_q (k >= 0) or x - c_q (k < 0) across the split axis,
        # the whole grid's cell across the slab; where w2 = 0 it repeats out
        steps = np.where(k >= 0, 2, 1)
        far_split = cell[0] - steps * lat.c[q][:, -1]
        far = (np.where(w2 != 0, far_split, cell[0]),
               *(np.where(w2 != 0, n[own] + 1, c) for n, c in zip(self.far[1:], cell[1:],
                                                                  strict=True)))
        q_far = np.where(w2 != 0, self.q_far[own], q)
        w = np.asarray(lat.w, np.float64)
        return SlabLinkTable(
            out=(q, *cell), own_in=(q_in, *cell), nb=(q, *nb), k=k,
            c=lat.c[q].astype(np.float64), body=self.body[own].astype(np.int32),
            n_bodies=len(self.names), arith=np.dtype(storage.arith),
            shifted=bool(storage.shifted), inv_scale=1.0 / storage.scale,
            w_out=w[q], w_in=w[q_in], far=(q_far, *far), w1=self.w1[own], w2=w2,
            w_far=w[q_far], records=bool(storage.records))


def total_forces(momentum: np.ndarray, body: np.ndarray, n_bodies: int) -> np.ndarray:
    """Force (n_bodies, dim) from every link's momentum, each sum exactly rounded (any
    order)."""
    dim = momentum.shape[1]
    out = np.zeros((n_bodies, dim))
    for b in range(n_bodies):
        mine = momentum[body == b]
        out[b] = [math.fsum(mine[:, a]) for a in range(dim)]
    return out


def measure_forces(solver: Any, links: BodyLinks) -> np.ndarray:
    """Force on each body (lattice units; per unit depth in 2D) from the solver's current
    post-collision populations (collective under MPI)."""
    pieces = {k: links.slab_values(blk.populations(), blk.layer0)
              for k, blk in solver.blocks.items()}
    got = solver.transport.gather(pieces)
    momentum = links.momentum([got[k] for k in sorted(got)], np.zeros(links.lattice.dim))
    return total_forces(momentum, links.body, len(links.names))


def body_links(setup: Any) -> BodyLinks:
    """The links of a fluid setup's bodies, with the weights its kernels use."""
    geo = setup.geometry
    weights = None
    if geo is not None and geo.links is not None:
        weights = geo.links.astype(setup.dtype)
    periodic = (setup.periodic_split, *(bool(p) for p in setup.params.periodic))
    return BodyLinks(list(setup.bodies), setup.grid, setup.lattice, periodic, weights)


class DeviceForces:
    """Forces on bodies reduced where the populations live: per slab a link table (built once,
    again when slabs move), one kernel launch, and n_bodies x dim exact sums read back (limbs,
    :mod:`simsplit.numerics.exact`). The same bits as :func:`measure_forces` (both are the
    correctly rounded sum of the same per-link momenta) on every backend and split; where a
    link's momentum is not finite, :func:`measure_forces` decides (fsum's NaN or error)."""

    def __init__(self, links: BodyLinks) -> None:
        self.links = links
        self._tables: dict[int, Any] = {}
        self._key: tuple[Any, ...] | None = None

    def _prepared(self, solver: Any) -> dict[int, Any]:
        key = tuple((k, id(blk), blk.layer0, blk.layers) for k, blk in solver.blocks.items())
        if key != self._key:
            self._tables = {k: blk.backend.link_forces.prepare(
                self.links.slab_table(blk.layer0, blk.layers, blk.storage, blk.depth),
                far_source(blk)[0]) for k, blk in solver.blocks.items()}
            self._key = key
        return self._tables

    def measure(self, solver: Any) -> np.ndarray:
        """Force on each body (lattice units; per unit depth in 2D) from the solver's current
        post-collision populations (collective under MPI)."""
        solver.refresh_ghosts()  # f*_q(x - c_q) of links at slab faces lies in ghost planes
        tables, pieces = self._prepared(solver), {}
        for k, blk in solver.blocks.items():
            limbs, bad = blk.backend.link_forces.sums(far_source(blk)[0], tables[k])
            pieces[k] = np.append(limbs.ravel(), np.int64(bad))
        total = sum(solver.transport.gather(pieces).values())  # integers: exact, any order
        if total[-1]:
            return measure_forces(solver, self.links)
        dim = self.links.lattice.dim
        return limb_sums(total[:-1].reshape(len(self.links.names) * dim, -1)).reshape(-1, dim)


def coefficients(force: np.ndarray, velocity: float | None, reference: float,
                 direction: float = 1.0, density: float = 1.0
                 ) -> tuple[float | None, float | None]:
    """(drag, lift) coefficients 2 F / (rho U^2 L) (2D, ``reference`` a length) or 2 F /
    (rho U^2 A) (3D, an area) of a force: drag along the flow (``direction`` +1: +x, -1: -x),
    lift along y; None without a reference velocity."""
    if not velocity:
        return None, None
    scale = 0.5 * density * velocity * velocity * reference
    return float(direction * force[0] / scale), float(force[1] / scale)
