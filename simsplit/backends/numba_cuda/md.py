"""Lennard-Jones MD kernels in Numba CUDA: ``kernels/md_lj.cu`` kernel for kernel.

The launch sequence, argument lists and list layout are :class:`DeviceMDKernels`'s, shared with
the CuPy backend; this module only holds the kernel bodies and Numba's allocation and launch.
The same source runs on Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``).

Every floating-point product goes through ``mul`` (libdevice ``dmul_rn`` on a GPU): NVVM would
otherwise contract ``a * b + c`` into a fused multiply-add and round differently from the CPU
kernels. All arithmetic is float64 whatever the storage type, as on the CPU.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Callable, ContextManager

import numpy as np
from numba import cuda

from simsplit.backends.cuda_c.md import (
    ARENA_FLOAT_KERNELS,
    ARENA_INDEX_KERNELS,
    FLOAT_KERNELS,
    INDEX_KERNELS,
    DeviceMDKernels,
    md_constants,
)
from simsplit.backends.numba_cuda.d2q9 import SIMULATOR
from simsplit.backends.numba_cuda.exact_sum import exact_add
from simsplit.backends.numba_cuda.md_device import global_cell, mul, near_slab, slab_of
from simsplit.backends.numba_cuda.md_ranks import RANK_KERNELS

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_PI = 2.0 * np.pi
_INV_2_53 = 1.0 / 9007199254740992.0


@cuda.jit(device=True)
def _min_image(dx, length):
    half = mul(0.5, length)
    if dx > half:
        return dx - length
    if dx < -half:
        return dx + length
    return dx


@cuda.jit(device=True)
def _mix64(z):
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@cuda.jit(device=True)
def _unit_open(h):
    return mul(np.float64(h >> np.uint64(11)) + 0.5, _INV_2_53)


@cuda.jit(device=True)
def _wrap_cell(c, n):
    if c < 0:
        return c + n
    if c >= n:
        return c - n
    return c


@cuda.jit(device=True)
def _face_dist2(xi, c, off, h):
    if off > 0:
        d = mul(np.float64(c + off), h) - xi
    elif off < 0:
        d = xi - mul(np.float64(c + off + 1), h)
    else:
        return 0.0
    return mul(d, d) if d > 0.0 else 0.0


@cuda.jit(device=True)
def _dist2(dx, dy, dz):
    return mul(dx, dx) + mul(dy, dy) + mul(dz, dz)


@cuda.jit(device=True)
def _halted(at, tick, inclusive):
    """md_lj.cu's halted(), given flags[0] as ``at``."""
    if tick <= 0 or at == 0:
        return False
    return at <= tick if inclusive else at < tick


@cuda.jit(device=True)
def _neighbour(entry, shift, typ):
    """(row, type) of a typed list entry (kernels/md_lj.cu's neighbour_of)."""
    if shift:
        return entry & ((1 << shift) - 1), entry >> shift
    return entry, typ[entry]


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
def md_gather_rows(src, idx, m, dst):
    r = cuda.grid(1)
    if r >= m:
        return
    s = idx[r]
    for d in range(3):
        dst[r, d] = src[s, d]


@cuda.jit
def md_cell_count(x, n, bx, by, bz, nx, ny, nz, cell_of, counts):
    i = cuda.grid(1)
    if i >= n:
        return
    c = global_cell(x, i, bx, by, bz, nx, ny, nz)
    cell_of[i] = c
    cuda.atomic.add(counts, c, np.int32(1))


@cuda.jit
def md_scan_chunks(counts, ncells, chunk, chunk_sums):
    t = cuda.grid(1)
    lo = t * chunk
    if lo >= ncells:
        return
    s = 0
    for c in range(lo, min(lo + chunk, ncells)):
        s += counts[c]
    chunk_sums[t] = s


@cuda.jit
def md_scan_serial(chunk_sums, nchunks):
    if cuda.grid(1) != 0:
        return
    run = 0
    for t in range(nchunks):
        s = chunk_sums[t]
        chunk_sums[t] = run
        run += s
    chunk_sums[nchunks] = run


@cuda.jit
def md_scan_inplace(a, n, chunk, base):
    t = cuda.grid(1)
    lo = t * chunk
    if lo >= n:
        return
    run = base[t]
    for c in range(lo, min(lo + chunk, n)):
        v = a[c]
        a[c] = run
        run += v


@cuda.jit
def md_scan_write(counts, ncells, chunk, chunk_sums, cell_start, fill):
    c = cuda.grid(1)
    if c >= ncells:
        return
    run = chunk_sums[c // chunk]
    for j in range(c - c % chunk, c):
        run += counts[j]
    cell_start[c] = run
    fill[c] = run
    if c == ncells - 1:
        cell_start[ncells] = run + counts[c]


@cuda.jit
def md_cell_scatter(cell_of, n, fill, cell_atoms):
    i = cuda.grid(1)
    if i >= n:
        return
    slot = cuda.atomic.add(fill, cell_of[i], np.int32(1))
    cell_atoms[slot] = i


@cuda.jit
def md_cell_sort(cell_start, ncells, gid, cell_atoms, counts):
    c = cuda.grid(1)
    if c >= ncells:
        return
    counts[c] = 0
    lo = cell_start[c]
    for p in range(lo + 1, cell_start[c + 1]):
        a = cell_atoms[p]
        key = gid[a]
        q = p - 1
        while q >= lo and gid[cell_atoms[q]] > key:
            cell_atoms[q + 1] = cell_atoms[q]
            q -= 1
        cell_atoms[q + 1] = a


@cuda.jit
def md_permute(n, cell_atoms, cell_of, x, v, img, gid, cell_of_out, x_out, v_out, img_out,
               gid_out):
    r = cuda.grid(1)
    if r >= n:
        return
    s = cell_atoms[r]
    cell_atoms[r] = r
    cell_of_out[r] = cell_of[s]
    gid_out[r] = gid[s]
    for d in range(3):
        x_out[r, d] = x[s, d]
        v_out[r, d] = v[s, d]
        img_out[r, d] = img[s, d]


@cuda.jit
def md_build_neighbors(x, n_own, bx, by, bz, nx, ny, nz, hx, hy, hz, ox0, oxn, oy0, oyn, oz0, ozn,
                       cell_of, cell_start, cell_atoms, in_order, cutsq, nl, pitch, cap, cnt,
                       worst, typ, shift, list_cutsq, ntypes):
    i = cuda.grid(1)
    if i >= n_own:
        return
    row_cut = typ[i] * ntypes if shift else 0  # pairs within their own list cutoff: md_lj.cu
    c = cell_of[i]
    cx = c % nx
    cy = (c // nx) % ny
    cz = c // (nx * ny)
    xi = np.float64(x[i, 0])
    yi = np.float64(x[i, 1])
    zi = np.float64(x[i, 2])
    # conservative: the margin keeps rounding in the face positions from dropping a pair
    prune = mul(cutsq, 1.0 + 1e-9) + 1e-12
    k = 0
    for a in range(ozn):
        offz = oz0 + a
        dz2 = 0.0 if oz0 == 0 else _face_dist2(zi, cz, offz, hz)
        if dz2 > prune:
            continue
        qz = _wrap_cell(cz + offz, nz)
        for b in range(oyn):
            offy = oy0 + b
            dyz2 = dz2 + (0.0 if oy0 == 0 else _face_dist2(yi, cy, offy, hy))
            if dyz2 > prune:
                continue
            row = (qz * ny + _wrap_cell(cy + offy, ny)) * nx
            for e in range(oxn):
                offx = ox0 + e
                if dyz2 + (0.0 if ox0 == 0 else _face_dist2(xi, cx, offx, hx)) > prune:
                    continue
                q = row + _wrap_cell(cx + offx, nx)
                for p in range(cell_start[q], cell_start[q + 1]):
                    j = p if in_order != 0 else cell_atoms[p]
                    if j == i:
                        continue
                    dx = _min_image(xi - np.float64(x[j, 0]), bx)
                    dy = _min_image(yi - np.float64(x[j, 1]), by)
                    dz = _min_image(zi - np.float64(x[j, 2]), bz)
                    r2 = _dist2(dx, dy, dz)
                    if r2 < cutsq:
                        if shift:
                            tj = typ[j]
                            if not r2 < list_cutsq[row_cut + tj]:
                                continue
                            if k < cap:  # scan order is the canonical order
                                nl[k, i] = j | (tj << shift)
                        elif k < cap:
                            nl[k, i] = j
                        k += 1
    cnt[i] = k
    if k > cap:
        cuda.atomic.max(worst, 0, np.int32(k))


@cuda.jit
def md_lj_forces(x, n_own, row0, nl, pitch, cnt, bx, by, bz, rcsq, eps4, eps24, sigsq, eshift,
                 f, pe, vir, flags, tick):
    i = row0 + cuda.grid(1)
    if i >= n_own or _halted(flags[0], tick, True):
        return
    xi = np.float64(x[i, 0])
    yi = np.float64(x[i, 1])
    zi = np.float64(x[i, 2])
    fx = 0.0
    fy = 0.0
    fz = 0.0
    e = 0.0
    w = 0.0
    for k in range(cnt[i]):
        j = nl[k, i]
        dx = _min_image(xi - np.float64(x[j, 0]), bx)
        dy = _min_image(yi - np.float64(x[j, 1]), by)
        dz = _min_image(zi - np.float64(x[j, 2]), bz)
        rsq = _dist2(dx, dy, dz)
        inside = rsq < rcsq
        r2inv = 1.0 / rsq
        sr2 = mul(sigsq, r2inv)
        sr6 = mul(mul(sr2, sr2), sr2)
        fpair = mul(mul(mul(eps24, sr6), mul(2.0, sr6) - 1.0), r2inv) if inside else 0.0
        fx += mul(dx, fpair)
        fy += mul(dy, fpair)
        fz += mul(dz, fpair)
        e += mul(mul(eps4, sr6), sr6 - 1.0) - eshift if inside else 0.0
        w += mul(rsq, fpair)
    f[i, 0] = fx
    f[i, 1] = fy
    f[i, 2] = fz
    pe[i] = mul(0.5, e)
    vir[i] = mul(0.5, w)


# --- several slabs in one arena (kernels/md_arena.cuh) ----------------------------------------
@cuda.jit
def md_arena_classify(x, n, bx, by, bz, nx, ny, nz, edges, nslab, cut, old_key, check, keys,
                      counts, err):
    i = cuda.grid(1)
    if i >= n:
        return
    ncells = nx * ny * nz
    c = global_cell(x, i, bx, by, bz, nx, ny, nz)
    z = np.float64(x[i, 2])
    k = slab_of(z, edges, nslab)
    lo_nb = nslab - 1 if k == 0 else k - 1
    hi_nb = 0 if k == nslab - 1 else k + 1
    if check != 0:
        was = old_key[i] // ncells
        if k != was and k != (nslab - 1 if was == 0 else was - 1) \
                and k != (0 if was == nslab - 1 else was + 1):
            err[0] = 1
            err[1] = i
        if k != was:
            cuda.atomic.add(err, 2, np.int32(1))
    own = k * ncells + c
    keys[3 * i] = own
    cuda.atomic.add(counts, own, np.int32(1))
    g0 = -1
    g1 = -1
    if lo_nb != k and near_slab(z, edges, lo_nb, bz, cut):
        g0 = (nslab + lo_nb) * ncells + c
        cuda.atomic.add(counts, g0, np.int32(1))
    if hi_nb != k and hi_nb != lo_nb and near_slab(z, edges, hi_nb, bz, cut):
        g1 = (nslab + hi_nb) * ncells + c
        cuda.atomic.add(counts, g1, np.int32(1))
    keys[3 * i + 1] = g0
    keys[3 * i + 2] = g1


@cuda.jit
def md_arena_bounds(cell_start, nbounds, ncells, err, worst, out):
    s = cuda.grid(1)
    if s < nbounds:
        out[s] = cell_start[s * ncells]
    if s == 0:
        for m in range(3):
            out[nbounds + m] = err[m]
            err[m] = 0
        out[nbounds + 3] = worst[0]
        worst[0] = 0


@cuda.jit
def md_arena_scatter(keys, nkeys, fill, entry_row):
    e = cuda.grid(1)
    if e >= nkeys:
        return
    key = keys[e]
    if key < 0:
        return
    slot = cuda.atomic.add(fill, key, np.int32(1))
    entry_row[slot] = e // 3


@cuda.jit
def md_arena_owned(n, entry_row, keys, x, v, img, gid, key_out, x_out, v_out, img_out, gid_out,
                   new_of_old, ghost_of):
    r = cuda.grid(1)
    if r >= n:
        return
    s = entry_row[r]
    ghost_of[2 * r] = -1
    ghost_of[2 * r + 1] = -1
    key_out[r] = keys[3 * s]
    gid_out[r] = gid[s]
    new_of_old[s] = r
    for d in range(3):
        x_out[r, d] = x[s, d]
        v_out[r, d] = v[s, d]
        img_out[r, d] = img[s, d]


@cuda.jit
def md_arena_ghosts(n, g_cap, cell_start, nb, entry_row, new_of_old, keys, x, gid, x_out,
                    gid_out, ghost_of):
    r = cuda.grid(1)
    if r >= g_cap or r >= cell_start[nb] - n:
        return
    row = n + r
    s = entry_row[row]
    k1 = keys[3 * s + 1]
    slot = 0 if (k1 >= 0 and cell_start[k1] <= row and row < cell_start[k1 + 1]) else 1
    ghost_of[2 * new_of_old[s] + slot] = row
    gid_out[row] = gid[s]
    for d in range(3):
        x_out[row, d] = x[s, d]


@cuda.jit
def md_arena_build_neighbors(x, n_own, rows, bx, by, bz, nx, ny, nz, hx, hy, hz, ox0, oxn, oy0,
                             oyn, oz0, ozn, nslab, key_of, cell_start, gid, cutsq, nl, pitch, cap,
                             cnt, worst, x0):
    i = cuda.grid(1)
    if i >= n_own:
        return
    ncells = nx * ny * nz
    key = key_of[i]
    slab = key // ncells
    c = key - slab * ncells
    own_base = slab * ncells
    ghost_base = (nslab + slab) * ncells
    cx = c % nx
    cy = (c // nx) % ny
    cz = c // (nx * ny)
    xi = np.float64(x[i, 0])
    yi = np.float64(x[i, 1])
    zi = np.float64(x[i, 2])
    x0[i, 0] = xi
    x0[i, 1] = yi
    x0[i, 2] = zi
    prune = mul(cutsq, 1.0 + 1e-9) + 1e-12
    k = 0
    for a in range(ozn):
        offz = oz0 + a
        dz2 = 0.0 if oz0 == 0 else _face_dist2(zi, cz, offz, hz)
        if dz2 > prune:
            continue
        qz = _wrap_cell(cz + offz, nz)
        for b in range(oyn):
            offy = oy0 + b
            dyz2 = dz2 + (0.0 if oy0 == 0 else _face_dist2(yi, cy, offy, hy))
            if dyz2 > prune:
                continue
            row = (qz * ny + _wrap_cell(cy + offy, ny)) * nx
            for e in range(oxn):
                offx = ox0 + e
                if dyz2 + (0.0 if ox0 == 0 else _face_dist2(xi, cx, offx, hx)) > prune:
                    continue
                q = row + _wrap_cell(cx + offx, nx)
                p = cell_start[own_base + q]
                p1 = cell_start[own_base + q + 1]
                h = min(cell_start[ghost_base + q], rows)
                h1 = min(cell_start[ghost_base + q + 1], rows)
                while p < p1 or h < h1:  # the slab's owned and ghost runs merged by gid
                    if h >= h1 or (p < p1 and gid[p] < gid[h]):
                        j = p
                        p += 1
                    else:
                        j = h
                        h += 1
                    if j == i:
                        continue
                    dx = _min_image(xi - np.float64(x[j, 0]), bx)
                    dy = _min_image(yi - np.float64(x[j, 1]), by)
                    dz = _min_image(zi - np.float64(x[j, 2]), bz)
                    if _dist2(dx, dy, dz) < cutsq:
                        if k < cap:
                            nl[k, i] = j
                        k += 1
    cnt[i] = k
    if k > cap:
        cuda.atomic.max(worst, 0, np.int32(k))


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


@cuda.jit
def md_lj_forces_typed(x, typ, n_own, row0, nl, pitch, cnt, bx, by, bz, table, ntypes, shift,
                       f, pe, vir, flags, tick):
    i = row0 + cuda.grid(1)
    if i >= n_own or _halted(flags[0], tick, True):
        return
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
        j, t = _neighbour(nl[k, i], shift, typ)
        p = row + t
        rcsq = table[p, 0]
        dx = _min_image(xi - np.float64(x[j, 0]), bx)
        dy = _min_image(yi - np.float64(x[j, 1]), by)
        dz = _min_image(zi - np.float64(x[j, 2]), bz)
        rsq = _dist2(dx, dy, dz)
        inside = rsq < rcsq
        r2inv = 1.0 / rsq
        sr2 = mul(table[p, 3], r2inv)
        sr6 = mul(mul(sr2, sr2), sr2)
        fpair = mul(mul(mul(table[p, 2], sr6), mul(2.0, sr6) - 1.0), r2inv) if inside else 0.0
        fx += mul(dx, fpair)
        fy += mul(dy, fpair)
        fz += mul(dz, fpair)
        e += mul(mul(table[p, 1], sr6), sr6 - 1.0) - table[p, 4] if inside else 0.0
        w += mul(rsq, fpair)
    f[i, 0] = fx
    f[i, 1] = fy
    f[i, 2] = fz
    pe[i] = mul(0.5, e)
    vir[i] = mul(0.5, w)


@cuda.jit
def md_kick_typed(v, f, typ, n, table, flags, tick):
    i = cuda.grid(1)
    if i >= n or _halted(flags[0], tick, False):
        return
    dtf = table[typ[i]]
    for d in range(3):
        v[i, d] = np.float64(v[i, d]) + mul(dtf, np.float64(f[i, d]))


@cuda.jit
def md_lj_forces_fshift(x, typ, n_own, row0, nl, pitch, cnt, bx, by, bz, table, ntypes, shift,
                        f, pe, vir, flags, tick):
    """md_lj_forces_typed with the force shifted to zero at the cutoff (the CPU's
    ``_lj_pair_fshift``; table rows: rc^2, 4 eps, 24 eps, sigma^2, e(rc), f(rc), rc)."""
    i = row0 + cuda.grid(1)
    if i >= n_own or _halted(flags[0], tick, True):
        return
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
        j, t = _neighbour(nl[k, i], shift, typ)
        p = row + t
        dx = _min_image(xi - np.float64(x[j, 0]), bx)
        dy = _min_image(yi - np.float64(x[j, 1]), by)
        dz = _min_image(zi - np.float64(x[j, 2]), bz)
        rsq = _dist2(dx, dy, dz)
        inside = rsq < table[p, 0]
        r2inv = 1.0 / rsq
        sr2 = mul(table[p, 3], r2inv)
        sr6 = mul(mul(sr2, sr2), sr2)
        r = math.sqrt(rsq)
        fshift = table[p, 5]
        fpair = (mul(mul(mul(table[p, 2], sr6), mul(2.0, sr6) - 1.0), r2inv) - fshift / r
                 if inside else 0.0)
        fx += mul(dx, fpair)
        fy += mul(dy, fpair)
        fz += mul(dz, fpair)
        e += (mul(mul(table[p, 1], sr6), sr6 - 1.0) - table[p, 4]
              + mul(r - table[p, 6], fshift) if inside else 0.0)
        w += mul(rsq, fpair)
    f[i, 0] = fx
    f[i, 1] = fy
    f[i, 2] = fz
    pe[i] = mul(0.5, e)
    vir[i] = mul(0.5, w)


@cuda.jit
def md_row_types(gid, n, types_by_id, typ):
    r = cuda.grid(1)
    if r >= n:
        return
    typ[r] = types_by_id[gid[r]]


@cuda.jit
def md_pack_types(nl, pitch, cnt, n_own, typ, shift):
    i = cuda.grid(1)
    if i >= n_own:
        return
    for k in range(cnt[i]):
        j = nl[k, i]
        nl[k, i] = j | (typ[j] << shift)


@cuda.jit
def _zero_fill(arr):
    i = cuda.grid(1)
    if i < arr.shape[0]:
        arr[i] = 0


#: kernel name (as in md_lj.cu) -> kernel
_KERNELS = {**{name: globals()[name] for name in (*FLOAT_KERNELS, *INDEX_KERNELS,
                                                  *ARENA_FLOAT_KERNELS, *ARENA_INDEX_KERNELS)},
            **RANK_KERNELS}


def _configure(name: str, grid: int, block: int) -> Any:
    with warnings.catch_warnings():  # small launches (scan, tiny test systems) are deliberate
        warnings.filterwarnings("ignore", message="Grid size .* under-utilization")
        return _KERNELS[name][grid, block]


# A configured launch is reusable on a GPU; the simulator's kernel[grid, block] reconfigures
# and returns the kernel object itself, so there every launch configures afresh.
_configured = _configure if SIMULATOR else functools.cache(_configure)


class NumbaMDKernels(DeviceMDKernels):
    """MD kernels on Numba device arrays of one device (or the simulator)."""

    # the simulator runs one Python thread per CUDA thread: small blocks keep tiny tests quick
    block = 32 if SIMULATOR else DeviceMDKernels.block
    #: kernels/md_ranks.cuh's twins are in md_ranks.py: under MPI, rebuilds stay on the device
    rank_slabs = True

    def __init__(self, activate: Callable[[], ContextManager[Any]]) -> None:
        self._activate = activate
        self._host_buffers: dict[tuple[int, str], np.ndarray] = {}
        super().__init__()

    def _read_small(self, arr: Any) -> np.ndarray:
        key = (arr.size, arr.dtype.str)
        buf = self._host_buffers.get(key)
        with self._activate():
            if buf is None:
                buf = self._host_buffers[key] = cuda.pinned_array(arr.shape, arr.dtype)
            arr.copy_to_host(buf)  # synchronous on the default stream
        return buf

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.to_device(np.zeros(shape, dtype=dtype))

    def to_device(self, host: np.ndarray) -> Any:
        with self._activate():
            return cuda.to_device(np.ascontiguousarray(host))

    def to_host(self, arr: Any) -> np.ndarray:
        if isinstance(arr, np.ndarray):
            return arr
        with self._activate():
            return arr.copy_to_host()

    def _zero(self, arr: Any) -> None:
        n = arr.shape[0]
        with self._activate():
            _zero_fill[self._grid(n), self.block](arr)

    def synchronize(self) -> None:
        with self._activate():
            cuda.synchronize()

    # --- ghost rows between devices and processes (synchronous copies) ----------------------
    def host_buffer(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        with self._activate():
            return cuda.pinned_array(shape, dtype)

    def download_rows(self, src, m: int, out: np.ndarray) -> np.ndarray:
        with self._activate():
            if m:
                src[:m].copy_to_host(out[:m])  # default stream: after the queued kernels
            else:
                cuda.synchronize()
        return out[:m]

    def upload_rows(self, host: np.ndarray, dst, row0: int, staging: Any = None) -> None:
        # synchronous on the default stream: ``staging`` is not needed to keep host alive
        m = int(host.shape[0])
        if m:
            with self._activate():
                dst[row0:row0 + m].copy_to_device(np.ascontiguousarray(host, dtype=dst.dtype))

    def _launch(self, name: str, dtype: Any, threads: int, *args: Any) -> None:
        with self._activate():
            _configured(name, self._grid(threads), self.block)(*args)

    def rank_pack(self, x, rows, trailer: int, buf) -> None:
        # the trailer row's flags are written through an int32 view of the pack
        m = int(rows.shape[0])
        with self._activate():
            words = buf.view(np.int32)
        self._launch("md_rank_pack", x.dtype, m + 1, x, rows, np.int32(m), self._flags,
                     np.int32(trailer), buf, words)

    def rank_land(self, src, idx, dst) -> None:
        # the trailer row's tick is read through an int32 view of the pack
        m = int(idx.shape[0])
        with self._activate():
            words = src.view(np.int32)
        self._launch("md_rank_land", src.dtype, m + 1, src, idx, np.int32(m), self._flags, dst,
                     words)
