"""The CPU kernels' bit-level 16-bit conversions (simsplit/backends/cpu/fast16.py) against the
scalar reference functions the Numba CUDA backend compiles (storage_codec): every 16-bit
pattern decoded, and every value, midpoint and their neighbours encoded, bit for bit."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

from simsplit.backends.cpu import fast16
from simsplit.backends.cpu import storage_codec as ref

_ALL16 = np.arange(1 << 16, dtype=np.int64)


@numba.njit(cache=False)
def _decode_both(slow, fast, bits):
    out = np.empty((2, bits.size), np.float64)
    for n in range(bits.size):
        out[0, n] = slow(np.uint16(bits[n]))
        out[1, n] = np.float64(fast(np.uint16(bits[n])))
    return out


@numba.njit(cache=False)
def _encode_both(slow, fast, x):
    out = np.empty((2, x.size), np.int64)
    for n in range(x.size):
        out[0, n] = slow(x[n])
        out[1, n] = fast(x[n])
    return out


@numba.njit(cache=False)
def _half_fast(x):
    return fast16.half_from_fast(x)


@numba.njit(cache=False)
def _e4m11_fast(x):
    return fast16.e4m11_from_fast(x)


@numba.njit(cache=False)
def _half_int(x):  # float32: the integer encoder, also where F16C takes float32
    return fast16._half_from32_int(x)


def _f64_bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint64)


@pytest.mark.parametrize("slow, fast", [(ref.half_to_float, fast16.half_to_f32),
                                        (ref.half_to_float, fast16._half_to_f32_int),
                                        (ref.e4m11_to_float, fast16.e4m11_to_f32)])
def test_decode_every_pattern(slow, fast):
    got = _decode_both(slow, fast, _ALL16)
    assert np.isnan(got[0]).sum() > 1000 and (got[0] == 0).sum() == 2
    np.testing.assert_array_equal(_f64_bits(got[1]), _f64_bits(got[0]))  # NaNs and signs too


def _sweep(values: np.ndarray, dtype: type) -> np.ndarray:
    """Each value of a 16-bit format, the midpoints between neighbours (the overflow boundary
    beyond the largest), and one ulp of ``dtype`` (and of float32) either side, both signs,
    with inf, NaN, signed zeros and float32 / float64 subnormals."""
    v = np.unique(np.abs(values[np.isfinite(values)]))
    top = v[-1] + (v[-1] - v[-2]) / 2  # rounds to inf, ties to even
    mids = np.concatenate([(v[:-1] + v[1:]) / 2, [top, 2 * v[-1], 4 * v[-1]]])
    base = np.concatenate([v, mids]).astype(dtype)
    near = [base]
    for t in {dtype, np.float32}:
        b = base.astype(t)
        near += [np.nextafter(b, t(np.inf)).astype(dtype), np.nextafter(b, t(0)).astype(dtype)]
    tiny = np.finfo(np.float32).smallest_subnormal
    extra = np.array([0.0, np.inf, np.nan, tiny, 2 * tiny, np.finfo(np.float32).tiny,
                      np.finfo(np.float32).max, np.finfo(np.float64).smallest_subnormal,
                      np.finfo(np.float64).max, 1e300, 1e-300], np.float64)
    with np.errstate(over="ignore", under="ignore"):  # float32: beyond its range, inf and 0
        extra = extra.astype(dtype)
    x = np.concatenate(near + [extra])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["float16", "float16-int", "e4m11"])
def test_encode_sweep(fmt, dtype):
    decode = ref.e4m11_to_float if fmt == "e4m11" else ref.half_to_float
    slow, fast = {"float16": (ref.half_from, _half_fast), "float16-int": (ref.half_from, _half_int),
                  "e4m11": (ref.e4m11_from, _e4m11_fast)}[fmt]
    if fmt == "float16-int" and dtype == np.float64:
        fast = _half_fast  # float64 has the integer encoder only
    values = _decode_both(decode, decode, _ALL16)[0]
    x = _sweep(values, dtype)
    assert x.size > 300_000
    got = _encode_both(slow, fast, x)
    bad = np.flatnonzero(got[0] != got[1])
    assert bad.size == 0, (x[bad[:5]], got[:, bad[:5]])


def test_encode_random_float32_bits():
    """Random float32 bit patterns of every exponent, NaN payloads included."""
    bits = np.random.default_rng(7).integers(0, 1 << 32, 2_000_000, dtype=np.uint64)
    x = bits.astype(np.uint32).view(np.float32)
    for slow, fast in ((ref.half_from, _half_fast), (ref.half_from, _half_int),
                       (ref.e4m11_from, _e4m11_fast)):
        got = _encode_both(slow, fast, x)
        np.testing.assert_array_equal(got[1], got[0])


@numba.njit(cache=False)
def _float32_parts(high, low, x, xs, es):
    n = high.size * low.size
    out = np.empty((2, n), np.float64)
    for a in range(high.size):
        for b in range(low.size):
            k = a * low.size + b
            out[0, k] = np.float32(ref.float32_from_bits(np.int64(low[b]) | (high[a] << 16)))
            out[1, k] = fast16.f32_from_halves(np.uint16(low[b]), np.uint16(high[a]))
    bits = np.empty((2, x.size), np.int64)
    for k in range(x.size):
        bits[0, k] = ref.float32_bits(x[k])
        bits[1, k] = fast16.f32_bits(x[k])
    scaled = np.empty((2, xs.size * es.size), np.float64)
    for a in range(xs.size):
        for b in range(es.size):
            scaled[0, a * es.size + b] = math.ldexp(xs[a], es[b])
            scaled[1, a * es.size + b] = fast16.ldexp(xs[a], es[b])
    return out, bits, scaled


def test_neq16_record_helpers():
    """float32 from two halves (every high half), float32 bits, ldexp over every exponent."""
    low = np.array([0, 1, 0x3FF, 0x8000, 0xFFFF, 0x1234], np.int64)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)])
    xs = np.concatenate([rng.standard_normal(50) * 10.0 ** rng.integers(-300, 300, 50),
                         [0.0, -0.0, 1.0, -3.0, 5e-324, np.inf, np.nan]])
    es = np.arange(-2200, 2200, dtype=np.int64)
    out, bits, scaled = _float32_parts(_ALL16, low, x, xs, es)
    np.testing.assert_array_equal(_f64_bits(out[1]), _f64_bits(out[0]))
    np.testing.assert_array_equal(bits[1], bits[0])
    np.testing.assert_array_equal(_f64_bits(scaled[1]), _f64_bits(scaled[0]))
