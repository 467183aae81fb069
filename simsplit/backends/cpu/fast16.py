"""Bit-level 16-bit conversions for the CPU kernels: the values and bits of
:mod:`.storage_codec`'s scalar reference functions (which the Numba CUDA backend compiles), in
integer operations on bit-cast floats and selects instead of branches and ``math.ldexp``, so that
LLVM can vectorise them. ``tests/test_fast16.py`` compares them with the reference functions on
every 16-bit pattern and on every rounding boundary.

Encoding rounds to nearest even on the float's bits: add half an output ulp less one, plus the
last kept bit, then shift (a carry moves into the exponent, and past the largest finite value
into inf); subnormal results come from one float addition of a power of two whose ulp is the
format's smallest subnormal, which rounds to nearest even as the hardware does.

Where the CPU has F16C, binary16 goes through its conversion instructions instead (LLVM's
``fpext`` / ``fptrunc`` of ``half``, vectorised; exact / one rounding to nearest even), with NaNs
made the reference's; float64 arithmetic keeps the integer encoder (float64 -> binary16 has no
single instruction, and through float32 it would round twice).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import binding, ir
from numba import types
from numba.core import config
from numba.extending import intrinsic, overload

from simsplit.numerics.storage import E4M11_BIAS, E4M11_MANT_BITS

#: (mantissa bits, bias, exponent field of inf/NaN, the NaN it writes) of the 16-bit formats
_HALF = (10, 15, 31, 0x7E00)
_E4M11 = (E4M11_MANT_BITS, E4M11_BIAS, 15, (15 << E4M11_MANT_BITS) | ((1 << E4M11_MANT_BITS) - 1))
#: (float type, unsigned type of its bits, mantissa bits, bias, exponent field of inf/NaN) of
#: float64, the one source :func:`_encoder` takes (float32 goes through :func:`_encoder32`)
_F64 = (np.float64, np.uint64, 52, 1023, 2047)


@numba.njit
def _bits64(x):
    return np.float64(x).view(np.int64)


def _i32(n: int) -> ir.Constant:
    return ir.Constant(ir.IntType(32), n)


def _decoder(fmt):
    """16 bits of ``fmt`` -> the float32 they denote (exact; NaN: the quiet NaN with the sign,
    as the reference's ``-math.nan``). Written in 32-bit integer IR: Numba would widen every
    integer operation to 64 bits, half the vector lanes."""
    man, bias, inf_e, _ = fmt
    inf = inf_e << man

    @intrinsic
    def decode(typingctx, h):
        def codegen(context, builder, sig, args):
            b = builder
            v = b.zext(b.trunc(args[0], ir.IntType(16)), ir.IntType(32))
            em = b.and_(v, _i32(0x7FFF))
            sign = b.shl(b.and_(v, _i32(0x8000)), _i32(16))
            bits = b.add(b.shl(em, _i32(23 - man)), _i32((127 - bias) << 23))
            bits = b.select(b.icmp_unsigned("==", em, _i32(inf)), _i32(0x7F800000), bits)
            bits = b.select(b.icmp_unsigned(">", em, _i32(inf)), _i32(0x7FC00000), bits)
            tiny = ir.Constant(ir.FloatType(), 2.0 ** (1 - bias - man))
            sub = b.bitcast(b.fmul(b.uitofp(em, ir.FloatType()), tiny), ir.IntType(32))
            bits = b.select(b.icmp_unsigned("<", em, _i32(1 << man)), sub, bits)
            return b.bitcast(b.or_(bits, sign), ir.FloatType())
        return types.float32(h), codegen
    return decode


def _encoder32(fmt, out_t):
    """float32 -> the 16 bits of ``fmt`` (``out_t``), as :func:`_encoder` in 32-bit IR."""
    man, bias, inf_e, nan = fmt
    shift = 23 - man
    magic = np.float32(2.0 ** (1 - bias - man + 23))

    @intrinsic
    def encode(typingctx, x):
        def codegen(context, builder, sig, args):
            b = builder
            bx = b.bitcast(args[0], ir.IntType(32))
            a = b.and_(bx, _i32(0x7FFFFFFF))
            sign = b.and_(b.lshr(bx, _i32(16)), _i32(0x8000))
            odd = b.and_(b.lshr(a, _i32(shift)), _i32(1))
            nrm = b.add(b.sub(a, _i32((127 - bias) << 23)), _i32((1 << (shift - 1)) - 1))
            nrm = b.lshr(b.add(nrm, odd), _i32(shift))
            fa = b.bitcast(a, ir.FloatType())
            sub = b.fadd(fa, ir.Constant(ir.FloatType(), float(magic)))
            sub = b.sub(b.bitcast(sub, ir.IntType(32)), _i32(int(magic.view(np.uint32))))
            small = _i32((127 + 1 - bias) << 23)
            bits = b.select(b.icmp_unsigned(">=", a, small), nrm, sub)
            big = _i32((127 + inf_e - bias) << 23)
            bits = b.select(b.icmp_unsigned(">=", a, big), _i32(inf_e << man), bits)
            bits = b.select(b.icmp_unsigned("<=", a, _i32(0x7F800000)), b.or_(bits, sign),
                            _i32(nan))
            return b.trunc(bits, ir.IntType(16))
        return out_t(types.float32), codegen
    return encode


def _encoder(src, fmt, out_t):
    """A float of ``src`` (float64) -> the 16 bits of ``fmt`` (``out_t``), one rounding to
    nearest even."""
    ftype, utype, fman, fbias, finf = src
    man, bias, inf_e, nan = fmt
    width = 8 * np.dtype(ftype).itemsize
    shift = fman - man
    abs_mask = (1 << (width - 1)) - 1
    f_inf = finf << fman
    big = (fbias + inf_e - bias) << fman  # |x| >= 2^(emax + 1): inf
    small = (fbias + 1 - bias) << fman  # |x| below the smallest normal: subnormal or zero
    rebias = (fbias - bias) << fman
    round_low = (1 << (shift - 1)) - 1
    magic = ftype(2.0 ** (1 - bias - man + fman))
    magic_bits = int(np.asarray(magic).view(utype))
    inf = inf_e << man

    @numba.njit
    def encode(x):
        b = _bits64(x)
        a = b & abs_mask
        sign = ((b >> (width - 1)) & 1) << 15
        nrm = (a - rebias + round_low + ((a >> shift) & 1)) >> shift
        sub = _bits64(abs(x) + magic) - magic_bits
        bits = nrm if a >= small else sub
        bits = inf if a >= big else bits
        bits = (bits | sign) if a <= f_inf else nan
        return out_t(bits)
    return encode


_half_ir, _e4m11_ir = _decoder(_HALF), _decoder(_E4M11)


@numba.njit
def _half_to_f32_int(h):
    return _half_ir(h)


@numba.njit
def e4m11_to_f32(h):
    """e4m11 bits (int16 or uint16) -> float32, as ``storage_codec.e4m11_to_float``."""
    return _e4m11_ir(h)


_half_from32_int = _encoder32(_HALF, types.uint16)
_half_from64 = _encoder(_F64, _HALF, np.uint16)
_e4m11_from32 = _encoder32(_E4M11, types.int16)
_e4m11_from64 = _encoder(_F64, _E4M11, np.int16)


#: binary16 <-> float32 conversion instructions on this CPU, where Numba compiles for the host
#: (NUMBA_CPU_NAME names another target, e.g. ``generic`` for portable caches: the integer path)
HARDWARE_HALF = (config.CPU_NAME in (None, "host")
                 and bool(binding.get_host_cpu_features().get("f16c", False)))


@intrinsic
def _fpext_half(typingctx, h):
    def codegen(context, builder, sig, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return types.float32(types.uint16), codegen


@intrinsic
def _fptrunc_half(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return types.uint16(types.float32), codegen


@numba.njit
def _half_to_f32_hw(h):
    v = np.int64(h) & 0xFFFF
    nan = np.uint32(((v & 0x8000) << 16) | 0x7FC00000).view(np.float32)
    return nan if (v & 0x7FFF) > 0x7C00 else _fpext_half(np.uint16(v))


@numba.njit
def _half_from32_hw(x):
    return np.uint16(0x7E00) if x != x else _fptrunc_half(np.float32(x))


half_to_f32 = _half_to_f32_hw if HARDWARE_HALF else _half_to_f32_int
_half_from32 = _half_from32_hw if HARDWARE_HALF else _half_from32_int


def half_from_fast(x):  # pragma: no cover - replaced by the overload in compiled code
    """float32/float64 -> binary16 bits (uint16), as ``storage_codec.half_from``."""
    raise NotImplementedError


def e4m11_from_fast(x):  # pragma: no cover - replaced by the overload in compiled code
    """float32/float64 -> e4m11 bits (int16), as ``storage_codec.e4m11_from``."""
    raise NotImplementedError


def _by_width(f32, f64):
    def pick(x):
        if isinstance(x, types.Float):
            return (lambda x: f32(x)) if x.bitwidth == 32 else (lambda x: f64(x))
        return None
    return pick


overload(half_from_fast)(_by_width(_half_from32, _half_from64))
overload(e4m11_from_fast)(_by_width(_e4m11_from32, _e4m11_from64))


@numba.njit
def f32_from_halves(low, high):
    """The float32 of two uint16 halves; NaN as ``storage_codec.float32_from_bits`` gives it
    (the quiet NaN with the sign)."""
    b = (np.int64(low) & 0xFFFF) | ((np.int64(high) & 0xFFFF) << 16)
    b = (b & 0x80000000) | 0x7FC00000 if (b & 0x7FFFFFFF) > 0x7F800000 else b
    return np.uint32(b).view(np.float32)


@numba.njit
def f32_bits(x):
    """A float32's 32 bits (int64); NaN as ``storage_codec.float32_bits``: 0x7FC00000."""
    b = np.int64(np.float32(x).view(np.uint32))
    return np.int64(0x7FC00000) if (b & 0x7FFFFFFF) > 0x7F800000 else b


@numba.njit
def ldexp(x, e):
    """``math.ldexp(x, e)`` for float64 x: a product by 2^e where 2^e is a normal float64 (one
    rounding of the same exact value), math.ldexp beyond."""
    if -1022 <= e <= 1023:
        return x * np.uint64((e + 1023) << 52).view(np.float64)
    return math.ldexp(x, e)
