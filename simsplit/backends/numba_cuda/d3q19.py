"""D3Q19 kernels in Numba CUDA: the CPU kernel's algorithm, one thread per cell, threads along i.

Like the D2Q9 set it runs on a GPU and on the CUDA simulator, and routes products through
``mul`` (never fused) so results match the CPU backend's. Halos move whole xy-planes through a
``(q, layers, cells per layer)`` view of the populations.

Populations may be stored narrower than the arithmetic (every ``run.storage`` pair): the D2Q9
set's ``_codec`` (the CPU's scalar conversions compiled as device functions) decodes each stored
element where the CPU kernel decodes it and encodes each post-collision population, so the
stored bits are the CPU's.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, ContextManager

import numpy as np
from numba import cuda

from simsplit.backends.cpu.rowgen import wrap
from simsplit.backends.cpu.storage_codec import far_view, raw_view
from simsplit.backends.cuda_c.source import MAX_GRID_Y
from simsplit.backends.numba_cuda import neq
from simsplit.backends.numba_cuda.d2q9 import (
    _block_x,
    _codec,
    _exact_mul,
    _halo_set,
    _launcher,
    _rates,
    _records_only,
    halo_kernels,
)
from simsplit.numerics.flags import BOUNDARY, CURVED, INLET, LID, NEAR_WALL, OUTLET, SLIP, SOLID
from simsplit.numerics.lattice import D3Q19, D3Q19_SPECULAR
from simsplit.numerics.lbm_params import OUTLET_CONVECTIVE, OUTLET_PRESSURE
from simsplit.numerics.neq_storage import NEQ16_DTYPE

_CX = tuple(int(c) for c in D3Q19.c[:, 0])
_CY = tuple(int(c) for c in D3Q19.c[:, 1])
_CZ = tuple(int(c) for c in D3Q19.c[:, 2])
_W = tuple(float(w) for w in D3Q19.w)
_OPP = tuple(int(o) for o in D3Q19.opp)
_PAIRS = tuple(q for q in range(1, D3Q19.q) if q < _OPP[q])
_SPECULAR = D3Q19_SPECULAR
_N_CROSS = len(D3Q19.up)
_HALO = tuple(D3Q19.up) + tuple(D3Q19.down)  #: set s, k-th population -> _HALO[s * N + k]
_pack, _unpack = halo_kernels(_HALO, _N_CROSS)


@functools.cache
def _collision(dtype: np.dtype, storage: np.dtype) -> Any:
    """``collide(fl, pair_sum, pair_dif, out, k, j, i, rho_out, ux_out, uy_out, uz_out, om_p,
    om_m, fx, fy, fz, src_p, src_m, store_macro, forced)``: the CPU kernels' collision of the
    pulled populations ``fl`` of cell (k, j, i), products through ``mul``; each post-collision
    population goes to ``out[q, k, j, i]`` encoded to ``storage`` or, for neq16 records (their
    own writer takes them all), to ``out[q]``, a local array of the arithmetic type."""
    dt = dtype.type
    mul = _exact_mul(dtype)
    if storage == NEQ16_DTYPE:
        @cuda.jit(device=True)
        def put(out, q, k, j, i, v, w):
            out[q] = v
    else:
        encode = _codec(dtype, storage)[1]

        @cuda.jit(device=True)
        def put(out, q, k, j, i, v, w):
            out[q, k, j, i] = encode(v, w)

    @cuda.jit(device=True)
    def dot_c(cx, cy, cz, a, b, c):  # c . (a, b, c) without c's zero components, as on the CPU
        if cx != 0:
            s = mul(cx, a)
        elif cy != 0:
            s = mul(cy, b)
        else:
            s = mul(cz, c)
        if cx != 0 and cy != 0:
            s += mul(cy, b)
        if (cx != 0 or cy != 0) and cz != 0:
            s += mul(cz, c)
        return s

    @cuda.jit(device=True)
    def collide(fl, pair_sum, pair_dif, out, k, j, i, rho_out, ux_out, uy_out, uz_out, om_p,
                om_m, fx, fy, fz, src_p, src_m, store_macro, forced):
        one = dt(1.0)
        half = dt(0.5)
        # moments from the pairs' sums and differences, as on the CPU
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
                t = mul(dt(_CX[q]), d)
                jx = jx + t if has_x else t
                has_x = True
            if _CY[q] != 0:
                t = mul(dt(_CY[q]), d)
                jy = jy + t if has_y else t
                has_y = True
            if _CZ[q] != 0:
                t = mul(dt(_CZ[q]), d)
                jz = jz + t if has_z else t
                has_z = True
        inv = one / r
        if forced:
            ux = mul(jx + mul(half, fx), inv)
            uy = mul(jy + mul(half, fy), inv)
            uz = mul(jz + mul(half, fz), inv)
            uf = mul(ux, fx) + mul(uy, fy) + mul(uz, fz)
        else:
            ux = mul(jx, inv)
            uy = mul(jy, inv)
            uz = mul(jz, inv)
            uf = dt(0.0)
        usq = mul(dt(1.5), mul(ux, ux) + mul(uy, uy) + mul(uz, uz))
        if store_macro:
            rho_out[k - 1, j - 1, i - 1] = r
            ux_out[k - 1, j - 1, i - 1] = ux
            uy_out[k - 1, j - 1, i - 1] = uy
            uz_out[k - 1, j - 1, i - 1] = uz
        # rest population: purely symmetric
        feq0 = mul(mul(dt(_W[0]), r), one - usq)
        post0 = fl[0] - mul(om_p, fl[0] - feq0)
        if forced:
            post0 += mul(src_p, mul(mul(dt(_W[0]), dt(-3.0)), uf))
        put(out, 0, k, j, i, post0, dt(_W[0]))
        nh_om_p = mul(dt(-0.5), om_p)
        nh_om_m = mul(dt(-0.5), om_m)
        for n in range(9):
            q = _PAIRS[n]
            o = _OPP[q]
            w = dt(_W[q])
            w2 = dt(2.0 * _W[q])  # halvings folded as on the CPU: same bits
            cx = dt(_CX[q])
            cy = dt(_CY[q])
            cz = dt(_CZ[q])
            cu = dot_c(cx, cy, cz, ux, uy, uz)
            feq_p2 = mul(mul(w2, r), one + mul(mul(dt(4.5), cu), cu) - usq)
            feq_m2 = mul(mul(mul(w2, r), dt(3.0)), cu)
            relax_p = mul(nh_om_p, pair_sum[n] - feq_p2)
            relax_m = mul(nh_om_m, pair_dif[n] - feq_m2)
            if forced:
                cf = dot_c(cx, cy, cz, fx, fy, fz)
                s_p = mul(w, mul(mul(dt(9.0), cu), cf) - mul(dt(3.0), uf))
                s_m = mul(mul(w, dt(3.0)), cf)
                relax_p += mul(src_p, s_p)
                relax_m += mul(src_m, s_m)
            put(out, q, k, j, i, fl[q] + relax_p + relax_m, w)
            put(out, o, k, j, i, fl[o] + relax_p - relax_m, dt(_W[o]))
    return collide


@functools.cache
def _stream_collide_kernel(dtype: np.dtype, storage: np.dtype) -> Any:
    """The stream-collide kernel specialised for one precision and population storage
    (constants typed in it)."""
    dt = dtype.type
    mul = _exact_mul(dtype)
    decode = _codec(dtype, storage)[0]
    collide = _collision(dtype, storage)
    rates = _rates(dtype)

    @cuda.jit(device=True)
    def wrap(s, n, periodic):
        if periodic:
            return n if s == 0 else (1 if s == n + 1 else s)
        return s

    @cuda.jit(device=True)
    def wrap_far(s, n, periodic):  # up to two cells beyond an end (quadratic bounce-back)
        if periodic:
            return s + n if s < 1 else (s - n if s > n else s)
        return s

    @cuda.jit(device=True)
    def quadratic(f_src, far, far_off, links, q, k, j, i, ny, nx, periodic_y, periodic_x,
                  own_opp):
        # quadratic interpolated bounce-back: the CPU kernel's _quadratic
        w0 = links[q, k, j, i]
        w1 = links[19 + q, k, j, i]
        w2 = links[38 + q, k, j, i]
        o = _OPP[q]
        nj = wrap_far(j + _CY[q], ny, periodic_y)
        ni = wrap_far(i + _CX[q], nx, periodic_x)
        if w0 >= dt(0.0):
            v = mul(w0, own_opp) + mul(w1, decode(f_src[o, k + _CZ[q], nj, ni], dt(_W[o])))
            if w2 != dt(0.0):
                fj = wrap_far(j + 2 * _CY[q], ny, periodic_y)
                fi = wrap_far(i + 2 * _CX[q], nx, periodic_x)
                v = v + mul(w2, decode(far[o, k + 2 * _CZ[q] + far_off, fj, fi], dt(_W[o])))
            return v
        v = mul(-w0, own_opp) + mul(w1, decode(f_src[q, k, j, i], dt(_W[q])))
        if w2 != dt(0.0):
            v = v + mul(w2, decode(f_src[q, k + _CZ[q], nj, ni], dt(_W[q])))
        return v

    @cuda.jit(device=True)
    def own_velocity(f_src, k, j, i):
        # the pressure outlet's velocity of the own cell, once per cell (kernels/d3q19.cu
        # own_velocity_3d): the CPU kernel's _anti_bounce_back sums, operation for operation
        r = dt(0.0)
        jx = dt(0.0)
        jy = dt(0.0)
        jz = dt(0.0)
        for p in range(19):
            v = decode(f_src[p, k, j, i], dt(_W[p]))
            r += v
            jx += mul(dt(_CX[p]), v)
            jy += mul(dt(_CY[p]), v)
            jz += mul(dt(_CZ[p]), v)
        inv = dt(1.0) / r
        ux = mul(jx, inv)
        uy = mul(jy, inv)
        uz = mul(jz, inv)
        return ux, uy, uz, mul(dt(1.5), mul(ux, ux) + mul(uy, uy) + mul(uz, uz))

    @cuda.jit(device=True)
    def anti_bounce_back(q, ux, uy, uz, usq, rho_w, own_opp):
        # pressure outlet: the CPU kernel's _anti_bounce_back with the velocity of own_velocity
        cu = mul(dt(_CX[q]), ux) + mul(dt(_CY[q]), uy) + mul(dt(_CZ[q]), uz)
        feq = mul(mul(dt(2.0 * _W[q]), rho_w), dt(1.0) + mul(mul(dt(4.5), cu), cu) - usq)
        return feq - own_opp

    @cuda.jit(device=True)
    def outlet_link(f_src, k, j, i, q, ny, periodic_y, rho_w, oux, ouy, ouz, ousq, own_opp,
                    kind, keep, take, press_w, slots):
        # the CPU kernel's _outlet (kernels/d3q19.cu outlet_link_3d), operation for operation
        if kind == OUTLET_PRESSURE:
            return anti_bounce_back(q, oux, ouy, ouz, ousq, rho_w, own_opp)
        v = decode(f_src[q, k - _CZ[q], wrap(j - _CY[q], ny, periodic_y), i], dt(_W[q]))
        if kind == OUTLET_CONVECTIVE:
            v = mul(keep, slots[q, k, j]) + mul(take, v)
        if press_w > dt(0.0):
            v += mul(press_w, anti_bounce_back(q, oux, ouy, ouz, ousq, rho_w, own_opp) - v)
        if kind == OUTLET_CONVECTIVE:
            slots[q, k, j] = v
        return v

    @cuda.jit(device=True)
    def specular(f_src, flags, k, j, i, q, nx, ny, periodic_x, periodic_y, own_opp):
        si = wrap(i - _CX[q], nx, periodic_x)
        sj = wrap(j - _CY[q], ny, periodic_y)
        mask = 0
        if _CX[q] != 0 and flags[k, j, si] == SLIP:
            mask |= 1
        if _CY[q] != 0 and flags[k, sj, i] == SLIP:
            mask |= 2
        if _CZ[q] != 0 and flags[k - _CZ[q], j, i] == SLIP:
            mask |= 4
        bi = i if mask & 1 else si
        bj = j if mask & 2 else sj
        bk = k if mask & 4 else k - _CZ[q]
        if (flags[bk, bj, bi] & BOUNDARY) != 0:
            return own_opp
        m = _SPECULAR[q, mask]
        return decode(f_src[m, bk, bj, bi], dt(_W[m]))

    @cuda.jit
    def stream_collide(f_src, f_dst, flags, rho_out, ux_out, uy_out, uz_out, k0, k1, omega_p,
                       omega_m, lid_velocity, force_x, force_y, force_z, periodic_x, periodic_y,
                       store_macro, forced, inlet, inlet_scale_in, rho_w_in, links, outlet_kind,
                       keep_in, take_in, press_w_in, slots, far, far_off):
        ny = f_src.shape[2] - 2
        nx = f_src.shape[3] - 2
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x + 1
        j = cuda.blockIdx.y + 1
        if i > nx or j > ny:
            return
        one = dt(1.0)
        om_p, om_m, src_p, src_m = rates(omega_p, omega_m)
        lid_u = dt(lid_velocity)
        fx = dt(force_x)
        fy = dt(force_y)
        fz = dt(force_z)
        inlet_scale = dt(inlet_scale_in)
        rho_w = dt(rho_w_in)
        keep = dt(keep_in)
        take = dt(take_in)
        press_w = dt(press_w_in)
        fl = cuda.local.array(19, dtype=dt)
        pair_sum = cuda.local.array(9, dtype=dt)
        pair_dif = cuda.local.array(9, dtype=dt)
        k = k0 + cuda.blockIdx.z
        while k < k1:
            own = flags[k, j, i]
            if (own & SOLID) == 0:
                for q in range(19):
                    sj = wrap(j - _CY[q], ny, periodic_y)
                    si = wrap(i - _CX[q], nx, periodic_x)
                    fl[q] = decode(f_src[q, k - _CZ[q], sj, si], dt(_W[q]))
                if own & NEAR_WALL:  # only cells next to a wall read their sources' flags
                    outlet = False
                    for q in range(19):
                        sj = wrap(j - _CY[q], ny, periodic_y)
                        si = wrap(i - _CX[q], nx, periodic_x)
                        outlet = outlet or flags[k - _CZ[q], sj, si] == OUTLET
                    oux = ouy = ouz = ousq = dt(0.0)
                    if outlet and (outlet_kind == OUTLET_PRESSURE or press_w > dt(0.0)):
                        oux, ouy, ouz, ousq = own_velocity(f_src, k, j, i)
                    for q in range(19):
                        sk = k - _CZ[q]
                        sj = wrap(j - _CY[q], ny, periodic_y)
                        si = wrap(i - _CX[q], nx, periodic_x)
                        kind = flags[sk, sj, si]
                        if (kind & BOUNDARY) != 0:
                            v = decode(f_src[_OPP[q], k, j, i], dt(_W[_OPP[q]]))
                            if kind == LID:
                                v += mul(dt(6.0 * _W[q] * _CX[q]), lid_u)
                            elif kind == INLET:
                                v += mul(dt(6.0 * _W[q] * _CX[q]), mul(inlet_scale, inlet[k, j]))
                            elif kind == OUTLET:
                                v = outlet_link(f_src, k, j, i, q, ny, periodic_y, rho_w, oux,
                                                ouy, ouz, ousq, v, outlet_kind, keep, take,
                                                press_w, slots)
                            elif kind == SLIP:  # specular, as the CPU kernel's _specular
                                v = specular(f_src, flags, k, j, i, q, nx, ny, periodic_x,
                                             periodic_y, v)
                            elif (own & CURVED) != 0 and links.shape[0] == 57:
                                v = quadratic(f_src, far, far_off, links, q, k, j, i, ny, nx,
                                              periodic_y, periodic_x, v)
                            elif (own & CURVED) != 0:  # Bouzidi, as the CPU kernel
                                w = links[q, k, j, i]
                                if w >= dt(0.0):
                                    nj = wrap(j + _CY[q], ny, periodic_y)
                                    ni = wrap(i + _CX[q], nx, periodic_x)
                                    o = _OPP[q]
                                    v = mul(w, v) + mul(one - w, decode(
                                        f_src[o, k + _CZ[q], nj, ni], dt(_W[o])))
                                else:
                                    v = mul(-w, v) + mul(one + w,
                                                         decode(f_src[q, k, j, i], dt(_W[q])))
                            fl[q] = v
                collide(fl, pair_sum, pair_dif, f_dst, k, j, i, rho_out, ux_out, uy_out,
                        uz_out, om_p, om_m, fx, fy, fz, src_p, src_m, store_macro, forced)
            k += cuda.gridDim.z

    return stream_collide


@functools.cache
def _records_kernel() -> Any:
    """The pull step on neq16 records, float32 arithmetic: the CPU scalar kernel's body on records
    per cell (walls, the lid, bodies of solid cells, forcing, periodic x and y; the case checks
    refuse the rest), records read and written by the CPU's codec (:func:`.neq.codec`), the
    collision :func:`_collision`'s."""
    dt = np.float32
    mul = _exact_mul(np.dtype(dt))
    collide = _collision(np.dtype(dt), NEQ16_DTYPE)
    rates = _rates(np.dtype(dt))
    pull, store = neq.codec()

    @cuda.jit
    def stream_collide(src, dst, flags, rho_out, ux_out, uy_out, uz_out, k0, k1, omega_p,
                       omega_m, lid_velocity, force_x, force_y, force_z, periodic_x, periodic_y,
                       store_macro, forced):
        ny = src.shape[2] - 2
        nx = src.shape[3] - 2
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x + 1
        j = cuda.blockIdx.y + 1
        if i > nx or j > ny:
            return
        om_p, om_m, src_p, src_m = rates(omega_p, omega_m)
        lid_u = dt(lid_velocity)
        fx = dt(force_x)
        fy = dt(force_y)
        fz = dt(force_z)
        fl = cuda.local.array(19, dtype=dt)
        post = cuda.local.array(19, dtype=dt)
        feq = cuda.local.array(19, dtype=dt)
        pair_sum = cuda.local.array(9, dtype=dt)
        pair_dif = cuda.local.array(9, dtype=dt)
        k = k0 + cuda.blockIdx.z
        while k < k1:
            own = flags[k, j, i]
            if (own & SOLID) == 0:
                for q in range(19):
                    fl[q] = pull(src, q, k - _CZ[q], wrap(j - _CY[q], ny, periodic_y),
                                 wrap(i - _CX[q], nx, periodic_x), _CX, _CY, _CZ, _W)
                if own & NEAR_WALL:
                    for q in range(19):
                        kind = flags[k - _CZ[q], wrap(j - _CY[q], ny, periodic_y),
                                     wrap(i - _CX[q], nx, periodic_x)]
                        if kind & BOUNDARY:
                            v = pull(src, _OPP[q], k, j, i, _CX, _CY, _CZ, _W)
                            if kind == LID:
                                v += mul(dt(6.0 * _W[q] * _CX[q]), lid_u)
                            fl[q] = v
                collide(fl, pair_sum, pair_dif, post, k, j, i, rho_out, ux_out, uy_out,
                        uz_out, om_p, om_m, fx, fy, fz, src_p, src_m, store_macro, forced)
                store(dst, post, feq, k, j, i, _CX, _CY, _CZ, _W)
            k += cuda.gridDim.z

    return stream_collide


class D3Q19Kernels:
    """Numba CUDA launchers with the signature every backend's D3Q19 kernel set shares."""

    #: takes run.storage neq16 (cell records: :func:`_records_kernel`)
    records = True
    #: ... and neq16s's stress-kept records (the same codec; boxes too)
    stress_records = True

    def __init__(self, activate: Callable[[], ContextManager[Any]]) -> None:
        self._activate = activate
        self._stand_ins: dict[tuple[str, np.dtype], Any] = {}

    def _stand_in(self, what: str, dtype: Any) -> Any:
        """A small device array where a block has no inlet speeds, link weights or outlet slots
        (read only next to INLET ghost cells, on CURVED cells or by a convective outlet's
        links: never then)."""
        key = (what, np.dtype(dtype))
        if key not in self._stand_ins:
            host = {"inlet": np.zeros((1, 1), dtype), "slots": np.zeros((19, 1, 1), dtype),
                    "links": np.full((19, 1, 1, 1), -1.0, dtype)}[what]
            with self._activate():
                self._stand_ins[key] = cuda.to_device(host)
        return self._stand_ins[key]

    def stream_collide(self, f_src, f_dst, flags, rho, ux, uy, uz, layers, p,
                       store_macro, inlet=None, links=None, outlet_slots=None,
                       far=None) -> None:
        """``inlet``: inflow speed per line (k, j), ghosts included; ``links``: interpolated
        bounce-back weights in f's shape; ``outlet_slots``: a convective outlet's previous
        values; ``far``: where quadratic links read two planes away (as the CPU kernel set)."""
        k0, k1 = int(layers[0]), int(layers[1])
        nz, ny, nx = (n - 2 for n in f_src.shape[1:])
        if not 1 <= k0 <= k1 <= nz + 1:
            raise ValueError(f"planes {layers} outside the interior planes [1, {nz + 1})")
        if k0 == k1:
            return
        bx = _block_x(nx)
        grid = ((nx + bx - 1) // bx, ny, min(k1 - k0, MAX_GRID_Y))
        if f_src.dtype == NEQ16_DTYPE:
            _records_only((inlet, links, outlet_slots), rho.dtype)
            with self._activate():
                _launcher(_records_kernel(), grid, bx)(
                    f_src, f_dst, flags, rho, ux, uy, uz, k0, k1, float(p.omega_plus),
                    float(p.omega_minus), float(p.lid_velocity), float(p.force_x),
                    float(p.force_y), float(p.force_z), bool(p.periodic_x), bool(p.periodic_y),
                    bool(store_macro), p.forced)
            return
        launch = _launcher(_stream_collide_kernel(np.dtype(rho.dtype), np.dtype(f_src.dtype)),
                           grid, bx)
        with self._activate():
            launch(raw_view(f_src), raw_view(f_dst), flags, rho, ux, uy, uz, k0, k1,
                   float(p.omega_plus), float(p.omega_minus), float(p.lid_velocity),
                   float(p.force_x), float(p.force_y), float(p.force_z), bool(p.periodic_x),
                   bool(p.periodic_y),
                   bool(store_macro), p.forced,
                   inlet if inlet is not None else self._stand_in("inlet", rho.dtype),
                   float(p.inlet_scale), float(p.outlet_density),
                   links if links is not None else self._stand_in("links", rho.dtype),
                   int(p.outlet_kind), *map(float, p.convective_weights),
                   float(p.outlet_pressure_weight),
                   outlet_slots if outlet_slots is not None
                   else self._stand_in("slots", rho.dtype),
                   *far_view(far, f_src))

    def _halo(self, f, side: int, *args: Any) -> None:
        """Pack (``side`` 0) or unpack (1) a halo of ``f``'s crossing populations or records."""
        table, per_set = _halo_set(f, (_HALO, _N_CROSS))
        size = f.shape[2] * f.shape[3]
        bx = _block_x(size)
        with self._activate():
            _launcher(halo_kernels(table, per_set)[side], ((size + bx - 1) // bx, per_set),
                      bx)(*args)

    @staticmethod
    def _layers(f) -> Any:
        """The stored elements of ``f`` as ``(q, layers, cells per layer)`` (16-bit formats as
        their bits: halos move them unchanged)."""
        return raw_view(f).reshape(f.shape[0], f.shape[1], f.shape[2] * f.shape[3])

    def pack(self, f, layer: int, direction: int, buf) -> None:
        self._halo(f, 0, self._layers(f), int(layer), int(direction), raw_view(buf))

    def unpack(self, buf, f, layer: int, direction: int) -> None:
        self._halo(f, 1, raw_view(buf), self._layers(f), int(layer), int(direction))
