"""Backends: where arrays live and how kernels are compiled and launched.

``get_backend(name, device)`` is the only entry point physics and drivers use; ``auto`` picks
the CUDA C backend (CuPy) when a GPU is usable and the CPU backend otherwise.
"""

from __future__ import annotations

import importlib
import os

from simsplit.backends.base import Backend
from simsplit.errors import BackendUnavailable

#: case-file name -> (module, class)
BACKENDS: dict[str, tuple[str, str]] = {
    "cpu": ("simsplit.backends.cpu", "CPUBackend"),
    "cupy": ("simsplit.backends.cuda_c", "CupyBackend"),
    "numba-cuda": ("simsplit.backends.numba_cuda", "NumbaCudaBackend"),
}
BACKEND_CHOICES = ("auto", *BACKENDS)


def gpu_count() -> int:
    """Number of CUDA devices CuPy can use here (0 without CuPy, driver or device)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return 0
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no cupy, no driver, no device: all mean "no GPU"
        return 0


def resolve_backend_name(name: str) -> str:
    if name == "auto":
        return "cupy" if gpu_count() > 0 else "cpu"
    if name not in BACKENDS:
        raise BackendUnavailable(
            f"unknown backend {name!r}; choose from {', '.join(BACKEND_CHOICES)}")
    return name


def get_backend(name: str = "auto", device: int = 0) -> Backend:
    """Instantiate a backend by case-file name, on ``device`` for GPU backends."""
    name = resolve_backend_name(name)
    module, cls = BACKENDS[name]
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise BackendUnavailable(
            f"backend {name!r} needs a library that is missing: {exc}") from exc
    return getattr(mod, cls)(device)


__all__ = ["Backend", "BackendUnavailable", "BACKENDS", "BACKEND_CHOICES", "get_backend",
           "gpu_count", "resolve_backend_name"]
