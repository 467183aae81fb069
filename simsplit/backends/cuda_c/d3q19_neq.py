"""CUDA C launchers of the D3Q19 kernels on ``run.storage: neq16`` cell records
(``kernels/d3q19_neq.cuh``; the records: :mod:`simsplit.numerics.neq_storage`).

One module holds the pull kernels (float32 arithmetic, with and without rho/u stores and the
body force, 32- and 64-bit offsets) and the records' halo kernels (the D3Q19 kernel set
launches those with its own halo path); :class:`D3Q19NeqKernels` loads the module and launches
the pull steps on record arrays.
"""

from __future__ import annotations

from typing import Any, Callable

import cupy
import numpy as np

from simsplit.backends.cuda_c import source
from simsplit.backends.cuda_c.graph import check_launch_device
from simsplit.numerics.lattice import D3Q19
from simsplit.numerics.neq_storage import NEQ16_DTYPE, halo_slots, record_slots

#: record slots a halo moves per face
HALO_SLOTS = len(halo_slots(D3Q19.q, D3Q19.up))


class D3Q19NeqKernels:
    """The neq16 records module on one device, and its pull steps."""

    def __init__(self, device: int, module: Callable[[], Any]) -> None:
        """``module``: gives the compiled module of :func:`source.d3q19_neq_expressions`."""
        self.device = device
        self._dev = cupy.cuda.Device(device)
        self._module = module
        self._kernels: dict[str, Any] = {}

    def prepare(self) -> list[int]:
        """Load the module (before any graph capture); the registers of its kernels."""
        if not self._kernels:
            module = self._module()
            with self._dev:
                self._kernels = {n: module.get_function(n)
                                 for n in source.d3q19_neq_expressions()}
        return [k.num_regs for k in self._kernels.values()]

    def kernel(self, name: str) -> Any:
        """The loaded kernel ``name`` of the module (:meth:`prepare` first)."""
        return self._kernels[name]

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
