"""The backend interface: array storage, kernel launch and synchronisation on one kind of device.

Physics code holds a :class:`Backend` and calls its kernel sets (``backend.d2q9``, ...) with
arrays it allocated through the same backend. It never imports a device library itself.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, ContextManager, Iterator, Protocol

import numpy as np


class Replay(Protocol):
    def replay(self) -> None:
        """Queue the recorded work once more, after the work already queued."""


class DirectReplay:
    """Replays by calling ``fn`` again: how backends without graphs honour ``capture``."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self._fn = fn

    def replay(self) -> None:
        self._fn()


#: fraction of :meth:`Backend.memory_free` a run may plan to use (allocator slack, compiled
#: modules, halos)
USABLE_MEMORY_FRACTION = 0.9


def host_memory_available() -> int:
    """Bytes of host memory the kernel says a new allocation can take without swapping."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


class Backend(ABC):
    """Allocation, transfer and reductions for one array library; kernels hang off it."""

    #: name used in case files (``run.backend``)
    name: str = ""
    #: True when arrays live in device memory and need explicit transfers
    is_device: bool = False
    #: True when :meth:`capture` records real graphs (replays cost one launch, not many)
    has_graphs: bool = False

    def __init__(self, device: int = 0) -> None:
        self.device = device

    # --- storage -----------------------------------------------------------------------
    @abstractmethod
    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any: ...

    @abstractmethod
    def asarray(self, host: np.ndarray) -> Any:
        """Copy a host array into this backend's memory."""

    def empty_field(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An uninitialised lattice field in the layout of :meth:`field`."""
        return self.zeros(shape, dtype)

    def field(self, host: np.ndarray) -> Any:
        """Copy a lattice field (populations or flags, ghost cells included) into this backend's
        memory, in the layout its kernels run fastest on. Same shape and values as
        :meth:`asarray`; the strides may differ (padded rows on GPUs)."""
        return self.asarray(host)

    @abstractmethod
    def to_host(self, arr: Any) -> np.ndarray:
        """Copy an array of this backend into a new host array."""

    @abstractmethod
    def copy(self, dst: Any, src: Any) -> None:
        """Copy ``src`` into ``dst`` (same shape and dtype) on this backend's device."""

    def clone(self, arr: Any) -> Any:
        """A new array on this backend holding a copy of ``arr``."""
        out = self.zeros(arr.shape, arr.dtype)
        self.copy(out, arr)
        return out

    # --- reductions (exact: max is independent of summation order) -----------------------
    @abstractmethod
    def max_abs(self, arr: Any) -> float: ...

    @abstractmethod
    def max_abs_diff(self, a: Any, b: Any) -> float: ...

    @abstractmethod
    def all_finite(self, arr: Any) -> bool: ...

    @abstractmethod
    def minmax(self, arr: Any) -> tuple[float, float]: ...

    # --- execution -----------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait until all work queued on this backend's device has finished."""

    def capture(self, fn: Callable[[], object]) -> Replay:
        """Record the launches ``fn`` queues for cheap replay (a CUDA graph where possible).

        ``fn`` must leave Python state as it found it (an even number of buffer swaps), and
        may not allocate, synchronise or read device data back.
        """
        return DirectReplay(fn)

    def clock(self) -> Any:
        """A :class:`simsplit.gpu.timing.DeviceClock` for this device, or None (host timers
        only)."""
        return None

    def reserve_lanes(self, n: int) -> None:
        """Make what :meth:`lanes` needs for ``n`` lanes now (before a graph capture)."""

    @contextmanager
    def lanes(self, n: int) -> Iterator[list[ContextManager[Any]]]:
        """``n`` contexts in which work is queued independently of each other's (one stream
        each on a GPU), after everything queued so far; work queued after the ``with`` block
        waits for all of it. Where the backend runs work in order (CPU), plain contexts."""
        yield [nullcontext() for _ in range(n)]

    def activate(self) -> ContextManager[Any]:
        """Context in which allocations and launches go to ``self.device``."""
        return nullcontext()

    def device_properties(self) -> dict[str, Any] | None:
        """The GPU this backend runs on as ``name``, ``total_memory`` (bytes) and
        ``compute_capability`` ("9.0"); None where there is no GPU (CPU, the CUDA simulator)."""
        return None

    def memory_free(self) -> int:
        """Bytes free where this backend's arrays live (host memory unless overridden)."""
        return host_memory_available()

    def describe(self) -> str:
        return self.name
