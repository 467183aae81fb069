"""Numba CPU kernels for Lennard-Jones molecular dynamics on one slab: counter-based random
numbers, velocity Verlet integration, the Langevin thermostat, the displacement check and the
slab bookkeeping, plus what the other MD kernel modules share (:data:`PARALLEL_MIN_ATOMS`, the
minimum image). Neighbour lists are in :mod:`.md_neighbors`, pair forces in :mod:`.md_forces`.

Every kernel works on local arrays: rows ``[0, n_own)`` are owned atoms, rows after that are
ghosts (exact copies of atoms owned by other slabs). Pair geometry always uses the minimum
image in all three dimensions, so periodic images and ghosts share one code path.

No ``fastmath``: without it LLVM neither reassociates nor contracts into FMA, so each owned
atom's result depends only on its inputs and on the order of its neighbour list, never on the
thread count or on how atoms are split between slabs.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba import njit, prange

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_PI = 2.0 * np.pi
_INV_2_53 = 1.0 / 9007199254740992.0


# --- counter-based random numbers -----------------------------------------------------------
@njit(cache=True)
def mix64(z: np.uint64) -> np.uint64:
    """SplitMix64 step: a bijective 64-bit hash with full avalanche."""
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _unit_open(h: np.uint64) -> float:
    """Top 53 bits of ``h`` as a float in the open interval (0, 1)."""
    return (np.float64(h >> np.uint64(11)) + 0.5) * _INV_2_53


@njit(cache=True)
def atom_key(seed: int, step: int, atom_id: int) -> np.uint64:
    """Hash of (seed, step, atom id): the whole state of the noise stream for one atom-step."""
    h = mix64(np.uint64(seed))
    h = mix64(h ^ np.uint64(step))
    return mix64(h ^ np.uint64(atom_id))


@njit(cache=True)
def counter_normals(seed: int, step: int, atom_id: int) -> tuple[float, float, float]:
    """Three independent standard normals for one (seed, step, atom id), by Box-Muller."""
    key = atom_key(seed, step, atom_id)
    u1 = _unit_open(mix64(key ^ np.uint64(1)))
    u2 = _unit_open(mix64(key ^ np.uint64(2)))
    u3 = _unit_open(mix64(key ^ np.uint64(3)))
    u4 = _unit_open(mix64(key ^ np.uint64(4)))
    r1 = np.sqrt(-2.0 * np.log(u1))
    r2 = np.sqrt(-2.0 * np.log(u3))
    return r1 * np.cos(_TWO_PI * u2), r1 * np.sin(_TWO_PI * u2), r2 * np.cos(_TWO_PI * u4)


@njit(parallel=True, cache=True)
def normals_table(seed: int, step: int, ids: np.ndarray) -> np.ndarray:
    """``(len(ids), 3)`` normals for the given atom ids (for tests and diagnostics)."""
    out = np.empty((ids.shape[0], 3))
    for i in prange(ids.shape[0]):
        g0, g1, g2 = counter_normals(seed, step, ids[i])
        out[i, 0] = g0
        out[i, 1] = g1
        out[i, 2] = g2
    return out


# --- integration ----------------------------------------------------------------------------
# Each per-atom loop is a block function plus two drivers: serial for small slabs (waking the
# thread pool costs more than the loop) and prange over blocks for large ones. Atoms are
# independent, so both drivers give the same bits.

#: below this many owned atoms one thread is faster than waking the pool
PARALLEL_MIN_ATOMS = 4096
#: atoms per work item of the parallel per-atom loops
_ROWS = 1024


def threading_for(n_own: int) -> tuple[bool, int]:
    """Whether a staged kernel over ``n_own`` owned atoms takes its prange driver (from
    :data:`PARALLEL_MIN_ATOMS`; else its one-thread driver, no thread wake-up), and the
    per-thread scratch rows it needs. The prange driver stays the choice on a pool of one
    thread: it ran 9 % faster than the one-thread force kernel there (32,000 atoms, measured)."""
    if n_own >= PARALLEL_MIN_ATOMS:
        return True, numba.config.NUMBA_NUM_THREADS
    return False, 1


@njit(cache=True)
def _initial_block(lo, hi, x, v, f, img, dtf, dt, box):
    for i in range(lo, hi):
        for d in range(3):
            v[i, d] = v[i, d] + dtf * f[i, d]
            x[i, d] = x[i, d] + dt * v[i, d]
            # wrap on the stored value (float32 rounding can land exactly on L)
            if x[i, d] < 0.0:
                x[i, d] = x[i, d] + box[d]
                img[i, d] -= 1
            if x[i, d] >= box[d]:
                x[i, d] = x[i, d] - box[d]
                img[i, d] += 1


@njit(parallel=True, cache=True)
def _initial_parallel(x, v, f, img, n, dtf, dt, box):
    for b in prange((n + _ROWS - 1) // _ROWS):
        _initial_block(b * _ROWS, min((b + 1) * _ROWS, n), x, v, f, img, dtf, dt, box)


def initial_integrate(x, v, f, img, n, dtf, dt, box) -> None:
    """Velocity Verlet first half: half kick, drift, wrap into [0, L) counting image flags."""
    if n >= PARALLEL_MIN_ATOMS:
        _initial_parallel(x, v, f, img, n, dtf, dt, box)
    else:
        _initial_block(0, n, x, v, f, img, dtf, dt, box)


@njit(cache=True)
def _final_block(lo, hi, v, f, dtf):
    for i in range(lo, hi):
        for d in range(3):
            v[i, d] = v[i, d] + dtf * f[i, d]


@njit(parallel=True, cache=True)
def _final_parallel(v, f, n, dtf):
    for b in prange((n + _ROWS - 1) // _ROWS):
        _final_block(b * _ROWS, min((b + 1) * _ROWS, n), v, f, dtf)


def final_integrate(v, f, n, dtf) -> None:
    """Velocity Verlet second half kick."""
    if n >= PARALLEL_MIN_ATOMS:
        _final_parallel(v, f, n, dtf)
    else:
        _final_block(0, n, v, f, dtf)


@njit(cache=True)
def _kick_block(lo, hi, v, f, typ, table):
    for i in range(lo, hi):
        dtf = table[typ[i]]
        for d in range(3):
            v[i, d] = v[i, d] + dtf * f[i, d]


@njit(parallel=True, cache=True)
def _kick_parallel(v, f, typ, n, table):
    for b in prange((n + _ROWS - 1) // _ROWS):
        _kick_block(b * _ROWS, min((b + 1) * _ROWS, n), v, f, typ, table)


def kick_typed(v, f, typ, n, table) -> None:
    """Half kick with per-type masses: ``v += table[typ] f`` (``table``: dt / 2m per type)."""
    if n >= PARALLEL_MIN_ATOMS:
        _kick_parallel(v, f, typ, n, table)
    else:
        _kick_block(0, n, v, f, typ, table)


@njit(cache=True)
def scale_rows(v, n, alpha) -> None:
    """``v[:n] *= alpha`` in double, rounded to the storage type (velocity rescaling)."""
    for i in range(n):
        for d in range(3):
            v[i, d] = np.float64(v[i, d]) * alpha


@njit(cache=True)
def _langevin_block(lo, hi, f, v, ids, typ, drag, noise, seed, step):
    # typ all zero and one-entry tables for atoms of one mass
    for i in range(lo, hi):
        t = typ[i]
        g0, g1, g2 = counter_normals(seed, step, ids[i])
        f[i, 0] = f[i, 0] - drag[t] * v[i, 0] + noise[t] * g0
        f[i, 1] = f[i, 1] - drag[t] * v[i, 1] + noise[t] * g1
        f[i, 2] = f[i, 2] - drag[t] * v[i, 2] + noise[t] * g2


@njit(parallel=True, cache=True)
def _langevin_parallel(f, v, ids, typ, n, drag, noise, seed, step):
    for b in prange((n + _ROWS - 1) // _ROWS):
        _langevin_block(b * _ROWS, min((b + 1) * _ROWS, n), f, v, ids, typ, drag, noise, seed,
                        step)


def langevin_forces_typed(f, v, ids, typ, n, drag, noise, seed, step) -> None:
    """Add Langevin drag ``-drag[t]*v`` and noise ``noise[t]*N(0,1)`` keyed by (seed, step,
    id), with ``t`` each row's type."""
    if n >= PARALLEL_MIN_ATOMS:
        _langevin_parallel(f, v, ids, typ, n, drag, noise, seed, step)
    else:
        _langevin_block(0, n, f, v, ids, typ, drag, noise, seed, step)


@functools.lru_cache(maxsize=4)
def _one_type(n: int) -> np.ndarray:
    """Type 0 for ``n`` rows, kept between steps (``n`` changes only at migrations); the
    kernels only read it (a read-only flag would make Numba compile another variant)."""
    return np.zeros(n, np.int32)


def langevin_forces(f, v, ids, n, drag, noise, seed, step) -> None:
    """Add Langevin drag ``-drag*v`` and noise ``noise*N(0,1)`` keyed by (seed, step, id)."""
    langevin_forces_typed(f, v, ids, _one_type(n), n, np.array([float(drag)]),
                          np.array([float(noise)]), seed, step)


@njit(cache=True, inline="always")
def _wrap(d, length, half):
    """The minimum image of ``d`` along an axis of ``length`` (``half`` = 0.5 * length), as
    selects (vectorises)."""
    return d - length if d > half else (d + length if d < -half else d)


@njit(cache=True)
def _min_image(dx, length):
    return _wrap(dx, length, 0.5 * length)


@njit(cache=True)
def _disp_block(lo, hi, x, x0, box):
    m = 0.0
    for i in range(lo, hi):
        dx = _min_image(np.float64(x[i, 0]) - x0[i, 0], box[0])
        dy = _min_image(np.float64(x[i, 1]) - x0[i, 1], box[1])
        dz = _min_image(np.float64(x[i, 2]) - x0[i, 2], box[2])
        m = max(m, dx * dx + dy * dy + dz * dz)
    return m


@njit(parallel=True, cache=True)
def _disp_parallel(x, x0, n, box):
    m = 0.0
    for b in prange((n + _ROWS - 1) // _ROWS):
        m = max(m, _disp_block(b * _ROWS, min((b + 1) * _ROWS, n), x, x0, box))
    return m


def max_displacement2(x, x0, n, box) -> float:
    """Largest squared minimum-image displacement of the first ``n`` atoms from ``x0``."""
    if n >= PARALLEL_MIN_ATOMS:
        return _disp_parallel(x, x0, n, box)
    return _disp_block(0, n, x, x0, box)


@njit(cache=True)
def kinetic_per_atom(v, n, mass):
    """``m |v|^2`` of each of the first ``n`` atoms (twice the kinetic energy)."""
    out = np.empty(n)
    for i in range(n):
        out[i] = mass * (np.float64(v[i, 0]) * v[i, 0] + np.float64(v[i, 1]) * v[i, 1]
                         + np.float64(v[i, 2]) * v[i, 2])
    return out


# --- slab bookkeeping -----------------------------------------------------------------------
@njit(cache=True)
def near_interval(z, n, lo, hi, length, cut):
    """Indices of the first ``n`` atoms whose periodic z-distance to ``[lo, hi)`` is < cut."""
    out = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        zi = np.float64(z[i])
        if lo <= zi < hi:
            out[m] = i
            m += 1
            continue
        below = (lo - zi) % length  # distance going up from the atom to the interval
        above = (zi - hi) % length  # distance going up from the interval to the atom
        if min(below, above) < cut:
            out[m] = i
            m += 1
    return out[:m]


@njit(cache=True)
def owners(z, n, edges):
    """Slab index of each of the first ``n`` atoms from the z edges (last slab takes z == L)."""
    nslab = edges.shape[0] - 1
    out = np.empty(n, np.int64)
    for i in range(n):
        k = np.searchsorted(edges, z[i], side="right") - 1
        out[i] = min(max(k, 0), nslab - 1)
    return out
