"""The transport interface: move buffers along decomposition links, reduce, gather.

A transport sees slab indices, faces and buffers. What the buffers hold (populations,
atoms) belongs to the physics that filled them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, Mapping, Sequence, TypeVar

import numpy as np

Key = tuple[int, int]  #: (slab index, face)
Link = tuple[int, int, int, int]  #: (src slab, src face, dst slab, dst face)
Plan = TypeVar("Plan")


class BufferPlans(Generic[Plan]):
    """What a transport made for its last few buffer sets (persistent requests, staging, copy
    plans), found by the identity of the buffers: a run alternates between a few sets (the
    one-step halos, the two-plane buffers of pair sweeps) and would rebuild at every switch."""

    #: buffer sets kept; the oldest goes beyond
    KEPT = 3

    def __init__(self) -> None:
        self._kept: list[tuple[list[Any], Plan]] = []

    def find(self, bufs: list[Any]) -> Plan | None:
        for have, plan in self._kept:
            if len(have) == len(bufs) and all(a is b for a, b in zip(have, bufs, strict=True)):
                return plan
        return None

    def add(self, bufs: list[Any], plan: Plan) -> Plan | None:
        """Keep ``plan`` for ``bufs``; returns the plan it pushed out (None if none)."""
        self._kept.append((list(bufs), plan))
        return self._kept.pop(0)[1] if len(self._kept) > self.KEPT else None

    def latest(self) -> Plan | None:
        return self._kept[-1][1] if self._kept else None

    def clear(self) -> list[Plan]:
        """Forget every plan; returns them."""
        out, self._kept = [plan for _, plan in self._kept], []
        return out


class Transport(ABC):
    """Moves halo buffers between slabs and combines per-slab scalars and arrays."""

    name = ""

    def __init__(self, links: Sequence[Link], local_slabs: Sequence[int], n_slabs: int) -> None:
        self.links = list(links)
        self.local_slabs = list(local_slabs)
        self.n_slabs = n_slabs

    @property
    def rank(self) -> int:
        return 0

    @property
    def size(self) -> int:
        return 1

    @abstractmethod
    def exchange(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> None:
        """For every link touching a local slab, deliver ``send[src]`` into ``recv[dst]``."""

    def allreduce_max(self, value: float) -> float:
        return value

    def allreduce_sum(self, value: float) -> float:
        return value

    def gather(self, pieces: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        """Host arrays of every slab, on every rank (collective)."""
        return dict(pieces)

    def bcast(self, obj: Any) -> Any:
        return obj

    def barrier(self) -> None:
        """Wait for every rank (no-op in one process)."""

    def abort(self, code: int = 1) -> None:
        """End every rank at once (one process: nothing else to end)."""

    def describe(self) -> str:
        return self.name


class NonBlockingTransport(Transport):
    """A transport whose exchange is split into a non-blocking start and a finish.

    After ``start`` returns, the caller may compute on anything except the buffers it passed;
    after ``finish`` returns, every receive buffer may be read by work the caller queues next
    (on the host, or on the device's current stream for GPU buffers).
    """

    def start(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> Any:
        raise NotImplementedError

    def finish(self, handle: Any) -> None:
        raise NotImplementedError

    def exchange(self, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> None:
        self.finish(self.start(send, recv))


def start_exchange(transport: Transport, send: Mapping[Key, Any], recv: Mapping[Key, Any]) -> Any:
    """Begin an exchange; a transport without a split interface does it all here."""
    if isinstance(transport, NonBlockingTransport):
        return transport.start(send, recv)
    transport.exchange(send, recv)
    return None


def finish_exchange(transport: Transport, handle: Any) -> None:
    """Complete an exchange begun with :func:`start_exchange`."""
    if isinstance(transport, NonBlockingTransport):
        transport.finish(handle)


def link_tag(dst_slab: int, dst_face: int) -> int:
    """MPI tag of the message that fills ghost layer ``dst_face`` of ``dst_slab``.

    Each ghost layer is filled by exactly one link, so this is unique per message of one
    exchange; it stays below 2 * 4096 slabs, far under the 32767 every MPI guarantees.
    """
    return 2 * dst_slab + dst_face
