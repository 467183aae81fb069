"""The CuPy backend: CuPy arrays, hand-written CUDA C kernels compiled by NVRTC, CUDA graphs."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from simsplit.backends.base import Backend
from simsplit.backends.cuda_c.graph import CudaGraphReplay, capture_graph, check_launch_device
from simsplit.errors import GPU_INSTALL_HINT, BackendUnavailable
from simsplit.gpu.cuda_errors import as_cuda_error


def _cupy() -> Any:
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailable(
            f"backend 'cupy' needs CuPy, which is not installed ({GPU_INSTALL_HINT}, "
            f"for CUDA 13 drivers): {exc}") from None
    return cupy


class CupyBackend(Backend):
    name = "cupy"
    is_device = True
    has_graphs = True

    def __init__(self, device: int = 0) -> None:
        cp = self._cp = _cupy()
        try:
            count = int(cp.cuda.runtime.getDeviceCount())
        except Exception as exc:  # no driver or no device
            raise BackendUnavailable(f"backend 'cupy' finds no usable CUDA GPU: "
                                     f"{str(exc).splitlines()[0]}") from None
        if not 0 <= device < count:
            raise BackendUnavailable(f"backend 'cupy': GPU {device} does not exist "
                                     f"({count} visible)")
        super().__init__(device)
        self._dev = cp.cuda.Device(device)
        with self._dev:
            #: streams (with their end events) that :meth:`lanes` hands out, made on first use
            self._lanes: list[tuple[Any, Any]] = []
            self._fork_event = cp.cuda.Event(block=False, disable_timing=True)
        from simsplit.backends.cuda_c.d2q9 import D2Q9Kernels

        self.d2q9 = D2Q9Kernels(device)

    @functools.cached_property
    def d3q19(self) -> Any:
        """D3Q19 fluid kernels (``kernels/d3q19.cu``), compiled on first use."""
        from simsplit.backends.cuda_c.d3q19 import D3Q19Kernels

        return D3Q19Kernels(self.device)

    @functools.cached_property
    def link_forces(self) -> Any:
        """Exact force sums on bodies (``kernels/link_forces.cu``), compiled on first use."""
        from simsplit.backends.cuda_c.link_forces import LinkForceKernels

        return LinkForceKernels(self.device)

    @functools.cached_property
    def md(self) -> Any:
        """Lennard-Jones MD kernels (``kernels/md_lj.cu``), compiled on first use."""
        from simsplit.backends.cuda_c.md_cupy import CupyMDKernels

        return CupyMDKernels(self.device)

    # --- storage ---------------------------------------------------------------------------
    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        with self._dev:
            return self._cp.zeros(shape, dtype=dtype)

    def asarray(self, host: np.ndarray) -> Any:
        with self._dev:
            return self._cp.array(np.ascontiguousarray(host), copy=True)

    def empty_field(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """Padded rows, interior aligned to 128 B (:mod:`simsplit.backends.layout`)."""
        from simsplit.backends.layout import padded_empty

        with self._dev:
            return padded_empty(self._cp, shape, dtype)

    def field(self, host: np.ndarray) -> Any:
        out = self.empty_field(host.shape, host.dtype)
        with self._dev:
            out[...] = self._cp.asarray(np.ascontiguousarray(host))
        return out

    def to_host(self, arr: Any) -> np.ndarray:
        return self._cp.asnumpy(arr)

    def copy(self, dst: Any, src: Any) -> None:
        if dst.shape != src.shape or dst.dtype != src.dtype:
            raise ValueError(f"copy between {src.shape} {src.dtype} and {dst.shape} {dst.dtype}")
        if not (dst.flags.c_contiguous and src.flags.c_contiguous):
            raise ValueError("copy needs C-contiguous arrays")
        d, s = dst.device.id, src.device.id
        check_launch_device(d)
        try:
            if d == s:
                with self._cp.cuda.Device(d):  # on that device's current stream
                    dst.data.copy_from_device_async(src.data, src.nbytes)
            else:
                # memcpyPeer is ordered after all work queued on both devices and before any
                # queued later, which is the ordering the halo exchange needs (not capturable)
                check_launch_device(s)
                self._cp.cuda.runtime.memcpyPeer(dst.data.ptr, d, src.data.ptr, s, src.nbytes)
        except Exception as exc:
            err = as_cuda_error(exc, f"copy GPU {s} -> GPU {d} ({src.nbytes} B)")
            if err is None:
                raise
            raise err from exc

    # --- reductions ----------------------------------------------------------------------------
    def max_abs(self, arr: Any) -> float:
        if arr.size == 0:
            return 0.0
        with arr.device:
            return float(self._cp.abs(arr).max())

    def max_abs_diff(self, a: Any, b: Any) -> float:
        if a.size == 0:
            return 0.0
        with a.device:
            return float(self._cp.abs(a - b).max())

    def all_finite(self, arr: Any) -> bool:
        with arr.device:
            return bool(self._cp.isfinite(arr).all())

    def minmax(self, arr: Any) -> tuple[float, float]:
        with arr.device:
            return float(arr.min()), float(arr.max())

    # --- execution -----------------------------------------------------------------------------
    def synchronize(self) -> None:
        self._dev.synchronize()

    def device_properties(self) -> dict[str, Any] | None:
        p = self._cp.cuda.runtime.getDeviceProperties(self.device)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        return {"name": name, "total_memory": int(p["totalGlobalMem"]),
                "compute_capability": f"{p['major']}.{p['minor']}"}

    def memory_free(self) -> int:
        with self._dev:
            return int(self._cp.cuda.runtime.memGetInfo()[0])

    def activate(self) -> Any:
        return self._cp.cuda.Device(self.device)

    def reserve_lanes(self, n: int) -> None:
        cp = self._cp
        with self._dev:
            while len(self._lanes) < n:
                self._lanes.append((cp.cuda.Stream(non_blocking=True),
                                    cp.cuda.Event(block=False, disable_timing=True)))

    @contextmanager
    def lanes(self, n: int) -> Iterator[list[Any]]:
        """``n`` streams of this device (made once, reused): each waits for the work queued so
        far on the current stream; the current stream waits for all of them at the end. Events
        order them, so a CUDA graph capture records the fork and the join."""
        cp = self._cp
        self.reserve_lanes(n)
        with self._dev:
            main = cp.cuda.get_current_stream()
            fork = self._fork_event
            fork.record(main)
            streams = [stream for stream, _ in self._lanes[:n]]
            for stream in streams:
                stream.wait_event(fork)
            yield streams
            for stream, done in self._lanes[:n]:
                done.record(stream)
                main.wait_event(done)

    def clock(self) -> CupyClock:
        return CupyClock(self._cp, self.device)

    def capture(self, fn: Callable[[], object]) -> CudaGraphReplay:
        """Record the launches and copies ``fn`` queues on this device into a CUDA graph.

        See :mod:`simsplit.backends.cuda_c.graph` for what ``fn`` may do.
        """
        return capture_graph(self.device, fn)

    def describe(self) -> str:
        cp = self._cp
        props = cp.cuda.runtime.getDeviceProperties(self.device)
        gpu = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        rt = cp.cuda.runtime.runtimeGetVersion()
        return (f"cupy {cp.__version__} on GPU {self.device} ({gpu}, sm_{props['major']}"
                f"{props['minor']}, CUDA runtime {rt // 1000}.{rt % 1000 // 10})")


class CupyClock:
    """CUDA events on the current stream of one device (``timing.DeviceClock``)."""

    def __init__(self, cp: Any, device: int) -> None:
        self._cp, self.device = cp, device

    def record(self) -> Any:
        with self._cp.cuda.Device(self.device):
            ev = self._cp.cuda.Event()
            ev.record()
        return ev

    def elapsed(self, start: Any, end: Any) -> float:
        end.synchronize()
        return self._cp.cuda.get_elapsed_time(start, end) / 1e3
