"""D3Q19 kernels for the CPU: fused pull stream-collide (BGK/TRT, Guo forcing), halo pack/unpack.

Two-lattice steps are up to two passes (:mod:`.rowgen`): a row kernel written out from the
lattice tables updates the fluid cells, vectorised across x, those next to walls and the lid
too; ``_stream_collide`` then updates, one at a time, the cells it leaves (the ends of a periodic
x, next to inlets, outlets or free-slip walls, with curved links). The in-place (AA) kernel
updates every cell one at a time.

Layout as in 2D with one more axis: populations ``f[q, k, j, i]`` with one ghost layer all round
(shape ``(19, nz + 2, ny + 2, nx + 2)``), flags ``(nz + 2, ny + 2, nx + 2)`` uint8, macroscopic
fields ``(nz, ny, nx)`` for the interior only. Planes ``k`` are along the split axis; x and y
may be periodic within a slab (their ghost cells are then never read).

Arithmetic runs in the type of the macroscopic fields; populations may be stored narrower
(``run.storage``) in the shifted encoding of :class:`simsplit.numerics.storage.PopulationStorage`.
The conversions are :mod:`.storage_codec`'s.
"""

from __future__ import annotations

from functools import partial

import numba
import numpy as np

from simsplit.backends.cpu import neq_chunks
from simsplit.backends.cpu.cells import commit_3d, load_3d, records_arg
from simsplit.backends.cpu.d2q9 import _pack, _unpack, halo_rows
from simsplit.backends.cpu.d3q19_collide import _CX, _CY, _CZ, _OPP, _PAIRS, _W, _collide
from simsplit.backends.cpu.jit_cache import announce_compile
from simsplit.backends.cpu.rowgen import (
    RowKernel,
    const,
    dot_c,
    launch,
    planes,
    scalar_only,
    serial,
    sum_terms,
    wrap_far,
)
from simsplit.backends.cpu.rowgen import wrap as _wrap
from simsplit.backends.cpu.storage_codec import _decode, _encode, far_view, raw_view
from simsplit.numerics.flags import BOUNDARY, CURVED, INLET, LID, NEAR_WALL, OUTLET, SLIP, SOLID
from simsplit.numerics.lattice import D3Q19, D3Q19_SPECULAR
from simsplit.numerics.lbm_params import OUTLET_CONVECTIVE, OUTLET_PRESSURE
from simsplit.numerics.neq_storage import NEQ16_DTYPE

_SPECULAR = D3Q19_SPECULAR
_HALO_DIRS = np.array([D3Q19.up, D3Q19.down], dtype=np.int64)


@numba.njit(parallel=True, cache=True)
def _stream_collide(f_src, f_dst, flags, rho_out, ux_out, uy_out, uz_out, k0, k1,
                    om_p, om_m, lid_u, fx, fy, fz, periodic_x, periodic_y, store_macro, forced,
                    inlet, inlet_scale, rho_w, links, outlet_kind, keep, take, press_w, slots,
                    far, far_off, every_cell):
    """Two-lattice pull step of planes [k0, k1), cell by cell: every fluid cell
    (``every_cell``), or those the row kernel leaves (``_takes``: next to an open face, a
    curved link or the ends of a periodic x). Near a boundary: walls and the lid bounce back;
    INLET ghost cells (open x faces) return Ladd's moving-wall value with the inflow speed
    ``inlet[k, j]`` of the cell's line; OUTLET ones the rule ``outlet_kind`` (:func:`_outlet`);
    SLIP ones the specular reflection (:func:`_specular`);
    body links of CURVED cells interpolate with ``links[q, k, j, i]`` (Bouzidi,
    simsplit/fluid/geometry/links.py; 57 weight planes: quadratic, reading two planes away
    from ``far``, the array behind ``f_src``, its plane 0 at ``far`` plane ``far_off``)."""
    ny = flags.shape[1] - 2
    nx = flags.shape[2] - 2
    dt = rho_out.dtype.type  # arithmetic type; f_src may be stored narrower (or records)
    one, half = dt(1.0), dt(0.5)
    om_p, om_m = dt(om_p), dt(om_m)
    fx, fy, fz, lid_u = dt(fx), dt(fy), dt(fz), dt(lid_u)
    inlet_scale, rho_w = dt(inlet_scale), dt(rho_w)
    keep, take, press_w = dt(keep), dt(take), dt(press_w)
    src_p = one - half * om_p  # Guo source weights for symmetric / antisymmetric parts
    src_m = one - half * om_m
    for row in numba.prange((k1 - k0) * ny):  # rows (k, j): parallel even in a one-plane range
        k = k0 + row // ny
        j = 1 + row % ny
        fl = np.empty(19, dtype=rho_out.dtype)
        post = np.empty(19, dtype=rho_out.dtype)
        pair_sum = np.empty(9, dtype=rho_out.dtype)
        pair_dif = np.empty(9, dtype=rho_out.dtype)
        feq = np.empty(19, dtype=rho_out.dtype)  # records' scratch
        for i in range(1, nx + 1):
            own = flags[k, j, i]
            if own & SOLID or (not every_cell
                               and _takes(flags, k, j, i, nx, periodic_x, ny, periodic_y)):
                continue
            for q in range(19):
                sj = _wrap(j - _CY[q], ny, periodic_y)
                si = _wrap(i - _CX[q], nx, periodic_x)
                fl[q] = load_3d(f_src, q, k - _CZ[q], sj, si, dt(_W[q]))
            if own & NEAR_WALL:  # only cells next to a wall look at their sources' flags
                for q in range(19):
                    sj = _wrap(j - _CY[q], ny, periodic_y)
                    si = _wrap(i - _CX[q], nx, periodic_x)
                    kind = flags[k - _CZ[q], sj, si]
                    if kind & BOUNDARY:
                        o = _OPP[q]
                        v = load_3d(f_src, o, k, j, i, dt(_W[o]))
                        if kind == LID:
                            v += dt(6.0 * _W[q] * _CX[q]) * lid_u
                        elif kind == INLET:  # Ladd: the wall moves at the line's inflow speed
                            v += dt(6.0 * _W[q] * _CX[q]) * (inlet_scale * inlet[k, j])
                        elif kind == OUTLET:
                            v = _outlet(f_src, k, j, i, q, rho_w, rho_out, outlet_kind, keep,
                                        take, press_w, slots, ny, periodic_y)
                        elif kind == SLIP:
                            v = _specular(f_src, flags, k, j, i, q, nx, ny, periodic_x,
                                          periodic_y, v, rho_out)
                        elif own & CURVED and links.shape[0] == 57:  # Bouzidi, quadratic
                            v = _quadratic(f_src, far, far_off, links, q, k, j, i, ny, nx,
                                           periodic_y, periodic_x, v)
                        elif own & CURVED:  # interpolated bounce-back (Bouzidi, linear)
                            w = links[q, k, j, i]
                            if w >= dt(0.0):  # wall nearer than halfway: the neighbour x + c_q
                                nj = _wrap(j + _CY[q], ny, periodic_y)
                                ni = _wrap(i + _CX[q], nx, periodic_x)
                                v = w * v + (one - w) * load_3d(f_src, o, k + _CZ[q], nj, ni,
                                                                dt(_W[o]))
                            else:  # beyond halfway: the own cell's q
                                v = (-w) * v + (one + w) * load_3d(f_src, q, k, j, i, dt(_W[q]))
                        fl[q] = v
            _collide(fl, post, pair_sum, pair_dif, rho_out, ux_out, uy_out, uz_out, k, j, i,
                     om_p, om_m, fx, fy, fz, src_p, src_m, store_macro, forced)
            commit_3d(f_dst, post, feq, k, j, i)


@numba.njit(inline="always")
def _quadratic(f_src, far, far_off, links, q, k, j, i, ny, nx, periodic_y, periodic_x, own_opp):
    """Quadratic interpolated bounce-back of link q of cell (k, j, i): the D2Q9 kernel's
    ``_quadratic`` with (k, j, i) cells."""
    t = links.dtype.type  # the arithmetic type
    w0, w1, w2 = links[q, k, j, i], links[19 + q, k, j, i], links[38 + q, k, j, i]
    o = _OPP[q]
    nj = wrap_far(j + _CY[q], ny, periodic_y)
    ni = wrap_far(i + _CX[q], nx, periodic_x)
    if w0 >= t(0.0):
        v = w0 * own_opp + w1 * load_3d(f_src, o, k + _CZ[q], nj, ni, t(_W[o]))
        if w2 != t(0.0):
            fj = wrap_far(j + 2 * _CY[q], ny, periodic_y)
            fi = wrap_far(i + 2 * _CX[q], nx, periodic_x)
            v = v + w2 * load_3d(far, o, k + 2 * _CZ[q] + far_off, fj, fi, t(_W[o]))
        return v
    v = (-w0) * own_opp + w1 * load_3d(f_src, q, k, j, i, t(_W[q]))
    if w2 != t(0.0):
        v = v + w2 * load_3d(f_src, q, k + _CZ[q], nj, ni, t(_W[q]))
    return v


@numba.njit(inline="always")
def _specular(f_src, flags, k, j, i, q, nx, ny, periodic_x, periodic_y, own_opp, like):
    """Free-slip walls: the D2Q9 kernel's ``_specular`` with z (never wrapped: ghost planes)."""
    mask = 0
    if _CX[q] != 0 and flags[k, j, _wrap(i - _CX[q], nx, periodic_x)] == SLIP:
        mask |= 1
    if _CY[q] != 0 and flags[k, _wrap(j - _CY[q], ny, periodic_y), i] == SLIP:
        mask |= 2
    if _CZ[q] != 0 and flags[k - _CZ[q], j, i] == SLIP:
        mask |= 4
    bi = i if mask & 1 else _wrap(i - _CX[q], nx, periodic_x)
    bj = j if mask & 2 else _wrap(j - _CY[q], ny, periodic_y)
    bk = k if mask & 4 else k - _CZ[q]
    if flags[bk, bj, bi] & BOUNDARY:
        return own_opp
    m = _SPECULAR[q, mask]
    return load_3d(f_src, m, bk, bj, bi, like.dtype.type(_W[m]))


@numba.njit(inline="always")
def _outlet(f_src, k, j, i, q, rho_w, like, kind, keep, take, press_w, slots, ny, periodic_y):
    """What an outlet link returns into cell (k, j, i) along q: the rules of the D2Q9 kernel's
    ``_outlet`` (pressure, zero gradient, convective), the open kinds' source f*_q(k - c_qz,
    j - c_qy, i) wrapped along a periodic y."""
    if kind == OUTLET_PRESSURE:
        return _anti_bounce_back(f_src, k, j, i, q, rho_w, like)
    dt = like.dtype.type
    sj = _wrap(j - _CY[q], ny, periodic_y)
    v = load_3d(f_src, q, k - _CZ[q], sj, i, dt(_W[q]))
    if kind == OUTLET_CONVECTIVE:
        v = keep * slots[q, k, j] + take * v
    if press_w > dt(0.0):
        v += press_w * (_anti_bounce_back(f_src, k, j, i, q, rho_w, like) - v)
    if kind == OUTLET_CONVECTIVE:
        slots[q, k, j] = v
    return v


@numba.njit(inline="always")
def _anti_bounce_back(f_src, k, j, i, q, rho_w, like):
    """Pressure outlet (anti-bounce-back): -f*_opp(q) + 2 w_q rho_w (1 + 4.5 (c_q.u)^2 - 1.5
    u^2), u the own cell's velocity from its post-collision populations (step t); sums over
    every population in order, zero products included (kernels/d3q19.cu own_velocity_3d and
    anti_bounce_back_3d, which compute u once per cell: the same operations, the same bits).
    ``like``: an array of the arithmetic type."""
    dt = like.dtype.type
    r = dt(0.0)
    jx = dt(0.0)
    jy = dt(0.0)
    jz = dt(0.0)
    for p in range(19):
        v = load_3d(f_src, p, k, j, i, dt(_W[p]))
        r += v
        jx += dt(_CX[p]) * v
        jy += dt(_CY[p]) * v
        jz += dt(_CZ[p]) * v
    inv = dt(1.0) / r
    ux = jx * inv
    uy = jy * inv
    uz = jz * inv
    cu = dt(_CX[q]) * ux + dt(_CY[q]) * uy + dt(_CZ[q]) * uz
    usq = dt(1.5) * (ux * ux + uy * uy + uz * uz)
    feq = dt(2.0 * _W[q]) * rho_w * (dt(1.0) + dt(4.5) * cu * cu - usq)
    o = _OPP[q]
    return feq - load_3d(f_src, o, k, j, i, dt(_W[o]))


@numba.njit(parallel=True, cache=True)
def _stream_collide_aa(f, flags, rho_out, ux_out, uy_out, uz_out, k0, k1, om_p, om_m, lid_u,
                       fx, fy, fz, periodic_x, periodic_y, store_macro, odd, forced):
    """In-place (AA) step on the one array ``f`` (docs/d3q19.md, streaming): an even step reads
    and writes the cell's own slots (post-collision q into slot opp q), an odd step reads slot
    opp q of x - c_q and writes slot q of x + c_q. Same collision as _stream_collide."""
    ny = f.shape[2] - 2
    nx = f.shape[3] - 2
    dt = rho_out.dtype.type
    one, half = dt(1.0), dt(0.5)
    om_p, om_m = dt(om_p), dt(om_m)
    fx, fy, fz, lid_u = dt(fx), dt(fy), dt(fz), dt(lid_u)
    src_p = one - half * om_p
    src_m = one - half * om_m
    for row in numba.prange((k1 - k0) * ny):
        k = k0 + row // ny
        j = 1 + row % ny
        fl = np.empty(19, dtype=rho_out.dtype)
        post = np.empty(19, dtype=rho_out.dtype)
        pair_sum = np.empty(9, dtype=rho_out.dtype)
        pair_dif = np.empty(9, dtype=rho_out.dtype)
        for i in range(1, nx + 1):
            own = flags[k, j, i]
            if own & SOLID:
                continue
            for q in range(19):
                if odd:  # the streamed value: neighbour x - c_q's post-collision q, in slot opp q
                    o = _OPP[q]
                    sj = _wrap(j - _CY[q], ny, periodic_y)
                    si = _wrap(i - _CX[q], nx, periodic_x)
                    fl[q] = _decode(f[o, k - _CZ[q], sj, si], dt(_W[o]))
                else:  # the previous odd step streamed it into the own slot q
                    fl[q] = _decode(f[q, k, j, i], dt(_W[q]))
            if own & NEAR_WALL:
                for q in range(19):
                    sk = k - _CZ[q]
                    sj = _wrap(j - _CY[q], ny, periodic_y)
                    si = _wrap(i - _CX[q], nx, periodic_x)
                    kind = flags[sk, sj, si]
                    if kind & SOLID:
                        o = _OPP[q]
                        # own post-collision opp q: the own slot q after an even step; after an
                        # odd step it went, raw, into the solid source's slot opp q
                        if odd:
                            v = _decode(f[q, k, j, i], dt(_W[q]))
                        else:
                            v = _decode(f[o, sk, sj, si], dt(_W[o]))
                        if kind == LID:
                            v += dt(6.0 * _W[q] * _CX[q]) * lid_u
                        fl[q] = v
            _collide(fl, post, pair_sum, pair_dif, rho_out, ux_out, uy_out, uz_out, k, j, i,
                     om_p, om_m, fx, fy, fz, src_p, src_m, store_macro, forced)
            for q in range(19):
                if odd:  # to x + c_q, solid or ghost cells included (the walls read it there)
                    dj = _wrap(j + _CY[q], ny, periodic_y)
                    di = _wrap(i + _CX[q], nx, periodic_x)
                    f[q, k + _CZ[q], dj, di] = _encode(post[q], dt(_W[q]), f)
                else:
                    o = _OPP[q]
                    f[o, k, j, i] = _encode(post[q], dt(_W[o]), f)



def _collide_source(macro: bool, forced: bool) -> list[str]:
    """:func:`_collide` as straight-line source for the row kernel: the same expressions in the
    same order (``f{q}`` for ``fl[q]``, ``s{q}``/``d{q}`` for the pair sums and differences,
    ``p{q}`` for ``post[q]``)."""
    lines = []
    for q in _PAIRS:
        lines += [f"s{q} = f{q} + f{_OPP[q]}", f"d{q} = f{q} - f{_OPP[q]}"]
    lines.append(f"r = {sum_terms(['f0'] + [f's{q}' for q in _PAIRS])}")
    for axis, c in zip("xyz", (_CX, _CY, _CZ), strict=True):
        terms = [f"{const(c[q])} * d{q}" for q in _PAIRS if c[q] != 0]
        lines.append(f"j{axis} = {sum_terms(terms)}")
    lines.append("inv = one / r")
    if forced:
        lines += [f"u{a} = (j{a} + half * f{a}) * inv" for a in "xyz"]
        lines.append("uf = ux * fx + uy * fy + uz * fz")
    else:
        lines += [f"u{a} = j{a} * inv" for a in "xyz"]
    lines += ["usq = dt(1.5) * (ux * ux + uy * uy + uz * uz)",
              "p0 = f0 - om_p * (f0 - wq0 * r * (one - usq))"]
    if forced:
        lines.append("p0 = p0 + src_p * (wq0 * dt(-3.0) * uf)")
    u, force = ("ux", "uy", "uz"), ("fx", "fy", "fz")
    for q in _PAIRS:
        o, c, w2 = _OPP[q], (_CX[q], _CY[q], _CZ[q]), const(2.0 * _W[q])
        lines += [f"cu = {dot_c(c, u)}",
                  f"relax_p = nh_om_p * (s{q} - {w2} * r * (one + dt(4.5) * cu * cu - usq))",
                  f"relax_m = nh_om_m * (d{q} - {w2} * r * dt(3.0) * cu)"]
        if forced:
            lines += [f"cf = {dot_c(c, force)}",
                      f"relax_p = relax_p + src_p * (wq{q} * (dt(9.0) * cu * cf - dt(3.0) * uf))",
                      f"relax_m = relax_m + src_m * (wq{q} * dt(3.0) * cf)"]
        lines += [f"p{q} = f{q} + relax_p + relax_m", f"p{o} = f{o} + relax_p - relax_m"]
    return lines


_row_kernel = RowKernel(D3Q19, __name__, _collide_source,
                        ("om_p", "om_m", "lid_u", "fx", "fy", "fz"), [
    "one, half = dt(1.0), dt(0.5)",
    "om_p, om_m = dt(om_p), dt(om_m)",
    "fx, fy, fz = dt(fx), dt(fy), dt(fz)",
    "src_p = one - half * om_p",
    "src_m = one - half * om_m",
    "nh_om_p = dt(-0.5) * om_p",
    "nh_om_m = dt(-0.5) * om_m",
    "stored = out0.dtype.type(0)",
    "lid_u = dt(lid_u)"], arith="rho_out.dtype.type", decode="_decode({v}, {w})",
    encode="_encode({v}, {w}, stored)", forced=True,
    env={"_decode": _decode, "_encode": _encode})
_rows = _row_kernel.compile()  # by (store_macro, forced)
globals().update({_row_kernel.names[v]: k for v, k in _rows.items()})  # seen by jit_cache
_takes = _row_kernel.takes


#: the types the launcher has run the scalar pass for in this process
_launched: set = set()


def _layers(f: np.ndarray) -> np.ndarray:
    """View of ``f`` as ``(q, layers, cells per layer)``: halos move whole layers."""
    return f.reshape(f.shape[0], f.shape[1], -1)


class D3Q19Kernels:
    """CPU launchers with the signature every backend's D3Q19 kernel set shares."""

    #: takes run.storage neq16 (records decoded and encoded a chunk at a time,
    #: :mod:`.neq_chunks`; cell by cell through :mod:`.cells` as the reference)
    records = True
    #: ... with bodies, inlets, outlets and free-slip walls too
    records_boundaries = True
    #: ... and stress-kept records (run.storage neq16s), the same two ways
    stress_records = True

    def stream_collide(self, f_src, f_dst, flags, rho, ux, uy, uz, layers, p, store_macro,
                       inlet=None, links=None, outlet_slots=None, far=None):
        """``inlet``: inflow speed of each line (k, j) along x, ghosts included (``(nz + 2,
        ny + 2)``, the arithmetic type; None: none); ``links``: interpolated bounce-back
        weights, f's shape in the arithmetic type (read where flags say CURVED; None: none;
        57 planes: quadratic); ``outlet_slots``: a convective outlet's previous values ``(19,
        nz + 2, ny + 2)`` (read and written where a link pulls from an outlet; None: none);
        ``far``: (the array behind ``f_src``, the plane of its plane 0 there), where quadratic
        links read two planes away (None: ``f_src`` itself)."""
        dt = rho.dtype
        if inlet is None:
            inlet = np.zeros((1, 1), dt)
        if links is None:
            links = np.full((19, 1, 1, 1), -1.0, dt)
        if outlet_slots is None:
            outlet_slots = np.zeros((19, 1, 1), dt)
        far_f, far_off = far_view(far, f_src)
        records = f_src.dtype == NEQ16_DTYPE
        chunk = records and neq_chunks.chunk_planes(flags[0].size)
        if chunk:  # records decoded a chunk of planes at a time, stepped as float32
            run = partial(self._float32, p, store_macro)
            neq_chunks.step(run, f_src, f_dst, flags, (rho, ux, uy, uz), layers, chunk,
                            neq_chunks.scratch(self, 19, chunk, f_src.shape[2:]), inlet, links,
                            outlet_slots, far_f, far_off)
            return
        if records:  # every cell through the scalar kernel, reading and writing records
            args = self._args(records_arg(f_src), records_arg(f_dst), flags, (rho, ux, uy, uz),
                              *layers, p, store_macro, inlet, links, outlet_slots,
                              records_arg(far_f), far_off)
            scalar_only(_stream_collide, args, rho.dtype)
            return
        self._float32(p, store_macro, raw_view(f_src), raw_view(f_dst), flags,
                      (rho, ux, uy, uz), *layers, inlet, links, outlet_slots, far_f, far_off)

    @staticmethod
    def _args(f_src, f_dst, flags, macro, k0, k1, p, store_macro, inlet, links, slots, far_f,
              far_off):
        return (f_src, f_dst, flags, *macro, k0, k1, p.omega_plus, p.omega_minus,
                p.lid_velocity, p.force_x, p.force_y, p.force_z, p.periodic_x, p.periodic_y,
                store_macro, p.forced, inlet, p.inlet_scale, p.outlet_density, links,
                p.outlet_kind, *p.convective_weights, p.outlet_pressure_weight, slots, far_f,
                far_off, False)

    def _float32(self, p, store_macro, f_src, f_dst, flags, macro, k0, k1, inlet, links, slots,
                 far_f, far_off):
        """Planes [k0, k1) of populations (narrow storage as raw views): the row kernel,
        then the scalar pass; ``far_f`` may be neq16 records (:func:`.cells.records_arg`:
        a chunk's reads two planes away)."""
        args = self._args(f_src, f_dst, flags, macro, k0, k1, p, store_macro, inlet, links,
                          slots, far_f, far_off)
        plain = (f_src, *planes(f_dst), flags, *macro, k0, k1, p.omega_plus, p.omega_minus,
                 p.lid_velocity, p.force_x, p.force_y, p.force_z, p.periodic_x, p.periodic_y,
                 store_macro, p.forced)
        launch(_rows[bool(store_macro), p.forced], plain, _stream_collide, args,
               (f_src.dtype, macro[0].dtype, type(far_f)), _launched)

    def stream_collide_aa(self, f, flags, rho, ux, uy, uz, layers, p, store_macro, odd):
        """In-place (AA) update of planes ``layers`` of ``f``; ``odd`` selects the parity."""
        args = (raw_view(f), flags, rho, ux, uy, uz, layers[0], layers[1], p.omega_plus,
                p.omega_minus, p.lid_velocity, p.force_x, p.force_y, p.force_z, p.periodic_x,
                p.periodic_y, store_macro, bool(odd), p.forced)
        kernel = serial(_stream_collide_aa)
        announce_compile(kernel, args)
        kernel(*args)

    def pack(self, f, layer, direction, buf):
        _pack(_layers(raw_view(f)), layer, halo_rows(f, direction, _HALO_DIRS),
              raw_view(buf))

    def unpack(self, buf, f, layer, direction):
        _unpack(raw_view(buf), _layers(raw_view(f)), layer,
                halo_rows(f, direction, _HALO_DIRS))
