"""Padded field layout for GPUs: rows that start on 128-byte boundaries.

A lattice field ``f[q, layer, ..., i]`` with one ghost cell all round has rows of ``n + 2``
elements, and with a packed layout every row starts at a different offset modulo the memory
transaction size, so the stores of a warp straddle 32-byte sectors and the L2 must merge
partial sectors (on an H200 the D2Q9 kernel measured 81.6 % of the copy bandwidth on packed
rows and 87.3 % on padded ones, `BENCHMARKS.md`). :func:`padded_empty` allocates rows of a
pitch rounded up to :data:`ALIGN` elements and offsets the view so that the first *interior*
element of every row (column 1, after the ghost) is aligned. The result is an ordinary strided
view of the logical shape: code that indexes it sees no difference, kernels that do their own
index arithmetic read the row pitch and plane stride from ``strides``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: row pitch granule in elements: 128 B of float32, 256 B of float64; flags (uint8) get the
#: same element pitch, so one cell index addresses populations and flags alike
ALIGN = 32


def padded_pitch(n: int) -> int:
    """Elements per padded row holding ``n`` elements."""
    return -(-n // ALIGN) * ALIGN


def padded_empty(xp: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """An uninitialised array of ``shape`` whose rows (last axis) are padded and aligned.

    ``xp`` is the array module (NumPy or CuPy). Element ``[..., 1]`` of every row lies on an
    ``ALIGN``-element boundary of the allocation; the row stride is ``padded_pitch(shape[-1])``
    elements and every other stride is a whole number of padded rows.
    """
    *outer, n = shape
    pitch = padded_pitch(n)
    rows = math.prod(outer)
    lead = ALIGN - 1  # ghost column 0 sits just before the boundary, column 1 on it
    flat = xp.empty(lead + rows * pitch + 1, dtype=np.dtype(dtype))
    return flat[lead:lead + rows * pitch].reshape(*outer, pitch)[..., :n]


def element_strides(arr: Any) -> tuple[int, ...]:
    """Strides of ``arr`` in elements."""
    return tuple(s // arr.dtype.itemsize for s in arr.strides)


def field_strides(f: Any, flags: Any, other: Any = None) -> tuple[int, ...]:
    """Strides in elements of a population array, innermost first without the unit stride:
    ``(pitch, plane)`` in 2D, ``(pitch, layer, plane)`` in 3D, as the kernels take them.

    The kernels address populations and flags with one cell index, so ``flags`` must have the
    populations' strides below the population axis, and ``other`` (the second population
    array) the same strides throughout.
    """
    st = element_strides(f)
    if (st[-1] != 1 or element_strides(flags) != st[1:]
            or (other is not None and element_strides(other) != st)):
        got = [element_strides(a) for a in (f, flags, other) if a is not None]
        raise ValueError(f"populations and flags do not share a layout (strides in elements "
                         f"{got})")
    return tuple(int(v) for v in reversed(st[:-1]))
