"""D2Q9 lattice tables: the single source of velocities, weights and halo directions.

Every backend (Numba CPU, Numba CUDA, CUDA C) builds its kernels from these tables, so the
direction numbering below is a contract: changing it changes every kernel at once.
"""

from __future__ import annotations

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

#: Directions whose populations move up (+y) across a slab face, and down (-y).
UP = tuple(int(q) for q in np.flatnonzero(D2Q9_C[:, 1] == 1))
DOWN = tuple(int(q) for q in np.flatnonzero(D2Q9_C[:, 1] == -1))


def equilibrium(rho: np.ndarray, ux: np.ndarray, uy: np.ndarray) -> np.ndarray:
    """Second-order equilibrium populations, shape (9, *rho.shape), in float64."""
    feq = np.empty((Q,) + np.shape(rho))
    usq = ux * ux + uy * uy
    for q in range(Q):
        cu = D2Q9_C[q, 0] * ux + D2Q9_C[q, 1] * uy
        feq[q] = D2Q9_W[q] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * usq)
    return feq
