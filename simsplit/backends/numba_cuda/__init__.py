"""Numba CUDA backend: ``@cuda.jit`` kernels on Numba device arrays; runs on the CUDA simulator.

Reductions run on the GPU through a zero-copy CuPy view when CuPy is installed, and on a host
copy otherwise (always on the simulator, whose arrays have no ``__cuda_array_interface__``).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import cuda

from simsplit.backends.base import Backend
from simsplit.backends.numba_cuda import d2q9
from simsplit.backends.numba_cuda.d2q9 import SIMULATOR
from simsplit.errors import BackendUnavailable


def _cupy_or_none() -> Any:
    if SIMULATOR:
        return None
    try:
        import cupy
    except ImportError:
        return None
    return cupy


class NumbaCudaBackend(Backend):
    name = "numba-cuda"
    is_device = True

    def __init__(self, device: int = 0) -> None:
        if not cuda.is_available():
            raise BackendUnavailable("backend 'numba-cuda' finds no usable CUDA GPU or driver")
        if not 0 <= device < len(cuda.gpus):
            raise BackendUnavailable(f"backend 'numba-cuda': GPU {device} does not exist "
                                     f"({len(cuda.gpus)} visible)")
        super().__init__(device)
        self._cp = _cupy_or_none()
        self.d2q9 = d2q9.D2Q9Kernels(self.activate)

    @functools.cached_property
    def d3q19(self) -> Any:
        """D3Q19 fluid kernels, compiled on first use of each."""
        from simsplit.backends.numba_cuda.d3q19 import D3Q19Kernels

        return D3Q19Kernels(self.activate)

    @functools.cached_property
    def link_forces(self) -> Any:
        """Exact force sums on bodies, compiled on first use."""
        from simsplit.backends.numba_cuda.link_forces import LinkForceKernels

        return LinkForceKernels(self.activate)

    @functools.cached_property
    def md(self) -> Any:
        """Lennard-Jones MD kernels, compiled on first use of each."""
        from simsplit.backends.numba_cuda.md import NumbaMDKernels

        return NumbaMDKernels(self.activate)

    # --- storage ---------------------------------------------------------------------------
    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.asarray(np.zeros(shape, dtype=dtype))

    def asarray(self, host: np.ndarray) -> Any:
        with self.activate():
            return cuda.to_device(np.ascontiguousarray(host))

    def to_host(self, arr: Any) -> np.ndarray:
        with self.activate():
            return arr.copy_to_host()

    def copy(self, dst: Any, src: Any) -> None:
        if dst.shape != src.shape or dst.dtype != src.dtype:
            raise ValueError(f"copy between {src.shape} {src.dtype} and {dst.shape} {dst.dtype}")
        with self.activate():
            dst.copy_to_device(src)

    # --- reductions ----------------------------------------------------------------------------
    def _view(self, arr: Any) -> tuple[Any, Any]:
        """(array module, array) to reduce with: a CuPy view of the device data, or a host copy."""
        if self._cp is not None:
            with self._cp.cuda.Device(self.device):
                return self._cp, self._cp.asarray(arr)
        return np, self.to_host(arr)

    def max_abs(self, arr: Any) -> float:
        if arr.size == 0:
            return 0.0
        xp, a = self._view(arr)
        return float(xp.abs(a).max())

    def max_abs_diff(self, a: Any, b: Any) -> float:
        if a.size == 0:
            return 0.0
        xp, x = self._view(a)
        _, y = self._view(b)
        return float(xp.abs(x - y).max())

    def all_finite(self, arr: Any) -> bool:
        xp, a = self._view(arr)
        return bool(xp.isfinite(a).all())

    def minmax(self, arr: Any) -> tuple[float, float]:
        xp, a = self._view(arr)
        return float(a.min()), float(a.max())

    # --- execution -----------------------------------------------------------------------------
    def synchronize(self) -> None:
        with self.activate():
            cuda.synchronize()

    def activate(self) -> Any:
        return cuda.gpus[self.device]

    def device_properties(self) -> dict[str, Any] | None:
        if SIMULATOR:
            return None
        with self.activate():
            dev = cuda.get_current_device()
            total = int(cuda.current_context().get_memory_info().total)
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        major, minor = dev.compute_capability
        return {"name": name, "total_memory": total, "compute_capability": f"{major}.{minor}"}

    def memory_free(self) -> int:
        if SIMULATOR:  # the simulator's device arrays are host arrays
            return super().memory_free()
        with self.activate():
            return int(cuda.current_context().get_memory_info().free)

    def describe(self) -> str:
        import numba_cuda

        version = getattr(numba_cuda, "__version__", "?")
        if SIMULATOR:
            return f"numba-cuda {version} (CUDA simulator)"
        with self.activate():
            dev = cuda.get_current_device()
            name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
            cc = "".join(str(c) for c in dev.compute_capability)
        return f"numba-cuda {version} on GPU {self.device} ({name}, sm_{cc})"
