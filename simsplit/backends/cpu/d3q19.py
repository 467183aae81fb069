"""D3Q19 kernels for the CPU: fused pull stream-collide (BGK/TRT, Guo forcing), halo pack/unpack.

Layout as in 2D with one more axis: populations ``f[q, k, j, i]`` with one ghost layer all round
(shape ``(19, nz + 2, ny + 2, nx + 2)``), flags ``(nz + 2, ny + 2, nx + 2)`` uint8, macroscopic
fields ``(nz, ny, nx)`` for the interior only. Planes ``k`` are along the split axis; x and y
may be periodic within a slab (their ghost cells are then never read).
"""

from __future__ import annotations

import numba
import numpy as np

from simsplit.backends.cpu.d2q9 import _pack, _unpack
from simsplit.fluid.flags import LID, NEAR_WALL, SOLID
from simsplit.fluid.lattice import D3Q19

_CX = tuple(int(c) for c in D3Q19.c[:, 0])
_CY = tuple(int(c) for c in D3Q19.c[:, 1])
_CZ = tuple(int(c) for c in D3Q19.c[:, 2])
_W = tuple(float(w) for w in D3Q19.w)
_OPP = tuple(int(o) for o in D3Q19.opp)
_PAIRS = tuple(q for q in range(1, D3Q19.q) if q < _OPP[q])
_HALO_DIRS = np.array([D3Q19.up, D3Q19.down], dtype=np.int64)


@numba.njit(inline="always")
def _wrap(s, n, periodic):
    if periodic:
        return n if s == 0 else (1 if s == n + 1 else s)
    return s


@numba.njit(parallel=True, cache=True)
def _stream_collide(f_src, f_dst, flags, rho_out, ux_out, uy_out, uz_out, k0, k1,
                    om_p, om_m, lid_u, fx, fy, fz, periodic_x, periodic_y, store_macro):
    ny = f_src.shape[2] - 2
    nx = f_src.shape[3] - 2
    dt = f_src.dtype.type
    one, half = dt(1.0), dt(0.5)
    om_p, om_m = dt(om_p), dt(om_m)
    fx, fy, fz, lid_u = dt(fx), dt(fy), dt(fz), dt(lid_u)
    src_p = one - half * om_p  # Guo source weights for symmetric / antisymmetric parts
    src_m = one - half * om_m
    for row in numba.prange((k1 - k0) * ny):  # rows (k, j): parallel even in a one-plane range
        k = k0 + row // ny
        j = 1 + row % ny
        fl = np.empty(19, dtype=f_src.dtype)
        for i in range(1, nx + 1):
            own = flags[k, j, i]
            if own & SOLID:
                continue
            for q in range(19):
                sj = _wrap(j - _CY[q], ny, periodic_y)
                si = _wrap(i - _CX[q], nx, periodic_x)
                fl[q] = f_src[q, k - _CZ[q], sj, si]
            if own & NEAR_WALL:  # only cells next to a wall look at their sources' flags
                for q in range(19):
                    sj = _wrap(j - _CY[q], ny, periodic_y)
                    si = _wrap(i - _CX[q], nx, periodic_x)
                    kind = flags[k - _CZ[q], sj, si]
                    if kind & SOLID:
                        v = f_src[_OPP[q], k, j, i]
                        if kind == LID:
                            v += dt(6.0 * _W[q] * _CX[q]) * lid_u
                        fl[q] = v
            _collide(fl, f_dst, rho_out, ux_out, uy_out, uz_out, k, j, i, om_p, om_m, fx, fy, fz,
                     src_p, src_m, store_macro)


@numba.njit(inline="always")
def _collide(fl, f_dst, rho_out, ux_out, uy_out, uz_out, k, j, i, om_p, om_m, fx, fy, fz,
             src_p, src_m, store_macro):
    dt = fl.dtype.type
    one, half = dt(1.0), dt(0.5)
    r = dt(0.0)
    jx = dt(0.0)
    jy = dt(0.0)
    jz = dt(0.0)
    for q in range(19):
        r += fl[q]
        jx += dt(_CX[q]) * fl[q]
        jy += dt(_CY[q]) * fl[q]
        jz += dt(_CZ[q]) * fl[q]
    inv = one / r
    ux = (jx + half * fx) * inv
    uy = (jy + half * fy) * inv
    uz = (jz + half * fz) * inv
    usq = dt(1.5) * (ux * ux + uy * uy + uz * uz)
    uf = ux * fx + uy * fy + uz * fz
    if store_macro:
        rho_out[k - 1, j - 1, i - 1] = r
        ux_out[k - 1, j - 1, i - 1] = ux
        uy_out[k - 1, j - 1, i - 1] = uy
        uz_out[k - 1, j - 1, i - 1] = uz
    # rest population: purely symmetric
    feq0 = dt(_W[0]) * r * (one - usq)
    s0 = dt(_W[0]) * dt(-3.0) * uf
    f_dst[0, k, j, i] = fl[0] - om_p * (fl[0] - feq0) + src_p * s0
    for n in range(9):
        q = _PAIRS[n]
        o = _OPP[q]
        # TRT relaxes a direction and its opposite together: symmetric and antisymmetric parts
        w = dt(_W[q])
        cu = dt(_CX[q]) * ux + dt(_CY[q]) * uy + dt(_CZ[q]) * uz
        cf = dt(_CX[q]) * fx + dt(_CY[q]) * fy + dt(_CZ[q]) * fz
        feq_p = w * r * (one + dt(4.5) * cu * cu - usq)
        feq_m = w * r * dt(3.0) * cu
        s_p = w * (dt(9.0) * cu * cf - dt(3.0) * uf)
        s_m = w * dt(3.0) * cf
        f_p = half * (fl[q] + fl[o])
        f_m = half * (fl[q] - fl[o])
        relax_p = -om_p * (f_p - feq_p) + src_p * s_p
        relax_m = -om_m * (f_m - feq_m) + src_m * s_m
        f_dst[q, k, j, i] = fl[q] + relax_p + relax_m
        f_dst[o, k, j, i] = fl[o] + relax_p - relax_m


def _layers(f: np.ndarray) -> np.ndarray:
    """View of ``f`` as ``(q, layers, cells per layer)``: halos move whole layers."""
    return f.reshape(f.shape[0], f.shape[1], -1)


class D3Q19Kernels:
    """CPU launchers with the signature every backend's D3Q19 kernel set shares."""

    def stream_collide(self, f_src, f_dst, flags, rho, ux, uy, uz, layers, p, store_macro):
        _stream_collide(f_src, f_dst, flags, rho, ux, uy, uz, layers[0], layers[1],
                        p.omega_plus, p.omega_minus, p.lid_velocity, p.force_x, p.force_y,
                        p.force_z, p.periodic_x, p.periodic_y, store_macro)

    def pack(self, f, layer, direction, buf):
        _pack(_layers(f), layer, _HALO_DIRS[direction], buf)

    def unpack(self, buf, f, layer, direction):
        _unpack(buf, _layers(f), layer, _HALO_DIRS[direction])
