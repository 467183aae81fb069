"""Host memory that the MPI ranks of one node share: outboxes a neighbour reads in place.

Each rank owns one segment of an MPI-3 shared-memory window (``MPI_Win_allocate_shared`` over
the node's ranks) and carves it into regions, one per outbox (destination, tag), each of two
slots used in turn. A device download can land straight in a slot and the neighbour's upload
read straight out of it: no message copies the bytes (Open MPI's shared-memory path copies them
twice without a single-copy mechanism, about 4 GB/s). Segments are pinned through a callback, so
device copies to and from them run asynchronously.

Growing is collective: every rank of the world communicator calls :meth:`NodeMemory.reserve`
at the same point of its program (the MD rank slabs do so at each rebuild, which all ranks share).
:class:`NodeCounters` are shared counters by which the ranks of a node tell each other how far
they have come (the MD device links' ordering).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

#: bytes each slot is aligned to (cache lines; also fine for any element type)
_ALIGN = 256


def _aligned(nbytes: int) -> int:
    return (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN


def _node_split(comm: Any) -> tuple[Any, dict[int, int]]:
    """The communicator of the ranks of ``comm`` that share this rank's node, and the map
    world rank -> rank in it for those ranks (collective over ``comm``)."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    ranks = MPI.Group.Translate_ranks(node.Get_group(), list(range(node.Get_size())),
                                      comm.Get_group())
    return node, {int(w): n for n, w in enumerate(ranks)}


class NodeMemory:
    """Shared outbox segments of the ranks of ``comm`` that share this rank's node.

    ``pin(buffer)`` registers host memory with the device (returning a handle for ``unpin``);
    both default to doing nothing.
    """

    def __init__(self, comm: Any, pin: Callable[[np.ndarray], Any] | None = None,
                 unpin: Callable[[Any], None] | None = None) -> None:
        self.comm = comm
        #: the node's communicator; world rank -> rank in it, for the ranks of this node
        self.node, self.local = _node_split(comm)
        self._pin, self._unpin = pin, unpin
        self._win: Any = None
        self._pins: list[Any] = []
        self._segments: dict[int, np.ndarray] = {}
        #: (destination, tag) -> (byte offset of slot 0, bytes per slot) in this rank's segment
        self.regions: dict[tuple[int, str], tuple[int, int]] = {}
        self._turn: dict[tuple[int, str], int] = {}
        self.generation = 0

    def shares(self, rank: int) -> bool:
        """Whether world rank ``rank`` is on this node (and may read this rank's segment)."""
        return rank in self.local

    def reserve(self, needs: dict[tuple[int, str], int]) -> None:
        """Make room for outboxes of at least ``needs[(dst, tag)]`` bytes (collective over the
        world communicator). Keeps the segments unless some rank's needs outgrow its own."""
        fits = all(key in self.regions and self.regions[key][1] >= n for key, n in needs.items())
        if not self.comm.allreduce(0 if fits else 1):
            return
        plan, offset = {}, 0
        for key in sorted(set(needs) | set(self.regions)):
            n = needs.get(key, 0)
            old = self.regions.get(key, (0, 0))[1]
            size = _aligned(max(old, n + n // 8 + _ALIGN))
            plan[key] = (offset, size)
            offset += 2 * size
        self._allocate(max(offset, _ALIGN))
        self.regions = plan
        self._turn = {}

    def outbox(self, dst: int, tag: str, nbytes: int) -> tuple[np.ndarray, int] | None:
        """The next slot of outbox (``dst``, ``tag``) as bytes, and its offset in this rank's
        segment; None if the outbox was never reserved or is too small. Slots alternate, so
        the slot of the post before last comes back: the caller must know that ``dst`` has
        finished reading it."""
        region = self.regions.get((dst, tag))
        if region is None or region[1] < nbytes or not self.shares(dst):
            return None
        turn = self._turn.get((dst, tag), 0)
        self._turn[(dst, tag)] = 1 - turn
        start = region[0] + turn * region[1]
        return self._segments[self.comm.Get_rank()][start: start + nbytes], start

    def inbox(self, src: int, offset: int, nbytes: int) -> np.ndarray:
        """Bytes ``[offset, offset + nbytes)`` of rank ``src``'s segment (read in place)."""
        return self._segments[src][offset: offset + nbytes]

    def close(self) -> None:
        """Unpin and free the segments (collective, like :meth:`reserve`)."""
        self._release()

    def _allocate(self, nbytes: int) -> None:
        from mpi4py import MPI

        self._release()
        self._win = MPI.Win.Allocate_shared(nbytes, 1, comm=self.node)
        for world, local in self.local.items():
            buf, _ = self._win.Shared_query(local)
            seg = np.frombuffer(buf, np.uint8)
            self._segments[world] = seg
            if self._pin is not None:
                self._pins.append(self._pin(seg))
        self.generation += 1

    def _release(self) -> None:
        if self._unpin is not None:
            for handle in self._pins:
                self._unpin(handle)
        self._pins, self._segments = [], {}
        if self._win is not None:
            self._win.Free()
            self._win = None


class NodeCounters:
    """One int64 counter per rank of this node in shared memory, which its rank raises and
    the others read: a rank says how far its program has come without a message (a few
    hundred nanoseconds against an MPI round trip of several microseconds). Made collectively
    over the world communicator ``comm``; counters start at 0."""

    def __init__(self, comm: Any) -> None:
        from mpi4py import MPI

        node, self._index = _node_split(comm)
        self._win = MPI.Win.Allocate_shared(8 * node.Get_size() if node.Get_rank() == 0 else 0, 8,
                                            comm=node)
        buf, _ = self._win.Shared_query(0)
        #: one counter per node rank, in node-rank order; world rank -> its index
        self._values = np.frombuffer(buf, np.int64, count=node.Get_size())
        self._mine = self._index[int(comm.Get_rank())]
        self._values[self._mine] = 0
        node.Barrier()

    def shares(self, rank: int) -> bool:
        """Whether world rank ``rank`` is on this node."""
        return rank in self._index

    def publish(self, value: int) -> None:
        """Set this rank's counter (only ever raised)."""
        self._values[self._mine] = value

    def wait(self, rank: int, value: int, timeout: float = 60.0) -> None:
        """Return once world rank ``rank``'s counter is at least ``value``; RuntimeError after
        ``timeout`` seconds (a rank that died or left the loop), so no rank spins forever."""
        values, at = self._values, self._index[rank]
        if values[at] >= value:
            return
        deadline = time.monotonic() + timeout
        spins = 0
        while values[at] < value:
            spins += 1
            if spins % 4096 == 0:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"rank {rank} did not reach point {value} within "
                                       f"{timeout:g} s (it is at {int(values[at])})")
                time.sleep(0)  # let a rank that shares this core run
