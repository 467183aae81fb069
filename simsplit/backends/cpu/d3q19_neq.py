"""D3Q19 on ``run.storage: neq16`` (:mod:`simsplit.numerics.neq_storage`): the pull
stream-collide that reads each population from its source cell's record (moments and 16-bit
deviation) and writes each cell's record, cell by cell.

Walls, the lid (bodies of solid cells among them), Guo forcing and periodic x and y; the case
checks refuse the rest (inlets, outlets, free-slip walls, curved links, in-place streaming) on
this storage. The operations are those of :func:`simsplit.numerics.neq_storage.encode` and
``decode``, in float32, scalar by scalar (the Numba CUDA target can compile these helpers
too).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from simsplit.backends.cpu.d3q19_collide import _CX, _CY, _CZ, _OPP, _W, _collide
from simsplit.backends.cpu.rowgen import wrap as _wrap
from simsplit.backends.cpu.storage_codec import (
    float32_bits,
    float32_from_bits,
    half_from,
    half_to_float,
    round_even,
)
from simsplit.numerics.flags import BOUNDARY, LID, NEAR_WALL, SOLID
from simsplit.numerics.neq_storage import (
    NEQ_BITS,
    RHO_SCALE,
    exponent_slot,
    rho_slot,
    velocity_slot,
)

_K = exponent_slot(19)
_RHO = rho_slot(19)
_UX, _UY, _UZ = (velocity_slot(19, a) for a in range(3))
_INV_RHO_SCALE = 1.0 / RHO_SCALE
_TOP = 2.0**NEQ_BITS


@numba.njit(inline="always")
def _signed16(bits):
    v = np.int64(bits)
    return v - 65536 if v >= 32768 else v


@numba.njit(inline="always")
def _velocity(rec, s, k, j, i):
    """Velocity component of slot pair (s, s + 1) of cell (k, j, i), float32."""
    bits = np.int64(rec[s, k, j, i]) | (np.int64(rec[s + 1, k, j, i]) << 16)
    return np.float32(float32_from_bits(bits))


@numba.njit(inline="always")
def _rho(bits):
    """rho = 1 + (rho - 1) from its stored binary16 bits, float32 (exact: 11 bits)."""
    return np.float32(1.0) + np.float32(half_to_float(bits) * _INV_RHO_SCALE)


@numba.njit(inline="always")
def _feq(q, rho, ux, uy, uz, usq):
    """Equilibrium q of (rho, u) in float32, Lattice.equilibrium's operations and order."""
    dt = np.float32
    cu = dt(0.0)
    cu += dt(_CX[q]) * ux
    cu += dt(_CY[q]) * uy
    cu += dt(_CZ[q]) * uz
    poly = dt(1.0) + dt(3.0) * cu
    poly = (poly + dt(4.5) * cu * cu) - dt(1.5) * usq
    return dt(_W[q]) * rho * poly


@numba.njit(inline="always")
def _usq(ux, uy, uz):
    s = np.float32(0.0)
    s += ux * ux
    s += uy * uy
    s += uz * uz
    return s


@numba.njit(inline="always")
def _pull(rec, q, k, j, i):
    """Population q of cell (k, j, i) rebuilt from its record: f^eq_q + n_q 2^k."""
    rho = _rho(rec[_RHO, k, j, i])
    ux = _velocity(rec, _UX, k, j, i)
    uy = _velocity(rec, _UY, k, j, i)
    uz = _velocity(rec, _UZ, k, j, i)
    dev = math.ldexp(float(_signed16(rec[q, k, j, i])), int(_signed16(rec[_K, k, j, i])))
    return np.float32(dev) + _feq(q, rho, ux, uy, uz, _usq(ux, uy, uz))


@numba.njit(inline="always")
def _store(rec, post, feq, k, j, i):
    """Cell (k, j, i)'s record of its post-collision populations ``post`` (float32)."""
    dt = np.float32
    one = dt(1.0)
    r = dt(0.0)
    jx = dt(0.0)
    jy = dt(0.0)
    jz = dt(0.0)
    for q in range(19):
        v = post[q]
        r += v
        jx += dt(_CX[q]) * v
        jy += dt(_CY[q]) * v
        jz += dt(_CZ[q]) * v
    inv = one / r
    ux = jx * inv
    uy = jy * inv
    uz = jz * inv
    rho_bits = half_from((r - one) * dt(RHO_SCALE))
    rho = _rho(rho_bits)
    usq = _usq(ux, uy, uz)
    top = 0.0
    for q in range(19):
        feq[q] = _feq(q, rho, ux, uy, uz, usq)
        a = abs(float(post[q] - feq[q]))
        if a > top:
            top = a
    e = 0
    if top > 0.0:
        e = math.frexp(top)[1] - NEQ_BITS
        if round_even(math.ldexp(top, -e)) >= _TOP:
            e += 1
    for q in range(19):
        n = np.int64(round_even(math.ldexp(float(post[q] - feq[q]), -e)))
        rec[q, k, j, i] = np.uint16(n & 0xFFFF)
    rec[_K, k, j, i] = np.uint16(e & 0xFFFF)
    rec[_RHO, k, j, i] = np.uint16(rho_bits)
    for s, u in ((_UX, ux), (_UY, uy), (_UZ, uz)):
        bits = float32_bits(u)
        rec[s, k, j, i] = np.uint16(bits & 0xFFFF)
        rec[s + 1, k, j, i] = np.uint16((bits >> 16) & 0xFFFF)


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
                fl[q] = _pull(src, q, k - _CZ[q], _wrap(j - _CY[q], ny, periodic_y),
                              _wrap(i - _CX[q], nx, periodic_x))
            if own & NEAR_WALL:
                for q in range(19):
                    kind = flags[k - _CZ[q], _wrap(j - _CY[q], ny, periodic_y),
                                 _wrap(i - _CX[q], nx, periodic_x)]
                    if kind & BOUNDARY:
                        v = _pull(src, _OPP[q], k, j, i)
                        if kind == LID:
                            v += dt(6.0 * _W[q] * _CX[q]) * lid_u
                        fl[q] = v
            _collide(fl, post, pair_sum, pair_dif, rho_out, ux_out, uy_out, uz_out, k, j, i,
                     om_p, om_m, fx, fy, fz, src_p, src_m, store_macro, forced)
            _store(dst, post, feq, k, j, i)
