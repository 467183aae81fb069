"""neq16 cell records (:mod:`simsplit.numerics.neq_storage`) read and written cell by cell, in
float32, for the CPU's D2Q9 and D3Q19 stream-collide kernels (through :mod:`.cells`).

The lattice comes in as tuples (c_x, c_y, c_z, w; c_z all zero and u_z zero in 2D, which adds
exact zeros: the same bits as the 2D sums) and records as 4D arrays ``rec[slot, k, j, i]`` (a
2D kernel passes its arrays with one plane, k = 0). The operations are those of
``neq_storage.encode``/``decode``; scalar code the Numba CUDA backend compiles too (their
``py_func``, :mod:`simsplit.backends.numba_cuda.neq`): products go through :func:`product`, which
that backend overloads with a multiplication NVVM cannot fuse into a following add (the CPU
target never fuses), so both targets round every operation alike. Nested helpers take scalars
only: on Numba's CUDA simulator these device functions run as Python and call them compiled
for the CPU.

The CPU kernels take :data:`pull_cpu` / :data:`store_cpu`: the same code with its conversion
helpers (:data:`_CPU_HELPERS`) rebound to :mod:`.fast16`'s bit-level versions (same bits,
tested against these in ``tests/test_fast16.py``); the Numba CUDA backend compiles the originals.
"""

from __future__ import annotations

import math
import types

import numba
import numpy as np
from numba.extending import overload

from simsplit.backends.cpu import fast16
from simsplit.backends.cpu.storage_codec import (
    float32_bits,
    float32_from_bits,
    half_from,
    half_to_float,
    round_even,
)
from simsplit.numerics.lattice import D2Q9, D3Q19
from simsplit.numerics.neq_storage import (
    NEQ_BITS,
    RHO_SCALE,
    STRESS_SCALE,
    stress_components,
    stress_weights,
)

_INV_RHO_SCALE = 1.0 / RHO_SCALE
_INV_STRESS_SCALE = 1.0 / STRESS_SCALE
_TOP = 2.0**NEQ_BITS
ldexp = math.ldexp  # a global name, rebound in the CPU's copies (:func:`_rebound`)


def product(a, b):
    """``a * b`` rounded once, never fused with an add or subtract that uses it."""
    return a * b


@overload(product, target="cpu")
def _product_cpu(a, b):
    def impl(a, b):
        return a * b
    return impl


@numba.njit(inline="always")
def _signed16(bits):
    v = np.int64(bits)
    return v - 65536 if v >= 32768 else v


@numba.njit(inline="always")
def _velocity(low, high):
    """The float32 of two uint16 halves."""
    return np.float32(float32_from_bits(np.int64(low) | (np.int64(high) << 16)))


@numba.njit(inline="always")
def _rho(bits):
    """rho = 1 + (rho - 1) from its stored binary16 bits, float32 (exact: 11 bits)."""
    return np.float32(1.0) + np.float32(half_to_float(bits) * _INV_RHO_SCALE)


@numba.njit(inline="always")
def _usq(ux, uy, uz):
    s = np.float32(0.0)
    s += product(ux, ux)
    s += product(uy, uy)
    s += product(uz, uz)
    return s


@numba.njit(inline="always")
def _feq_of(rho, ux, uy, uz, usq, cx, cy, cz, w):
    """The equilibrium of (rho, u) in float32 for one direction's c and w (float32),
    Lattice.equilibrium's operations and order."""
    dt = np.float32
    cu = dt(0.0)
    cu += product(cx, ux)
    cu += product(cy, uy)
    cu += product(cz, uz)
    poly = dt(1.0) + product(dt(3.0), cu)
    poly = (poly + product(product(dt(4.5), cu), cu)) - product(dt(1.5), usq)
    return product(product(w, rho), poly)


@numba.njit(inline="always")
def _feq(q, rho, ux, uy, uz, usq, cx, cy, cz, w):
    """Equilibrium q of (rho, u) from the lattice tables (:func:`_feq_of`)."""
    dt = np.float32
    return _feq_of(rho, ux, uy, uz, usq, dt(cx[q]), dt(cy[q]), dt(cz[q]), dt(w[q]))


#: the stress-kept records' components (a, b) in slot order and their float32 weights per
#: population, from the reference codec (compile-time constants here)
_PAIRS2, _PAIRS3 = stress_components(2), stress_components(3)
_SW2 = tuple(tuple(float(v) for v in row) for row in stress_weights(D2Q9))
_SW3 = tuple(tuple(float(v) for v in row) for row in stress_weights(D3Q19))


@numba.njit(inline="always")
def _axis(a, cxq, cyq, czq):
    return cxq if a == 0 else (cyq if a == 1 else czq)


@numba.njit(inline="always")
def _stress_weight(q, s, dim):
    """Population q's float32 weight of stress component s (neq_storage.stress_weights)."""
    return np.float32(_SW3[q][s] if dim == 3 else _SW2[q][s])


@numba.njit(inline="always")
def _stress_pair(s, dim):
    """(a, b) of stress component s (neq_storage.stress_components)."""
    return _PAIRS3[s] if dim == 3 else _PAIRS2[s]


@numba.njit(inline="always")
def _stress_value(bits):
    """A stress component from its slot's binary16 bits (exact)."""
    return np.float32(half_to_float(bits) * _INV_STRESS_SCALE)


@numba.njit(inline="always")
def pull(rec, q, k, j, i, cx, cy, cz, w):
    """Population q of cell (k, j, i) rebuilt from its record: f^eq_q + n_q 2^k, and on a
    stress-kept record (more slots than the plain one) f^eq_q + f^1_q(Pi) + n_q 2^k."""
    n_q = len(w)
    dim = 3 if n_q == 19 else 2
    dt = np.float32  # around each helper's result: Python floats where this runs as Python
    rho = dt(_rho(rec[n_q + 1, k, j, i]))
    ux = dt(_velocity(rec[n_q + 2, k, j, i], rec[n_q + 3, k, j, i]))
    uy = dt(_velocity(rec[n_q + 4, k, j, i], rec[n_q + 5, k, j, i]))
    uz = dt(0.0)
    if dim == 3:
        uz = dt(_velocity(rec[n_q + 6, k, j, i], rec[n_q + 7, k, j, i]))
    dev = ldexp(float(_signed16(rec[q, k, j, i])), int(_signed16(rec[n_q, k, j, i])))
    base = dt(_feq(q, rho, ux, uy, uz, dt(_usq(ux, uy, uz)), cx, cy, cz, w))
    first = n_q + 2 + 2 * dim
    if rec.shape[0] > first:
        g = dt(0.0)
        for s in range(rec.shape[0] - first):
            if _stress_weight(q, s, dim) != 0:
                g += product(dt(_stress_weight(q, s, dim)),
                             dt(_stress_value(rec[first + s, k, j, i])))
        base = base + g
    return dt(dev) + base


@numba.njit(inline="always")
def store(rec, post, feq, k, j, i, cx, cy, cz, w):
    """Cell (k, j, i)'s record of its post-collision populations ``post`` (float32); on a
    stress-kept record also the stress of the deviations, which ``feq`` (scratch) then
    includes."""
    dt = np.float32
    n_q = len(w)
    dim = 3 if n_q == 19 else 2
    one = dt(1.0)
    r = dt(0.0)
    jx = dt(0.0)
    jy = dt(0.0)
    jz = dt(0.0)
    for q in range(n_q):
        v = post[q]
        r += v
        jx += product(dt(cx[q]), v)
        jy += product(dt(cy[q]), v)
        jz += product(dt(cz[q]), v)
    inv = one / r
    ux = product(jx, inv)
    uy = product(jy, inv)
    uz = product(jz, inv)
    rho_bits = half_from(product(r - one, dt(RHO_SCALE)))
    rho = dt(_rho(rho_bits))
    usq = dt(_usq(ux, uy, uz))
    for q in range(n_q):
        feq[q] = dt(_feq(q, rho, ux, uy, uz, usq, cx, cy, cz, w))
    first = n_q + 2 + 2 * dim
    if rec.shape[0] > first:  # stress-kept: the rounded stress's slots, its first-order part
        for s in range(rec.shape[0] - first):
            a, b = _stress_pair(s, dim)
            pi = dt(0.0)
            for q in range(n_q):
                pi += product(product(dt(_axis(a, cx[q], cy[q], cz[q])),
                                      dt(_axis(b, cx[q], cy[q], cz[q]))), post[q] - feq[q])
            rec[first + s, k, j, i] = np.uint16(half_from(product(pi, dt(STRESS_SCALE))))
        for q in range(n_q):
            g = dt(0.0)
            for s in range(rec.shape[0] - first):
                if _stress_weight(q, s, dim) != 0:
                    g += product(dt(_stress_weight(q, s, dim)),
                                 dt(_stress_value(rec[first + s, k, j, i])))
            feq[q] = feq[q] + g
    top = 0.0
    for q in range(n_q):
        a = abs(float(post[q] - feq[q]))
        if a > top:
            top = a
    e = 0
    if top > 0.0:
        e = math.frexp(top)[1] - NEQ_BITS
        if round_even(math.ldexp(top, -e)) >= _TOP:
            e += 1
    for q in range(n_q):
        n = np.int64(round_even(ldexp(float(post[q] - feq[q]), -e)))
        rec[q, k, j, i] = np.uint16(n & 0xFFFF)
    rec[n_q, k, j, i] = np.uint16(e & 0xFFFF)
    rec[n_q + 1, k, j, i] = np.uint16(rho_bits)
    for a in range(dim):
        bits = float32_bits(ux if a == 0 else (uy if a == 1 else uz))
        rec[n_q + 2 + 2 * a, k, j, i] = np.uint16(bits & 0xFFFF)
        rec[n_q + 3 + 2 * a, k, j, i] = np.uint16((bits >> 16) & 0xFFFF)


@numba.njit(inline="always")
def _rho_fast(bits):
    return np.float32(1.0) + np.float32(float(fast16.half_to_f32(bits)) * _INV_RHO_SCALE)


@numba.njit(inline="always")
def _stress_value_fast(bits):
    return np.float32(float(fast16.half_to_f32(bits)) * _INV_STRESS_SCALE)


#: the names :func:`pull` and :func:`store` call that the CPU's copies rebind
_CPU_HELPERS = {"_velocity": fast16.f32_from_halves, "_rho": _rho_fast,
                "_stress_value": _stress_value_fast,
                "half_from": fast16.half_from_fast, "float32_bits": fast16.f32_bits,
                "ldexp": fast16.ldexp}


def _rebound(fn: numba.core.registry.CPUDispatcher) -> numba.core.registry.CPUDispatcher:
    """``fn``'s code with the names of :data:`_CPU_HELPERS` bound to them, compiled alike."""
    py = fn.py_func
    copy = types.FunctionType(py.__code__, {**py.__globals__, **_CPU_HELPERS},
                              f"{py.__name__}_cpu", py.__defaults__, py.__closure__)
    copy.__qualname__ = copy.__name__
    return numba.njit(inline="always")(copy)


pull_cpu = _rebound(pull)
store_cpu = _rebound(store)
