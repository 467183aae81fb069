"""CPU backend: NumPy storage and Numba ``@njit(parallel=True, cache=True)`` kernels."""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.backends.base import Backend


class CPUBackend(Backend):
    name = "cpu"
    is_device = False

    def __init__(self, device: int = 0) -> None:
        super().__init__(device)
        from simsplit.backends.cpu import d2q9, d3q19, link_forces, neq_chunks

        neq_chunks.chunk_planes(1)  # a bad SIMSPLIT_CPU_NEQ_PLANES stops the set-up, not a step
        self.d2q9 = d2q9.D2Q9Kernels()
        self.d3q19 = d3q19.D3Q19Kernels()
        self.link_forces = link_forces.LinkForceKernels()

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.zeros(shape, dtype=dtype)

    def asarray(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, copy=True)

    def to_host(self, arr: np.ndarray) -> np.ndarray:
        return np.array(arr, copy=True)

    def copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        np.copyto(dst, src)

    def max_abs(self, arr: np.ndarray) -> float:
        return float(np.max(np.abs(arr))) if arr.size else 0.0

    def max_abs_diff(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(np.max(np.abs(a - b))) if a.size else 0.0

    def all_finite(self, arr: np.ndarray) -> bool:
        return bool(np.isfinite(arr).all())

    def minmax(self, arr: np.ndarray) -> tuple[float, float]:
        return float(arr.min()), float(arr.max())

    def describe(self) -> str:
        import numba

        return f"cpu (numba {numba.__version__}, {numba.get_num_threads()} threads)"
