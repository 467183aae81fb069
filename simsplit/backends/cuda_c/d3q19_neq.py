"""CUDA C launchers of the D3Q19 kernels on ``run.storage: neq16`` cell records
(``kernels/d3q19_neq.cuh``; the records: :mod:`simsplit.numerics.neq_storage`).

One module holds the pull kernels (float32 arithmetic, with and without rho/u stores and the
body force, 32- and 64-bit offsets) and the records' halo kernels; :class:`D3Q19NeqKernels` is
what the D3Q19 kernel set hands record arrays to.
"""

from __future__ import annotations

import functools
from typing import Any

import cupy
import numpy as np

from simsplit.backends.cuda_c import source
from simsplit.backends.cuda_c.d2q9 import _grid_x, compile_options
from simsplit.backends.cuda_c.graph import check_launch_device
from simsplit.backends.layout import element_strides
from simsplit.numerics.lattice import D3Q19
from simsplit.numerics.neq_storage import NEQ16_DTYPE, halo_slots, record_slots

#: record slots a halo moves per face
HALO_SLOTS = len(halo_slots(D3Q19.q, D3Q19.up))


@functools.cache
def _module(device: int) -> Any:
    """The neq16 kernels of ``d3q19.cu`` for one device (compiled once per process)."""
    with cupy.cuda.Device(device):
        return cupy.RawModule(code=source.kernel_source("d3q19.cu"),
                              options=compile_options(device),
                              name_expressions=source.d3q19_neq_expressions())


class D3Q19NeqKernels:
    """Pull step and halos of neq16 records on one device."""

    def __init__(self, device: int) -> None:
        self.device = device
        self._dev = cupy.cuda.Device(device)
        self._kernels: dict[str, Any] = {}

    def prepare(self) -> list[int]:
        """Load the module (before any graph capture); the registers of its kernels."""
        if not self._kernels:
            module = _module(self.device)
            with self._dev:
                self._kernels = {n: module.get_function(n)
                                 for n in source.d3q19_neq_expressions()}
        return [k.num_regs for k in self._kernels.values()]

    def stream_collide(self, args: tuple[Any, ...], f_src: Any, store_macro: bool,
                       forced: bool, wide: bool, blocks: tuple[int, int, int]) -> None:
        """One pull step: ``args`` as d3q19_stream_collide takes them (float32 rho/u and
        parameters), ``blocks`` its grid."""
        if f_src.dtype != NEQ16_DTYPE or f_src.shape[0] != record_slots(D3Q19.q):
            raise ValueError(f"neq16 records expected, got {f_src.dtype} {f_src.shape}")
        if args[3].dtype != np.float32:
            raise TypeError("run.storage neq16 computes in float32")
        self.prepare()
        check_launch_device(self.device)
        kern = self._kernels[source.d3q19_neq_name(store_macro, forced, wide)]
        with self._dev:
            kern(blocks, (source.BLOCK_X,), args)

    def halo(self, pack: bool, f: Any, layer: int, direction: int, buf: Any) -> None:
        """Pack (``pack``) or unpack the slots crossing a face in ``direction`` of ``layer``."""
        _, d, h, w = f.shape
        size = h * w
        if buf.shape != (HALO_SLOTS, size) or buf.dtype != f.dtype:
            raise ValueError(f"halo buffer {buf.shape} {buf.dtype} does not fit records "
                             f"{f.shape}")
        if not 0 <= layer < d or direction not in (0, 1):
            raise ValueError(f"layer {layer} / direction {direction} out of range")
        self.prepare()
        check_launch_device(self.device)
        name = f"lbm_{'pack' if pack else 'unpack'}<D3Q19Records, {source.NEQ_CTYPE}>"
        plane, layer_stride, pitch = (np.int64(v) for v in element_strides(f)[:3])
        src, dst = (f, buf) if pack else (buf, f)
        with self._dev:
            self._kernels[name]((_grid_x(size), HALO_SLOTS), (source.BLOCK_X,),
                                (src, dst, plane, layer_stride, pitch, np.int32(w),
                                 np.int32(size), np.int32(layer), np.int32(direction)))
