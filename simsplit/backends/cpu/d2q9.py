"""D2Q9 kernels for the CPU: fused pull stream-collide (BGK/TRT, Guo forcing), halo pack/unpack.

A step is up to two passes (:mod:`.rowgen`): a row kernel written out from the lattice tables
updates the fluid cells, vectorised across x, those next to walls and bodies too (halfway
bounce-back, the lid); ``_stream_collide`` then updates, one at a time, the cells it leaves:
next to open faces (inlet, outlet, free-slip), with curved links, at the ends of a periodic x.
Where the row kernel takes every fluid cell, two steps go in one sweep
(:meth:`D2Q9Kernels.stream_collide_two_steps`, ``run.temporal_blocking``).

Array layout shared with the GPU backends: populations ``f[q, j, i]`` with one ghost layer all
round (shape ``(9, ny + 2, nx + 2)``), flags ``(ny + 2, nx + 2)`` uint8, macroscopic fields
``(ny, nx)`` for the interior only. Rows ``j`` are along the split axis.

Arithmetic runs in the type of the macroscopic fields; populations may be stored narrower
(``run.storage``) in the shifted encoding of :class:`simsplit.numerics.storage.PopulationStorage`,
converted by :mod:`.storage_codec` as the D3Q19 kernels convert them.
"""

from __future__ import annotations

import weakref
from functools import cache, partial
from typing import Any

import numba
import numpy as np

from simsplit.backends.cpu import neq_chunks
from simsplit.backends.cpu.cells import commit_2d, load_2d, records_arg, stage_2d
from simsplit.backends.cpu.d2q9_collide import _CX, _CY, _OPP, _PAIRS, _W, _collide
from simsplit.backends.cpu.jit_cache import announce_compile
from simsplit.backends.cpu.rowgen import (
    RowKernel,
    const,
    dot_c,
    launch,
    planes,
    rows_enabled,
    scalar_only,
    serial,
    sum_terms,
    wrap_far,
)
from simsplit.backends.cpu.rowgen import wrap as _wrap
from simsplit.backends.cpu.storage_codec import _decode, _encode, far_view, raw_view
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
from simsplit.numerics.lattice import D2Q9, D2Q9_SPECULAR, DOWN, UP
from simsplit.numerics.lbm_params import OUTLET_CONVECTIVE, OUTLET_PRESSURE
from simsplit.numerics.neq_storage import NEQ16_DTYPE, halo_slot_sets

_SPECULAR = D2Q9_SPECULAR
_HALO_DIRS = np.array([UP, DOWN], dtype=np.int64)
#: rows a thread takes at least in a two-step sweep: each thread also computes step t + 1 of
#: the row before and after its own, which more, shorter chunks would repeat more often
MIN_CHUNK_ROWS = 8


@numba.njit(parallel=True, cache=True)
def _stream_collide(f_src, f_dst, flags, rho_out, ux_out, uy_out, j0, j1,
                    om_p, om_m, lid_u, fx, fy, periodic_x, store_macro, inlet, inlet_scale,
                    rho_w, links, outlet_kind, keep, take, press_w, slots, far, far_off,
                    every_cell):
    """Cell by cell: every fluid cell (``every_cell``), or those the row kernel leaves
    (``_takes``: next to an open face, a curved link or the ends of a periodic x). Outlet
    links take the rule ``outlet_kind`` (:func:`_outlet`). ``links`` of 27 weight planes are
    quadratic (simsplit/fluid/geometry/links.py); their reads two rows away go to ``far``, the
    array behind ``f_src`` (its row 0 at ``far`` row ``far_off``)."""
    nx = flags.shape[1] - 2
    dt = rho_out.dtype.type  # arithmetic type; f_src may be stored narrower (or records)
    one, half = dt(1.0), dt(0.5)
    om_p, om_m = dt(om_p), dt(om_m)
    fx, fy, lid_u = dt(fx), dt(fy), dt(lid_u)
    inlet_scale, rho_w = dt(inlet_scale), dt(rho_w)
    keep, take, press_w = dt(keep), dt(take), dt(press_w)
    src_p = one - half * om_p  # Guo source weights for symmetric / antisymmetric parts
    src_m = one - half * om_m
    for j in numba.prange(j0, j1):
        fl = np.empty(9, dtype=rho_out.dtype)
        out = np.empty((9, 1, 1), dtype=rho_out.dtype)  # records: post-collision, then stored
        feq = np.empty(9, dtype=rho_out.dtype)
        for i in range(1, nx + 1):
            own = flags[j, i]
            if own & SOLID or (not every_cell and _takes(flags, j, i, nx, periodic_x)):
                continue
            for q in range(9):
                si = i - _CX[q]
                if periodic_x:
                    si = nx if si == 0 else (1 if si == nx + 1 else si)
                fl[q] = load_2d(f_src, q, j - _CY[q], si, dt(_W[q]))
            if own & NEAR_WALL:  # only cells next to a wall look at their sources' flags
                for q in range(9):
                    si = i - _CX[q]
                    if periodic_x:
                        si = nx if si == 0 else (1 if si == nx + 1 else si)
                    kind = flags[j - _CY[q], si]
                    if kind & BOUNDARY:
                        v = load_2d(f_src, _OPP[q], j, i, dt(_W[_OPP[q]]))
                        if kind == LID:
                            v += dt(6.0 * _W[q] * _CX[q]) * lid_u
                        elif kind == INLET:  # Ladd: the wall moves at the row's inflow speed
                            v += dt(6.0 * _W[q] * _CX[q]) * (inlet_scale * inlet[j])
                        elif kind == OUTLET:
                            v = _outlet(f_src, j, i, q, rho_w, outlet_kind, keep, take,
                                        press_w, slots, rho_out)
                        elif kind == SLIP:
                            v = _specular(f_src, flags, j, i, q, nx, periodic_x, v, rho_out)
                        elif own & CURVED and links.shape[0] == 27:  # Bouzidi, quadratic
                            v = _quadratic(f_src, far, far_off, links, q, j, i, nx, periodic_x,
                                           v)
                        elif own & CURVED:  # interpolated bounce-back (Bouzidi, linear)
                            k = links[q, j, i]
                            if k >= dt(0.0):  # wall nearer than halfway: the neighbour x + c_q
                                ni = i + _CX[q]
                                if periodic_x:
                                    ni = nx if ni == 0 else (1 if ni == nx + 1 else ni)
                                v = k * v + (one - k) * load_2d(f_src, _OPP[q], j + _CY[q],
                                                                ni, dt(_W[_OPP[q]]))
                            else:  # beyond halfway: the own cell's q
                                v = (-k) * v + (one + k) * load_2d(f_src, q, j, i, dt(_W[q]))
                        fl[q] = v
            dst, dj, di = stage_2d(f_dst, out, j, i)
            _collide(fl, dst, dj, di, rho_out, ux_out, uy_out, j, i, om_p, om_m, fx, fy, src_p,
                     src_m, store_macro)
            commit_2d(f_dst, out, feq, j, i)


@numba.njit(inline="always")
def _quadratic(f_src, far, far_off, links, q, j, i, nx, periodic_x, own_opp):
    """Quadratic interpolated bounce-back of link q of cell (j, i) (links.py): |w0| f*_opp(x)
    + w1 A, then + w2 B unless w2 is 0; (A, B) = f*_opp at x + c_q and x + 2 c_q where w0 >= 0,
    f*_q at x and x + c_q else."""
    t = links.dtype.type  # the arithmetic type
    w0, w1, w2 = links[q, j, i], links[9 + q, j, i], links[18 + q, j, i]
    o = _OPP[q]
    if w0 >= t(0.0):
        ni = wrap_far(i + _CX[q], nx, periodic_x)
        v = w0 * own_opp + w1 * load_2d(f_src, o, j + _CY[q], ni, t(_W[o]))
        if w2 != t(0.0):
            fi = wrap_far(i + 2 * _CX[q], nx, periodic_x)
            v = v + w2 * load_2d(far, o, j + 2 * _CY[q] + far_off, fi, t(_W[o]))
        return v
    v = (-w0) * own_opp + w1 * load_2d(f_src, q, j, i, t(_W[q]))
    if w2 != t(0.0):
        ni = wrap_far(i + _CX[q], nx, periodic_x)
        v = v + w2 * load_2d(f_src, q, j + _CY[q], ni, t(_W[q]))
    return v


@numba.njit(inline="always")
def _specular(f_src, flags, j, i, q, nx, periodic_x, own_opp, like):
    """Free-slip walls (docs/bodies.md): q arrives reflected across the slip faces its link
    crosses (those whose ghost one step along the axis alone is SLIP: ``mask``), from the cell
    beside, x - c_q without those components; where that is no fluid cell, bounce back
    (``own_opp``). ``like``: an array of the arithmetic type."""
    mask = 0
    if _CX[q] != 0 and flags[j, _wrap(i - _CX[q], nx, periodic_x)] == SLIP:
        mask |= 1
    if _CY[q] != 0 and flags[j - _CY[q], i] == SLIP:
        mask |= 2
    bi = i if mask & 1 else _wrap(i - _CX[q], nx, periodic_x)
    bj = j if mask & 2 else j - _CY[q]
    if flags[bj, bi] & BOUNDARY:
        return own_opp
    m = _SPECULAR[q, mask]
    return load_2d(f_src, m, bj, bi, like.dtype.type(_W[m]))


@numba.njit(inline="always")
def _outlet(f_src, j, i, q, rho_w, kind, keep, take, press_w, slots, like):
    """What an outlet link returns into cell (j, i) along q (docs/bodies.md). Pressure:
    anti-bounce-back. Zero gradient: f*_q(j - c_qy, i), the value the interior neighbour
    x + c_qx pulls along q this step (the populations' x derivative is zero across the face);
    the source lies in the own column, in a ghost row across a slab face only for a q that
    crosses it, which the halo carries. Convective: the implicit upwind step of df/dt +
    U df/dx = 0 from the link's previous value and that one, ``keep * slots[q, j] + take *
    f*_q(j - c_qy, i)``, kept in ``slots`` for the next step. ``press_w`` > 0 mixes the
    pressure outlet's value into the open kinds' (the density then cannot drift). ``like``:
    an array of the arithmetic type (f_src may be stored narrower)."""
    dt = like.dtype.type
    if kind == OUTLET_PRESSURE:
        return _anti_bounce_back(f_src, j, i, q, rho_w, like)
    v = load_2d(f_src, q, j - _CY[q], i, dt(_W[q]))
    if kind == OUTLET_CONVECTIVE:
        v = keep * slots[q, j] + take * v
    if press_w > dt(0.0):
        v += press_w * (_anti_bounce_back(f_src, j, i, q, rho_w, like) - v)
    if kind == OUTLET_CONVECTIVE:
        slots[q, j] = v
    return v


@numba.njit(inline="always")
def _anti_bounce_back(f_src, j, i, q, rho_w, like):
    """Pressure outlet (anti-bounce-back): -f*_opp(q) + 2 w_q rho_w (1 + 4.5 (c_q.u)^2 - 1.5
    u^2), u the own cell's velocity from its post-collision populations (step t). ``like``: an
    array of the arithmetic type."""
    dt = like.dtype.type
    r = dt(0.0)
    jx = dt(0.0)
    jy = dt(0.0)
    for p in range(9):
        v = load_2d(f_src, p, j, i, dt(_W[p]))
        r += v
        jx += dt(_CX[p]) * v
        jy += dt(_CY[p]) * v
    inv = dt(1.0) / r
    ux = jx * inv
    uy = jy * inv
    cu = dt(_CX[q]) * ux + dt(_CY[q]) * uy
    usq = dt(1.5) * (ux * ux + uy * uy)
    feq = dt(2.0 * _W[q]) * rho_w * (dt(1.0) + dt(4.5) * cu * cu - usq)
    return feq - load_2d(f_src, _OPP[q], j, i, dt(_W[_OPP[q]]))


def _collide_source(macro: bool, forced: bool) -> list[str]:
    """:func:`_collide` and :func:`_relax_pair` as straight-line source for the row kernel:
    the same expressions in the same order (``f{q}`` for ``fl[q]``, ``p{q}`` for ``f_dst``).
    Without a body force (``forced`` false) the Guo source terms and the products with a zero
    lattice velocity component are left out: each would add a zero to a nonzero sum, so the
    populations keep their bits (every backend's kernel computes them in full)."""
    q9 = range(9)

    def momentum(c: tuple[int, ...]) -> str:
        return sum_terms(['dt(0.0)'] + [f'{const(c[q])} * f{q}' for q in q9 if forced or c[q]])

    lines = [f"r = {sum_terms(['dt(0.0)'] + [f'f{q}' for q in q9])}",
             f"jx = {momentum(_CX)}",
             f"jy = {momentum(_CY)}",
             "inv = one / r"]
    if forced:
        lines += ["ux = (jx + half * fx) * inv",
                  "uy = (jy + half * fy) * inv",
                  "usq = dt(1.5) * (ux * ux + uy * uy)",
                  "uf = ux * fx + uy * fy",
                  "p0 = f0 - om_p * (f0 - wq0 * r * (one - usq)) + src_p * (wq0 * dt(-3.0) * uf)"]
    else:
        lines += ["ux = jx * inv",
                  "uy = jy * inv",
                  "usq = dt(1.5) * (ux * ux + uy * uy)",
                  "p0 = f0 - om_p * (f0 - wq0 * r * (one - usq))"]
    for q in _PAIRS:
        o, cx, cy = _OPP[q], const(_CX[q]), const(_CY[q])
        relax_p = (f"relax_p = -om_p * (half * (f{q} + f{o}) - wq{q} * r * (one + dt(4.5) * cu"
                   f" * cu - usq))")
        relax_m = f"relax_m = -om_m * (half * (f{q} - f{o}) - wq{q} * r * dt(3.0) * cu)"
        if forced:
            lines += [f"cu = {cx} * ux + {cy} * uy",
                      f"cf = {cx} * fx + {cy} * fy",
                      f"{relax_p} + src_p * (wq{q} * (dt(9.0) * cu * cf - dt(3.0) * uf))",
                      f"{relax_m} + src_m * (wq{q} * dt(3.0) * cf)"]
        else:
            lines += [f"cu = {dot_c((_CX[q], _CY[q]), ('ux', 'uy'))}", relax_p, relax_m]
        lines += [f"p{q} = f{q} + relax_p + relax_m",
                  f"p{o} = f{o} + relax_p - relax_m"]
    return lines


_row_kernel = RowKernel(D2Q9, __name__, _collide_source, ("om_p", "om_m", "lid_u", "fx", "fy"), [
    "one, half = dt(1.0), dt(0.5)",
    "om_p, om_m, fx, fy = dt(om_p), dt(om_m), dt(fx), dt(fy)",
    "src_p = one - half * om_p",
    "src_m = one - half * om_m",
    "stored = out0.dtype.type(0)",
    "lid_u = dt(lid_u)"], arith="rho_out.dtype.type", decode="_decode({v}, {w})",
    encode="_encode({v}, {w}, stored)", forced=True, env={"_decode": _decode, "_encode": _encode})
_rows = _row_kernel.compile()  # by (store_macro, forced)
_two_steps = _row_kernel.two_steps  # by (store_macro, forced)
globals().update({_row_kernel.names[v]: k for v, k in _rows.items()})  # seen by jit_cache
globals().update({_row_kernel.two_step_names[v]: k for v, k in _two_steps.items()})
_takes = _row_kernel.takes


_row_runs = _row_kernel.row_runs
globals()[_row_kernel.runs_name] = _row_runs  # seen by jit_cache


#: the types the launcher has run the scalar pass for in this process
_launched: set = set()


@numba.njit(cache=True)
def _pack(f, row, dirs, buf):
    for k in range(dirs.shape[0]):
        q = dirs[k]
        for i in range(f.shape[2]):
            buf[k, i] = f[q, row, i]


@numba.njit(cache=True)
def _unpack(buf, f, row, dirs):
    for k in range(dirs.shape[0]):
        q = dirs[k]
        for i in range(f.shape[2]):
            f[q, row, i] = buf[k, i]


class D2Q9Kernels:
    """CPU launchers with the signature every backend's D2Q9 kernel set shares."""

    #: takes run.storage neq16 (records decoded and encoded a chunk at a time,
    #: :mod:`.neq_chunks`; cell by cell through :mod:`.cells` as the reference)
    records = True
    #: ... with bodies, inlets, outlets and free-slip walls too
    records_boundaries = True
    #: ... and stress-kept records (run.storage neq16s), the same two ways
    stress_records = True

    def stream_collide(self, f_src, f_dst, flags, rho, ux, uy, rows, p, store_macro,
                       inlet=None, links=None, outlet_slots=None, far=None):
        """``inlet``: inflow speed per row, ghost rows included (``(ny + 2,)``; None: none);
        ``links``: interpolated bounce-back weights, f's shape (read where flags say CURVED;
        None: none; 27 planes: quadratic); ``outlet_slots``: a convective outlet's previous
        values ``(9, ny + 2)`` (read and written where a link pulls from an outlet; None:
        none); ``far``: (the array behind ``f_src``, the row of its row 0 there), where
        quadratic links read two rows away (None: ``f_src`` itself)."""
        dt = rho.dtype
        if inlet is None:
            inlet = np.zeros(f_src.shape[1], dt)
        if links is None:
            links = np.full((9, 1, 1), -1.0, dt)
        if outlet_slots is None:
            outlet_slots = np.zeros((9, 1), dt)
        far_f, far_off = far_view(far, f_src)
        records = f_src.dtype == NEQ16_DTYPE
        chunk = records and neq_chunks.chunk_planes(flags.shape[1])
        if chunk:  # records decoded a chunk of rows at a time, stepped as float32
            neq_chunks.step(partial(self._float32, p, store_macro), f_src, f_dst, flags,
                            (rho, ux, uy), rows, chunk,
                            neq_chunks.scratch(self, 9, chunk, f_src.shape[2:]), inlet, links,
                            outlet_slots, far_f, far_off)
            return
        if records:  # every cell through the scalar kernel, reading and writing records
            args = self._args(records_arg(f_src), records_arg(f_dst), flags, (rho, ux, uy),
                              *rows, p, store_macro, inlet, links, outlet_slots,
                              records_arg(far_f), far_off)
            scalar_only(_stream_collide, args, rho.dtype)
            return
        self._float32(p, store_macro, raw_view(f_src), raw_view(f_dst), flags, (rho, ux, uy),
                      *rows, inlet, links, outlet_slots, far_f, far_off)

    @staticmethod
    def _args(f_src, f_dst, flags, macro, j0, j1, p, store_macro, inlet, links, slots, far_f,
              far_off):
        return (f_src, f_dst, flags, *macro, j0, j1, p.omega_plus, p.omega_minus,
                p.lid_velocity, p.force_x, p.force_y, p.periodic_x, store_macro, inlet,
                p.inlet_scale, p.outlet_density, links, p.outlet_kind, *p.convective_weights,
                p.outlet_pressure_weight, slots, far_f, far_off, False)

    def _float32(self, p, store_macro, f_src, f_dst, flags, macro, j0, j1, inlet, links, slots,
                 far_f, far_off):
        """Rows [j0, j1) of populations (narrow storage as raw views): the row kernel, then
        the scalar pass; ``far_f`` may be neq16 records (:func:`.cells.records_arg`: a
        chunk's reads two rows away)."""
        args = self._args(f_src, f_dst, flags, macro, j0, j1, p, store_macro, inlet, links,
                          slots, far_f, far_off)
        plain = (f_src, *planes(f_dst), flags, *macro, j0, j1, p.omega_plus, p.omega_minus,
                 p.lid_velocity, p.force_x, p.force_y, p.periodic_x, store_macro, p.forced)
        launch(_rows[bool(store_macro), p.forced], plain, _stream_collide, args,
               (f_src.dtype, macro[0].dtype, type(far_f)), _launched)

    # --- two steps per sweep (temporal blocking) -----------------------------------------
    def two_steps_fit(self, f: np.ndarray, dtype: Any) -> bool:
        """Whether two steps per sweep take population arrays like ``f``: the row kernels are
        on (the two-step kernel is made of them)."""
        return rows_enabled() and f.ndim == 3 and f.dtype != NEQ16_DTYPE

    def two_steps_fit_shape(self, shape: tuple[int, ...], storage: Any, dtype: Any) -> bool:
        """:meth:`two_steps_fit` for population arrays of ``shape`` not allocated yet (a block
        with halo faces then holds two ghost planes at each, and the sweep recomputes step
        t + 1 of the inner one from the neighbour's two planes)."""
        return rows_enabled() and len(shape) == 3 and np.dtype(storage) != NEQ16_DTYPE

    def two_steps_cover(self, flags: np.ndarray, p: Any) -> bool:
        """Whether the row kernel updates every fluid cell of ``flags`` (none left to the
        scalar pass: no open face, curved link or periodic x), which two steps per sweep
        need."""
        return not p.periodic_x and self._runs(flags)[2] == 0

    def _runs(self, flags: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """The row kernel's runs of cells in ``flags`` (x not periodic), listed once for the
        two-step kernel (``row_runs``: ``ptr``, ``spans``) with the number of fluid cells
        they leave, kept for each flags array while it lives (a block's flags never change)."""
        kept = self.__dict__.setdefault("_kept_runs", {})
        for key in [k for k, (ref, _) in kept.items() if ref() is None]:
            del kept[key]
        if id(flags) in kept:
            return kept[id(flags)][1]
        ptr = np.zeros(flags.shape[0] + 1, np.int64)
        spans = np.zeros((0, 3), np.int64)
        _row_runs(flags, False, ptr, spans, False)
        ptr = np.cumsum(ptr)
        spans = np.zeros((int(ptr[-1]), 3), np.int64)
        left = int(_row_runs(flags, False, ptr, spans, True))
        kept[id(flags)] = (weakref.ref(flags), (ptr, spans, left))
        return ptr, spans, left

    def stream_collide_two_steps(self, f_src, f_dst, flags, rho, ux, uy, rows, p,
                                 store_macro) -> None:
        """Steps t + 1 and t + 2 of rows ``rows`` in one sweep, ``f_src`` (step t) ->
        ``f_dst`` (step t + 2), the step t + 1 rows kept in a ring of three rows per chunk of
        rows (one chunk a thread, of :data:`MIN_CHUNK_ROWS` rows or more;
        :meth:`RowKernel._two_steps_source`): the bits of two :meth:`stream_collide` calls
        with a swap between, half their memory traffic. Every fluid cell must be one the
        row kernel takes (:meth:`two_steps_cover`); rho/u, if stored, are step t + 2's."""
        ptr, spans, left = self._runs(flags)
        if p.periodic_x or left:
            raise ValueError("two steps per sweep: the row kernel leaves cells to the scalar "
                             "pass here (two_steps_cover is false)")
        f_src, f_dst = raw_view(f_src), raw_view(f_dst)
        chunks = max(1, min(numba.get_num_threads(), (rows[1] - rows[0]) // MIN_CHUNK_ROWS))
        ring = self._ring(chunks, f_src.shape[2], f_src.dtype)
        args = (f_src, *planes(f_dst), flags, rho, ux, uy, rows[0], rows[1], p.omega_plus,
                p.omega_minus, p.lid_velocity, p.force_x, p.force_y, p.periodic_x,
                store_macro, p.forced, *ring, ptr, spans)
        kernel = serial(_two_steps[bool(store_macro), p.forced])
        announce_compile(kernel, args)
        kernel(*args)

    def _ring(self, chunks: int, width: int, dtype: Any) -> tuple[np.ndarray, ...]:
        """Per population, three step-(t + 1) rows for each of ``chunks`` chunks (kept). Rows
        are padded so that a cache line or more lies between one chunk's rows and the next's:
        without it the two threads' stores to the line they would share cost 6 % at 512² on
        two threads (644 against 684 MLUPS, the kernel alone)."""
        key = (chunks, width, np.dtype(dtype))
        rings = self.__dict__.setdefault("_rings", {})
        if key not in rings:
            if len(rings) >= 8:  # slabs of a run share a few keys; other runs' go
                rings.clear()
            line = max(1, 64 // np.dtype(dtype).itemsize)  # elements in a 64-byte cache line
            padded = (width // line + 2) * line
            rings[key] = tuple(np.zeros((chunks, 3, padded), dtype) for _ in range(9))
        return rings[key]

    def pack(self, f, row, direction, buf):
        _pack(raw_view(f), row, halo_rows(f, direction, _HALO_DIRS),
              raw_view(buf))

    def unpack(self, buf, f, row, direction):
        _unpack(raw_view(buf), raw_view(f), row,
                halo_rows(f, direction, _HALO_DIRS))


def halo_rows(f: np.ndarray, direction: int, populations: np.ndarray) -> np.ndarray:
    """The stored slots of ``f`` a halo in ``direction`` moves: a lattice's crossing
    populations (``populations[direction]``) or, for neq16 records (plain or stress-kept),
    their halo slots (:func:`~simsplit.numerics.neq_storage.halo_slot_sets`)."""
    if f.dtype != NEQ16_DTYPE:
        return populations[direction]
    return _record_halo_rows(f.shape[0])[direction]


@cache
def _record_halo_rows(slots: int) -> tuple[np.ndarray, np.ndarray]:
    return tuple(np.array(s, np.int64) for s in halo_slot_sets(slots))  # type: ignore
