"""Numba CPU kernels that bin a slab's atoms into cells and build the full Verlet list of each
owned atom in the canonical order (:func:`build_neighbors`), the same on every split.

Same conventions as :mod:`.md`: local rows, minimum image, no ``fastmath``.
"""

from __future__ import annotations

import numpy as np
from numba import get_thread_id, njit, prange

from simsplit.backends.cpu import md
from simsplit.backends.cpu.md import _min_image, _wrap


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


@njit(cache=True, inline="always")
def _row_origin(i, x, cell_of, nx, ny):
    """Atom ``i``'s cell coordinates and its position in float64."""
    c = cell_of[i]
    return (c % nx, (c // nx) % ny, c // (nx * ny), np.float64(x[i, 0]), np.float64(x[i, 1]),
            np.float64(x[i, 2]))


@njit(cache=True)
def _neighbor_row(i, x, box, ncell, cell_of, cell_start, cell_atoms, offx, offy, offz, cutsq,
                  nl, cnt, typ, pair_cutsq):
    """List of atom ``i`` into ``nl[i]`` in canonical order (see :func:`build_neighbors`)."""
    if pair_cutsq is None:  # pruned at compile time
        lim0 = lim1 = cutsq
    else:
        lim0, lim1 = pair_cutsq[2 * typ[i]], pair_cutsq[2 * typ[i] + 1]
    cap = nl.shape[1]
    nx, ny, nz = ncell[0], ncell[1], ncell[2]
    cx, cy, cz, xi, yi, zi = _row_origin(i, x, cell_of, nx, ny)
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
                    lim = lim0
                    if pair_cutsq is not None and typ[j] != 0:
                        lim = lim1
                    if dx * dx + dy * dy + dz * dz < lim:
                        if k < cap:
                            nl[i, k] = j
                        k += 1
    cnt[i] = k
    return k


@njit(cache=True)
def _neighbor_block(lo, hi, x, box, ncell, cell_of, cell_start, cell_atoms, offx, offy, offz,
                    cutsq, nl, cnt, typ, pair_cutsq):
    worst = 0
    for i in range(lo, hi):
        k = _neighbor_row(i, x, box, ncell, cell_of, cell_start, cell_atoms, offx, offy, offz,
                          cutsq, nl, cnt, typ, pair_cutsq)
        worst = max(worst, k)
    return worst


@njit(cache=True, inline="always")
def _dist2(p, xi, yi, zi, sx, sy, sz, lx, ly, lz, gx, gy, gz):
    """Squared minimum-image distance from (xi, yi, zi) to candidate ``p`` of the sorted
    coordinates."""
    dx = _wrap(xi - sx[p], lx, gx)
    dy = _wrap(yi - sy[p], ly, gy)
    dz = _wrap(zi - sz[p], lz, gz)
    return dx * dx + dy * dy + dz * dz


@njit(cache=True, inline="always")
def _near(t, i, p0, m, xi, yi, zi, sx, sy, sz, cell_atoms, lx, ly, lz, gx, gy, gz, cutsq, near):
    """``near[t, u]``: candidate ``p0 + u`` (``u < m``) is within ``cutsq`` of atom ``i``
    (minimum image) and not ``i`` itself. Vectorises."""
    u = np.uint64(0)
    while u < m:
        p = p0 + u
        near[t, u] = (_dist2(p, xi, yi, zi, sx, sy, sz, lx, ly, lz, gx, gy, gz) < cutsq) & (
            cell_atoms[p] != i)
        u += np.uint64(1)


@njit(cache=True, inline="always")
def _near_typed(t, i, p0, m, xi, yi, zi, sx, sy, sz, st, cell_atoms, lx, ly, lz, gx, gy, gz,
                lim0, lim1, near):
    """:func:`_near` against ``lim0`` for type 0 candidates (``st``), ``lim1`` for type 1.
    Plain lists compile without it (``st`` None): the type's load and select cost them 17 %
    where they ran it (measured)."""
    u = np.uint64(0)
    while u < m:
        p = p0 + u
        lim = lim1 if st[p] != 0 else lim0
        near[t, u] = (_dist2(p, xi, yi, zi, sx, sy, sz, lx, ly, lz, gx, gy, gz) < lim) & (
            cell_atoms[p] != i)
        u += np.uint64(1)


#: rows per work item of the parallel list build
_BLOCK = 256


#: candidates per pass of the parallel list build's distance test
_CHUNK = 256


@njit(cache=True, inline="always")
def _list_rows(i, hi, t, x, box, ncell, cell_of, cell_start, cell_atoms, offx, offy, offz,
               cutsq, nl, cnt, typ, pair_cutsq, sx, sy, sz, st, near, row):
    """:func:`build_neighbors_parallel`'s work on rows ``[i, hi)`` with the thread rows ``t``;
    returns the longest row."""
    cap = nl.shape[1]
    nx, ny, nz = ncell[0], ncell[1], ncell[2]
    lx, ly, lz = box[0], box[1], box[2]
    gx, gy, gz = 0.5 * lx, 0.5 * ly, 0.5 * lz
    hx, hy, hz = lx / nx, ly / ny, lz / nz
    prune = cutsq * (1.0 + 1e-9) + 1e-12
    full_x = offx[0] == 0
    full_y = offy[0] == 0
    full_z = offz[0] == 0
    worst = 0
    while i < hi:
        cx, cy, cz, xi, yi, zi = _row_origin(i, x, cell_of, nx, ny)
        lim0 = lim1 = cutsq
        if pair_cutsq is not None:
            lim0, lim1 = pair_cutsq[2 * typ[i]], pair_cutsq[2 * typ[i] + 1]
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
                                if st is not None:
                                    _near_typed(t, i, p0, m, xi, yi, zi, sx, sy, sz, st,
                                                cell_atoms, lx, ly, lz, gx, gy, gz, lim0,
                                                lim1, near)
                                else:
                                    _near(t, i, p0, m, xi, yi, zi, sx, sy, sz, cell_atoms,
                                          lx, ly, lz, gx, gy, gz, cutsq, near)
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


@njit(parallel=True, cache=True, error_model="numpy", boundscheck=False)
def build_neighbors_parallel(x, n_own, box, ncell, cell_of, cell_start, cell_atoms,
                             offx, offy, offz, cutsq, nl, cnt, typ, pair_cutsq, sx, sy, sz, st,
                             near, row):
    """Full Verlet list of each owned atom (pairs within ``sqrt(cutsq)``, or with two types
    within their own list cutoff: :func:`build_neighbors`), canonical order.

    ``nl`` has a fixed capacity per atom; rows that overflow are counted but not stored.
    Returns the largest count, so the caller can grow the capacity and rebuild.

    :func:`_neighbor_row`'s list, found without a branch per candidate: ``sx, sy, sz`` are the
    coordinates in ``cell_atoms`` order (float64) and ``st`` their types (None, as ``typ`` and
    ``pair_cutsq``, for lists within ``cutsq``: a variant compiled without the types), so the
    atoms of the stencil cells of one (z, y) row that follow each other in memory are tested
    as one run, ``_CHUNK`` at a time (the test vectorises into the thread's ``near`` row),
    then appended in order into its ``row`` (one slot over the capacity: the write needs no
    test). Same stencil, pruning, order and arithmetic as :func:`_neighbor_row`, so the same
    lists. Loops are unsigned ``while`` loops written out in one inlined function,
    :func:`_list_rows` (see :func:`.md_forces.lj_forces_parallel`).
    """
    worst = 0
    for blk in prange((n_own + _BLOCK - 1) // _BLOCK):
        worst = max(worst, _list_rows(
            blk * _BLOCK, min((blk + 1) * _BLOCK, n_own), get_thread_id(), x, box, ncell,
            cell_of, cell_start, cell_atoms, offx, offy, offz, cutsq, nl, cnt, typ, pair_cutsq,
            sx, sy, sz, st, near, row))
    return worst


@njit(cache=True, error_model="numpy", boundscheck=False)
def build_neighbors_staged(x, n_own, box, ncell, cell_of, cell_start, cell_atoms,
                           offx, offy, offz, cutsq, nl, cnt, typ, pair_cutsq, sx, sy, sz, st,
                           near, row):
    """:func:`build_neighbors_parallel` on one thread (thread rows 0; no thread wake-up)."""
    return _list_rows(0, n_own, 0, x, box, ncell, cell_of, cell_start, cell_atoms, offx, offy,
                      offz, cutsq, nl, cnt, typ, pair_cutsq, sx, sy, sz, st, near, row)


@njit(cache=True)
def build_neighbors_reference(x, n_own, box, ncell, cell_of, cell_start, cell_atoms,
                              offx, offy, offz, cutsq, nl, cnt, typ, pair_cutsq):
    """:func:`_neighbor_row` one atom at a time: the reference whose lists the staged builds
    give (tests compare them)."""
    return _neighbor_block(0, n_own, x, box, ncell, cell_of, cell_start, cell_atoms,
                           offx, offy, offz, cutsq, nl, cnt, typ, pair_cutsq)


def build_neighbors(x, n_own, box, ncell, cell_of, cell_start, cell_atoms,
                    offx, offy, offz, cutsq, nl, cnt, typ=None, pair_cutsq=None) -> int:
    """Full Verlet lists of the owned atoms in canonical order; returns the largest row count.

    Canonical order: the stencil cells in loop order (z outer, x inner, offsets ascending)
    around the atom's own cell of the global grid, and within a cell ascending global id (as
    :func:`bin_atoms` leaves them). A row holds exactly the atoms within the list cutoff, every
    one of which is local on every split, and a cell is a pure function of a coordinate, so
    the order does not depend on the split or on the row order in memory.

    Two atom types (``typ`` per local row, ``pair_cutsq`` the 4 squared list cutoffs
    (rc_ij + skin)^2): each pair within its own, as LAMMPS' per-type-pair lists and the device
    lists; a pair left out is beyond its cutoff until the next build, where its force and
    energy are +0.0, which leaves every sum's bits unchanged. Otherwise every pair within
    ``cutsq``.
    """
    if typ is None or pair_cutsq is None or len(pair_cutsq) != 4:
        typ = pair_cutsq = None
    else:
        pair_cutsq = np.asarray(pair_cutsq, np.float64)
    args = (x, n_own, box, ncell, cell_of, cell_start, cell_atoms, offx, offy, offz, cutsq, nl,
            cnt, typ, pair_cutsq)
    sorted_x = [np.ascontiguousarray(x[cell_atoms, d], dtype=np.float64) for d in range(3)]
    threaded, threads = md.threading_for(n_own)
    build = build_neighbors_parallel if threaded else build_neighbors_staged
    st = None if typ is None else typ[cell_atoms].astype(np.int8)
    return build(*args, *sorted_x, st, np.empty((threads, _CHUNK), np.int64),
                 np.empty((threads, nl.shape[1] + 1), nl.dtype))
