"""Several slabs in one arena in Numba CUDA: ``kernels/md_arena.cuh`` kernel for kernel (its
neighbour-list build walks pairs and is in :mod:`md_pairs`).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from simsplit.backends.numba_cuda.md_device import global_cell, near_slab, slab_of


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


#: kernel name (as in md_arena.cuh) -> kernel
ARENA_KERNELS = {name: globals()[name] for name in (
    "md_arena_classify", "md_arena_bounds", "md_arena_scatter", "md_arena_owned",
    "md_arena_ghosts")}
