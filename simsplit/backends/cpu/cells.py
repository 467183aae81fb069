"""A cell's populations as the CPU's scalar stream-collide kernels read and write them: stored
populations (``f[q, j, i]`` / ``f[q, k, j, i]`` in the shifted encoding of
:mod:`.storage_codec`) or neq16 records (:mod:`simsplit.numerics.neq_storage`).

A kernel gets records as a 1-tuple ``(rec,)`` of the 4D record array (one plane in 2D), so that
the type alone picks the access at compile time: every rule of the kernel (bounce-back, the lid,
inlets, outlets, free-slip, curved links) reads through :func:`load_2d` / :func:`load_3d`, which
rebuild f*_q of the source cell from its record, and writes through :func:`stage_2d` /
:func:`commit_2d` (2D) or :func:`commit_3d` (3D), which store the cell's record from its
post-collision populations. On records the arithmetic is float32 (the case checks refuse the
rest), so the weight ``wq`` a caller passes in the arithmetic type is not used there.

The launchers step records a chunk of planes at a time through the float32 kernels
(:mod:`.neq_chunks`: the same bits, faster); the records kernel cell by cell is the reference
(``SIMSPLIT_CPU_NEQ_PLANES=0``), and the chunks' quadratic links read two planes away through
:func:`load_2d` / :func:`load_3d` on the records.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from simsplit.backends.cpu import d2q9_collide as d2
from simsplit.backends.cpu import d3q19_collide as d3
from simsplit.backends.cpu.neq_codec import pull_cpu as pull
from simsplit.backends.cpu.neq_codec import store_cpu as store
from simsplit.backends.cpu.storage_codec import _decode, _encode

_CZ_2D = (0,) * len(d2._W)


def records_arg(rec: np.ndarray) -> tuple[np.ndarray]:
    """neq16 records ``(slots, [nz + 2,] ny + 2, nx + 2)`` as the scalar kernels take them:
    4D (2D records get one plane) in a 1-tuple."""
    return (rec[:, None] if rec.ndim == 3 else rec,)


def load_2d(f, q, j, i, wq):  # pragma: no cover - replaced by the overload in compiled code
    """f*_q of cell (j, i) in the arithmetic type of ``wq``."""
    raise NotImplementedError


def stage_2d(f_dst, out, j, i):  # pragma: no cover - replaced by the overload
    """(array, j, i) the D2Q9 collision writes cell (j, i)'s populations to: ``f_dst`` itself,
    or for records ``out`` ((9, 1, 1) float32) at (0, 0), stored by :func:`commit_2d`."""
    raise NotImplementedError


def commit_2d(f_dst, out, feq, j, i):  # pragma: no cover - replaced by the overload
    """Records: cell (j, i)'s record from ``out[:, 0, 0]`` (``feq``: scratch of 9); else none."""
    raise NotImplementedError


def load_3d(f, q, k, j, i, wq):  # pragma: no cover - replaced by the overload
    """f*_q of cell (k, j, i) in the arithmetic type of ``wq``."""
    raise NotImplementedError


def commit_3d(f_dst, post, feq, k, j, i):  # pragma: no cover - replaced by the overload
    """Cell (k, j, i)'s post-collision populations ``post`` into ``f_dst``: each encoded, or
    the cell's record (``feq``: scratch of 19)."""
    raise NotImplementedError


def _is_records(f) -> bool:
    return isinstance(f, types.BaseTuple)


_CX2, _CY2, _W2 = d2._CX, d2._CY, d2._W
_CX3, _CY3, _CZ3, _W3 = d3._CX, d3._CY, d3._CZ, d3._W


@overload(load_2d)
def _load_2d(f, q, j, i, wq):
    def rec(f, q, j, i, wq):
        return pull(f[0], q, 0, j, i, _CX2, _CY2, _CZ_2D, _W2)

    def pops(f, q, j, i, wq):
        return _decode(f[q, j, i], wq)
    return rec if _is_records(f) else pops


@overload(stage_2d)
def _stage_2d(f_dst, out, j, i):
    def rec(f_dst, out, j, i):
        return out, 0, 0

    def pops(f_dst, out, j, i):
        return f_dst, j, i
    return rec if _is_records(f_dst) else pops


@overload(commit_2d)
def _commit_2d(f_dst, out, feq, j, i):
    def rec(f_dst, out, feq, j, i):
        store(f_dst[0], out[:, 0, 0], feq, 0, j, i, _CX2, _CY2, _CZ_2D, _W2)

    def pops(f_dst, out, feq, j, i):
        pass
    return rec if _is_records(f_dst) else pops


@overload(load_3d)
def _load_3d(f, q, k, j, i, wq):
    def rec(f, q, k, j, i, wq):
        return pull(f[0], q, k, j, i, _CX3, _CY3, _CZ3, _W3)

    def pops(f, q, k, j, i, wq):
        return _decode(f[q, k, j, i], wq)
    return rec if _is_records(f) else pops


@overload(commit_3d)
def _commit_3d(f_dst, post, feq, k, j, i):
    def rec(f_dst, post, feq, k, j, i):
        store(f_dst[0], post, feq, k, j, i, _CX3, _CY3, _CZ3, _W3)

    def pops(f_dst, post, feq, k, j, i):
        dt = post.dtype.type
        for q in range(19):
            f_dst[q, k, j, i] = _encode(post[q], dt(_W3[q]), f_dst)
    return rec if _is_records(f_dst) else pops
