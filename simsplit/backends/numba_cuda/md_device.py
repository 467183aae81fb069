"""Device functions the Numba MD kernels share: the unfused product, slab tests, global cells
and the halt test.

``mul`` is libdevice ``dmul_rn`` on a GPU (NVVM would otherwise contract ``a * b + c`` into a
fused multiply-add and round differently from the CPU) and a plain product on the simulator.
Every floating-point product of the MD kernels goes through it, and all their arithmetic is
float64 whatever the storage type, as on the CPU.
``slab_of``, ``near_slab`` and ``global_cell`` are ``kernels/md_lj.cu``'s and
``kernels/md_arena.cuh``'s, test for test. The pair geometry (minimum image, distances, cell
walks) is in :mod:`md_pairs`, beside the kernels that call it once per pair.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np
from numba import cuda

from simsplit.backends.numba_cuda.d2q9 import SIMULATOR

if SIMULATOR:  # plain Python arithmetic: nothing fuses
    mul: Callable[[Any, Any], Any] = operator.mul
else:
    from numba.cuda import libdevice

    mul = libdevice.dmul_rn


@cuda.jit(device=True)
def _py_mod(a, m):
    r = math.fmod(a, m)
    if r != 0.0:
        if (m < 0.0) != (r < 0.0):
            r += m
    else:
        r = math.copysign(0.0, m)
    return r


@cuda.jit(device=True)
def slab_of(z, edges, nslab):
    """The slab whose interval [edges[k], edges[k + 1]) holds z (clamped to the slabs)."""
    k = -1
    for m in range(nslab + 1):
        if not (z < edges[m]):
            k += 1
    return min(max(k, 0), nslab - 1)


@cuda.jit(device=True)
def near_slab(z, edges, s, lz, cut):
    """Whether z lies in slab s or within ``cut`` of it across a periodic z of length lz."""
    lo = edges[s]
    hi = edges[s + 1]
    if lo <= z and z < hi:
        return True
    return min(_py_mod(lo - z, lz), _py_mod(z - hi, lz)) < cut


@cuda.jit(device=True)
def global_cell(x, i, bx, by, bz, nx, ny, nz):
    """The global cell of row i: per axis int(x * (n / L)) clamped to [0, n)."""
    cx = int(mul(np.float64(x[i, 0]), np.float64(nx) / bx))
    cy = int(mul(np.float64(x[i, 1]), np.float64(ny) / by))
    cz = int(mul(np.float64(x[i, 2]), np.float64(nz) / bz))
    cx = min(max(cx, 0), nx - 1)
    cy = min(max(cy, 0), ny - 1)
    cz = min(max(cz, 0), nz - 1)
    return (cz * ny + cy) * nx + cx


@cuda.jit(device=True)
def _halted(at, tick, inclusive):
    """md_lj.cu's halted(), given flags[0] as ``at``."""
    if tick <= 0 or at == 0:
        return False
    return at <= tick if inclusive else at < tick
