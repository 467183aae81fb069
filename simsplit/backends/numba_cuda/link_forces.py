"""Forces on bodies in Numba CUDA: kernels/link_forces.cu's algorithm (the momentum of each
fluid-to-body link of a slab, then exact per-body sums), on a GPU or the simulator. Products go
through ``mul`` (never fused), so each link's momentum has the CPU's bits; stored populations
are decoded as the stream-collide kernels decode them (16-bit storage of D2Q9)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

import numpy as np
from numba import cuda

from simsplit.backends.cpu.storage_codec import raw_view
from simsplit.backends.cuda_c.source import BLOCK_X
from simsplit.backends.layout import element_strides
from simsplit.backends.numba_cuda.d2q9 import _codec, _exact_mul
from simsplit.backends.numba_cuda.exact_sum import exact_add
from simsplit.numerics.exact import EXACT_LIMBS
from simsplit.numerics.momentum_exchange import SlabLinkTable

mul = _exact_mul(np.dtype(np.float64))


@functools.cache
def _link_momentum(arith: np.dtype, storage: np.dtype) -> Any:
    """The kernel for populations stored as ``storage`` under arithmetic ``arith``:
    mom[i * dim + a] is SlabLinkTable.momentum of link i (w_out, w_in: the weights of q and
    qbar per link, in the arithmetic type)."""
    decode = _codec(arith, storage)[0]

    @cuda.jit
    def link_momentum(f, n, at_out, at_in, at_nb, at_far, w_out, w_in, w_far, k, w1, w2, c,
                      dim, mom):
        i = cuda.grid(1)
        if i >= n:
            return
        kk = k[i]
        f_out = np.float64(decode(f[at_out[i]], w_out[i]))
        if kk >= 0.0:
            f_back = mul(kk, f_out) + mul(w1[i], np.float64(decode(f[at_nb[i]], w_out[i])))
        else:
            f_back = mul(-kk, f_out) + mul(w1[i], np.float64(decode(f[at_in[i]], w_in[i])))
        f_back = f_back + mul(w2[i], np.float64(decode(f[at_far[i]], w_far[i])))
        u_wall = 0.0
        for a in range(dim):
            ca = c[i * dim + a]
            mom[i * dim + a] = mul(ca - u_wall, f_out) - mul(-ca - u_wall, f_back)
    return link_momentum


@cuda.jit
def _accumulate(bits, n, dim, body, limbs, acc, nonfinite):
    j = cuda.grid(1)
    if j >= n * dim:
        return
    i = j // dim
    exact_add(acc, (body[i] * dim + j - i * dim) * limbs, np.uint64(bits[j]), nonfinite)


@dataclass
class DeviceLinkTable:
    n: int
    dim: int
    slots: int
    strides: tuple[int, ...]
    #: at_out, at_in, at_nb, at_far, w_out, w_in, w_far, k, w1, w2, c, body
    arrays: tuple[Any, ...]
    kernel: Any  #: the link-momentum kernel of the populations' storage
    mom: Any
    acc: Any
    nonfinite: Any


class LinkForceKernels:
    """The link-force reduction of one device (or the simulator)."""

    def __init__(self, activate: Callable[[], ContextManager[Any]]) -> None:
        self._activate = activate

    def prepare(self, table: SlabLinkTable, f: Any) -> DeviceLinkTable:
        strides = element_strides(f)
        host = (*table.flat(strides), *(w.astype(table.arith) for w in (table.w_out, table.w_in,
                                                                          table.w_far)),
                table.k, table.w1, table.w2, np.ascontiguousarray(table.c, np.float64).ravel(),
                table.body.astype(np.int32))
        slots = table.n_bodies * table.dim
        with self._activate():
            return DeviceLinkTable(
                table.n, table.dim, slots, strides,
                tuple(cuda.to_device(np.ascontiguousarray(a)) for a in host),
                _link_momentum(np.dtype(table.arith), np.dtype(f.dtype)),
                cuda.to_device(np.zeros(max(table.n * table.dim, 1), np.float64)),
                cuda.to_device(np.zeros(slots * EXACT_LIMBS, np.uint64)),
                cuda.to_device(np.zeros(1, np.int32)))

    def sums(self, f: Any, t: DeviceLinkTable) -> tuple[np.ndarray, bool]:
        """As :meth:`simsplit.backends.cuda_c.link_forces.LinkForceKernels.sums`."""
        if element_strides(f) != t.strides or not f.is_c_contiguous():
            raise ValueError("populations laid out unlike the link table's")
        *per_link, c, body = t.arrays
        with self._activate():
            if t.n:
                flat = raw_view(f).reshape(f.size)
                t.kernel[(t.n + BLOCK_X - 1) // BLOCK_X, BLOCK_X](
                    flat, t.n, *per_link, c, t.dim, t.mom)
                m = t.n * t.dim
                _accumulate[(m + BLOCK_X - 1) // BLOCK_X, BLOCK_X](
                    t.mom.view(np.int64), t.n, t.dim, body, EXACT_LIMBS, t.acc, t.nonfinite)
            limbs = t.acc.copy_to_host().view(np.int64).reshape(t.slots, EXACT_LIMBS)
            bad = bool(t.nonfinite.copy_to_host()[0])
            t.acc.copy_to_device(np.zeros(t.slots * EXACT_LIMBS, np.uint64))
            t.nonfinite.copy_to_device(np.zeros(1, np.int32))
        return limbs, bad
