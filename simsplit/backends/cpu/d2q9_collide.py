"""The D2Q9 collision (BGK/TRT, Guo forcing) of the CPU kernels, shared by the populations'
kernels (:mod:`.d2q9`) on populations and on neq16 records alike."""

from __future__ import annotations

import numba

from simsplit.backends.cpu.storage_codec import _encode
from simsplit.numerics.lattice import D2Q9_C, D2Q9_OPP, D2Q9_W

_CX = tuple(int(c) for c in D2Q9_C[:, 0])
_CY = tuple(int(c) for c in D2Q9_C[:, 1])
_W = tuple(float(w) for w in D2Q9_W)
_OPP = tuple(int(o) for o in D2Q9_OPP)
_PAIRS = tuple(q for q in range(1, 9) if q < _OPP[q])


@numba.njit(inline="always")
def _collide(fl, f_dst, dj, di, rho_out, ux_out, uy_out, j, i, om_p, om_m, fx, fy, src_p, src_m,
             store_macro):
    """Collide cell (j, i)'s pulled populations ``fl`` into ``f_dst[:, dj, di]`` (encoded to
    its storage type); rho/u into the macroscopic fields if asked."""
    dt = fl.dtype.type
    one, half = dt(1.0), dt(0.5)
    r = dt(0.0)
    jx = dt(0.0)
    jy = dt(0.0)
    for q in range(9):
        r += fl[q]
        jx += dt(_CX[q]) * fl[q]
        jy += dt(_CY[q]) * fl[q]
    inv = one / r
    ux = (jx + half * fx) * inv
    uy = (jy + half * fy) * inv
    usq = dt(1.5) * (ux * ux + uy * uy)
    uf = ux * fx + uy * fy
    if store_macro:
        rho_out[j - 1, i - 1] = r
        ux_out[j - 1, i - 1] = ux
        uy_out[j - 1, i - 1] = uy
    # rest population: purely symmetric
    feq0 = dt(_W[0]) * r * (one - usq)
    s0 = dt(_W[0]) * dt(-3.0) * uf
    f_dst[0, dj, di] = _encode(fl[0] - om_p * (fl[0] - feq0) + src_p * s0, dt(_W[0]), f_dst)
    for k in range(4):
        _relax_pair(fl, f_dst, _PAIRS[k], dj, di, r, ux, uy, usq, uf, fx, fy,
                    om_p, om_m, src_p, src_m)


@numba.njit(inline="always")
def _relax_pair(fl, f_dst, q, j, i, r, ux, uy, usq, uf, fx, fy, om_p, om_m, src_p, src_m):
    # TRT relaxes a direction and its opposite together: symmetric and antisymmetric parts.
    o = _OPP[q]
    dt = fl.dtype.type
    w = dt(_W[q])
    cu = dt(_CX[q]) * ux + dt(_CY[q]) * uy
    cf = dt(_CX[q]) * fx + dt(_CY[q]) * fy
    feq_p = w * r * (dt(1.0) + dt(4.5) * cu * cu - usq)
    feq_m = w * r * dt(3.0) * cu
    s_p = w * (dt(9.0) * cu * cf - dt(3.0) * uf)
    s_m = w * dt(3.0) * cf
    f_p = dt(0.5) * (fl[q] + fl[o])
    f_m = dt(0.5) * (fl[q] - fl[o])
    relax_p = -om_p * (f_p - feq_p) + src_p * s_p
    relax_m = -om_m * (f_m - feq_m) + src_m * s_m
    f_dst[q, j, i] = _encode(fl[q] + relax_p + relax_m, w, f_dst)
    f_dst[o, j, i] = _encode(fl[o] + relax_p - relax_m, dt(_W[o]), f_dst)
