"""``run.storage: neq16`` and ``neq16s`` cell records (:mod:`simsplit.numerics.neq_storage`) on
Numba CUDA: the CPU record kernels' reader and writer (:mod:`simsplit.backends.cpu.neq_codec`,
which tell the two apart by their slot count) compiled as
device functions, and the record halos' slot tables.

The codec's scalar code is compiled from its ``py_func``; the helpers it calls are CPU
dispatchers, which Numba CUDA compiles as device functions where a kernel calls them. Its
products go through ``neq_codec.product``, overloaded here with libdevice's ``fmul_rn`` /
``dmul_rn`` so that NVVM fuses none of them into an add (the CPU target never fuses): both
round every operation alike, and the GPU writes the CPU's records bit for bit. On the
simulator the device functions run as Python, calling the helpers compiled for the CPU.
"""

from __future__ import annotations

import functools
from typing import Any

import numba
from numba import cuda, types

from simsplit.backends.cpu import neq_codec
from simsplit.numerics.neq_storage import halo_slot_sets

if not numba.config.ENABLE_CUDASIM:  # the simulator runs product's Python body
    from numba.cuda import libdevice
    from numba.cuda.extending import overload

    @overload(neq_codec.product)
    def _product_cuda(a, b):  # no annotations: Numba compares them with the lambdas
        if a == types.float32 and b == types.float32:
            return lambda a, b: libdevice.fmul_rn(a, b)
        return lambda a, b: libdevice.dmul_rn(a, b)


@functools.cache
def codec() -> tuple[Any, Any]:
    """``(pull, store)`` device functions: ``pull(rec, q, k, j, i, cx, cy, cz, w)`` rebuilds
    population q of cell (k, j, i), ``store(rec, post, feq, k, j, i, cx, cy, cz, w)`` writes the
    cell's record of ``post`` (float32; ``feq``: a local scratch array of q floats). Records are
    4D (a D2Q9 set passes a one-plane view, k = 0)."""
    return (cuda.jit(device=True)(neq_codec.pull.py_func),
            cuda.jit(device=True)(neq_codec.store.py_func))


@functools.cache
def halo_table(slots: int) -> tuple[tuple[int, ...], int]:
    """(the slots a halo moves for records of ``slots`` slots, direction set up then down;
    slots per set), the kernels' halo table."""
    up, down = halo_slot_sets(slots)
    return up + down, len(up)
