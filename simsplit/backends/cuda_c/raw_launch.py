"""Kernel launches through ``cuLaunchKernel`` with a reused parameter block per kernel.

CuPy's call of a compiled function converts every argument anew: on the H200 machine's host
that costs 9-12 us a launch, against about 3.5 us for the driver call with its parameters
already in place (``scripts/probe_launch_overhead.py``, 2026-12-06). A rank slab's rebuild is
a chain of short kernels each waiting on the host's launch, so those microseconds are GPU idle
time. :class:`RawLauncher` packs the arguments of a kernel into one buffer laid out once for
their types (CuPy arrays as their data pointers, NumPy scalars as their C types) and hands
the driver pointers into it. Arguments of any other type, or types other than the ones a
kernel's block was laid out for, take CuPy's call.
"""

from __future__ import annotations

import ctypes
import os
import struct
from typing import Any

import numpy as np

#: struct codes of the NumPy scalar types a kernel argument may have
_CODES = {np.int32: "i", np.uint32: "I", np.int64: "q", np.uint64: "Q", np.float64: "d",
          np.float32: "f", np.int8: "b", np.uint8: "B", np.int16: "h", np.uint16: "H"}
#: SIMSPLIT_RAW_LAUNCH=0 leaves every launch to CuPy (to compare)
RAW_LAUNCH_ENV = "SIMSPLIT_RAW_LAUNCH"


class _Block:
    """The parameter block of one kernel for one tuple of argument types."""

    __slots__ = ("types", "function", "array_at", "packer", "buffer", "params", "_keep")

    def __init__(self, types: tuple[type, ...], array_type: type, function: int) -> None:
        codes = ["P" if t is array_type else _CODES[t] for t in types]
        self.types = types
        #: the kernel's CUfunction on the device the block was made on
        self.function = function
        #: positions of the CuPy arrays among the arguments (passed as their data pointers)
        self.array_at = tuple(j for j, t in enumerate(types) if t is array_type)
        self.packer = struct.Struct("@" + "".join(codes))
        self.buffer = bytearray(max(self.packer.size, 1))
        base = ctypes.addressof((ctypes.c_char * len(self.buffer)).from_buffer(self.buffer))
        offsets = [struct.calcsize("@" + "".join(codes[: i + 1])) - struct.calcsize(code)
                   for i, code in enumerate(codes)]
        pointers = (ctypes.c_void_p * max(len(codes), 1))(*[base + o for o in offsets])
        self.params = ctypes.addressof(pointers)
        self._keep = pointers


class RawLauncher:
    """Launches of CuPy ``RawKernel`` objects through the driver (see the module docstring).

    One launcher serves one device: a kernel's driver handle is looked up once, on the device
    current when its first launch comes.
    """

    def __init__(self, cupy: Any) -> None:
        self._array = cupy.ndarray
        self._driver_launch = cupy.cuda.driver.launchKernel
        self._current_stream = cupy.cuda.get_current_stream
        self._blocks: dict[Any, _Block | None] = {}
        self.enabled = os.environ.get(RAW_LAUNCH_ENV, "1") != "0"
        #: launches that took CuPy's call (argument types outside the table)
        self.fallbacks = 0

    def __call__(self, key: Any, fn: Any, blocks: int, threads: int, args: tuple) -> None:
        """Launch ``fn`` on the current stream of the current device: ``blocks`` blocks of
        ``threads`` threads, no dynamic shared memory. ``key`` names the kernel (its block
        is reused across calls)."""
        types = tuple(map(type, args))
        block = self._blocks.get(key)
        if block is None or block.types != types:
            block = self._block(key, fn, types)
        if block is None:
            self.fallbacks += 1
            fn((blocks,), (threads,), args)
            return
        values = list(args)
        for j in block.array_at:
            values[j] = values[j].data.ptr
        block.packer.pack_into(block.buffer, 0, *values)
        self._driver_launch(block.function, blocks, 1, 1, threads, 1, 1, 0,
                            self._current_stream().ptr, block.params, 0)

    def _block(self, key: Any, fn: Any, types: tuple[type, ...]) -> _Block | None:
        if not self.enabled or any(t is not self._array and t not in _CODES for t in types):
            block = None
        else:  # a RawKernel's compiled Function (for the current device) holds the handle
            block = _Block(types, self._array, fn.kernel.ptr)
        self._blocks[key] = block
        return block
