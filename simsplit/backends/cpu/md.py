"""Numba CPU kernels for Lennard-Jones molecular dynamics on one slab.

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
from numba import get_thread_id, njit, prange

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


@njit(cache=True)
def _min_image(dx, length):
    half = 0.5 * length
    if dx > half:
        return dx - length
    if dx < -half:
        return dx + length
    return dx


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


# --- cells and neighbour lists --------------------------------------------------------------
@njit(cache=True)
def cell_index(x, i, box, ncell):
    """Cell of atom ``i`` in the periodic grid of ``ncell`` cells; x must lie in [0, L]."""
    cx = int(x[i, 0] * (ncell[0] / box[0]))
    cy = int(x[i, 1] * (ncell[1] / box[1]))
    cz = int(x[i, 2] * (ncell[2] / box[2]))
    cx = min(max(cx, 0), ncell[0] - 1)
    cy = min(max(cy, 0), ncell[1] - 1)
    cz = min(max(cz, 0), ncell[2] - 1)
    return (cz * ncell[1] + cy) * ncell[0] + cx


@njit(cache=True)
def bin_atoms(x, gid, n, box, ncell, cell_of, cell_start, cell_atoms):
    """Counting sort of the first ``n`` atoms into cells.

    Fills ``cell_of[i]`` (cell of atom i), ``cell_start`` (CSR offsets, length ncells+1)
    and ``cell_atoms`` (atom indices grouped by cell, by ascending global id ``gid`` within a
    cell: the within-cell part of the canonical neighbour order).
    """
    nc = ncell[0] * ncell[1] * ncell[2]
    cell_start[:] = 0
    for i in range(n):
        c = cell_index(x, i, box, ncell)
        cell_of[i] = c
        cell_start[c + 1] += 1
    for c in range(nc):
        cell_start[c + 1] += cell_start[c]
    fill = cell_start[:nc].copy()
    for i in range(n):
        c = cell_of[i]
        cell_atoms[fill[c]] = i
        fill[c] += 1
    for c in range(nc):  # a few atoms per cell: insertion sort by global id
        lo = cell_start[c]
        for p in range(lo + 1, cell_start[c + 1]):
            a = cell_atoms[p]
            key = gid[a]
            q = p - 1
            while q >= lo and gid[cell_atoms[q]] > key:
                cell_atoms[q + 1] = cell_atoms[q]
                q -= 1
            cell_atoms[q + 1] = a


@njit(cache=True)
def _wrap_cell(c, n):
    """Periodic cell index for ``-n <= c < 2n`` without an integer division."""
    if c < 0:
        return c + n
    if c >= n:
        return c - n
    return c


@njit(cache=True)
def _face_dist2(xi, c, off, h):
    """Squared distance from coordinate ``xi`` (in cell ``c``) to cell ``c + off``."""
    if off > 0:
        d = (c + off) * h - xi
    elif off < 0:
        d = xi - (c + off + 1) * h
    else:
        return 0.0
    return d * d if d > 0.0 else 0.0


@njit(cache=True)
def _neighbor_row(i, x, box, ncell, cell_of, cell_start, cell_atoms, offx, offy, offz, cutsq,
                  nl, cnt):
    """List of atom ``i`` into ``nl[i]`` in canonical order (see :func:`build_neighbors`)."""
    cap = nl.shape[1]
    nx, ny, nz = ncell[0], ncell[1], ncell[2]
    c = cell_of[i]
    cx = c % nx
    cy = (c // nx) % ny
    cz = c // (nx * ny)
    xi = np.float64(x[i, 0])
    yi = np.float64(x[i, 1])
    zi = np.float64(x[i, 2])
    # skip stencil cells whose nearest face is beyond the cutoff (conservatively: the
    # margin keeps rounding in the face positions from ever dropping a pair)
    hx, hy, hz = box[0] / nx, box[1] / ny, box[2] / nz
    prune = cutsq * (1.0 + 1e-9) + 1e-12
    full_x = offx[0] == 0  # short axis: every cell is scanned, no pruning
    full_y = offy[0] == 0  # short axis: every cell is scanned, no pruning
    full_z = offz[0] == 0  # short axis: every cell is scanned, no pruning
    k = 0
    for a in range(offz.shape[0]):
        dz2 = 0.0 if full_z else _face_dist2(zi, cz, offz[a], hz)
        if dz2 > prune:
            continue
        qz = _wrap_cell(cz + offz[a], nz)
        for b in range(offy.shape[0]):
            dyz2 = dz2 + (0.0 if full_y else _face_dist2(yi, cy, offy[b], hy))
            if dyz2 > prune:
                continue
            qy = _wrap_cell(cy + offy[b], ny)
            row = (qz * ny + qy) * nx
            for e in range(offx.shape[0]):
                if dyz2 + (0.0 if full_x else _face_dist2(xi, cx, offx[e], hx)) > prune:
                    continue
                q = row + _wrap_cell(cx + offx[e], nx)
                for p in range(cell_start[q], cell_start[q + 1]):
                    j = cell_atoms[p]
                    if j == i:
                        continue
                    dx = _min_image(xi - x[j, 0], box[0])
                    dy = _min_image(yi - x[j, 1], box[1])
                    dz = _min_image(zi - x[j, 2], box[2])
                    if dx * dx + dy * dy + dz * dz < cutsq:
                        if k < cap:
                            nl[i, k] = j
                        k += 1
    cnt[i] = k
    return k


@njit(cache=True)
def _neighbor_block(lo, hi, x, box, ncell, cell_of, cell_start, cell_atoms, offx, offy, offz,
                    cutsq, nl, cnt):
    worst = 0
    for i in range(lo, hi):
        k = _neighbor_row(i, x, box, ncell, cell_of, cell_start, cell_atoms, offx, offy, offz,
                          cutsq, nl, cnt)
        worst = max(worst, k)
    return worst


#: rows per work item of the parallel list build
_BLOCK = 256


#: candidates per pass of the parallel list build's distance test
_CHUNK = 256


@njit(parallel=True, cache=True, error_model="numpy", boundscheck=False)
def build_neighbors_parallel(x, n_own, box, ncell, cell_of, cell_start, cell_atoms,
                             offx, offy, offz, cutsq, nl, cnt, sx, sy, sz, near, row):
    """Full Verlet list of each owned atom (pairs within ``sqrt(cutsq)``), canonical order.

    ``nl`` has a fixed capacity per atom; rows that overflow are counted but not stored.
    Returns the largest count, so the caller can grow the capacity and rebuild.

    :func:`_neighbor_row`'s list, found without a branch per candidate: ``sx, sy, sz`` are the
    coordinates in ``cell_atoms`` order (float64), so the atoms of the stencil cells of one
    (z, y) row that follow each other in memory are tested as one run, ``_CHUNK`` at a time
    (the test vectorises into the thread's ``near`` row), then appended in order into its
    ``row`` (one slot over the capacity: the write needs no test). Same stencil, pruning,
    order and arithmetic as :func:`_neighbor_row`, so the same lists. Loops are unsigned
    ``while`` loops written out in the prange body (see :func:`lj_forces_parallel`).
    """
    cap = nl.shape[1]
    nx, ny, nz = ncell[0], ncell[1], ncell[2]
    lx, ly, lz = box[0], box[1], box[2]
    gx, gy, gz = 0.5 * lx, 0.5 * ly, 0.5 * lz
    hx, hy, hz = lx / nx, ly / ny, lz / nz
    prune = cutsq * (1.0 + 1e-9) + 1e-12
    full_x = offx[0] == 0
    full_y = offy[0] == 0
    full_z = offz[0] == 0
    nblocks = (n_own + _BLOCK - 1) // _BLOCK
    worst = 0
    for blk in prange(nblocks):
        t = get_thread_id()
        i = blk * _BLOCK
        hi = min(i + _BLOCK, n_own)
        while i < hi:
            c = cell_of[i]
            cx = c % nx
            cy = (c // nx) % ny
            cz = c // (nx * ny)
            xi = np.float64(x[i, 0])
            yi = np.float64(x[i, 1])
            zi = np.float64(x[i, 2])
            k = 0
            a = 0
            while a < offz.shape[0]:
                dz2 = 0.0 if full_z else _face_dist2(zi, cz, offz[a], hz)
                if dz2 <= prune:
                    qz = _wrap_cell(cz + offz[a], nz)
                    b = 0
                    while b < offy.shape[0]:
                        dyz2 = dz2 + (0.0 if full_y else _face_dist2(yi, cy, offy[b], hy))
                        if dyz2 <= prune:
                            base = (qz * ny + _wrap_cell(cy + offy[b], ny)) * nx
                            e = 0
                            while e < offx.shape[0]:
                                # the next run: stencil cells kept, adjacent in memory
                                if dyz2 + (0.0 if full_x else _face_dist2(xi, cx, offx[e],
                                                                          hx)) > prune:
                                    e += 1
                                    continue
                                q = base + _wrap_cell(cx + offx[e], nx)
                                last = q
                                e += 1
                                while e < offx.shape[0] and base + _wrap_cell(
                                        cx + offx[e], nx) == last + 1 and (full_x or dyz2 + (
                                        _face_dist2(xi, cx, offx[e], hx)) <= prune):
                                    last += 1
                                    e += 1
                                p0 = np.uint64(cell_start[q])
                                p1 = np.uint64(cell_start[last + 1])
                                while p0 < p1:
                                    m = min(p1 - p0, np.uint64(_CHUNK))
                                    u = np.uint64(0)
                                    while u < m:  # vectorised: _min_image, r^2 < cutsq
                                        p = p0 + u
                                        dx = xi - sx[p]
                                        dx = dx - lx if dx > gx else (dx + lx if dx < -gx
                                                                      else dx)
                                        dy = yi - sy[p]
                                        dy = dy - ly if dy > gy else (dy + ly if dy < -gy
                                                                      else dy)
                                        dz = zi - sz[p]
                                        dz = dz - lz if dz > gz else (dz + lz if dz < -gz
                                                                      else dz)
                                        near[t, u] = (dx * dx + dy * dy + dz * dz < cutsq) & (
                                            cell_atoms[p] != i)
                                        u += np.uint64(1)
                                    u = np.uint64(0)
                                    while u < m:  # in order, branch-free
                                        row[t, min(k, cap)] = cell_atoms[p0 + u]
                                        k += near[t, u]
                                        u += np.uint64(1)
                                    p0 += m
                        b += 1
                a += 1
            cnt[i] = k
            n = 0
            while n < min(k, cap):
                nl[i, n] = row[t, n]
                n += 1
            worst = max(worst, k)
            i += 1
    return worst


@njit(cache=True)
def build_neighbors_serial(x, n_own, box, ncell, cell_of, cell_start, cell_atoms,
                           offx, offy, offz, cutsq, nl, cnt):
    """Single-threaded :func:`build_neighbors_parallel` (same result, no thread wake-up)."""
    return _neighbor_block(0, n_own, x, box, ncell, cell_of, cell_start, cell_atoms,
                           offx, offy, offz, cutsq, nl, cnt)


# --- forces ---------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _lj_pair(dx, dy, dz, rcsq, eps4, eps24, sigsq, eshift):
    """One pair's ``r^2``, ``f / r`` and energy; pairs beyond the cutoff give 0.0 for both
    (a select instead of a branch: the 70/30 split mispredicts; adding +-0.0 leaves every
    sum bitwise unchanged)."""
    rsq = dx * dx + dy * dy + dz * dz
    inside = rsq < rcsq
    r2inv = 1.0 / rsq
    sr2 = sigsq * r2inv
    sr6 = sr2 * sr2 * sr2
    fpair = eps24 * sr6 * (2.0 * sr6 - 1.0) * r2inv if inside else 0.0
    e = eps4 * sr6 * (sr6 - 1.0) - eshift if inside else 0.0
    return rsq, fpair, e


@njit(cache=True)
def _lj_row(i, x, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir):
    xi = np.float64(x[i, 0])
    yi = np.float64(x[i, 1])
    zi = np.float64(x[i, 2])
    fx = 0.0
    fy = 0.0
    fz = 0.0
    e = 0.0
    w = 0.0
    for k in range(cnt[i]):
        j = nl[i, k]
        dx = _min_image(xi - x[j, 0], box[0])
        dy = _min_image(yi - x[j, 1], box[1])
        dz = _min_image(zi - x[j, 2], box[2])
        rsq, fpair, ep = _lj_pair(dx, dy, dz, rcsq, eps4, eps24, sigsq, eshift)
        fx += dx * fpair
        fy += dy * fpair
        fz += dz * fpair
        e += ep
        w += rsq * fpair
    f[i, 0] = fx
    f[i, 1] = fy
    f[i, 2] = fz
    pe[i] = 0.5 * e
    vir[i] = 0.5 * w


#: pair-term scratch rows per thread: the list's differences, then each pair's terms
_SCRATCH = 5


@njit(parallel=True, cache=True, error_model="numpy", boundscheck=False)
def lj_forces_parallel(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir,
                       sdx, sdy, sdz, se, sw):
    """Truncated Lennard-Jones forces on owned atoms from a full list, in list order.

    ``pe[i]`` and ``vir[i]`` get half of each pair's energy and of ``r . f`` so their sums
    over all atoms are the total potential energy and the virial ``W = sum_pairs r . f``.

    Each atom in three loops over its list, on the thread's scratch rows ``s*[thread]``: the
    coordinate differences (the gather), every pair's terms (no dependence between pairs:
    LLVM vectorises it), then the five sums in list order. Every operation is
    :func:`_lj_row`'s, in its order, so the bits are its bits. The loops are written out in
    the prange body with unsigned ``while`` counters stepped by a literal: an array passed to
    a call, a ``for`` iterator, or a step variable set outside the prange (3x slower, measured)
    keep LLVM from vectorising, and negative-index wrapping would put a select on every load.
    """
    lx, ly, lz = box[0], box[1], box[2]
    hx, hy, hz = 0.5 * lx, 0.5 * ly, 0.5 * lz
    for b in prange((n_own + _ROWS - 1) // _ROWS):
        t = get_thread_id()
        i = b * _ROWS
        hi = min(i + _ROWS, n_own)
        while i < hi:
            xi = np.float64(x[i, 0])
            yi = np.float64(x[i, 1])
            zi = np.float64(x[i, 2])
            m = np.uint64(cnt[i])
            k = np.uint64(0)
            while k < m:
                j = nl[i, k]
                sdx[t, k] = xi - x[j, 0]
                sdy[t, k] = yi - x[j, 1]
                sdz[t, k] = zi - x[j, 2]
                k += np.uint64(1)
            k = np.uint64(0)
            while k < m:  # _min_image and _lj_pair, as selects
                dx = sdx[t, k]
                dx = dx - lx if dx > hx else (dx + lx if dx < -hx else dx)
                dy = sdy[t, k]
                dy = dy - ly if dy > hy else (dy + ly if dy < -hy else dy)
                dz = sdz[t, k]
                dz = dz - lz if dz > hz else (dz + lz if dz < -hz else dz)
                rsq = dx * dx + dy * dy + dz * dz
                inside = rsq < rcsq
                r2inv = 1.0 / rsq
                sr2 = sigsq * r2inv
                sr6 = sr2 * sr2 * sr2
                fpair = eps24 * sr6 * (2.0 * sr6 - 1.0) * r2inv if inside else 0.0
                se[t, k] = eps4 * sr6 * (sr6 - 1.0) - eshift if inside else 0.0
                sw[t, k] = rsq * fpair
                sdx[t, k] = dx * fpair
                sdy[t, k] = dy * fpair
                sdz[t, k] = dz * fpair
                k += np.uint64(1)
            fx = 0.0
            fy = 0.0
            fz = 0.0
            e = 0.0
            w = 0.0
            k = np.uint64(0)
            while k < m:
                fx += sdx[t, k]
                fy += sdy[t, k]
                fz += sdz[t, k]
                e += se[t, k]
                w += sw[t, k]
                k += np.uint64(1)
            f[i, 0] = fx
            f[i, 1] = fy
            f[i, 2] = fz
            pe[i] = 0.5 * e
            vir[i] = 0.5 * w
            i += 1


def pair_scratch(capacity: int) -> tuple[np.ndarray, ...]:
    """Scratch rows for :func:`lj_forces_parallel`: one per thread and term, a list long."""
    rows = numba.config.NUMBA_NUM_THREADS
    return tuple(np.empty((rows, capacity)) for _ in range(_SCRATCH))


@njit(cache=True)
def lj_forces_serial(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir):
    """One atom at a time (same result as :func:`lj_forces_parallel`, no thread wake-up)."""
    for i in range(n_own):
        _lj_row(i, x, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir)


@njit(cache=True)
def _lj_row_typed(i, x, typ, nl, cnt, box, table, ntypes, f, pe, vir):
    """:func:`_lj_row` with the pair's coefficients from ``table[typ[i] * ntypes + typ[j]]``
    (rc^2, 4 eps, 24 eps, sigma^2, energy shift)."""
    xi = np.float64(x[i, 0])
    yi = np.float64(x[i, 1])
    zi = np.float64(x[i, 2])
    row = typ[i] * ntypes
    fx = 0.0
    fy = 0.0
    fz = 0.0
    e = 0.0
    w = 0.0
    for k in range(cnt[i]):
        j = nl[i, k]
        p = row + typ[j]
        dx = _min_image(xi - x[j, 0], box[0])
        dy = _min_image(yi - x[j, 1], box[1])
        dz = _min_image(zi - x[j, 2], box[2])
        rsq, fpair, ep = _lj_pair(dx, dy, dz, table[p, 0], table[p, 1], table[p, 2],
                                  table[p, 3], table[p, 4])
        fx += dx * fpair
        fy += dy * fpair
        fz += dz * fpair
        e += ep
        w += rsq * fpair
    f[i, 0] = fx
    f[i, 1] = fy
    f[i, 2] = fz
    pe[i] = 0.5 * e
    vir[i] = 0.5 * w


@njit(parallel=True, cache=True)
def _lj_typed_parallel(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir):
    for i in prange(n_own):
        _lj_row_typed(i, x, typ, nl, cnt, box, table, ntypes, f, pe, vir)


@njit(cache=True)
def _lj_typed_serial(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir):
    for i in range(n_own):
        _lj_row_typed(i, x, typ, nl, cnt, box, table, ntypes, f, pe, vir)


def lj_forces_typed(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir) -> None:
    """:func:`lj_forces` for several atom types (``typ`` per row, ``table`` per type pair)."""
    fn = _lj_typed_parallel if n_own >= PARALLEL_MIN_ATOMS else _lj_typed_serial
    fn(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir)


@njit(cache=True, inline="always")
def _lj_pair_fshift(dx, dy, dz, rcsq, eps4, eps24, sigsq, eshift, fshift, rc):
    """:func:`_lj_pair` with the force shifted to zero at the cutoff (LAMMPS
    ``lj/smooth/linear``): f(r) - f(rc), and e(r) - e(rc) + (r - rc) f(rc)."""
    rsq = dx * dx + dy * dy + dz * dz
    inside = rsq < rcsq
    r2inv = 1.0 / rsq
    sr2 = sigsq * r2inv
    sr6 = sr2 * sr2 * sr2
    r = np.sqrt(rsq)
    fpair = (eps24 * sr6 * (2.0 * sr6 - 1.0) * r2inv - fshift / r) if inside else 0.0
    e = (eps4 * sr6 * (sr6 - 1.0) - eshift + (r - rc) * fshift) if inside else 0.0
    return rsq, fpair, e


@njit(cache=True)
def _lj_row_fshift(i, x, typ, nl, cnt, box, table, ntypes, f, pe, vir):
    """:func:`_lj_row_typed` with the force shift (``table`` rows: rc^2, 4 eps, 24 eps,
    sigma^2, e(rc), f(rc), rc)."""
    xi = np.float64(x[i, 0])
    yi = np.float64(x[i, 1])
    zi = np.float64(x[i, 2])
    row = typ[i] * ntypes
    fx = 0.0
    fy = 0.0
    fz = 0.0
    e = 0.0
    w = 0.0
    for k in range(cnt[i]):
        j = nl[i, k]
        p = row + typ[j]
        dx = _min_image(xi - x[j, 0], box[0])
        dy = _min_image(yi - x[j, 1], box[1])
        dz = _min_image(zi - x[j, 2], box[2])
        rsq, fpair, ep = _lj_pair_fshift(dx, dy, dz, table[p, 0], table[p, 1], table[p, 2],
                                         table[p, 3], table[p, 4], table[p, 5], table[p, 6])
        fx += dx * fpair
        fy += dy * fpair
        fz += dz * fpair
        e += ep
        w += rsq * fpair
    f[i, 0] = fx
    f[i, 1] = fy
    f[i, 2] = fz
    pe[i] = 0.5 * e
    vir[i] = 0.5 * w


@njit(parallel=True, cache=True)
def _lj_fshift_parallel(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir):
    for i in prange(n_own):
        _lj_row_fshift(i, x, typ, nl, cnt, box, table, ntypes, f, pe, vir)


@njit(cache=True)
def _lj_fshift_serial(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir):
    for i in range(n_own):
        _lj_row_fshift(i, x, typ, nl, cnt, box, table, ntypes, f, pe, vir)


def lj_forces_fshift(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir) -> None:
    """:func:`lj_forces_typed` with the force shifted to zero at each pair's cutoff
    (``table``: :meth:`simsplit.md.pair_table.PairTable.force_shift_table`)."""
    fn = _lj_fshift_parallel if n_own >= PARALLEL_MIN_ATOMS else _lj_fshift_serial
    fn(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir)


def build_neighbors(x, n_own, box, ncell, cell_of, cell_start, cell_atoms,
                    offx, offy, offz, cutsq, nl, cnt) -> int:
    """Full Verlet lists of the owned atoms in canonical order; returns the largest row count.

    Canonical order: the stencil cells in loop order (z outer, x inner, offsets ascending)
    around the atom's own cell of the global grid, and within a cell ascending global id (as
    :func:`bin_atoms` leaves them). A row holds exactly the atoms within the list cutoff, every
    one of which is local on every split, and a cell is a pure function of a coordinate, so
    the order does not depend on the split or on the row order in memory.
    """
    if n_own < PARALLEL_MIN_ATOMS:
        return build_neighbors_serial(x, n_own, box, ncell, cell_of, cell_start, cell_atoms,
                                      offx, offy, offz, cutsq, nl, cnt)
    sorted_x = [np.ascontiguousarray(x[cell_atoms, d], dtype=np.float64) for d in range(3)]
    threads = numba.config.NUMBA_NUM_THREADS
    return build_neighbors_parallel(x, n_own, box, ncell, cell_of, cell_start, cell_atoms,
                                    offx, offy, offz, cutsq, nl, cnt, *sorted_x,
                                    np.empty((threads, _CHUNK), np.int64),
                                    np.empty((threads, nl.shape[1] + 1), nl.dtype))


def lj_forces(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir) -> None:
    """Lennard-Jones forces, per-atom energy and virial of the owned atoms."""
    if n_own >= PARALLEL_MIN_ATOMS:
        lj_forces_parallel(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir,
                           *pair_scratch(nl.shape[1]))
    else:
        lj_forces_serial(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir)


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
