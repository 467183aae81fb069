"""neq16 records stepped through the float32-storage kernels, a chunk of planes at a time.

The records kernel (:mod:`.cells`) rebuilds a source cell's populations on every pull and runs
one cell at a time. Here each chunk of ``C`` planes along the split axis (k in 3D, rows j in
2D) is decoded once into float32 populations (the chunk's planes and one each side: its pulls'
sources), stepped by the lattice's float32-storage path (row kernel and scalar pass, on views
of the chunk), and its post-collision populations are encoded into the destination records.
Decoding repeats :func:`.neq_codec.pull`'s operations and encoding :func:`.neq_codec.store`'s,
vectorised over x, so every record, density, velocity and force keeps its bits: float32
storage under float32 arithmetic stores f as it is (its decode and encode are identities), so
the float32 path collides the very values a pull returns. Quadratic links' reads two planes
away go to the records themselves (through :mod:`.cells`). Two planes of the source chunk move
to the next chunk instead of being decoded again; scratch stays two chunks of float32.

``SIMSPLIT_CPU_NEQ_PLANES`` sets C (cells, not planes, when it ends in ``c``; "0": the records
kernel cell by cell, the reference).
"""

from __future__ import annotations

import math
import os
import threading
import types
from typing import Any, Callable

import numba
import numpy as np

from simsplit.backends.cpu import fast16
from simsplit.backends.cpu.cells import records_arg
from simsplit.backends.cpu.jit_cache import announce_compile
from simsplit.backends.cpu.neq_codec import _rho_fast, _signed16, _usq
from simsplit.backends.cpu.rowgen import SERIAL_ENV
from simsplit.numerics.flags import SOLID
from simsplit.numerics.lattice import D2Q9, D3Q19
from simsplit.numerics.neq_storage import NEQ_BITS, RHO_SCALE

#: environment variable: planes a chunk (0: the records kernel cell by cell)
PLANES_ENV = "SIMSPLIT_CPU_NEQ_PLANES"
#: cells a chunk holds by default: 8 planes of 96^2 (fastest of 2-16 planes at 96^3, one
#: thread, 2026-12-05: 9, 11, 15 and 14 MLUPS at 2, 4, 8 and 16); about 6 MB of float32 D3Q19
CHUNK_CELLS = 80000
_TOP = 2.0**NEQ_BITS
_RNE = 2.0**52
_RNE32 = 2.0**23
# the lattice's tables: rebound in each lattice's copy of the kernels (:func:`_for_lattice`)
_CX = _CY = _CZ = _W = (0,)


def chunk_planes(plane_cells: int) -> int:
    """Planes a chunk takes (``plane_cells``: cells of a plane, ghosts included); 0: none."""
    raw = os.environ.get(PLANES_ENV, "").strip()
    if raw.endswith("c") or not raw:
        cells = int(raw[:-1]) if raw else CHUNK_CELLS
        return max(1, cells // plane_cells)
    return max(0, int(raw))


@numba.njit(inline="always")
def _round_even(x):
    a = abs(x)
    r = (a + _RNE) - _RNE
    return -r if x < 0 else r


@numba.njit(inline="always")
def _round_even32(x):
    """x (float32, |x| < 2^23) rounded to an integer, ties to even (:func:`_round_even`'s
    result for the same value: both exact roundings)."""
    a = abs(x)
    r = (a + np.float32(_RNE32)) - np.float32(_RNE32)
    return -r if x < 0 else r


@numba.njit(inline="always")
def _pow2(e):
    """2^e as float64 for -1022 <= e <= 1023 (a normal number: as :func:`.fast16.ldexp`)."""
    return np.uint64((e + 1023) << 52).view(np.float64)


@numba.njit(inline="always")
def _pow2_32(e):
    """2^e as float32 for -149 <= e <= 127 (subnormal below -126)."""
    bits = (e + 127) << 23 if e >= -126 else 1 << (e + 149)
    return np.uint32(bits).view(np.float32)


@numba.njit(inline="always")
def _split(e):
    """(e1, e2): e1 is e clamped to float32's normal exponents, e2 the rest clamped to
    [-149, 127]. For an integer |n| < 2^15, n 2^e1 is exact (or e1 = e: one rounding), times
    2^e2 one rounding: n 2^e rounded once to float32, past the clamps the same signed zero or
    infinity."""
    e1 = min(max(e, -126), 127)
    return e1, min(max(e - e1, -149), 127)


@numba.njit(inline="always")
def _feq_of(rho, ux, uy, uz, usq, cx, cy, cz, w):
    """:func:`.neq_codec._feq` with the lattice's numbers for one q given as float32."""
    dt = np.float32
    cu = dt(0.0)
    cu += cx * ux
    cu += cy * uy
    cu += cz * uz
    poly = dt(1.0) + dt(3.0) * cu
    poly = (poly + (dt(4.5) * cu) * cu) - dt(1.5) * usq
    return (w * rho) * poly


@numba.njit(inline="always")
def _exponent(top):
    """The block exponent of :func:`.neq_codec.store` from a cell's largest |d| (float64 of a
    float32 or inf, >= 0), from the bits: frexp's exponent, plus one where the top rounds to
    2^15 (from 32767.5 up, ties to even); 0 for 0 (and -14 for inf, as math.frexp gives)."""
    b = np.float64(top).view(np.int64)
    e = ((b >> 52) & 0x7FF) - 1022 - NEQ_BITS
    scaled = top * _pow2(min(max(-e, -1022), 1023))
    e = e + 1 if scaled >= _TOP - 0.5 else e
    e = 0 if top == 0.0 else e
    return -14 if top == math.inf else e


def _decode(rec, out, a, b, off, threads):  # pragma: no cover - compiled per lattice
    """Populations of planes [a, b) of records ``rec[slot, plane, j, i]`` (every row and
    column) into ``out[q, plane - off, j, i]``, as :func:`.neq_codec.pull` rebuilds each."""
    n_q = len(_W)
    ny, nx = rec.shape[2], rec.shape[3]
    rows = (b - a) * ny
    three_d = rec.shape[0] > n_q + 6
    for t in numba.prange(threads):
        rho = np.empty(nx, np.float32)
        ux = np.empty(nx, np.float32)
        uy = np.empty(nx, np.float32)
        uz = np.zeros(nx, np.float32)
        usq = np.empty(nx, np.float32)
        scale = np.empty(nx, np.float32)
        scale2 = np.empty(nx, np.float32)
        for row in range(rows * t // threads, rows * (t + 1) // threads):
            k = a + row // ny
            j = row % ny
            for i in range(np.uint64(0), np.uint64(nx)):
                rho[i] = _rho_fast(rec[n_q + 1, k, j, i])
                ux[i] = fast16.f32_from_halves(rec[n_q + 2, k, j, i], rec[n_q + 3, k, j, i])
                uy[i] = fast16.f32_from_halves(rec[n_q + 4, k, j, i], rec[n_q + 5, k, j, i])
                if three_d:
                    uz[i] = fast16.f32_from_halves(rec[n_q + 6, k, j, i], rec[n_q + 7, k, j, i])
                usq[i] = _usq(ux[i], uy[i], uz[i])
                # pull's float32(ldexp(n, e)) as (n 2^e1) 2^e2 in float32 (:func:`_split`)
                e1, e2 = _split(_signed16(rec[n_q, k, j, i]))
                scale[i] = _pow2_32(e1)
                scale2[i] = _pow2_32(e2)
            for q in range(n_q):
                cx, cy, cz = np.float32(_CX[q]), np.float32(_CY[q]), np.float32(_CZ[q])
                w = np.float32(_W[q])
                for i in range(np.uint64(0), np.uint64(nx)):
                    dev = (np.float32(_signed16(rec[q, k, j, i])) * scale[i]) * scale2[i]
                    out[q, k - off, j, i] = dev + _feq_of(rho[i], ux[i], uy[i], uz[i], usq[i],
                                                          cx, cy, cz, w)


def _encode(post, rec, flags, a, b, off, j0, j1, threads):  # pragma: no cover - per lattice
    """Records of the fluid cells of planes [a, b), rows [j0, j1), columns 1 .. nx of
    ``rec[slot, plane, j, i]`` from ``post[q, plane - off, j, i]``, as
    :func:`.neq_codec.store` writes each (solid cells keep theirs)."""
    n_q = len(_W)
    nx = rec.shape[3] - 1
    rows = (b - a) * (j1 - j0)
    n_u = (rec.shape[0] - n_q - 2) // 2
    one = np.float32(1.0)
    for t in numba.prange(threads):
        r = np.empty(nx, np.float32)
        jx = np.empty(nx, np.float32)
        jy = np.empty(nx, np.float32)
        jz = np.empty(nx, np.float32)
        rho = np.empty(nx, np.float32)
        usq = np.empty(nx, np.float32)
        bits = np.empty(nx, np.uint16)
        top = np.empty(nx, np.float32)
        scale = np.empty(nx, np.float32)
        scale2 = np.empty(nx, np.float32)
        expo = np.empty(nx, np.int64)
        feq = np.empty((n_q, nx), np.float32)
        for row in range(rows * t // threads, rows * (t + 1) // threads):
            k = a + row // (j1 - j0)
            j = j0 + row % (j1 - j0)
            kl = k - off
            for i in range(np.uint64(1), np.uint64(nx)):
                r[i] = np.float32(0.0)
                jx[i] = np.float32(0.0)
                jy[i] = np.float32(0.0)
                jz[i] = np.float32(0.0)
            for q in range(n_q):
                cx, cy, cz = np.float32(_CX[q]), np.float32(_CY[q]), np.float32(_CZ[q])
                for i in range(np.uint64(1), np.uint64(nx)):
                    v = post[q, kl, j, i]
                    r[i] += v
                    jx[i] += cx * v
                    jy[i] += cy * v
                    jz[i] += cz * v
            for i in range(np.uint64(1), np.uint64(nx)):
                inv = one / r[i]
                jx[i] = jx[i] * inv  # u from here on
                jy[i] = jy[i] * inv
                jz[i] = jz[i] * inv
                h = fast16.half_from_fast((r[i] - one) * np.float32(RHO_SCALE))
                bits[i] = h
                rho[i] = _rho_fast(h)
                usq[i] = _usq(jx[i], jy[i], jz[i])
                top[i] = np.float32(0.0)
            for q in range(n_q):
                cx, cy, cz = np.float32(_CX[q]), np.float32(_CY[q]), np.float32(_CZ[q])
                w = np.float32(_W[q])
                for i in range(np.uint64(1), np.uint64(nx)):
                    fe = _feq_of(rho[i], jx[i], jy[i], jz[i], usq[i], cx, cy, cz, w)
                    feq[q, i] = fe
                    d = abs(post[q, kl, j, i] - fe)  # exact: store's float64 abs, compared
                    top[i] = d if d > top[i] else top[i]
            for i in range(np.uint64(1), np.uint64(nx)):
                e = _exponent(float(top[i]))
                expo[i] = e
                # -114 <= -e <= 164 (e of a float32's |d|, or inf): 2^-e as two float32
                # factors, each product exact where |d 2^-e| >= 2^-126 (else both round to 0)
                e1, e2 = _split(-e)
                scale[i] = _pow2_32(e1)
                scale2[i] = _pow2_32(e2)
            for q in range(n_q):
                for i in range(np.uint64(1), np.uint64(nx)):
                    x = ((post[q, kl, j, i] - feq[q, i]) * scale[i]) * scale2[i]
                    n = np.uint16(np.int32(_round_even32(x)) & 0xFFFF)
                    rec[q, k, j, i] = rec[q, k, j, i] if flags[k, j, i] & SOLID else n
            for i in range(1, nx):
                if flags[k, j, i] & SOLID:
                    continue
                rec[n_q, k, j, i] = np.uint16(expo[i] & 0xFFFF)
                rec[n_q + 1, k, j, i] = bits[i]
                for c in range(n_u):
                    u = fast16.f32_bits(jx[i] if c == 0 else (jy[i] if c == 1 else jz[i]))
                    rec[n_q + 2 + 2 * c, k, j, i] = np.uint16(u & 0xFFFF)
                    rec[n_q + 3 + 2 * c, k, j, i] = np.uint16((u >> 16) & 0xFFFF)


def _for_lattice(fn: Callable, lattice: Any) -> tuple[Any, Any]:
    """``fn`` compiled with ``lattice``'s tables as its globals (cached): threaded, and its
    serial twin (``$SIMSPLIT_CPU_SERIAL``, as :func:`.rowgen.serial`). ``error_model="numpy"``:
    no division check in the vectorised loops (IEEE results; solid cells' scratch is never
    stored)."""
    c = lattice.c
    tables = {"_CX": tuple(int(v) for v in c[:, 0]), "_CY": tuple(int(v) for v in c[:, 1]),
              "_CZ": tuple(int(v) for v in c[:, 2]) if lattice.dim == 3 else (0,) * lattice.q,
              "_W": tuple(float(w) for w in lattice.w)}
    built = []
    for parallel in (True, False):
        name = f"{fn.__name__}_{lattice.name.lower()}{'' if parallel else '_serial'}"
        copy = types.FunctionType(fn.__code__, {**fn.__globals__, **tables}, name)
        copy.__qualname__ = name
        copy.__doc__ = fn.__doc__
        built.append(numba.njit(parallel=parallel, cache=True, error_model="numpy")(copy))
    return built[0], built[1]


_decode_d2q9, _decode_d2q9_serial = _for_lattice(_decode, D2Q9)
_decode_d3q19, _decode_d3q19_serial = _for_lattice(_decode, D3Q19)
_encode_d2q9, _encode_d2q9_serial = _for_lattice(_encode, D2Q9)
_encode_d3q19, _encode_d3q19_serial = _for_lattice(_encode, D3Q19)
#: (decode, encode) by (q, serial)
_KERNELS = {(9, False): (_decode_d2q9, _encode_d2q9), (19, False): (_decode_d3q19, _encode_d3q19),
            (9, True): (_decode_d2q9_serial, _encode_d2q9_serial),
            (19, True): (_decode_d3q19_serial, _encode_d3q19_serial)}

#: a chunk's step on float32 populations: (f_src chunk, f_dst chunk, flags, macroscopic
#: outputs, first and end plane, inlet, links, outlet slots, far records, their plane offset),
#: each array a view whose plane 0 is the chunk's plane before its first
ChunkStep = Callable[..., None]


def _serial() -> bool:
    return os.environ.get(SERIAL_ENV, "0").strip() == "1"


def _call(kernel: Any, *args: Any) -> None:
    announce_compile(kernel, args)
    kernel(*args)


def _cut(a: np.ndarray, lo: int, n: int, axis: int, full: int) -> np.ndarray:
    """Planes [lo, lo + n) of ``a`` along ``axis`` when it spans ``full`` planes there (else
    ``a``: a placeholder of the launcher's)."""
    if a.shape[axis] != full:
        return a
    return a[(slice(None),) * axis + (slice(lo, lo + n),)]


def step(run: ChunkStep, f_src: np.ndarray, f_dst: np.ndarray, flags: np.ndarray,
         macro: tuple[np.ndarray, ...], span: tuple[int, int], planes: int,
         scratch: tuple[np.ndarray, np.ndarray], inlet: np.ndarray, links: np.ndarray,
         slots: np.ndarray, far: np.ndarray, far_off: int) -> None:
    """Planes ``span`` (split axis, ghost-based indices) of records ``f_src`` -> ``f_dst``
    (``(slots, planes, [rows,] columns)``), ``planes`` at a time through ``run`` on the
    float32 ``scratch`` (source and destination, ``(q, planes + 2, ...)``). ``inlet``,
    ``links``, ``slots`` as the launchers take them (placeholders stay whole); ``far``:
    the records behind ``f_src`` and the plane of its plane 0 there (``run`` gets them as
    :func:`.cells.records_arg` makes them, the offset of the chunk's plane 0)."""
    src, dst = scratch
    serial = _serial()
    decode, encode = _KERNELS[src.shape[0], serial]
    three_d = flags.ndim == 3
    full = flags.shape[0]

    def four(a: np.ndarray) -> np.ndarray:  # (.., plane, j, i): 2D rows as planes of one row
        return a if three_d else a[:, :, None]

    rec_src, rec_dst, post = four(f_src), four(f_dst), four(dst)
    far_rec = records_arg(far)
    check_arith(macro[0].dtype)
    flags4 = flags if three_d else flags[:, None]
    rows = (1, flags.shape[1] - 1) if three_d else (0, 1)
    threads = 1 if serial else numba.get_num_threads()
    lo, hi = span
    done = 0  # planes of src kept from the last chunk (its last two)
    ks = lo
    while ks < hi:
        n = min(planes, hi - ks)
        off = ks - 1  # global plane of the views' plane 0
        if done:
            src[:, 0:2] = src[:, done:done + 2]
            _call(decode, rec_src, four(src), ks + 1, ks + n + 1, off, threads)
        else:
            _call(decode, rec_src, four(src), ks - 1, ks + n + 1, off, threads)
        cut = planes + 2
        run(src, dst, flags[off:off + cut], tuple(m[off:off + planes] for m in macro), 1, n + 1,
            _cut(inlet, off, cut, 0, full), _cut(links, off, cut, 1, full),
            _cut(slots, off, cut, 1, full), far_rec, far_off + off)
        _call(encode, post, rec_dst, flags4, ks, ks + n, off, rows[0], rows[1], threads)
        done = n
        ks += n


def scratch(owner: Any, q: int, planes: int, plane: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """The float32 source and destination chunks (``(q, planes + 2, *plane)``), kept on
    ``owner`` per calling thread (slabs stepped from other threads get their own)."""
    key = (q, planes, tuple(plane), threading.get_ident())
    kept = owner.__dict__.setdefault("_neq_scratch", {})
    if key not in kept:
        if len(kept) >= 8:
            kept.clear()
        kept[key] = tuple(np.zeros((q, planes + 2, *plane), np.float32) for _ in range(2))
    return kept[key]


def check_arith(dtype: Any) -> None:
    """neq16 records are stepped in float32 only."""
    if np.dtype(dtype) != np.float32:
        raise ValueError("run.storage neq16: float32 arithmetic only")
