"""Forces on bodies on a CuPy device: the launcher of ``kernels/link_forces.cu`` (exact
per-body sums of the momentum on fluid-to-body links; one small read per measurement)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import cupy
import numpy as np

from simsplit.backends.cuda_c import kernel_names, source
from simsplit.backends.cuda_c.d2q9 import compile_options
from simsplit.backends.layout import element_strides
from simsplit.numerics.exact import EXACT_LIMBS
from simsplit.numerics.momentum_exchange import SlabLinkTable
from simsplit.numerics.neq_storage import stress_kept

KERNEL_FILE = "link_forces.cu"


@functools.cache
def _module(device: int) -> Any:
    with cupy.cuda.Device(device):
        return cupy.RawModule(code=source.kernel_source(KERNEL_FILE),
                              options=compile_options(device),
                              name_expressions=kernel_names.name_expressions(KERNEL_FILE))


@dataclass
class DeviceLinkTable:
    """A slab's link table on the device, with its accumulator (cleared after each read)."""

    n: int
    dim: int
    slots: int
    arith: np.dtype
    shifted: bool
    inv_scale: float
    strides: tuple[int, ...]
    #: at_out, at_in, at_nb, at_far, w_out, w_in, w_far, k, w1, w2, c, body
    arrays: tuple[Any, ...]
    acc: Any
    nonfinite: Any
    #: the populations are neq16 records (rebuilt from each cell's record)
    records: bool = False


class LinkForceKernels:
    """The link-force reduction of one device."""

    def __init__(self, device: int) -> None:
        self.device = device
        self._dev = cupy.cuda.Device(device)
        self._module = _module(device)

    def prepare(self, table: SlabLinkTable, f: Any) -> DeviceLinkTable:
        """``table`` on the device, addressed as populations laid out as ``f``."""
        strides = element_strides(f)
        host = (*table.flat(strides), table.w_out, table.w_in, table.w_far, table.k, table.w1,
                table.w2, np.ascontiguousarray(table.c, np.float64), table.body.astype(np.int32))
        with self._dev:
            arrays = tuple(cupy.asarray(np.ascontiguousarray(a)) for a in host)
            slots = table.n_bodies * table.dim
            return DeviceLinkTable(table.n, table.dim, slots, table.arith, table.shifted,
                                   table.inv_scale, strides, arrays,
                                   cupy.zeros(slots * EXACT_LIMBS, np.uint64),
                                   cupy.zeros(1, np.int32), table.records)

    def sums(self, f: Any, t: DeviceLinkTable) -> tuple[np.ndarray, bool]:
        """(signed limb totals ``(n_bodies * dim, EXACT_LIMBS)``, whether a link's momentum
        was not finite) of the populations ``f``."""
        if element_strides(f) != t.strides:
            raise ValueError("populations laid out unlike the link table's")
        with self._dev:
            if t.n:
                threads = source.BLOCK_X
                if t.records:  # the plane between record slots locates a cell's record
                    name = kernel_names.link_force_sums_neq_name(t.dim, stress_kept(f.shape[0]))
                    scalars: tuple = (np.int64(t.strides[0]),)
                else:
                    name = kernel_names.link_force_sums_name(t.arith, f.dtype)
                    scalars = (t.arith.type(t.inv_scale), np.int32(t.shifted))
                kern = self._module.get_function(name)
                kern(((t.n + threads - 1) // threads,), (threads,),
                     (f, np.int32(t.n), *t.arrays, np.int32(t.dim), *scalars, t.acc,
                      t.nonfinite))
            limbs = t.acc.get().view(np.int64).reshape(t.slots, EXACT_LIMBS)
            bad = bool(t.nonfinite.get()[0])
            t.acc.fill(0)
            t.nonfinite.fill(0)
        return limbs, bad
