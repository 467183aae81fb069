"""Lattice tables (D2Q9, D3Q19): the single source of velocities, weights and halo directions.

Every backend (Numba CPU, Numba CUDA, CUDA C) builds its kernels from these tables, so the
direction numbering below is a contract: changing it changes every kernel at once. The split
axis of a slab decomposition is the last component of ``c`` (y in 2D, z in 3D).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Lattice speed of sound squared.
CS2 = 1.0 / 3.0

#: Discrete velocities (cx, cy). Direction 0 rests; opposite pairs are (1,3), (2,4), (5,7), (6,8).
D2Q9_C = np.array(
    [
        (0, 0),
        (1, 0),
        (0, 1),
        (-1, 0),
        (0, -1),
        (1, 1),
        (-1, 1),
        (-1, -1),
        (1, -1),
    ],
    dtype=np.int64,
)
D2Q9_W = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4, dtype=np.float64)
D2Q9_OPP = np.array([0, 3, 4, 1, 2, 7, 8, 5, 6], dtype=np.int64)
Q = 9


def specular_table(c: np.ndarray) -> np.ndarray:
    """``[q, mask]``: the direction of ``c[q]`` with the components of the axes in bit mask
    ``mask`` (bit a: axis a, x first) reversed, the specular reflection of q at free-slip walls
    normal to those axes (docs/bodies.md, "Free-slip walls"); every backend's slip rule reads
    it."""
    index = {tuple(int(v) for v in row): p for p, row in enumerate(c)}
    dim = c.shape[1]
    table = np.empty((len(c), 1 << dim), dtype=np.int64)
    for q, row in enumerate(c):
        for mask in range(1 << dim):
            table[q, mask] = index[tuple(-int(v) if mask >> a & 1 else int(v)
                                         for a, v in enumerate(row))]
    return table


D2Q9_SPECULAR = specular_table(D2Q9_C)

#: Directions whose populations move up (+y) across a slab face, and down (-y).
UP = tuple(int(q) for q in np.flatnonzero(D2Q9_C[:, 1] == 1))
DOWN = tuple(int(q) for q in np.flatnonzero(D2Q9_C[:, 1] == -1))

#: D3Q19 velocities (cx, cy, cz): rest, the six faces (opposites adjacent), the twelve edges
#: (opposites adjacent).
D3Q19_C = np.array(
    [
        (0, 0, 0),
        (1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1),
        (1, 1, 0), (-1, -1, 0), (1, -1, 0), (-1, 1, 0),
        (1, 0, 1), (-1, 0, -1), (1, 0, -1), (-1, 0, 1),
        (0, 1, 1), (0, -1, -1), (0, 1, -1), (0, -1, 1),
    ],
    dtype=np.int64,
)
D3Q19_W = np.array([1 / 3] + [1 / 18] * 6 + [1 / 36] * 12, dtype=np.float64)


def _opposites(c: np.ndarray) -> np.ndarray:
    return np.array([next(p for p in range(len(c)) if (c[p] == -c[q]).all())
                     for q in range(len(c))], dtype=np.int64)


D3Q19_OPP = _opposites(D3Q19_C)
D3Q19_SPECULAR = specular_table(D3Q19_C)


@dataclass(frozen=True, eq=False)
class Lattice:
    """A DdQq velocity set and the halo direction sets of a split along its last axis."""

    name: str
    c: np.ndarray
    w: np.ndarray
    opp: np.ndarray

    @property
    def q(self) -> int:
        return len(self.w)

    @property
    def dim(self) -> int:
        return int(self.c.shape[1])

    @property
    def kernels(self) -> str:
        """Attribute name of this lattice's kernel set on a backend (``backend.d2q9``, ...)."""
        return self.name.lower()

    @property
    def up(self) -> tuple[int, ...]:
        """Directions crossing a slab face upwards (+1 along the split axis)."""
        return tuple(int(q) for q in np.flatnonzero(self.c[:, -1] == 1))

    @property
    def down(self) -> tuple[int, ...]:
        return tuple(int(q) for q in np.flatnonzero(self.c[:, -1] == -1))

    def equilibrium(self, rho: np.ndarray, *u: np.ndarray, dtype: Any = np.float64,
                    order: int = 2) -> np.ndarray:
        """Equilibrium populations, shape ``(q, *rho.shape)``, computed in ``dtype`` (float64;
        an emulated kernel's arithmetic type, scripts/fp16_study.py), of second order in u or,
        with ``order=1``, of first (``w rho (1 + 3 c.u)``)."""
        if order not in (1, 2):
            raise ValueError(f"equilibrium order {order!r} (allowed: 1, 2)")
        dt = np.dtype(dtype).type
        rho = np.asarray(rho, dtype=dtype)
        u = tuple(np.asarray(v, dtype=dtype) for v in u)
        feq = np.empty((self.q,) + rho.shape, dtype=dtype)
        usq = sum(v**2 for v in u)
        for q in range(self.q):
            cu = sum(dt(self.c[q, d]) * u[d] for d in range(self.dim))
            poly = 1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * usq if order == 2 else 1.0 + 3.0 * cu
            feq[q] = dt(self.w[q]) * rho * poly
        return feq


D2Q9 = Lattice("D2Q9", D2Q9_C, D2Q9_W, D2Q9_OPP)
D3Q19 = Lattice("D3Q19", D3Q19_C, D3Q19_W, D3Q19_OPP)
LATTICES = {2: D2Q9, 3: D3Q19}


def lattice_for(dim: int) -> Lattice:
    """The lattice of a ``dim``-dimensional grid: D2Q9 in 2D, D3Q19 in 3D."""
    try:
        return LATTICES[dim]
    except KeyError:
        raise ValueError(f"no lattice for {dim} dimensions (2 or 3)") from None


def equilibrium(rho: np.ndarray, ux: np.ndarray, uy: np.ndarray) -> np.ndarray:
    """Second-order D2Q9 equilibrium populations, shape (9, *rho.shape), in float64."""
    feq = np.empty((Q,) + np.shape(rho))
    usq = ux * ux + uy * uy
    for q in range(Q):
        cu = D2Q9_C[q, 0] * ux + D2Q9_C[q, 1] * uy
        feq[q] = D2Q9_W[q] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * usq)
    return feq
