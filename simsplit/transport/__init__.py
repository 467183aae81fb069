"""Halo transports: move opaque buffers between slabs, in one process or across ranks.

Every transport can be driven in two halves, ``start(send, recv)`` -> handle and
``finish(handle)``, so the caller can compute while halos travel; ``exchange`` is both at once.
The MPI, NCCL and peer transports are imported lazily (they pull in mpi4py or CuPy).
"""

from __future__ import annotations

from typing import Any, Mapping

from simsplit.transport.base import Key, Link, Transport
from simsplit.transport.local import LocalTransport

#: ``run.transport`` choices; ``auto`` is resolved by :mod:`simsplit.parallel`
TRANSPORT_CHOICES = ("auto", "local", "peer", "nccl", "mpi", "mpi-cuda-aware")


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


__all__ = [
    "Key", "Link", "Transport", "LocalTransport", "NonBlockingTransport", "TRANSPORT_CHOICES",
    "finish_exchange", "link_tag", "start_exchange",
]
