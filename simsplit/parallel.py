"""Placement of slabs on processes and devices, and the transport that links them.

Physics asks a :class:`ParallelContext` which slabs are its own, which backend each one
runs on and how halos travel; it never looks at ranks, devices or MPI itself.
"""

from __future__ import annotations

from typing import Sequence

from simsplit.backends import Backend, get_backend, gpu_count, resolve_backend_name
from simsplit.transport.base import Link, Transport
from simsplit.transport.local import LocalTransport


class ParallelContext:
    """One process holding every slab (slab i on device i mod the number of devices)."""

    def __init__(self, backend: str = "auto", devices: Sequence[int] | None = None) -> None:
        self.backend_name = resolve_backend_name(backend)
        if devices is None:
            devices = list(range(max(1, gpu_count()))) if self.backend_name != "cpu" else [0]
        self.devices = list(devices)
        self._backends: dict[int, Backend] = {}

    @property
    def rank(self) -> int:
        return 0

    @property
    def size(self) -> int:
        return 1

    def local_slabs(self, n_slabs: int) -> list[int]:
        return list(range(n_slabs))

    def device_of(self, slab: int) -> int:
        return self.devices[slab % len(self.devices)]

    def backend_for(self, slab: int) -> Backend:
        dev = self.device_of(slab)
        if dev not in self._backends:
            self._backends[dev] = get_backend(self.backend_name, dev)
        return self._backends[dev]

    def transport(self, links: Sequence[Link], n_slabs: int) -> Transport:
        backend = self.backend_for(0)
        return LocalTransport(links, self.local_slabs(n_slabs), n_slabs, backend.copy)

    def describe(self) -> str:
        return f"1 process, backend {self.backend_for(0).describe()}"
