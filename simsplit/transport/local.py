"""In-process transport: every slab lives in this process; halos are plain array copies."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from simsplit.transport.base import Key, Transport


class LocalTransport(Transport):
    """Copies each link's send buffer into its receive buffer with ``copy(dst, src)``."""

    name = "local"

    def __init__(self, links, local_slabs, n_slabs, copy: Callable[[Any, Any], None]) -> None:
        super().__init__(links, local_slabs, n_slabs)
        self._copy = copy

    def exchange(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> None:
        for src, sface, dst, dface in self.links:
            self._copy(recv[(dst, dface)], send[(src, sface)])
