"""The kernels that walk atom pairs in Numba CUDA, with their pair geometry: neighbour-list builds
(one slab and the arena's) and Lennard-Jones forces (plain, typed, force-shifted), as in
``kernels/md_lj.cu`` and ``kernels/md_arena.cuh``, kernel for kernel.

Products go through ``md_device.mul`` (no fused multiply-add; see :mod:`md_device`). The
geometry functions live here, not in md_device, because the CUDA simulator swaps a module's
globals on every call of a device function from another module: once per pair, that made the
simulator tests 1.7 times slower.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from simsplit.backends.numba_cuda.md_device import _halted, mul


@cuda.jit(device=True)
def _min_image(dx, length):
    half = mul(0.5, length)
    if dx > half:
        return dx - length
    if dx < -half:
        return dx + length
    return dx


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
def _neighbour(entry, shift, typ):
    """(row, type) of a typed list entry (kernels/md_lj.cu's neighbour_of)."""
    if shift:
        return entry & ((1 << shift) - 1), entry >> shift
    return entry, typ[entry]


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
    cnt[i] = min(k, cap)  # as md_arena.cuh: an overflowed row keeps the entries it holds
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


#: kernel name (as in md_lj.cu and md_arena.cuh) -> kernel
PAIR_KERNELS = {name: globals()[name] for name in (
    "md_build_neighbors", "md_arena_build_neighbors", "md_lj_forces", "md_lj_forces_typed",
    "md_lj_forces_fshift")}
