"""Lennard-Jones MD in Numba CUDA: the kernel table and Numba's allocation and launch.

The launch sequence, argument lists and list layout are :class:`DeviceMDKernels`'s, shared with
the CuPy backend. The kernels, ``kernels/md_lj.cu``'s and its headers' kernel for kernel, are in
md_integrate (integration, thermostat, thermo sums), md_lists (cells, scans, sorts), md_pairs
(neighbour-list builds, forces), md_arena and md_ranks; md_device has their shared device
functions and says why every product goes through ``mul``. The same source runs on Numba's CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, ContextManager

import numpy as np
from numba import cuda

from simsplit.backends.cuda_c.md import (
    ARENA_FLOAT_KERNELS,
    ARENA_INDEX_KERNELS,
    FLOAT_KERNELS,
    INDEX_KERNELS,
    DeviceMDKernels,
)
from simsplit.backends.numba_cuda.d2q9 import SIMULATOR
from simsplit.backends.numba_cuda.md_arena import ARENA_KERNELS
from simsplit.backends.numba_cuda.md_integrate import INTEGRATE_KERNELS
from simsplit.backends.numba_cuda.md_lists import LIST_KERNELS
from simsplit.backends.numba_cuda.md_pairs import PAIR_KERNELS
from simsplit.backends.numba_cuda.md_ranks import RANK_KERNELS

_BY_NAME = {**INTEGRATE_KERNELS, **LIST_KERNELS, **PAIR_KERNELS, **ARENA_KERNELS}


@cuda.jit
def _zero_fill(arr):
    i = cuda.grid(1)
    if i < arr.shape[0]:
        arr[i] = 0


#: kernel name (as in md_lj.cu) -> kernel
_KERNELS = {**{name: _BY_NAME[name] for name in (*FLOAT_KERNELS, *INDEX_KERNELS,
                                                 *ARENA_FLOAT_KERNELS, *ARENA_INDEX_KERNELS)},
            **RANK_KERNELS}


def _configure(name: str, grid: int, block: int) -> Any:
    with warnings.catch_warnings():  # small launches (scan, tiny test systems) are deliberate
        warnings.filterwarnings("ignore", message="Grid size .* under-utilization")
        return _KERNELS[name][grid, block]


# A configured launch is reusable on a GPU; the simulator's kernel[grid, block] reconfigures
# and returns the kernel object itself, so there every launch configures afresh.
_configured = _configure if SIMULATOR else functools.cache(_configure)


class NumbaMDKernels(DeviceMDKernels):
    """MD kernels on Numba device arrays of one device (or the simulator)."""

    # the simulator runs one Python thread per CUDA thread: small blocks keep tiny tests quick
    block = 32 if SIMULATOR else DeviceMDKernels.block
    #: kernels/md_ranks.cuh's twins are in md_ranks.py: under MPI, rebuilds stay on the device
    rank_slabs = True

    def __init__(self, activate: Callable[[], ContextManager[Any]]) -> None:
        self._activate = activate
        self._host_buffers: dict[tuple[int, str], np.ndarray] = {}
        super().__init__()

    def _read_small(self, arr: Any) -> np.ndarray:
        key = (arr.size, arr.dtype.str)
        buf = self._host_buffers.get(key)
        with self._activate():
            if buf is None:
                buf = self._host_buffers[key] = cuda.pinned_array(arr.shape, arr.dtype)
            arr.copy_to_host(buf)  # synchronous on the default stream
        return buf

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.to_device(np.zeros(shape, dtype=dtype))

    def to_device(self, host: np.ndarray) -> Any:
        with self._activate():
            return cuda.to_device(np.ascontiguousarray(host))

    def to_host(self, arr: Any) -> np.ndarray:
        if isinstance(arr, np.ndarray):
            return arr
        with self._activate():
            return arr.copy_to_host()

    def _zero(self, arr: Any) -> None:
        n = arr.shape[0]
        with self._activate():
            _zero_fill[self._grid(n), self.block](arr)

    def synchronize(self) -> None:
        with self._activate():
            cuda.synchronize()

    # --- ghost rows between devices and processes (synchronous copies) ----------------------
    def host_buffer(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        with self._activate():
            return cuda.pinned_array(shape, dtype)

    def download_rows(self, src, m: int, out: np.ndarray) -> np.ndarray:
        with self._activate():
            if m:
                src[:m].copy_to_host(out[:m])  # default stream: after the queued kernels
            else:
                cuda.synchronize()
        return out[:m]

    def upload_rows(self, host: np.ndarray, dst, row0: int, staging: Any = None) -> None:
        # synchronous on the default stream: ``staging`` is not needed to keep host alive
        m = int(host.shape[0])
        if m:
            with self._activate():
                dst[row0:row0 + m].copy_to_device(np.ascontiguousarray(host, dtype=dst.dtype))

    def _launch(self, name: str, dtype: Any, threads: int, *args: Any) -> None:
        with self._activate():
            _configured(name, self._grid(threads), self.block)(*args)

    def rank_pack(self, x, rows, trailer: int, buf) -> None:
        # the trailer row's flags are written through an int32 view of the pack
        m = int(rows.shape[0])
        with self._activate():
            words = buf.view(np.int32)
        self._launch("md_rank_pack", x.dtype, m + 1, x, rows, np.int32(m), self._flags,
                     np.int32(trailer), buf, words)

    def _message_views(self, msg, dtype: Any) -> tuple[Any, Any]:
        with self._activate():
            words = msg.reshape(msg.shape[0])
            return words, words.view(np.dtype(dtype))

    def rank_land(self, src, idx, dst) -> None:
        # the trailer row's tick is read through an int32 view of the pack
        m = int(idx.shape[0])
        with self._activate():
            words = src.view(np.int32)
        self._launch("md_rank_land", src.dtype, m + 1, src, idx, np.int32(m), self._flags, dst,
                     words)
