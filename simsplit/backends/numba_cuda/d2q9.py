"""D2Q9 kernels in Numba CUDA: the CPU kernel's algorithm, one thread per cell, threads along i.

The same source runs on a GPU and on Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), so it
uses only scalars in device functions, no warp intrinsics, and numpy scalar types for casts.

NVVM contracts ``a * b + c`` into a fused multiply-add, which rounds differently from the CPU
kernel; products therefore go through ``mul`` (libdevice's ``*mul_rn``, never fused) so that
float32 and float64 results match the CPU backend's as closely as the CUDA C kernels do.

Populations may be stored narrower than the arithmetic (``run.storage``): 16-bit formats reach
the kernels as their raw bits (uint16 for fp16, int16 for e4m11) and are converted by the CPU
backend's own scalar functions (:mod:`simsplit.backends.cpu.storage_codec`), compiled here as
device functions, with the CPU's operations around them (:func:`_codec`).
"""

from __future__ import annotations

import functools
import operator
import warnings
from typing import Any, Callable, ContextManager

import numba
import numpy as np
from numba import cuda

from simsplit.backends.cpu import storage_codec
from simsplit.backends.cpu.rowgen import wrap
from simsplit.backends.cpu.storage_codec import far_view, raw_view
from simsplit.backends.cuda_c.source import BLOCK_X, MAX_GRID_Y
from simsplit.backends.numba_cuda import neq
from simsplit.numerics.flags import (
    BOUNDARY,
    CURVED,
    INLET,
    LID,
    NEAR_WALL,
    OUTLET,
    SLIP,
    SOLID,
)
from simsplit.numerics.lattice import D2Q9_C, D2Q9_OPP, D2Q9_SPECULAR, D2Q9_W, DOWN, UP, Q
from simsplit.numerics.lbm_params import OUTLET_CONVECTIVE, OUTLET_PRESSURE
from simsplit.numerics.neq_storage import NEQ16_DTYPE
from simsplit.numerics.storage import population_storage

SIMULATOR = bool(numba.config.ENABLE_CUDASIM)

_CX = tuple(int(c) for c in D2Q9_C[:, 0])
_CY = tuple(int(c) for c in D2Q9_C[:, 1])
_W = tuple(float(w) for w in D2Q9_W)
_OPP = tuple(int(o) for o in D2Q9_OPP)
_SPECULAR = D2Q9_SPECULAR
_PAIRS = tuple(q for q in range(1, Q) if q < _OPP[q])
_N_CROSS = len(UP)
_HALO = tuple(UP) + tuple(DOWN)  #: direction set s, k-th population -> _HALO[s * _N_CROSS + k]


def _exact_mul(dtype: np.dtype) -> Callable[[Any, Any], Any]:
    if SIMULATOR:  # plain Python arithmetic: nothing fuses
        return operator.mul
    from numba.cuda import libdevice

    return libdevice.fmul_rn if dtype == np.float32 else libdevice.dmul_rn


@functools.cache
def _device(fn: Any) -> Any:
    """A scalar function of :mod:`simsplit.backends.cpu.storage_codec` as a device function."""
    return cuda.jit(device=True)(fn.py_func)


@functools.cache
def _codec(dtype: np.dtype, storage: np.dtype) -> tuple[Any, Any]:
    """``(decode(raw, w), encode(v, w))`` device functions between a stored element and f in
    the arithmetic type ``dtype`` (``w``: the population's weight in it): the operations of the
    CPU kernels' ``storage_codec._decode`` / ``_encode``, products through ``mul``."""
    dt = dtype.type
    st = population_storage(storage, dtype)
    mul = _exact_mul(dtype)
    if not st.shifted:
        @cuda.jit(device=True)
        def same(v, w):
            return v
        return same, same
    inv, scale = dt(1.0 / st.scale), dt(st.scale)
    if st.name == "float32":  # under float64: f - w, scale 1
        @cuda.jit(device=True)
        def decode32(raw, w):
            return mul(dt(raw), inv) + w

        @cuda.jit(device=True)
        def encode32(v, w):
            return np.float32(mul(v - w, scale))
        return decode32, encode32
    to_float, from_float = (
        (storage_codec.half_to_float, storage_codec.half_from) if st.name == "float16"
        else (storage_codec.e4m11_to_float, storage_codec.e4m11_from))
    bits_to_float, float_to_bits = _device(to_float), _device(from_float)

    @cuda.jit(device=True)
    def decode16(raw, w):
        return mul(dt(bits_to_float(raw)), inv) + w

    @cuda.jit(device=True)
    def encode16(v, w):
        return float_to_bits(mul(v - w, scale))
    return decode16, encode16


@functools.cache
def _collision(dtype: np.dtype, storage: np.dtype) -> Any:
    """``collide(fl, out, j, i, rho_out, ux_out, uy_out, om_p, om_m, fx, fy, src_p, src_m,
    store_macro)``: the CPU kernels' collision of the pulled populations ``fl`` of cell (j, i),
    products through ``mul``; each post-collision population goes to ``out[q, j, i]`` encoded
    to ``storage`` or, for neq16 records (their own writer takes them all), to ``out[q]``, a
    local array of the arithmetic type."""
    dt = dtype.type
    mul = _exact_mul(dtype)
    if storage == NEQ16_DTYPE:
        @cuda.jit(device=True)
        def put(out, q, j, i, v, w):
            out[q] = v
    else:
        encode = _codec(dtype, storage)[1]

        @cuda.jit(device=True)
        def put(out, q, j, i, v, w):
            out[q, j, i] = encode(v, w)

    @cuda.jit(device=True)
    def relax_pair(fq, fo, q, r, ux, uy, usq, uf, fx, fy, om_p, om_m, src_p, src_m):
        # TRT relaxes a direction and its opposite together: symmetric and antisymmetric parts.
        w = dt(_W[q])
        cx = dt(_CX[q])
        cy = dt(_CY[q])
        cu = mul(cx, ux) + mul(cy, uy)
        cf = mul(cx, fx) + mul(cy, fy)
        feq_p = mul(mul(w, r), dt(1.0) + mul(mul(dt(4.5), cu), cu) - usq)
        feq_m = mul(mul(mul(w, r), dt(3.0)), cu)
        s_p = mul(w, mul(mul(dt(9.0), cu), cf) - mul(dt(3.0), uf))
        s_m = mul(mul(w, dt(3.0)), cf)
        f_p = mul(dt(0.5), fq + fo)
        f_m = mul(dt(0.5), fq - fo)
        relax_p = mul(-om_p, f_p - feq_p) + mul(src_p, s_p)
        relax_m = mul(-om_m, f_m - feq_m) + mul(src_m, s_m)
        return fq + relax_p + relax_m, fo + relax_p - relax_m

    @cuda.jit(device=True)
    def collide(fl, out, j, i, rho_out, ux_out, uy_out, om_p, om_m, fx, fy, src_p, src_m,
                store_macro):
        one = dt(1.0)
        half = dt(0.5)
        r = dt(0.0)
        jx = dt(0.0)
        jy = dt(0.0)
        for q in range(9):
            r += fl[q]
            jx += mul(dt(_CX[q]), fl[q])
            jy += mul(dt(_CY[q]), fl[q])
        inv = one / r
        ux = mul(jx + mul(half, fx), inv)
        uy = mul(jy + mul(half, fy), inv)
        usq = mul(dt(1.5), mul(ux, ux) + mul(uy, uy))
        uf = mul(ux, fx) + mul(uy, fy)
        if store_macro:
            rho_out[j - 1, i - 1] = r
            ux_out[j - 1, i - 1] = ux
            uy_out[j - 1, i - 1] = uy
        # rest population: purely symmetric
        feq0 = mul(mul(dt(_W[0]), r), one - usq)
        s0 = mul(mul(dt(_W[0]), dt(-3.0)), uf)
        put(out, 0, j, i, fl[0] - mul(om_p, fl[0] - feq0) + mul(src_p, s0), dt(_W[0]))
        for k in range(len(_PAIRS)):
            q = _PAIRS[k]
            o = _OPP[q]
            a, b = relax_pair(fl[q], fl[o], q, r, ux, uy, usq, uf, fx, fy, om_p, om_m,
                              src_p, src_m)
            put(out, q, j, i, a, dt(_W[q]))
            put(out, o, j, i, b, dt(_W[o]))
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
    def anti_bounce_back(f_src, j, i, q, rho_w):
        # pressure outlet: the CPU kernel's _anti_bounce_back, operation for operation
        r = dt(0.0)
        jx = dt(0.0)
        jy = dt(0.0)
        for p in range(9):
            v = decode(f_src[p, j, i], dt(_W[p]))
            r += v
            jx += mul(dt(_CX[p]), v)
            jy += mul(dt(_CY[p]), v)
        inv = dt(1.0) / r
        ux = mul(jx, inv)
        uy = mul(jy, inv)
        cu = mul(dt(_CX[q]), ux) + mul(dt(_CY[q]), uy)
        usq = mul(dt(1.5), mul(ux, ux) + mul(uy, uy))
        feq = mul(mul(dt(2.0 * _W[q]), rho_w), dt(1.0) + mul(mul(dt(4.5), cu), cu) - usq)
        return feq - decode(f_src[_OPP[q], j, i], dt(_W[_OPP[q]]))

    @cuda.jit(device=True)
    def outlet_link(f_src, j, i, q, rho_w, kind, keep, take, press_w, slots):
        # the CPU kernel's _outlet: pressure, zero-gradient or convective, operation for operation
        if kind == OUTLET_PRESSURE:
            return anti_bounce_back(f_src, j, i, q, rho_w)
        v = decode(f_src[q, j - _CY[q], i], dt(_W[q]))
        if kind == OUTLET_CONVECTIVE:
            v = mul(keep, slots[q, j]) + mul(take, v)
        if press_w > dt(0.0):
            v += mul(press_w, anti_bounce_back(f_src, j, i, q, rho_w) - v)
        if kind == OUTLET_CONVECTIVE:
            slots[q, j] = v
        return v

    @cuda.jit(device=True)
    def quadratic(f_src, far, far_off, links, q, j, i, nx, periodic_x, own_opp):
        # quadratic interpolated bounce-back: the CPU kernel's _quadratic
        w0 = links[q, j, i]
        w1 = links[9 + q, j, i]
        w2 = links[18 + q, j, i]
        o = _OPP[q]
        ni = i + _CX[q]
        if periodic_x:
            ni = (ni - 1 + nx) % nx + 1
        if w0 >= dt(0.0):
            v = mul(w0, own_opp) + mul(w1, decode(f_src[o, j + _CY[q], ni], dt(_W[o])))
            if w2 != dt(0.0):
                fi = i + 2 * _CX[q]
                if periodic_x:
                    fi = (fi - 1 + nx) % nx + 1
                v = v + mul(w2, decode(far[o, j + 2 * _CY[q] + far_off, fi], dt(_W[o])))
            return v
        v = mul(-w0, own_opp) + mul(w1, decode(f_src[q, j, i], dt(_W[q])))
        if w2 != dt(0.0):
            v = v + mul(w2, decode(f_src[q, j + _CY[q], ni], dt(_W[q])))
        return v

    @cuda.jit
    def stream_collide(f_src, f_dst, flags, rho_out, ux_out, uy_out, j0, j1, omega_p, omega_m,
                       lid_velocity, force_x, force_y, periodic_x, store_macro, inlet,
                       inlet_scale_in, rho_w_in, links, outlet_kind, keep_in, take_in,
                       press_w_in, slots, far, far_off):
        nx = f_src.shape[2] - 2
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x + 1
        if i > nx:
            return
        one = dt(1.0)
        om_p, om_m, src_p, src_m = rates(omega_p, omega_m)
        lid_u = dt(lid_velocity)
        fx = dt(force_x)
        fy = dt(force_y)
        inlet_scale = dt(inlet_scale_in)
        rho_w = dt(rho_w_in)
        keep = dt(keep_in)
        take = dt(take_in)
        press_w = dt(press_w_in)
        fl = cuda.local.array(9, dtype=dt)
        j = j0 + cuda.blockIdx.y
        while j < j1:
            if (flags[j, i] & SOLID) == 0:
                for q in range(9):
                    sj = j - _CY[q]
                    si = i - _CX[q]
                    if periodic_x:
                        si = (si - 1 + nx) % nx + 1
                    kind = flags[sj, si]
                    if (kind & BOUNDARY) == 0:
                        fl[q] = decode(f_src[q, sj, si], dt(_W[q]))
                    else:
                        v = decode(f_src[_OPP[q], j, i], dt(_W[_OPP[q]]))
                        if kind == LID:
                            v += mul(dt(6.0 * _W[q] * _CX[q]), lid_u)
                        elif kind == INLET:
                            v += mul(dt(6.0 * _W[q] * _CX[q]), mul(inlet_scale, inlet[j]))
                        elif kind == OUTLET:
                            v = outlet_link(f_src, j, i, q, rho_w, outlet_kind, keep, take,
                                            press_w, slots)
                        elif kind == SLIP:  # specular, as the CPU kernel's _specular
                            mask = 0
                            if _CX[q] != 0 and flags[j, si] == SLIP:
                                mask |= 1
                            if _CY[q] != 0 and flags[sj, i] == SLIP:
                                mask |= 2
                            bi = i if mask & 1 else si
                            bj = j if mask & 2 else sj
                            if (flags[bj, bi] & BOUNDARY) == 0:
                                m = _SPECULAR[q, mask]
                                v = decode(f_src[m, bj, bi], dt(_W[m]))
                        elif (flags[j, i] & CURVED) != 0 and links.shape[0] == 27:
                            v = quadratic(f_src, far, far_off, links, q, j, i, nx, periodic_x,
                                          v)
                        elif (flags[j, i] & CURVED) != 0:  # Bouzidi, as the CPU kernel
                            k = links[q, j, i]
                            if k >= dt(0.0):
                                ni = i + _CX[q]
                                if periodic_x:
                                    ni = (ni - 1 + nx) % nx + 1
                                nb = decode(f_src[_OPP[q], j + _CY[q], ni], dt(_W[_OPP[q]]))
                                v = mul(k, v) + mul(one - k, nb)
                            else:
                                v = mul(-k, v) + mul(one + k, decode(f_src[q, j, i], dt(_W[q])))
                        fl[q] = v
                collide(fl, f_dst, j, i, rho_out, ux_out, uy_out, om_p, om_m, fx, fy, src_p,
                        src_m, store_macro)
            j += cuda.gridDim.y

    return stream_collide


@functools.cache
def _rates(dtype: np.dtype) -> Any:
    """``rates(omega_p, omega_m) -> (om_p, om_m, src_p, src_m)``: the TRT rates in ``dtype``
    and the Guo source weights 1 - om / 2 of the symmetric and antisymmetric parts, as the
    population kernels compute them."""
    dt = dtype.type
    mul = _exact_mul(dtype)

    @cuda.jit(device=True)
    def rates(omega_p, omega_m):
        om_p = dt(omega_p)
        om_m = dt(omega_m)
        return om_p, om_m, dt(1.0) - mul(dt(0.5), om_p), dt(1.0) - mul(dt(0.5), om_m)
    return rates


@functools.cache
def _records_kernel() -> Any:
    """The pull step on neq16 records, float32 arithmetic: the CPU scalar kernel's body on records
    per cell (walls, the lid, forcing, periodic x; the case checks refuse the rest), records
    read and written by the CPU's codec (:func:`.neq.codec`), the collision :func:`_collision`'s.
    Records come as one-plane 4D arrays ``(15, 1, ny + 2, nx + 2)``."""
    dt = np.float32
    mul = _exact_mul(np.dtype(dt))
    collide = _collision(np.dtype(dt), NEQ16_DTYPE)
    rates = _rates(np.dtype(dt))
    pull, store = neq.codec()
    cz = (0,) * Q

    @cuda.jit
    def stream_collide(src, dst, flags, rho_out, ux_out, uy_out, j0, j1, omega_p, omega_m,
                       lid_velocity, force_x, force_y, periodic_x, store_macro):
        nx = src.shape[3] - 2
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x + 1
        if i > nx:
            return
        om_p, om_m, src_p, src_m = rates(omega_p, omega_m)
        lid_u = dt(lid_velocity)
        fx = dt(force_x)
        fy = dt(force_y)
        fl = cuda.local.array(9, dtype=dt)
        post = cuda.local.array(9, dtype=dt)
        feq = cuda.local.array(9, dtype=dt)
        j = j0 + cuda.blockIdx.y
        while j < j1:
            if (flags[j, i] & SOLID) == 0:
                for q in range(9):
                    fl[q] = pull(src, q, 0, j - _CY[q], wrap(i - _CX[q], nx, periodic_x), _CX,
                                 _CY, cz, _W)
                if flags[j, i] & NEAR_WALL:
                    for q in range(9):
                        kind = flags[j - _CY[q], wrap(i - _CX[q], nx, periodic_x)]
                        if kind & BOUNDARY:
                            v = pull(src, _OPP[q], 0, j, i, _CX, _CY, cz, _W)
                            if kind == LID:
                                v += mul(dt(6.0 * _W[q] * _CX[q]), lid_u)
                            fl[q] = v
                collide(fl, post, j, i, rho_out, ux_out, uy_out, om_p, om_m, fx, fy, src_p,
                        src_m, store_macro)
                store(dst, post, feq, 0, j, i, _CX, _CY, cz, _W)
            j += cuda.gridDim.y

    return stream_collide


@functools.cache
def halo_kernels(table: tuple[int, ...], per_set: int) -> tuple[Any, Any]:
    """``(pack, unpack)`` of stored slots ``table[s * per_set + k]`` (direction set s, k-th
    slot) of one layer of ``f[slot, layer, n]`` to / from ``buf[k, n]``: a lattice's crossing
    populations, or the slots of its neq16 records' halo."""

    @cuda.jit
    def pack(f, row, dir_set, buf):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        k = cuda.blockIdx.y
        if i < f.shape[2]:
            buf[k, i] = f[table[dir_set * per_set + k], row, i]

    @cuda.jit
    def unpack(buf, f, row, dir_set):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        k = cuda.blockIdx.y
        if i < f.shape[2]:
            f[table[dir_set * per_set + k], row, i] = buf[k, i]

    return pack, unpack


_pack, _unpack = halo_kernels(_HALO, _N_CROSS)


def _halo_set(f: Any, populations: tuple[tuple[int, ...], int]) -> tuple[tuple[int, ...], int]:
    """The halo table of ``f``: its lattice's ``populations`` table, or for neq16 records
    (plain or stress-kept, by their slot count) their slots'."""
    if f.dtype != NEQ16_DTYPE:
        return populations
    return neq.halo_table(f.shape[0])


def _records_only(open_rules: tuple[Any, ...], dtype: Any) -> None:
    """neq16 records: float32 arithmetic, walls and the lid (the case checks refuse the rest)."""
    if any(a is not None for a in open_rules) or np.dtype(dtype) != np.float32:
        raise ValueError("run.storage neq16: float32 arithmetic, walls and the lid only")


def _block_x(n: int) -> int:
    # the simulator runs a Python thread per CUDA thread: no idle ones on tiny test grids
    return min(BLOCK_X, n) if SIMULATOR else BLOCK_X


@functools.cache
def _launcher(kernel: Any, grid: tuple[int, ...], block: int) -> Any:
    """``kernel[grid, block]``, configured once per shape: halo grids are small on purpose, so
    Numba's low-occupancy warning is silenced here, and reuse saves per-launch set-up."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Grid size .* under-utilization")
        return kernel[grid, block]


class D2Q9Kernels:
    """Numba CUDA launchers with the signature every backend's D2Q9 kernel set shares: the
    arithmetic type is that of the macroscopic fields, populations any run.storage type."""

    #: takes run.storage neq16 (cell records: :func:`_records_kernel`)
    records = True
    #: ... and neq16s's stress-kept records (the same codec; boxes too)
    stress_records = True

    def __init__(self, activate: Callable[[], ContextManager[Any]]) -> None:
        self._activate = activate
        self._zeros: dict[tuple[int, np.dtype], Any] = {}

    def _inlet(self, inlet: Any, rows: int, dtype: Any) -> Any:
        """The inflow speeds per row, or a cached zero array where there is no inlet."""
        if inlet is not None:
            return inlet
        key = (rows, np.dtype(dtype))
        if key not in self._zeros:
            with self._activate():
                self._zeros[key] = cuda.to_device(np.zeros(rows, dtype))
        return self._zeros[key]

    def _links(self, links: Any, dtype: Any) -> Any:
        """Interpolated bounce-back weights, or a cached halfway stand-in (read only where
        flags say CURVED: never then)."""
        if links is not None:
            return links
        key = (-1, np.dtype(dtype))
        if key not in self._zeros:
            with self._activate():
                self._zeros[key] = cuda.to_device(np.full((9, 1, 1), -1.0, dtype))
        return self._zeros[key]

    def _slots(self, slots: Any, dtype: Any) -> Any:
        """A convective outlet's previous values, or a cached stand-in (touched only by a
        convective outlet's links: never then)."""
        if slots is not None:
            return slots
        key = (-2, np.dtype(dtype))
        if key not in self._zeros:
            with self._activate():
                self._zeros[key] = cuda.to_device(np.zeros((9, 1), dtype))
        return self._zeros[key]

    def stream_collide(self, f_src, f_dst, flags, rho, ux, uy, rows, p, store_macro,
                       inlet=None, links=None, outlet_slots=None, far=None) -> None:
        """``links`` of 27 planes are quadratic, reading two rows away from ``far`` (the
        array behind ``f_src``, the row of its row 0 there; None: ``f_src`` itself)."""
        j0, j1 = int(rows[0]), int(rows[1])
        ny, nx = f_src.shape[1] - 2, f_src.shape[2] - 2
        if not 1 <= j0 <= j1 <= ny + 1:
            raise ValueError(f"rows {rows} outside the interior rows [1, {ny + 1})")
        if j0 == j1:
            return
        bx = _block_x(nx)
        grid = ((nx + bx - 1) // bx, min(j1 - j0, MAX_GRID_Y))
        dt = np.dtype(rho.dtype)
        if f_src.dtype == NEQ16_DTYPE:
            _records_only((inlet, links, outlet_slots), dt)
            plane = (f_src.shape[0], 1, *f_src.shape[1:])
            with self._activate():
                _launcher(_records_kernel(), grid, bx)(
                    f_src.reshape(plane), f_dst.reshape(plane), flags, rho, ux, uy, j0, j1,
                    float(p.omega_plus), float(p.omega_minus), float(p.lid_velocity),
                    float(p.force_x), float(p.force_y), bool(p.periodic_x), bool(store_macro))
            return
        launch = _launcher(_stream_collide_kernel(dt, np.dtype(f_src.dtype)), grid, bx)
        with self._activate():
            launch(raw_view(f_src), raw_view(f_dst), flags, rho, ux, uy, j0, j1,
                   float(p.omega_plus), float(p.omega_minus), float(p.lid_velocity),
                   float(p.force_x), float(p.force_y), bool(p.periodic_x), bool(store_macro),
                   self._inlet(inlet, ny + 2, dt), float(p.inlet_scale),
                   float(p.outlet_density), self._links(links, dt),
                   int(p.outlet_kind), *map(float, p.convective_weights),
                   float(p.outlet_pressure_weight), self._slots(outlet_slots, dt),
                   *far_view(far, f_src))

    def _halo(self, f, side: int, *args: Any) -> None:
        """Pack (``side`` 0) or unpack (1) a halo of ``f``'s crossing populations or records."""
        table, per_set = _halo_set(f, (_HALO, _N_CROSS))
        w = f.shape[2]
        bx = _block_x(w)
        with self._activate():
            _launcher(halo_kernels(table, per_set)[side], ((w + bx - 1) // bx, per_set),
                      bx)(*args)

    def pack(self, f, row: int, direction: int, buf) -> None:
        self._halo(f, 0, raw_view(f), int(row), int(direction), raw_view(buf))

    def unpack(self, buf, f, row: int, direction: int) -> None:
        self._halo(f, 1, raw_view(buf), raw_view(f), int(row), int(direction))
