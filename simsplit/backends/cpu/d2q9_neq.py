"""D2Q9 on ``run.storage: neq16`` (:mod:`simsplit.numerics.neq_storage`): the pull
stream-collide on cell records, cell by cell (walls, the lid, forcing, periodic x; the case
checks refuse the rest on this storage). Records are read and written by :mod:`.neq_codec`,
as one-plane 4D arrays."""

from __future__ import annotations

import numba
import numpy as np

from simsplit.backends.cpu.d2q9_collide import _CX, _CY, _OPP, _W, _collide
from simsplit.backends.cpu.neq_codec import pull, store
from simsplit.backends.cpu.rowgen import wrap as _wrap
from simsplit.numerics.flags import BOUNDARY, LID, NEAR_WALL, SOLID

_CZ = (0,) * len(_W)


@numba.njit(parallel=True, cache=True)
def stream_collide_neq(src, dst, flags, rho_out, ux_out, uy_out, j0, j1, om_p, om_m, lid_u,
                       fx, fy, periodic_x, store_macro):
    """Two-lattice pull step of rows [j0, j1) on neq16 records ``src`` -> ``dst`` (``(15, 1,
    ny + 2, nx + 2)``): walls and the lid bounce back the own cell's rebuilt opposite
    population, float32 arithmetic."""
    nx = src.shape[3] - 2
    dt = np.float32
    one, half = dt(1.0), dt(0.5)
    om_p, om_m = dt(om_p), dt(om_m)
    fx, fy, lid_u = dt(fx), dt(fy), dt(lid_u)
    src_p = one - half * om_p
    src_m = one - half * om_m
    for j in numba.prange(j0, j1):
        fl = np.empty(9, dtype=np.float32)
        out = np.empty((9, 1, 1), dtype=np.float32)
        post = out[:, 0, 0]
        feq = np.empty(9, dtype=np.float32)
        for i in range(1, nx + 1):
            if flags[j, i] & SOLID:
                continue
            for q in range(9):
                fl[q] = pull(src, q, 0, j - _CY[q], _wrap(i - _CX[q], nx, periodic_x), _CX, _CY,
                             _CZ, _W)
            if flags[j, i] & NEAR_WALL:
                for q in range(9):
                    kind = flags[j - _CY[q], _wrap(i - _CX[q], nx, periodic_x)]
                    if kind & BOUNDARY:
                        v = pull(src, _OPP[q], 0, j, i, _CX, _CY, _CZ, _W)
                        if kind == LID:
                            v += dt(6.0 * _W[q] * _CX[q]) * lid_u
                        fl[q] = v
            _collide(fl, out, 0, 0, rho_out, ux_out, uy_out, j, i, om_p, om_m, fx, fy, src_p,
                     src_m, store_macro)
            store(dst, post, feq, 0, j, i, _CX, _CY, _CZ, _W)
