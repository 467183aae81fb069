"""Numba CPU kernels for the Lennard-Jones forces, per-atom energy and virial of a slab's owned
atoms from their full lists: one atom type, several types (a table per type pair), and
force-shifted.

Same conventions as :mod:`.md`: local rows, minimum image, no ``fastmath``; each atom's sums
run in its list's order. Runs take the staged kernels (gather, vectorised pair terms, sums:
``*_parallel`` over threads, ``*_staged`` on one); the one-loop ``*_reference`` kernels are
what the tests hold them to, bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import get_thread_id, njit, prange

from simsplit.backends.cpu import md
from simsplit.backends.cpu.md import _ROWS, _min_image, _wrap


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


@njit(cache=True, inline="always")
def _store_row(i, fx, fy, fz, e, w, f, pe, vir):
    """Row ``i``'s force, half its pair energy and half its virial sum."""
    f[i, 0] = fx
    f[i, 1] = fy
    f[i, 2] = fz
    pe[i] = 0.5 * e
    vir[i] = 0.5 * w


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
    _store_row(i, fx, fy, fz, e, w, f, pe, vir)


#: pair-term scratch rows per thread: the list's differences, then each pair's terms
_SCRATCH = 5


@njit(cache=True, inline="always")
def _wrap3(dx, dy, dz, lx, ly, lz, hx, hy, hz):
    """:func:`_wrap` of a difference vector."""
    return _wrap(dx, lx, hx), _wrap(dy, ly, hy), _wrap(dz, lz, hz)


@njit(cache=True, inline="always")
def _stage(t, k, dx, dy, dz, rsq, fpair, e, sdx, sdy, sdz, se, sw):
    """A pair's terms into slot ``k`` of the thread's scratch rows ``t``."""
    se[t, k] = e
    sw[t, k] = rsq * fpair
    sdx[t, k] = dx * fpair
    sdy[t, k] = dy * fpair
    sdz[t, k] = dz * fpair


@njit(cache=True, inline="always")
def _sum_terms(i, t, m, sdx, sdy, sdz, se, sw, f, pe, vir):
    """Row ``i``'s force, half energy and half virial: the ``m`` pair terms of the thread's
    scratch rows ``t`` summed in list order."""
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
    _store_row(i, fx, fy, fz, e, w, f, pe, vir)


@njit(cache=True, inline="always")
def _gather(i, t, x, nl, cnt, sdx, sdy, sdz):
    """Row ``i``'s coordinate differences to its ``cnt[i]`` listed neighbours (not yet
    wrapped) into the thread's scratch rows ``t``; returns the count (unsigned)."""
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
    return m


@njit(cache=True, inline="always")
def _lj_rows(i, hi, t, x, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir, sdx, sdy,
             sdz, se, sw):
    """:func:`lj_forces_parallel`'s work on rows ``[i, hi)`` with the scratch rows ``t``."""
    lx, ly, lz = box[0], box[1], box[2]
    hx, hy, hz = 0.5 * lx, 0.5 * ly, 0.5 * lz
    while i < hi:
        m = _gather(i, t, x, nl, cnt, sdx, sdy, sdz)
        k = np.uint64(0)
        while k < m:  # _min_image and _lj_pair, as selects
            dx, dy, dz = _wrap3(sdx[t, k], sdy[t, k], sdz[t, k], lx, ly, lz, hx, hy, hz)
            rsq, fpair, e = _lj_pair(dx, dy, dz, rcsq, eps4, eps24, sigsq, eshift)
            _stage(t, k, dx, dy, dz, rsq, fpair, e, sdx, sdy, sdz, se, sw)
            k += np.uint64(1)
        _sum_terms(i, t, m, sdx, sdy, sdz, se, sw, f, pe, vir)
        i += 1


@njit(parallel=True, cache=True, error_model="numpy", boundscheck=False)
def lj_forces_parallel(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir,
                       sdx, sdy, sdz, se, sw):
    """Truncated Lennard-Jones forces on owned atoms from a full list, in list order.

    ``pe[i]`` and ``vir[i]`` get half of each pair's energy and of ``r . f`` so their sums
    over all atoms are the total potential energy and the virial ``W = sum_pairs r . f``.

    Each atom in three loops over its list, on the thread's scratch rows ``s*[thread]``: the
    coordinate differences (the gather), every pair's terms (no dependence between pairs:
    LLVM vectorises it), then the five sums in list order. Every operation is
    :func:`_lj_row`'s, in its order, so the bits are its bits (:func:`lj_forces_reference`).
    The loops are written out in one inlined function (:func:`_lj_rows`, also
    :func:`lj_forces_staged`'s) with unsigned ``while`` counters stepped by a literal: an
    array passed to a call that is not inlined, a ``for`` iterator, or a step variable set
    outside the prange (3x slower, measured) keep LLVM from vectorising, and negative-index
    wrapping would put a select on every load.
    """
    for b in prange((n_own + _ROWS - 1) // _ROWS):
        _lj_rows(b * _ROWS, min((b + 1) * _ROWS, n_own), get_thread_id(), x, nl, cnt, box, rcsq,
                 eps4, eps24, sigsq, eshift, f, pe, vir, sdx, sdy, sdz, se, sw)


@njit(cache=True, error_model="numpy", boundscheck=False)
def lj_forces_staged(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir,
                     sdx, sdy, sdz, se, sw):
    """:func:`lj_forces_parallel` on one thread (scratch rows 0; no thread wake-up)."""
    _lj_rows(0, n_own, 0, x, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir, sdx,
             sdy, sdz, se, sw)


def pair_scratch(capacity: int, threads: int) -> tuple[np.ndarray, ...]:
    """Scratch rows for the staged kernels: one per thread and term, a list long."""
    return tuple(np.empty((threads, capacity)) for _ in range(_SCRATCH))


@njit(cache=True)
def lj_forces_reference(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir):
    """One atom at a time in one loop: the reference whose bits the staged kernels give
    (tests compare them)."""
    for i in range(n_own):
        _lj_row(i, x, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir)


@njit(cache=True)
def _lj_row_typed(i, x, typ, nl, cnt, box, table, ntypes, shifted, f, pe, vir):
    """:func:`_lj_row` with the pair's coefficients from ``table[typ[i] * ntypes + typ[j]]``
    (rc^2, 4 eps, 24 eps, sigma^2, energy shift; ``shifted``: then e(rc), f(rc), rc, and the
    force shifted to zero at the cutoff, :func:`_lj_pair_fshift`)."""
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
        if shifted:
            rsq, fpair, ep = _lj_pair_fshift(dx, dy, dz, table[p, 0], table[p, 1],
                                             table[p, 2], table[p, 3], table[p, 4],
                                             table[p, 5], table[p, 6])
        else:
            rsq, fpair, ep = _lj_pair(dx, dy, dz, table[p, 0], table[p, 1], table[p, 2],
                                      table[p, 3], table[p, 4])
        fx += dx * fpair
        fy += dy * fpair
        fz += dz * fpair
        e += ep
        w += rsq * fpair
    _store_row(i, fx, fy, fz, e, w, f, pe, vir)


@njit(cache=True, inline="always")
def _lj_typed_rows(i, hi, t, x, typ, nl, cnt, box, table, ntypes, shifted, f, pe, vir, sdx, sdy,
                   sdz, se, sw, pair):
    """:func:`lj_typed_forces_parallel`'s work on rows ``[i, hi)`` with the scratch rows
    ``t``."""
    lx, ly, lz = box[0], box[1], box[2]
    hx, hy, hz = 0.5 * lx, 0.5 * ly, 0.5 * lz
    while i < hi:
        m = _gather(i, t, x, nl, cnt, sdx, sdy, sdz)
        row = typ[i] * ntypes
        k = np.uint64(0)
        while k < m:
            pair[t, k] = row + typ[nl[i, k]]
            k += np.uint64(1)
        # one loop per kind: a branch inside stops the vectoriser; two types select their
        # coefficients (a gather per coefficient and pair costs a third of the time)
        k = np.uint64(0)
        if ntypes == 2:
            o = row + 1
            a0, a1, a2, a3, a4 = table[row, 0], table[row, 1], table[row, 2], \
                table[row, 3], table[row, 4]
            b0, b1, b2, b3, b4 = table[o, 0], table[o, 1], table[o, 2], table[o, 3], \
                table[o, 4]
            if shifted:
                a5, a6, b5, b6 = table[row, 5], table[row, 6], table[o, 5], table[o, 6]
                while k < m:
                    u = pair[t, k] == row
                    dx, dy, dz = _wrap3(sdx[t, k], sdy[t, k], sdz[t, k], lx, ly, lz, hx,
                                        hy, hz)
                    rsq, fpair, e = _lj_pair_fshift(
                        dx, dy, dz, a0 if u else b0, a1 if u else b1, a2 if u else b2,
                        a3 if u else b3, a4 if u else b4, a5 if u else b5, a6 if u else b6)
                    _stage(t, k, dx, dy, dz, rsq, fpair, e, sdx, sdy, sdz, se, sw)
                    k += np.uint64(1)
            else:
                while k < m:
                    u = pair[t, k] == row
                    dx, dy, dz = _wrap3(sdx[t, k], sdy[t, k], sdz[t, k], lx, ly, lz, hx,
                                        hy, hz)
                    rsq, fpair, e = _lj_pair(dx, dy, dz, a0 if u else b0, a1 if u else b1,
                                             a2 if u else b2, a3 if u else b3,
                                             a4 if u else b4)
                    _stage(t, k, dx, dy, dz, rsq, fpair, e, sdx, sdy, sdz, se, sw)
                    k += np.uint64(1)
        elif shifted:
            while k < m:
                p = pair[t, k]
                dx, dy, dz = _wrap3(sdx[t, k], sdy[t, k], sdz[t, k], lx, ly, lz, hx, hy, hz)
                rsq, fpair, e = _lj_pair_fshift(dx, dy, dz, table[p, 0], table[p, 1],
                                                table[p, 2], table[p, 3], table[p, 4],
                                                table[p, 5], table[p, 6])
                _stage(t, k, dx, dy, dz, rsq, fpair, e, sdx, sdy, sdz, se, sw)
                k += np.uint64(1)
        else:
            while k < m:
                p = pair[t, k]
                dx, dy, dz = _wrap3(sdx[t, k], sdy[t, k], sdz[t, k], lx, ly, lz, hx, hy, hz)
                rsq, fpair, e = _lj_pair(dx, dy, dz, table[p, 0], table[p, 1], table[p, 2],
                                         table[p, 3], table[p, 4])
                _stage(t, k, dx, dy, dz, rsq, fpair, e, sdx, sdy, sdz, se, sw)
                k += np.uint64(1)
        _sum_terms(i, t, m, sdx, sdy, sdz, se, sw, f, pe, vir)
        i += 1


@njit(parallel=True, cache=True, error_model="numpy", boundscheck=False)
def lj_typed_forces_parallel(x, typ, n_own, nl, cnt, box, table, ntypes, shifted, f, pe, vir,
                             sdx, sdy, sdz, se, sw, pair):
    """:func:`_lj_row_typed` for every owned atom, staged as :func:`lj_forces_parallel`: the
    gather also writes each pair's table row into the thread's ``pair`` row; the pair terms
    (:func:`_lj_pair`, or :func:`_lj_pair_fshift` where ``shifted``) then vectorise, with
    their coefficients chosen by a select between the atom's two table rows where there are
    two types, else gathered by index. Same operations in the same order: the bits of
    :func:`_lj_row_typed`."""
    for b in prange((n_own + _ROWS - 1) // _ROWS):
        _lj_typed_rows(b * _ROWS, min((b + 1) * _ROWS, n_own), get_thread_id(), x, typ, nl, cnt,
                       box, table, ntypes, shifted, f, pe, vir, sdx, sdy, sdz, se, sw, pair)


@njit(cache=True, error_model="numpy", boundscheck=False)
def lj_typed_forces_staged(x, typ, n_own, nl, cnt, box, table, ntypes, shifted, f, pe, vir,
                           sdx, sdy, sdz, se, sw, pair):
    """:func:`lj_typed_forces_parallel` on one thread (scratch rows 0; no thread wake-up)."""
    _lj_typed_rows(0, n_own, 0, x, typ, nl, cnt, box, table, ntypes, shifted, f, pe, vir, sdx,
                   sdy, sdz, se, sw, pair)


@njit(cache=True)
def lj_typed_forces_reference(x, typ, n_own, nl, cnt, box, table, ntypes, shifted, f, pe, vir):
    """:func:`_lj_row_typed` one atom at a time: the reference of the staged typed kernels."""
    for i in range(n_own):
        _lj_row_typed(i, x, typ, nl, cnt, box, table, ntypes, shifted, f, pe, vir)


def _typed_forces(x, typ, n_own, nl, cnt, box, table, ntypes, shifted, f, pe, vir) -> None:
    threaded, threads = md.threading_for(n_own)
    kernel = lj_typed_forces_parallel if threaded else lj_typed_forces_staged
    kernel(x, typ, n_own, nl, cnt, box, table, ntypes, shifted, f, pe, vir,
           *pair_scratch(nl.shape[1], threads), np.empty((threads, nl.shape[1]), np.int64))


def lj_forces_typed(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir) -> None:
    """:func:`lj_forces` for several atom types (``typ`` per row, ``table`` per type pair)."""
    _typed_forces(x, typ, n_own, nl, cnt, box, table, ntypes, False, f, pe, vir)


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


def lj_forces_fshift(x, typ, n_own, nl, cnt, box, table, ntypes, f, pe, vir) -> None:
    """:func:`lj_forces_typed` with the force shifted to zero at each pair's cutoff
    (``table``: :meth:`simsplit.md.pair_table.PairTable.force_shift_table`)."""
    _typed_forces(x, typ, n_own, nl, cnt, box, table, ntypes, True, f, pe, vir)


def lj_forces(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir) -> None:
    """Lennard-Jones forces, per-atom energy and virial of the owned atoms."""
    threaded, threads = md.threading_for(n_own)
    kernel = lj_forces_parallel if threaded else lj_forces_staged
    kernel(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir,
           *pair_scratch(nl.shape[1], threads))
