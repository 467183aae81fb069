"""Halo transports: move opaque buffers between slabs, in one process or across ranks.

Every transport can be driven in two halves, ``start(send, recv)`` -> handle and
``finish(handle)``, so the caller can compute while halos travel; ``exchange`` is both at once.
The interface is :mod:`.base` (all that physics may import); the transports are :mod:`.local`
(one process, same device), :mod:`.peer` (GPUs of one process), :mod:`.nccl` and :mod:`.mpi`
(ranks). :mod:`simsplit.parallel` picks one; a new transport is a module here.
"""

from __future__ import annotations

from simsplit.transport.base import (
    Key,
    Link,
    NonBlockingTransport,
    Transport,
    finish_exchange,
    link_tag,
    start_exchange,
)

#: ``run.transport`` choices; ``auto`` is resolved by :mod:`simsplit.parallel`
TRANSPORT_CHOICES = ("auto", "local", "peer", "nccl", "mpi", "mpi-cuda-aware")

__all__ = [
    "Key", "Link", "Transport", "NonBlockingTransport", "TRANSPORT_CHOICES",
    "finish_exchange", "link_tag", "start_exchange",
]
