"""One slab per MPI rank in Numba CUDA: ``kernels/md_ranks.cuh`` kernel for kernel.

:class:`~simsplit.backends.cuda_c.md.DeviceMDKernels` launches them by name with the CuPy
backend's argument lists (its ``rank_*`` methods); positions are (rows, 3) arrays here.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from simsplit.backends.numba_cuda.md_device import global_cell, near_slab, slab_of


@cuda.jit
def md_rank_classify(x, n, edges, nslab, me, lo, hi, room, cursor, kept, to_lo, to_hi, err):
    i = cuda.grid(1)
    if i >= n:
        return
    k = slab_of(np.float64(x[i, 2]), edges, nslab)
    if k == me:
        kept[cuda.atomic.add(cursor, 0, np.int32(1))] = i
    elif k == lo:
        s = cuda.atomic.add(cursor, 1, np.int32(1))
        if s < room:
            to_lo[s] = i
    elif k == hi:
        s = cuda.atomic.add(cursor, 2, np.int32(1))
        if s < room:
            to_hi[s] = i
    else:
        err[0] = 1
        err[1] = i


@cuda.jit
def md_rank_gather(idx, m, x, v, img, gid, motion, x_out, v_out, img_out, gid_out):
    r = cuda.grid(1)
    if r >= m:
        return
    s = idx[r]
    gid_out[r] = gid[s]
    for d in range(3):
        x_out[r, d] = x[s, d]
    if motion != 0:
        for d in range(3):
            v_out[r, d] = v[s, d]
            img_out[r, d] = img[s, d]


@cuda.jit
def md_rank_gather_message(mig, n_mig, near, n_near, x, v, img, gid, mx, mv, mimg, mgid, gx,
                           ggid):
    r = cuda.grid(1)
    if r < n_mig:
        s = mig[r]
        mgid[r] = gid[s]
        for d in range(3):
            mx[r, d] = x[s, d]
            mv[r, d] = v[s, d]
            mimg[r, d] = img[s, d]
    if r < n_near:
        s = near[r]
        ggid[r] = gid[s]
        for d in range(3):
            gx[r, d] = x[s, d]


@cuda.jit
def md_rank_place_message(words, vals, o_mx, o_mv, o_mimg, o_mgid, n_mig, o_gx, o_ggid, n_near,
                          x, v, img, gid, at_mig, at_near):
    r = cuda.grid(1)
    if r < n_mig:
        o = at_mig + r
        gid[o] = words[o_mgid + r]
        for d in range(3):
            x[o, d] = vals[o_mx + 3 * r + d]
            v[o, d] = vals[o_mv + 3 * r + d]
            img[o, d] = words[o_mimg + 3 * r + d]
    if r < n_near:
        o = at_near + r
        gid[o] = words[o_ggid + r]
        for d in range(3):
            x[o, d] = vals[o_gx + 3 * r + d]


@cuda.jit
def md_rank_select(x, n, edges, lo, hi, lz, cut, room, cursor, to_lo, to_hi):
    i = cuda.grid(1)
    if i >= n:
        return
    z = np.float64(x[i, 2])
    if near_slab(z, edges, lo, lz, cut):
        s = cuda.atomic.add(cursor, 0, np.int32(1))
        if s < room:
            to_lo[s] = i
    if hi != lo and near_slab(z, edges, hi, lz, cut):
        s = cuda.atomic.add(cursor, 1, np.int32(1))
        if s < room:
            to_hi[s] = i


@cuda.jit(device=True)
def _push(cursor, which, room, near_room, lists, i):
    s = cuda.atomic.add(cursor, 1 + which, np.int32(1))
    cap = room if which < 3 else near_room
    base = which * room if which < 3 else 3 * room + (which - 3) * near_room
    if s < cap:
        lists[base + s] = i


@cuda.jit
def md_rank_route(x, n, edges, nslab, me, lo, hi, lz, cut, room, near_room, cursor, kept,
                  lists, err):
    i = cuda.grid(1)
    if i >= n:
        return
    z = np.float64(x[i, 2])
    k = slab_of(z, edges, nslab)
    if k == me:
        kept[cuda.atomic.add(cursor, 0, np.int32(1))] = i
        if near_slab(z, edges, lo, lz, cut):
            _push(cursor, 3, room, near_room, lists, i)
        if hi != lo and near_slab(z, edges, hi, lz, cut):
            _push(cursor, 4, room, near_room, lists, i)
    elif k == lo or k == hi:
        _push(cursor, 0 if k == lo else 1, room, near_room, lists, i)
        if near_slab(z, edges, me, lz, cut):
            _push(cursor, 2, room, near_room, lists, i)
        if k == lo:
            beyond = nslab - 1 if lo == 0 else lo - 1
        else:
            beyond = 0 if hi == nslab - 1 else hi + 1
        if beyond != me and near_slab(z, edges, beyond, lz, cut):
            if beyond == lo or beyond == hi:
                _push(cursor, 3 if beyond == lo else 4, room, near_room, lists, i)
                cuda.atomic.add(err, 3, np.int32(1))
            else:
                err[2] = 1
    else:
        err[0] = 1
        err[1] = i


@cuda.jit
def md_rank_mark(x, n_own, rows, edges, nslab, link0, link1, nlinks, lz, cut, flags):
    t = cuda.grid(1)
    if t >= nlinks * rows:
        return
    r = t % rows
    s = link0 if t < rows else link1
    z = np.float64(x[r, 2])
    if r < n_own:
        flags[t] = 1 if near_slab(z, edges, s, lz, cut) else 0
    else:
        flags[t] = 1 if slab_of(z, edges, nslab) == s else 0


@cuda.jit
def md_rank_compact(flags, start, n_own, rows, nlinks, out, bounds):
    t = cuda.grid(1)
    if t < nlinks * rows and flags[t] != 0:
        out[start[t]] = t % rows
    if t < 2 * nlinks + 1:
        bounds[t] = start[(t // 2) * rows + (t % 2) * n_own]


@cuda.jit
def md_rank_keys(x, n_own, rows, bx, by, bz, nx, ny, nz, keys, counts):
    i = cuda.grid(1)
    if i >= rows:
        return
    key = (0 if i < n_own else nx * ny * nz) + global_cell(x, i, bx, by, bz, nx, ny, nz)
    keys[3 * i] = key
    keys[3 * i + 1] = -1
    keys[3 * i + 2] = -1
    cuda.atomic.add(counts, key, np.int32(1))


@cuda.jit
def md_rank_ghost_rows(n_own, g, entry_row, x, gid, x_out, gid_out, new_of_old):
    r = cuda.grid(1)
    if r >= g:
        return
    row = n_own + r
    s = entry_row[row]
    new_of_old[s] = row
    gid_out[row] = gid[s]
    for d in range(3):
        x_out[row, d] = x[s, d]


@cuda.jit
def md_rank_compose(idx, use_idx, base, m, mapping, out):
    j = cuda.grid(1)
    if j >= m:
        return
    out[j] = mapping[idx[j]] if use_idx != 0 else mapping[base + j]


@cuda.jit
def md_scatter_rows(src, idx, m, dst):
    r = cuda.grid(1)
    if r >= m:
        return
    s = idx[r]
    for d in range(3):
        dst[s, d] = src[r, d]


@cuda.jit
def md_rank_pack(x, idx, m, flags, trailer, buf, words):
    """``words``: the int32 view of ``buf``'s rows (row m's first two words hold the flags)."""
    r = cuda.grid(1)
    if r < m:
        s = idx[r]
        for d in range(3):
            buf[r, d] = x[s, d]
    elif r == m and trailer != 0:
        words[m, 0] = flags[0]
        words[m, 1] = flags[1]
        if trailer == 2:
            flags[2] = flags[0]  # the step's own rebuild flag, for its interior forces
            flags[0] = 0
            flags[1] = 0


@cuda.jit
def md_rank_land(src, idx, m, flags, dst, words):
    """``words``: the int32 view of ``src``'s rows (row m's first word: the neighbour's
    rebuild tick, merged into ``flags`` as in md_ranks.cuh)."""
    r = cuda.grid(1)
    if r < m:
        s = idx[r]
        for d in range(3):
            dst[s, d] = src[r, d]
    elif r == m:
        at = words[m, 0]
        if at != 0 and (flags[0] == 0 or at < flags[0]):
            flags[0] = at


#: kernel name (as in md_ranks.cuh) -> kernel
RANK_KERNELS = {name: globals()[name] for name in (
    "md_rank_classify", "md_rank_route", "md_rank_mark", "md_rank_compact",
    "md_rank_gather", "md_rank_gather_message", "md_rank_place_message", "md_rank_select",
    "md_rank_keys",
    "md_rank_ghost_rows", "md_rank_compose", "md_scatter_rows", "md_rank_pack",
    "md_rank_land")}
