"""The decode and encode of :mod:`.neq_chunks`, written out from the lattice tables as
straight-line source per cell (as :mod:`.rowgen` writes the row kernels), so that LLVM keeps a
cell's populations in registers and vectorises across x.

Decode: each cell of a row, every population as :func:`.neq_codec.pull` rebuilds it:
``float32(n_q 2^k) + f^eq_q(rho, u)``, ``n_q 2^k`` rounded once to float32 as two float32
products (:func:`_split`). Encode: each fluid cell's record as :func:`.neq_codec.store`
writes it from its post-collision populations, the deviations scaled by 2^-k in float32
(:func:`_scales`) and rounded to integers, the block exponent from the bits of the largest |d|
(:func:`_exponent`), u's bits as fast16's. Stress-kept records (neq16s) add the first-order
part of the kept stress to each equilibrium on decode, and on encode first round the stress of
the deviations into its slots, as the reference codec does. Arrays come as one argument per
population or slot plane (``(plane, j, i)`` each): separate arrays, so that the vectoriser needs
no overlap checks between the stores. Compiled like the row kernels (``cache=True``,
``error_model="numpy"``, no fast-math, bodies of shares of rows with the no-alias promise:
:mod:`.parts`), threaded and serial, under names that carry a hash of their source.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from typing import Any

import numba
import numpy as np

from simsplit.backends.cpu import fast16
from simsplit.backends.cpu.neq_codec import (
    _feq_of,
    _rho_fast,
    _signed16,
    _stress_value_fast,
    _usq,
)
from simsplit.backends.cpu.parts import NoAliasCompiler, over_threads
from simsplit.numerics.flags import SOLID
from simsplit.numerics.lattice import Lattice
from simsplit.numerics.neq_storage import (
    NEQ_BITS,
    RHO_SCALE,
    STRESS_SCALE,
    lattice_of,
    record_layout,
    record_slots,
    stress_components,
    stress_slot,
    stress_weights,
)

_RNE32 = 2.0**23


@numba.njit(inline="always")
def _round_even32(x):
    """x (float32, |x| < 2^23) rounded to an integer, ties to even (``round_even``'s result
    for the same value: both round it exactly once)."""
    a = abs(x)
    r = (a + np.float32(_RNE32)) - np.float32(_RNE32)
    return -r if x < 0 else r


@numba.njit(inline="always")
def _pow2_32(e):
    """2^e as float32, -149 <= e <= 127 (subnormal below -126)."""
    bits = (e + 127) << 23 if e >= -126 else 1 << (e + 149)
    return np.uint32(bits).view(np.float32)


@numba.njit(inline="always")
def _split(e):
    """(e1, e2): e clamped to float32's normal exponents, and the rest clamped to [-149, 127].
    For an integer |n| < 2^15, n 2^e1 is exact (or e1 = e: one rounding), times 2^e2 one
    rounding: n 2^e rounded once to float32, past the clamps the same signed zero or inf."""
    e1 = min(max(e, -126), 127)
    return e1, min(max(e - e1, -149), 127)


@numba.njit(inline="always")
def _exponent(top):
    """:func:`.neq_codec.store`'s block exponent from a cell's largest |d| (float32, >= 0,
    or inf), from the bits: frexp's exponent (subnormals scaled by 2^64 first, exactly) less
    15, plus one where the top rounds to 2^15 (significand 1.m 2^14 >= 32767.5: m >= 2^23 -
    256); 0 for 0, -14 for inf (as math.frexp gives 0 for inf)."""
    b = np.float32(top).view(np.uint32)
    small = b < np.uint32(0x00800000)
    t = top * np.float32(2.0**64) if small else top
    bits = np.float32(t).view(np.uint32)
    e = np.int64(bits >> np.uint32(23)) - (126 + NEQ_BITS) - (64 if small else 0)
    e = e + 1 if (bits & np.uint32(0x7FFFFF)) >= np.uint32(0x7FFF00) else e
    e = 0 if top == np.float32(0.0) else e
    return -14 if b == np.uint32(0x7F800000) else e


@numba.njit(inline="always")
def _scales(e):
    """2^-e as two normal float32 factors, for -164 <= e <= 114 (e of a float32's |d|): d 2^-e
    is exact where |d 2^-e| >= 2^-126; below, it and the exact value both round to 0."""
    t = -e
    t1 = min(t, 127)
    return (np.uint32((t1 + 127) << 23).view(np.float32),
            np.uint32((t - t1 + 127) << 23).view(np.float32))


@numba.njit(inline="always")
def _bits(x):
    """:func:`.fast16.f32_bits` in uint32 (NaN: 0x7FC00000)."""
    b = np.float32(x).view(np.uint32)
    return np.uint32(0x7FC00000) if (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000) else b


def _f(x: float) -> str:
    return f"np.float32({float(x)!r})"


def _feq_src(lattice: Lattice, q: int) -> str:
    c = [int(v) for v in lattice.c[q]] + [0] * (3 - lattice.dim)
    return (f"_feq_of(rho, ux, uy, uz, usq, {_f(c[0])}, {_f(c[1])}, {_f(c[2])}, "
            f"{_f(lattice.w[q])})")


def _rows(indent: str, span: str) -> list[str]:
    """Share ``part`` of ``parts`` of the rows of planes [a, b) x ``span`` (a pair of row
    bounds; :mod:`.parts`)."""
    return [f"{indent}j0, j1 = {span}",
            f"{indent}rows = (b - a) * (j1 - j0)",
            f"{indent}for row in range(rows * part // parts, rows * (part + 1) // parts):",
            f"{indent}    k = a + row // (j1 - j0)",
            f"{indent}    j = j0 + row % (j1 - j0)"]


def _first_order(weights: np.ndarray, values: list[str], ind: str) -> list[str]:
    """Lines setting ``g`` to a population's first-order part of the stresses ``values``
    (float32 names) under its ``weights`` (its row of ``stress_weights``), summed over the
    components with a weight in slot order as the reference codec does."""
    return [f"{ind}g = np.float32(0.0)",
            *(f"{ind}g += {_f(weights[s])} * {v}" for s, v in enumerate(values)
              if weights[s] != 0)]


def _decode_source(lattice: Lattice, name: str, stress: bool) -> list[str]:
    nq, ns = lattice.q, record_slots(lattice.q, stress)
    rec = [f"s{s}" for s in range(ns)]
    out = [f"f{q}" for q in range(nq)]
    cell = "[k, j, i]"
    ind = "            "
    lines = [f"def {name}({', '.join(rec + out)}, a, b, off, part, parts):",
             "    nx = s0.shape[2]",
             *_rows("    ", "0, s0.shape[1]"),
             "        for i in range(np.uint64(0), np.uint64(nx)):",
             f"{ind}rho = _rho_fast(s{nq + 1}{cell})",
             f"{ind}ux = f32_from_halves(s{nq + 2}{cell}, s{nq + 3}{cell})",
             f"{ind}uy = f32_from_halves(s{nq + 4}{cell}, s{nq + 5}{cell})",
             (f"{ind}uz = f32_from_halves(s{nq + 6}{cell}, s{nq + 7}{cell})"
              if lattice.dim == 3 else f"{ind}uz = np.float32(0.0)"),
             f"{ind}usq = _usq(ux, uy, uz)",
             f"{ind}e1, e2 = _split(_signed16(s{nq}{cell}))",
             f"{ind}m1 = _pow2_32(e1)",
             f"{ind}m2 = _pow2_32(e2)"]
    pis = _stress_names(lattice) if stress else []
    weights = stress_weights(lattice) if stress else None
    for n, pi in enumerate(pis):
        lines.append(f"{ind}{pi} = _stress_value_fast(s{stress_slot(nq, n)}{cell})")
    for q in range(nq):
        dev = f"(np.float32(_signed16(s{q}{cell})) * m1) * m2"
        if not stress:
            lines.append(f"{ind}f{q}[k - off, j, i] = {dev} + {_feq_src(lattice, q)}")
            continue
        lines += [*_first_order(weights[q], pis, ind),
                  f"{ind}f{q}[k - off, j, i] = {dev} + ({_feq_src(lattice, q)} + g)"]
    return lines


def _stress_names(lattice: Lattice) -> list[str]:
    return [f"pi{a}{b}" for a, b in stress_components(lattice.dim)]


def _encode_source(lattice: Lattice, name: str, stress: bool) -> list[str]:
    nq, ns = lattice.q, record_slots(lattice.q, stress)
    rec = [f"s{s}" for s in range(ns)]
    post = [f"f{q}" for q in range(nq)]
    cell = "[k, j, i]"
    ind = "            "
    lines = [f"def {name}(flags, {', '.join(post + rec)}, a, b, off, j0_, j1_, part, parts):",
             "    nx = s0.shape[2] - 1",
             "    one = np.float32(1.0)",
             *_rows("    ", "j0_, j1_"),
             "        for i in range(np.uint64(1), np.uint64(nx)):",
             f"{ind}r = np.float32(0.0)",
             f"{ind}jx = np.float32(0.0)",
             f"{ind}jy = np.float32(0.0)",
             f"{ind}jz = np.float32(0.0)"]
    for q in range(nq):
        c = [int(v) for v in lattice.c[q]] + [0] * (3 - lattice.dim)
        lines += [f"{ind}v{q} = f{q}[k - off, j, i]",
                  f"{ind}r += v{q}",
                  *(f"{ind}j{a} += {_f(c[n])} * v{q}" for n, a in enumerate("xyz"))]
    lines += [f"{ind}inv = one / r",
              f"{ind}ux = jx * inv",
              f"{ind}uy = jy * inv",
              f"{ind}uz = jz * inv",
              f"{ind}h = half_from_fast((r - one) * np.float32({RHO_SCALE!r}))",
              f"{ind}rho = _rho_fast(h)",
              f"{ind}usq = _usq(ux, uy, uz)",
              f"{ind}top = np.float32(0.0)"]
    if stress:
        lines += _encode_stress(lattice, ind)
    for q in range(nq):
        base = f"e{q}" if stress else _feq_src(lattice, q)
        lines += [f"{ind}d{q} = v{q} - {base}",
                  f"{ind}m = abs(d{q})",  # exact: store's float64 |d|, compared alike
                  f"{ind}top = m if m > top else top"]
    lines += [f"{ind}e = _exponent(top)",
              f"{ind}m1, m2 = _scales(e)",
              f"{ind}solid = flags{cell} & SOLID"]
    for q in range(nq):
        lines.append(f"{ind}s{q}{cell} = s{q}{cell} if solid else "
                     f"np.uint16(np.int32(_round_even32((d{q} * m1) * m2)) & 0xFFFF)")
    lines += [f"{ind}s{nq}{cell} = s{nq}{cell} if solid else np.uint16(e & 0xFFFF)",
              f"{ind}s{nq + 1}{cell} = s{nq + 1}{cell} if solid else h"]
    for n, u in enumerate(("ux", "uy", "uz")[:lattice.dim]):
        lo, hi = nq + 2 + 2 * n, nq + 3 + 2 * n
        lines += [f"{ind}ub = _bits({u})",
                  f"{ind}s{lo}{cell} = s{lo}{cell} if solid else np.uint16(ub & 0xFFFF)",
                  f"{ind}s{hi}{cell} = s{hi}{cell} if solid else np.uint16((ub >> 16) & 0xFFFF)"]
    if stress:
        for n in range(len(_stress_names(lattice))):
            slot = f"s{stress_slot(nq, n)}{cell}"
            lines.append(f"{ind}{slot} = {slot} if solid else sb{n}")
    return lines


def _encode_stress(lattice: Lattice, ind: str) -> list[str]:
    """Lines of the stress-kept encode before the deviations: each equilibrium ``e{q}``, the
    stress of the deviations from them rounded to its slots' bits ``sb{n}``, and the first-order
    part of the rounded stress added to each ``e{q}``."""
    nq = lattice.q
    lines = [f"{ind}e{q} = {_feq_src(lattice, q)}" for q in range(nq)]
    pis = _stress_names(lattice)
    for n, (a, b) in enumerate(stress_components(lattice.dim)):
        lines.append(f"{ind}p = np.float32(0.0)")
        for q in range(nq):
            cc = int(lattice.c[q][a]) * int(lattice.c[q][b])
            lines.append(f"{ind}p += {_f(cc)} * (v{q} - e{q})")
        lines += [f"{ind}sb{n} = half_from_fast(p * {_f(STRESS_SCALE)})",
                  f"{ind}{pis[n]} = _stress_value_fast(sb{n})"]
    weights = stress_weights(lattice)
    for q in range(nq):
        lines += [*_first_order(weights[q], pis, ind), f"{ind}e{q} = e{q} + g"]
    return lines


def _compile(lattice: Lattice, stress: bool) -> dict[str, Any]:
    """{(kind, serial): dispatcher} of ``lattice``'s decode and encode (``stress``: of
    stress-kept records)."""
    tag = lattice.name.lower() + ("s" if stress else "")
    source = "\n\n\n".join("\n".join(make(lattice, f"{kind}_{tag}", stress)) for kind, make in
                           (("decode", _decode_source), ("encode", _encode_source))) + "\n"
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    env = {"numba": numba, "np": np, "SOLID": SOLID, "_rho_fast": _rho_fast,
           "_signed16": _signed16, "_usq": _usq, "_split": _split, "_pow2_32": _pow2_32,
           "_exponent": _exponent, "_scales": _scales, "_bits": _bits,
           "_round_even32": _round_even32, "_feq_of": _feq_of,
           "_stress_value_fast": _stress_value_fast,
           "f32_from_halves": fast16.f32_from_halves, "half_from_fast": fast16.half_from_fast,
           "__name__": __name__}
    text = source.replace(f"_{tag}(", f"_{tag}_{digest}_part(")
    exec(compile(text, sys.modules[__name__].__file__, "exec"), env)  # noqa: S102
    jit = numba.njit(cache=True, error_model="numpy", pipeline_class=NoAliasCompiler)
    built = {}
    for kind in ("decode", "encode"):
        threaded, twin = over_threads(jit(env[f"{kind}_{tag}_{digest}_part"]))
        built[kind, False], built[kind, True] = threaded, twin
    return built


@functools.cache
def _built(slots: int) -> dict[str, Any]:
    """The decode and encode of records of ``slots`` slots (plain or stress-kept, each
    lattice), generated on first use: a run that holds no records does not pay for them."""
    q, stress = record_layout(slots)
    return _compile(lattice_of(q), stress)


def decode(rec: np.ndarray, out: np.ndarray, a: int, b: int, off: int, serial: bool) -> Any:
    """Planes [a, b) of records ``rec[slot, plane, j, i]`` (every row and column) into
    ``out[q, plane - off, j, i]``: (kernel, its arguments)."""
    parts = 1 if serial else numba.get_num_threads()
    return _built(rec.shape[0])["decode", serial], (*rec, *out, a, b, off, parts)


def encode(post: np.ndarray, rec: np.ndarray, flags: np.ndarray, a: int, b: int, off: int,
           rows: tuple[int, int], serial: bool) -> Any:
    """The fluid cells of planes [a, b), ``rows``, columns 1 .. nx of records
    ``rec[slot, plane, j, i]`` from ``post[q, plane - off, j, i]``: (kernel, arguments)."""
    parts = 1 if serial else numba.get_num_threads()
    return _built(rec.shape[0])["encode", serial], (flags, *post, *rec, a, b, off, *rows,
                                                     parts)
