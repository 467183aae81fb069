"""Stored populations <-> the arithmetic on the CPU: IEEE fp16 and e4m11 bits, the shifted
encoding of :class:`simsplit.numerics.storage.PopulationStorage`.

Numba's CPU target has no float16, so fp16 arrays reach the kernels as uint16 views of their
bits (:func:`raw_view`) and e4m11 arrays as the int16 arrays that carry them; both are converted
here, rounding to nearest even exactly as the GPU kernels (``lbm_common.cuh``) and NumPy do.
The conversion functions here are plain scalar code, the reference: the Numba CUDA backend
compiles them (their ``py_func``) as device functions. The CPU kernels' ``_decode`` /
``_encode`` call :mod:`.fast16`'s bit-level versions instead (same bits, tested exhaustively).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from simsplit.backends.cpu.fast16 import (
    e4m11_from_fast,
    e4m11_to_f32,
    half_from_fast,
    half_to_f32,
)
from simsplit.numerics.storage import (
    E4M11_BIAS,
    E4M11_MANT_BITS,
    E4M11_SCALE,
    FP16_SCALE,
)

#: e4m11: the leading significand bit, the exponent field of inf/NaN, the largest finite bits,
#: the smallest normal magnitude, and the magnitude from which a value rounds to inf
_E4_ONE = 1 << E4M11_MANT_BITS
_E4_INF = 15 << E4M11_MANT_BITS
_E4_MIN_NORMAL = 2.0 ** (1 - E4M11_BIAS)
_E4_OVERFLOW = (2 * _E4_ONE - 0.5) * 2.0 ** (14 - E4M11_BIAS - E4M11_MANT_BITS)
#: (x + 2^52) - 2^52 rounds 0 <= x < 2^52 to an integer, to nearest even, in float64 (the sum's
#: ulp is 1): np.rint without a NumPy call, so that the CUDA target compiles these functions too
#: (simsplit/backends/numba_cuda/d2q9.py); neither target reassociates without fast-math
_RNE = 2.0**52


@numba.njit(cache=True)
def half_to_float(h):
    """IEEE binary16 bits -> the float64 they denote (exact)."""
    v = np.int64(h)
    e = (v >> 10) & 0x1F
    m = v & 0x3FF
    if e == 0:
        x = math.ldexp(float(m), -24)
    elif e == 31:
        x = math.inf if m == 0 else math.nan
    else:
        x = math.ldexp(float(1024 + m), int(e) - 25)
    return -x if v & 0x8000 else x


@numba.njit(cache=True)
def half_from(x):
    """float32/float64 -> IEEE binary16 bits, one rounding to nearest even (as cvt.rn.f16)."""
    v = float(x)  # exact: float32 values are float64 values
    if v != v:
        return np.uint16(0x7E00)
    sign = 0x8000 if math.copysign(1.0, v) < 0 else 0
    a = abs(v)
    if a >= 65520.0:  # halfway between 65504 and 2^16 rounds to even: infinity
        return np.uint16(sign | 0x7C00)
    if a < 2.0**-14:  # subnormal (the rounding may carry into the smallest normal: same bits)
        return np.uint16(sign | int((math.ldexp(a, 24) + _RNE) - _RNE))
    e = math.frexp(a)[1] - 1  # 2^e <= a < 2^(e + 1)
    m = int((math.ldexp(a, 10 - e) + _RNE) - _RNE)  # 1024 .. 2048, exact scaling then one rounding
    if m == 2048:
        m = 1024
        e += 1
    return np.uint16(sign | ((e + 15) << 10) | (m - 1024))


@numba.njit(cache=True)
def e4m11_to_float(h):
    """e4m11 bits (int16 or uint16) -> the float64 they denote (exact)."""
    v = np.int64(h) & 0xFFFF
    e = (v >> E4M11_MANT_BITS) & 15
    m = v & (_E4_ONE - 1)
    if e == 0:
        x = math.ldexp(float(m), 1 - E4M11_BIAS - E4M11_MANT_BITS)
    elif e == 15:
        x = math.inf if m == 0 else math.nan
    else:
        x = math.ldexp(float(_E4_ONE + m), int(e) - E4M11_BIAS - E4M11_MANT_BITS)
    return -x if v & 0x8000 else x


@numba.njit(cache=True)
def e4m11_from(x):
    """float32/float64 -> e4m11 bits (int16), one rounding to nearest even (as
    :func:`simsplit.numerics.storage.e4m11_from`)."""
    v = float(x)  # exact
    if v != v:
        return np.int16(_E4_INF | (_E4_ONE - 1))
    sign = 0x8000 if math.copysign(1.0, v) < 0 else 0
    a = abs(v)
    if a >= _E4_OVERFLOW:
        bits = _E4_INF
    elif a < _E4_MIN_NORMAL:  # subnormal: a carry into the smallest normal gives its bits
        bits = int((math.ldexp(a, E4M11_MANT_BITS + E4M11_BIAS - 1) + _RNE) - _RNE)
    else:
        e = math.frexp(a)[1] - 1  # 2^e <= a < 2^(e + 1); a carry to 2^(e + 1) gives its bits
        m = int((math.ldexp(a, E4M11_MANT_BITS - e) + _RNE) - _RNE)
        bits = ((e + E4M11_BIAS) << E4M11_MANT_BITS) + m - _E4_ONE
    return np.int16(np.int64(sign | bits) - (np.int64(0x10000) if sign else np.int64(0)))


def _decode(raw, w):  # pragma: no cover - replaced by the overload in compiled code
    raise NotImplementedError


def _encode(x, w, out):  # pragma: no cover - replaced by the overload in compiled code
    raise NotImplementedError


@overload(_decode, inline="always")
def _decode_impl(raw, w):
    """Stored element -> f in w's (the arithmetic) type: raw, or raw / scale + w if narrower."""
    cast = np.float32 if w.bitwidth == 32 else np.float64
    if isinstance(raw, types.Integer) and raw.signed:  # int16 bits of e4m11
        inv_e4 = 1.0 / E4M11_SCALE

        def e4m11(raw, w):
            return cast(e4m11_to_f32(raw)) * cast(inv_e4) + w
        return e4m11
    if isinstance(raw, types.Integer):  # uint16 bits of fp16
        inv = 1.0 / FP16_SCALE

        def fp16(raw, w):
            return cast(half_to_f32(raw)) * cast(inv) + w
        return fp16
    if raw.bitwidth < w.bitwidth:  # float32 under float64: scale 1, same operations

        def narrow(raw, w):
            return cast(raw) * cast(1.0) + w
        return narrow

    def same(raw, w):
        return raw
    return same


@overload(_encode, inline="always")
def _encode_impl(x, w, out):
    """f in the arithmetic type -> element of ``out``'s storage type (``out``: the array, or
    an element of it: the row kernel passes an element, as an array passed to a call counts as
    aliased for Numba's parfors, which then give up LLVM's no-alias guarantee)."""
    cast = np.float32 if x.bitwidth == 32 else np.float64
    stored = out.dtype if isinstance(out, types.Array) else out
    if isinstance(stored, types.Integer) and stored.signed:
        scale_e4 = E4M11_SCALE

        def e4m11(x, w, out):
            return e4m11_from_fast((x - w) * cast(scale_e4))
        return e4m11
    if isinstance(stored, types.Integer):
        scale = FP16_SCALE

        def fp16(x, w, out):
            return half_from_fast((x - w) * cast(scale))
        return fp16
    if stored.bitwidth < x.bitwidth:

        def narrow(x, w, out):
            return np.float32((x - w) * cast(1.0))
        return narrow

    def same(x, w, out):
        return x
    return same


def raw_view(a: np.ndarray) -> np.ndarray:
    """The array as the kernels take it: fp16 as uint16 bits (Numba's CPU target has no fp16),
    e4m11 as its int16 bits."""
    return a.view(np.uint16) if a.dtype == np.float16 else a


def far_view(far: tuple[np.ndarray, int] | None, f_src: np.ndarray) -> tuple[np.ndarray, int]:
    """Where quadratic links read two rows / planes away (``far``: the array behind ``f_src``
    and the offset of its first layer there; None: ``f_src`` itself), as the kernels take it."""
    arr, off = (f_src, 0) if far is None else far
    return raw_view(arr), off


@numba.njit(cache=True)
def float32_from_bits(b):
    """The 32 bits of a float32 (an integer) -> the float64 it denotes (exact): neq16 records
    hold u as two uint16 halves (:mod:`simsplit.numerics.neq_storage`)."""
    v = np.int64(b) & 0xFFFFFFFF
    e = (v >> 23) & 0xFF
    m = v & 0x7FFFFF
    if e == 0:
        x = math.ldexp(float(m), -149)
    elif e == 255:
        x = math.inf if m == 0 else math.nan
    else:
        x = math.ldexp(float(m + 0x800000), int(e) - 150)
    return -x if v & 0x80000000 else x


@numba.njit(cache=True)
def float32_bits(x):
    """A float32 value (of any float type, exactly representable) -> its 32 bits (int64)."""
    v = float(x)
    if v != v:
        return np.int64(0x7FC00000)
    sign = 0x80000000 if math.copysign(1.0, v) < 0 else 0
    a = abs(v)
    if a == math.inf:
        return np.int64(sign | 0x7F800000)
    if a < 2.0**-126:
        return np.int64(sign | int(math.ldexp(a, 149)))  # exact: a subnormal float32
    e = math.frexp(a)[1] - 1
    return np.int64(sign | ((e + 127) << 23) | (int(math.ldexp(a, 23 - e)) - 0x800000))


@numba.njit(cache=True)
def round_even(x):
    """x (float64, |x| < 2^52) rounded to an integer, ties to even (np.rint without NumPy)."""
    a = abs(x)
    r = (a + _RNE) - _RNE
    return -r if x < 0 else r
