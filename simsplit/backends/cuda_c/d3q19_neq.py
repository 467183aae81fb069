"""CUDA C launchers of the D3Q19 kernels on ``run.storage: neq16`` cell records
(``kernels/d3q19_neq.cuh``; the records: :mod:`simsplit.numerics.neq_storage`).

One module holds the pull kernels (float32 arithmetic, with and without rho/u stores and the
body force; 32-bit offsets from two bases, 64-bit ones) and the records' halo kernels (the
D3Q19 kernel set launches those with its own halo path); :class:`D3Q19NeqKernels` loads the
module and launches the pull steps on record arrays. neq16s's stress-kept records have a module
of their own (the same kernels with the storage type ``neq::srec``). A tiled candidate of the
box kernel (``kernels/d3q19_neq_tile.cuh``, :data:`neq_tiles.D3Q19_NEQ_TILES`: the same bits)
joins the module and takes the box steps with 32-bit offsets where :attr:`D3Q19NeqKernels.tile`
names it (environment variable :data:`neq_tiles.NEQ_TILE_ENV`; scripts/tune_neq16.py times
them).
"""

from __future__ import annotations

from typing import Any, Callable

import cupy
import numpy as np

from simsplit.backends.cuda_c import kernel_names, neq_tiles, source
from simsplit.backends.cuda_c.d3q19_modules import grid_x
from simsplit.backends.cuda_c.graph import check_launch_device
from simsplit.backends.layout import element_strides
from simsplit.numerics.lattice import D3Q19
from simsplit.numerics.neq_storage import NEQ16_DTYPE, record_slots


class D3Q19NeqKernels:
    """The neq16 records module on one device (``stress``: neq16s's), and its pull steps."""

    def __init__(self, device: int, module: Callable[[tuple[str, ...]], Any],
                 tile: str | None = None, stress: bool = False) -> None:
        """``module``: compiles the module of the kernels it is given the names of; ``tile``:
        the candidate the box steps take (None: :func:`neq_tiles.neq_tile_from_env`'s; the
        stress-kept records have none: the candidates read plain records)."""
        self.device = device
        self.stress = stress
        self._dev = cupy.cuda.Device(device)
        self._module = module
        self._kernels: dict[str, Any] = {}
        #: the tiled candidate the box steps take (None: the production kernel); set before
        #: the first :meth:`prepare`
        self.tile = None if stress else (
            tile if tile is not None
            else neq_tiles.neq_tile_from_env(neq_tiles.D3Q19_NEQ_TILES,
                                             default=neq_tiles.D3Q19_NEQ_TILE_DEFAULT))

    def names(self) -> list[str]:
        """The module's kernels: :func:`kernel_names.d3q19_neq_expressions`, and the candidate's."""
        extra = neq_tiles.d3q19_neq_tile_expressions(self.tile) if self.tile else []
        return [*kernel_names.d3q19_neq_expressions(self.stress), *extra]

    def prepare(self) -> list[int]:
        """Load the module (before any graph capture); the registers of its kernels."""
        if not self._kernels:
            names = self.names()
            module = self._module(tuple(names))
            with self._dev:
                self._kernels = {n: module.get_function(n) for n in names}
                if self.tile:  # beyond the default 48 KB
                    shared = neq_tiles.d3q19_neq_tile_launch(self.tile, 1, 1, 1)[2]
                    for n in neq_tiles.d3q19_neq_tile_expressions(self.tile):
                        self._kernels[n].max_dynamic_shared_size_bytes = shared
        return [k.num_regs for k in self._kernels.values()]

    def kernel(self, name: str) -> Any:
        """The loaded kernel ``name`` of the module (:meth:`prepare` first)."""
        return self._kernels[name]

    def stream_collide(self, args: tuple[Any, ...], f_src: Any, store_macro: bool,
                       forced: bool, ny: int, columns: tuple[int, int]) -> None:
        """One pull step: ``args`` as d3q19_stream_collide takes them (float32 rho/u and
        parameters), on ``ny`` rows and the 1-based interior ``columns`` ``[i0, i1)``, with the
        index type :func:`source.d3q19_records_index` picks for ``f_src``. The tiled candidate
        takes whole planes of arrays within 32-bit offsets only; a part of them (a slab's column
        span beside bodies or open faces) runs on the production kernel (the same bits)."""
        if f_src.dtype != NEQ16_DTYPE or f_src.shape[0] != record_slots(D3Q19.q, self.stress):
            raise ValueError(f"neq16{'s' if self.stress else ''} records expected, got "
                             f"{f_src.dtype} {f_src.shape}")
        if args[3].dtype != np.float32:
            raise TypeError("run.storage neq16 computes in float32")
        self.prepare()
        check_launch_device(self.device)
        nx, k0, k1 = (int(args[n]) for n in (7, 13, 14))
        i0, i1 = columns
        slots, plane = f_src.shape[0], element_strides(f_src)[0]
        if (self.tile and (i0, i1) == (1, nx + 1)
                and not source.needs_wide_offsets(slots * plane)):
            grid, threads, shared = neq_tiles.d3q19_neq_tile_launch(self.tile, nx, ny, k1 - k0)
            kern = self._kernels[neq_tiles.d3q19_neq_tile_name(self.tile, store_macro, forced)]
            with self._dev:
                kern(grid, (threads,), (*args, np.int32(neq_tiles.D3Q19_NEQ_TILE_RUN)),
                     shared_mem=shared)
            return
        index = source.d3q19_records_index(slots, plane)
        kern = self._kernels[kernel_names.d3q19_neq_name(store_macro, forced, index, self.stress)]
        threads = source.BLOCK_X if (i0, i1) == (1, nx + 1) else source.span_block(
            i1 - i0, source.SPAN_BLOCK_X)
        # blocks from column 1 on, those before the span idle (the kernel's indexing: see
        # kernels/d3q19_neq.cuh)
        with self._dev:
            kern((grid_x(i1 - 1, block_x=threads), ny, k1 - k0), (threads,),
                 (*args, np.int32(i0), np.int32(i1),
                  *(a[source.NEQ_HALVES_SPLIT] for a in args[:2])))  # the upper halves
