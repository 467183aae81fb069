"""The D3Q19 collision (BGK/TRT, Guo forcing) of the CPU kernels, shared by the pull and
in-place kernels (:mod:`.d3q19`), on populations and on neq16 records alike."""

from __future__ import annotations

import numba

from simsplit.numerics.lattice import D3Q19

_CX = tuple(int(c) for c in D3Q19.c[:, 0])
_CY = tuple(int(c) for c in D3Q19.c[:, 1])
_CZ = tuple(int(c) for c in D3Q19.c[:, 2])
_W = tuple(float(w) for w in D3Q19.w)
_OPP = tuple(int(o) for o in D3Q19.opp)
_PAIRS = tuple(q for q in range(1, D3Q19.q) if q < _OPP[q])


@numba.njit(inline="always")
def _dot_c(cx, cy, cz, a, b, c):
    """c . (a, b, c) with the zero components of c left out, in the order the GPU kernels add
    (a product with zero is not free under IEEE rules, so every backend leaves out the same)."""
    if cx != 0:
        s = cx * a
    elif cy != 0:
        s = cy * b
    else:
        s = cz * c
    if cx != 0 and cy != 0:
        s += cy * b
    if (cx != 0 or cy != 0) and cz != 0:
        s += cz * c
    return s


@numba.njit(inline="always")
def _collide(fl, post, pair_sum, pair_dif, rho_out, ux_out, uy_out, uz_out, k, j, i, om_p, om_m,
             fx, fy, fz, src_p, src_m, store_macro, forced):
    """Collide the pulled populations ``fl`` into ``post`` (arithmetic type); macros if asked.
    Without a body force (``forced`` false) the Guo source terms are left out."""
    dt = fl.dtype.type
    one, half = dt(1.0), dt(0.5)
    # moments from the pairs' sums and differences (kept in pair_sum/pair_dif for the
    # relaxation), each momentum component from its first nonzero term, as the GPU kernels
    r = fl[0]
    jx = dt(0.0)
    jy = dt(0.0)
    jz = dt(0.0)
    has_x = has_y = has_z = False
    for n in range(9):
        q = _PAIRS[n]
        o = _OPP[q]
        d = fl[q] - fl[o]
        pair_sum[n] = fl[q] + fl[o]
        pair_dif[n] = d
        r += pair_sum[n]
        if _CX[q] != 0:
            jx = jx + dt(_CX[q]) * d if has_x else dt(_CX[q]) * d
            has_x = True
        if _CY[q] != 0:
            jy = jy + dt(_CY[q]) * d if has_y else dt(_CY[q]) * d
            has_y = True
        if _CZ[q] != 0:
            jz = jz + dt(_CZ[q]) * d if has_z else dt(_CZ[q]) * d
            has_z = True
    inv = one / r
    if forced:
        ux = (jx + half * fx) * inv
        uy = (jy + half * fy) * inv
        uz = (jz + half * fz) * inv
        uf = ux * fx + uy * fy + uz * fz
    else:
        ux = jx * inv
        uy = jy * inv
        uz = jz * inv
        uf = dt(0.0)
    usq = dt(1.5) * (ux * ux + uy * uy + uz * uz)
    if store_macro:
        rho_out[k - 1, j - 1, i - 1] = r
        ux_out[k - 1, j - 1, i - 1] = ux
        uy_out[k - 1, j - 1, i - 1] = uy
        uz_out[k - 1, j - 1, i - 1] = uz
    # rest population: purely symmetric
    feq0 = dt(_W[0]) * r * (one - usq)
    post[0] = fl[0] - om_p * (fl[0] - feq0)
    nh_om_p = dt(-0.5) * om_p
    nh_om_m = dt(-0.5) * om_m
    if forced:
        post[0] += src_p * (dt(_W[0]) * dt(-3.0) * uf)
    for n in range(9):
        q = _PAIRS[n]
        o = _OPP[q]
        # TRT relaxes a direction and its opposite together: symmetric and antisymmetric parts
        # -om (f_sum / 2 - feq) as (-om / 2) (f_sum - 2 feq): exact halvings, same bits, fewer
        # operations (kernels/d3q19.cu relax_pair_3d)
        w = dt(_W[q])
        w2 = dt(2.0 * _W[q])
        cx, cy, cz = dt(_CX[q]), dt(_CY[q]), dt(_CZ[q])
        cu = _dot_c(cx, cy, cz, ux, uy, uz)
        feq_p2 = w2 * r * (one + dt(4.5) * cu * cu - usq)
        feq_m2 = w2 * r * dt(3.0) * cu
        relax_p = nh_om_p * (pair_sum[n] - feq_p2)
        relax_m = nh_om_m * (pair_dif[n] - feq_m2)
        if forced:
            cf = _dot_c(cx, cy, cz, fx, fy, fz)
            s_p = w * (dt(9.0) * cu * cf - dt(3.0) * uf)
            s_m = w * dt(3.0) * cf
            relax_p += src_p * s_p
            relax_m += src_m * s_m
        post[q] = fl[q] + relax_p + relax_m
        post[o] = fl[o] + relax_p - relax_m
