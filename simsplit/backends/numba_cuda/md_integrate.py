"""Integration, thermostat and thermo-reduction kernels in Numba CUDA: ``kernels/md_lj.cu``'s
and ``kernels/md_sums.cuh``'s, kernel for kernel, with the Langevin noise's hash.

Products go through ``md_device.mul`` (no fused multiply-add; see :mod:`md_device`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from simsplit.backends.cuda_c.md import md_constants
from simsplit.backends.numba_cuda.exact_sum import exact_add
from simsplit.backends.numba_cuda.md_device import _halted, mul
from simsplit.backends.numba_cuda.md_pairs import _min_image

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_PI = 2.0 * np.pi
_INV_2_53 = 1.0 / 9007199254740992.0


@cuda.jit(device=True)
def _mix64(z):
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@cuda.jit(device=True)
def _unit_open(h):
    return mul(np.float64(h >> np.uint64(11)) + 0.5, _INV_2_53)


@cuda.jit
def md_advance(x, v, f, img, n, kick, dtf, dt, bx, by, bz, x0, limit2, jump2, tick, flags,
               ghost_of, ghosts):
    i = cuda.grid(1)
    if i >= n or _halted(flags[0], tick, False):
        return
    r2 = 0.0
    for d in range(3):
        box = bx if d == 0 else (by if d == 1 else bz)
        fd = np.float64(f[i, d])
        if kick != 0:  # the previous step's second half kick, stored (rounded) in between
            v[i, d] = np.float64(v[i, d]) + mul(dtf, fd)
        v[i, d] = np.float64(v[i, d]) + mul(dtf, fd)
        x[i, d] = np.float64(x[i, d]) + mul(dt, np.float64(v[i, d]))
        # wrap on the stored value (float32 rounding can land exactly on L)
        if x[i, d] < 0.0:
            x[i, d] = np.float64(x[i, d]) + box
            img[i, d] -= 1
        if x[i, d] >= box:
            x[i, d] = np.float64(x[i, d]) - box
            img[i, d] += 1
        dd = _min_image(np.float64(x[i, d]) - x0[i, d], box)
        r2 += mul(dd, dd)  # 0.0 + a == a: the CPU's dx*dx + dy*dy + dz*dz
    if ghosts != 0:  # an arena's ghost copies of this row (md_lj.cu)
        for c in range(2):
            g = ghost_of[2 * i + c]
            if g >= 0:
                for d in range(3):
                    x[g, d] = x[i, d]
    if r2 > limit2:
        flags[0] = tick
    if r2 > jump2:
        flags[1] = 1


@cuda.jit
def md_final_integrate(v, f, n, dtf):
    i = cuda.grid(1)
    if i >= n:
        return
    for d in range(3):
        v[i, d] = np.float64(v[i, d]) + mul(dtf, np.float64(f[i, d]))


@cuda.jit(device=True)
def _langevin_row(f, v, i, atom_id, drag, noise, seed, step):
    key = _mix64(seed)
    key = _mix64(key ^ step)
    key = _mix64(key ^ np.uint64(atom_id))
    u1 = _unit_open(_mix64(key ^ np.uint64(1)))
    u2 = _unit_open(_mix64(key ^ np.uint64(2)))
    u3 = _unit_open(_mix64(key ^ np.uint64(3)))
    u4 = _unit_open(_mix64(key ^ np.uint64(4)))
    r1 = math.sqrt(mul(-2.0, math.log(u1)))
    r2 = math.sqrt(mul(-2.0, math.log(u3)))
    g0 = mul(r1, math.cos(mul(_TWO_PI, u2)))
    g1 = mul(r1, math.sin(mul(_TWO_PI, u2)))
    g2 = mul(r2, math.cos(mul(_TWO_PI, u4)))
    f[i, 0] = np.float64(f[i, 0]) - mul(drag, np.float64(v[i, 0])) + mul(noise, g0)
    f[i, 1] = np.float64(f[i, 1]) - mul(drag, np.float64(v[i, 1])) + mul(noise, g1)
    f[i, 2] = np.float64(f[i, 2]) - mul(drag, np.float64(v[i, 2])) + mul(noise, g2)


@cuda.jit
def md_langevin(f, v, ids, n, drag, noise, seed, step, flags, tick):
    i = cuda.grid(1)
    if i >= n or _halted(flags[0], tick, True):
        return
    _langevin_row(f, v, i, ids[i], drag, noise, seed, step)


@cuda.jit
def md_langevin_typed(f, v, ids, typ, n, drag, noise, seed, step, flags, tick):
    i = cuda.grid(1)
    if i >= n or _halted(flags[0], tick, True):
        return
    t = typ[i]
    _langevin_row(f, v, i, ids[i], drag[t], noise[t], seed, step)


@cuda.jit
def md_snapshot(x, n, x0):
    t = cuda.grid(1)
    if t >= 3 * n:
        return
    x0[t // 3, t % 3] = np.float64(x[t // 3, t % 3])


@cuda.jit
def md_kick_typed(v, f, typ, n, table, flags, tick):
    i = cuda.grid(1)
    if i >= n or _halted(flags[0], tick, False):
        return
    dtf = table[typ[i]]
    for d in range(3):
        v[i, d] = np.float64(v[i, d]) + mul(dtf, np.float64(f[i, d]))


# --- exact thermo sums (kernels/md_sums.cuh) ----------------------------------------------------
_SUM = md_constants()
_LIMBS, _QUANTITIES, _REPLICAS = _SUM["sum_limbs"], _SUM["sum_quantities"], _SUM["sum_replicas"]
_U64 = np.uint64(0xFFFFFFFFFFFFFFFF)


@cuda.jit
def md_exact_accumulate(bits, n, quantity, acc, nonfinite):
    i = cuda.grid(1)
    if i >= n:
        return
    exact_add(acc, ((cuda.blockIdx.x % _REPLICAS) * _QUANTITIES + quantity) * _LIMBS,
              np.uint64(bits[i]), nonfinite)


@cuda.jit
def md_exact_merge(acc, nonfinite, out):
    t = cuda.grid(1)
    width = _QUANTITIES * _LIMBS
    if t == 0:
        out[width] = nonfinite[0]
        nonfinite[0] = 0
    if t >= width:
        return
    s = 0  # a Python int in the simulator, int64 on a GPU: both add exactly (|sum| < 2^63)
    for r in range(_REPLICAS):
        v = acc[r * width + t]
        s += np.int64(v) if v < np.uint64(1 << 63) else -np.int64((_U64 - v) + np.uint64(1))
        acc[r * width + t] = 0
    out[t] = s


@cuda.jit
def md_kinetic(v, n, mass, mv2):
    i = cuda.grid(1)
    if i >= n:
        return
    a = np.float64(v[i, 0])
    b = np.float64(v[i, 1])
    c = np.float64(v[i, 2])
    mv2[i] = mul(mass, mul(a, a) + mul(b, b) + mul(c, c))


@cuda.jit
def md_kinetic_typed(v, typ, n, masses, mv2):
    i = cuda.grid(1)
    if i >= n:
        return
    a = np.float64(v[i, 0])
    b = np.float64(v[i, 1])
    c = np.float64(v[i, 2])
    mv2[i] = mul(masses[typ[i]], mul(a, a) + mul(b, b) + mul(c, c))


@cuda.jit
def md_nonfinite(x, v, n, flag):
    i = cuda.grid(1)
    if i >= n:
        return
    for d in range(3):
        a = np.float64(x[i, d])
        b = np.float64(v[i, d])
        if not (a - a == 0.0) or not (b - b == 0.0):
            flag[0] = 1


@cuda.jit
def md_scale_rows(v, n, alpha):
    t = cuda.grid(1)
    if t >= 3 * n:
        return
    v[t // 3, t % 3] = mul(np.float64(v[t // 3, t % 3]), alpha)


#: kernel name (as in md_lj.cu and md_sums.cuh) -> kernel
INTEGRATE_KERNELS = {name: globals()[name] for name in (
    "md_advance", "md_final_integrate", "md_langevin", "md_langevin_typed", "md_snapshot",
    "md_kick_typed", "md_exact_accumulate", "md_exact_merge", "md_kinetic", "md_kinetic_typed",
    "md_nonfinite", "md_scale_rows")}
