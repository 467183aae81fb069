"""D3Q19 launchers for the hand-written CUDA C kernels in ``kernels/d3q19.cu`` (CuPy + NVRTC).

Same call signatures as :class:`simsplit.backends.cpu.d3q19.D3Q19Kernels`; launches go to the
current CuPy stream of the backend's device (graph-capturable), as for D2Q9. Halos use the
lattice-generic ``lbm_pack``/``lbm_unpack`` of ``lbm_common.cuh`` on whole xy-planes.
"""

from __future__ import annotations

import functools
from typing import Any

import cupy
import numpy as np

from simsplit.backends.cuda_c import source
from simsplit.backends.cuda_c.d2q9 import _grid_x, compile_options
from simsplit.backends.cuda_c.graph import check_launch_device
from simsplit.fluid.lattice import D3Q19
from simsplit.fluid.params import D3Q19Params

_NAME = "D3Q19"
_N_CROSS = len(D3Q19.up)


@functools.cache
def _module(device: int) -> Any:
    """``d3q19.cu`` compiled for one device (once per process; CuPy caches it on disk)."""
    with cupy.cuda.Device(device):
        return cupy.RawModule(code=source.kernel_source("d3q19.cu"),
                              options=compile_options(device),
                              name_expressions=source.name_expressions("d3q19.cu"))


class D3Q19Kernels:
    """CUDA C launchers for one device."""

    def __init__(self, device: int) -> None:
        self.device = device
        self._dev = cupy.cuda.Device(device)
        module = _module(device)
        dtypes = list(source.CTYPES)
        with self._dev:
            self._collide = {(dt, s): module.get_function(
                source.stream_collide_name(dt, s, _NAME)) for dt in dtypes for s in (False, True)}
            self._pack = {dt: module.get_function(source.pack_name(_NAME, dt)) for dt in dtypes}
            self._unpack = {dt: module.get_function(source.unpack_name(_NAME, dt))
                            for dt in dtypes}
            # load every kernel now: a first launch inside a graph capture must not load modules
            kernels = [*self._collide.values(), *self._pack.values(), *self._unpack.values()]
            self.registers = [k.num_regs for k in kernels]
        self._scalars: dict[tuple[D3Q19Params, np.dtype], tuple[Any, ...]] = {}

    def _params(self, p: D3Q19Params, dtype: np.dtype) -> tuple[Any, ...]:
        key = (p, dtype)
        if key not in self._scalars:
            t = dtype.type  # scalars in the array's precision, rounded as the CPU rounds them
            self._scalars[key] = (t(p.omega_plus), t(p.omega_minus), t(p.lid_velocity),
                                  t(p.force_x), t(p.force_y), t(p.force_z),
                                  np.int32(bool(p.periodic_x)), np.int32(bool(p.periodic_y)))
        return self._scalars[key]

    def stream_collide(self, f_src, f_dst, flags, rho, ux, uy, uz, layers, p,
                       store_macro) -> None:
        k0, k1 = int(layers[0]), int(layers[1])
        q, d, h, w = f_src.shape
        nz, ny, nx = d - 2, h - 2, w - 2
        if (q != D3Q19.q or f_dst.shape != f_src.shape or flags.shape != (d, h, w)
                or rho.shape != (nz, ny, nx)):
            raise ValueError(f"inconsistent D3Q19 arrays: f {f_src.shape}, f_dst {f_dst.shape}, "
                             f"flags {flags.shape}, rho {rho.shape}")
        if not 1 <= k0 <= k1 <= nz + 1:
            raise ValueError(f"planes {layers} outside the interior planes [1, {nz + 1})")
        if k0 == k1:
            return
        dt = f_src.dtype
        if any(a.dtype != dt for a in (f_dst, rho, ux, uy, uz)):
            raise TypeError("populations and macroscopic fields must share one dtype")
        if ny > source.MAX_GRID_Y or k1 - k0 > source.MAX_GRID_Y:
            raise ValueError(f"D3Q19 grids are limited to {source.MAX_GRID_Y} cells along y, z")
        check_launch_device(self.device)
        kern = self._collide[(dt, bool(store_macro))]
        with self._dev:
            kern((_grid_x(nx), ny, k1 - k0), (source.BLOCK_X,),
                 (f_src, f_dst, flags, rho, ux, uy, uz, np.int32(nx), np.int32(ny),
                  np.int32(nz), np.int32(k0), np.int32(k1), *self._params(p, dt)))

    def _halo(self, kernels: dict, f, layer: int, direction: int, buf, src, dst) -> None:
        q, d, h, w = f.shape
        size = h * w
        if buf.shape != (_N_CROSS, size) or buf.dtype != f.dtype:
            raise ValueError(f"halo buffer {buf.shape} {buf.dtype} does not fit f {f.shape}")
        if not 0 <= layer < d or direction not in (0, 1):
            raise ValueError(f"layer {layer} / direction {direction} out of range")
        check_launch_device(self.device)
        with self._dev:
            kernels[f.dtype]((_grid_x(size), _N_CROSS), (source.BLOCK_X,),
                             (src, dst, np.int64(d * size), np.int32(layer), np.int32(size),
                              np.int32(direction)))

    def pack(self, f, layer: int, direction: int, buf) -> None:
        self._halo(self._pack, f, layer, direction, buf, f, buf)

    def unpack(self, buf, f, layer: int, direction: int) -> None:
        self._halo(self._unpack, f, layer, direction, buf, buf, f)
