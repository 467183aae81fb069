"""Cell, scan, sort and row-movement kernels in Numba CUDA: ``kernels/md_lj.cu``'s, kernel for
kernel. The neighbour-list build itself walks pairs and is in :mod:`md_pairs`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from simsplit.backends.numba_cuda.md_device import global_cell


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


#: kernel name (as in md_lj.cu) -> kernel
LIST_KERNELS = {name: globals()[name] for name in (
    "md_gather_rows", "md_cell_count", "md_scan_chunks", "md_scan_serial", "md_scan_inplace",
    "md_scan_write", "md_cell_scatter", "md_cell_sort", "md_permute", "md_row_types",
    "md_pack_types")}
