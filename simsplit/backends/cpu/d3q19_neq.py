"""D3Q19 on ``run.storage: neq16`` (:mod:`simsplit.numerics.neq_storage`): the pull
stream-collide that reads each population from its source cell's record (moments and 16-bit
deviation) and writes each cell's record, cell by cell.

Walls, the lid (bodies of solid cells among them), Guo forcing and periodic x and y; the case
checks refuse the rest (inlets, outlets, free-slip walls, curved links, in-place streaming) on
this storage. Records are read and written by :mod:`.neq_codec`.
"""

from __future__ import annotations

import numba
import numpy as np

from simsplit.backends.cpu.d3q19_collide import _CX, _CY, _CZ, _OPP, _W, _collide
from simsplit.backends.cpu.neq_codec import pull, store
from simsplit.backends.cpu.rowgen import wrap as _wrap
from simsplit.numerics.flags import BOUNDARY, LID, NEAR_WALL, SOLID


@numba.njit(parallel=True, cache=True)
def stream_collide_neq(src, dst, flags, rho_out, ux_out, uy_out, uz_out, k0, k1, om_p, om_m,
                       lid_u, fx, fy, fz, periodic_x, periodic_y, store_macro, forced):
    """Two-lattice pull step of planes [k0, k1) on neq16 records ``src`` -> ``dst``: walls and
    the lid bounce back the own cell's rebuilt opposite population (Ladd's term on the lid),
    float32 arithmetic."""
    ny = src.shape[2] - 2
    nx = src.shape[3] - 2
    dt = np.float32
    one, half = dt(1.0), dt(0.5)
    om_p, om_m = dt(om_p), dt(om_m)
    fx, fy, fz, lid_u = dt(fx), dt(fy), dt(fz), dt(lid_u)
    src_p = one - half * om_p
    src_m = one - half * om_m
    for row in numba.prange((k1 - k0) * ny):
        k = k0 + row // ny
        j = 1 + row % ny
        fl = np.empty(19, dtype=np.float32)
        post = np.empty(19, dtype=np.float32)
        feq = np.empty(19, dtype=np.float32)
        pair_sum = np.empty(9, dtype=np.float32)
        pair_dif = np.empty(9, dtype=np.float32)
        for i in range(1, nx + 1):
            own = flags[k, j, i]
            if own & SOLID:
                continue
            for q in range(19):
                fl[q] = pull(src, q, k - _CZ[q], _wrap(j - _CY[q], ny, periodic_y),
                             _wrap(i - _CX[q], nx, periodic_x), _CX, _CY, _CZ, _W)
            if own & NEAR_WALL:
                for q in range(19):
                    kind = flags[k - _CZ[q], _wrap(j - _CY[q], ny, periodic_y),
                                 _wrap(i - _CX[q], nx, periodic_x)]
                    if kind & BOUNDARY:
                        v = pull(src, _OPP[q], k, j, i, _CX, _CY, _CZ, _W)
                        if kind == LID:
                            v += dt(6.0 * _W[q] * _CX[q]) * lid_u
                        fl[q] = v
            _collide(fl, post, pair_sum, pair_dif, rho_out, ux_out, uy_out, uz_out, k, j, i,
                     om_p, om_m, fx, fy, fz, src_p, src_m, store_macro, forced)
            store(dst, post, feq, k, j, i, _CX, _CY, _CZ, _W)
