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
they have come (the MD device links' ordering); :class:`NodeNotices` carry the small notices
(tag, rows, offset) of posts between the ranks of a node, instead of MPI messages.

The shared counters and rings rely on stores becoming visible to the other cores in program
order (x86-64's memory model): a record is written before the count that publishes it.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable

import numpy as np

#: bytes each slot is aligned to (cache lines; also fine for any element type)
_ALIGN = 256
#: notices a rank may post to another before that one has read them
NOTICE_RING = 64


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


def _shared_int64s(node: Any, count: int) -> tuple[Any, np.ndarray]:
    """An MPI shared-memory window of ``count`` int64 over the ranks of ``node`` (node rank 0
    holds it) and the array every rank sees of it (collective over ``node``)."""
    from mpi4py import MPI

    win = MPI.Win.Allocate_shared(8 * count if node.Get_rank() == 0 else 0, 8, comm=node)
    buf, _ = win.Shared_query(0)
    return win, np.frombuffer(buf, np.int64, count=count)


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
        #: the vote :meth:`announce` started: its needs, request and (vote, total) buffers
        self._vote: tuple[dict[tuple[int, str], int], Any, tuple[np.ndarray, np.ndarray]] | \
            None = None

    def shares(self, rank: int) -> bool:
        """Whether world rank ``rank`` is on this node (and may read this rank's segment)."""
        return rank in self.local

    def announce(self, needs: dict[tuple[int, str], int]) -> None:
        """Start the ranks' vote of :meth:`reserve` on ``needs`` without waiting (collective,
        non-blocking): a rank that gets to its :meth:`reserve` of the same ``needs`` later then
        finds the others' votes there instead of waiting for them to arrive."""
        from mpi4py import MPI

        self._settle()
        vote = np.array([0 if self._fits(needs) else 1], np.int64)
        total = np.zeros(1, np.int64)
        self._vote = (needs, self.comm.Iallreduce(vote, total, op=MPI.SUM), (vote, total))

    def reserve(self, needs: dict[tuple[int, str], int]) -> None:
        """Make room for outboxes of at least ``needs[(dst, tag)]`` bytes (collective over the
        world communicator; the vote :meth:`announce` started if it was for these ``needs``).
        Keeps the segments unless some rank's needs outgrow its own."""
        vote = self._vote
        if vote is not None and vote[0] is needs:
            self._vote = None
            vote[1].Wait()
            grow = int(vote[2][1][0])
        else:
            self._settle()
            grow = self.comm.allreduce(0 if self._fits(needs) else 1)
        if not grow:
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

    def _fits(self, needs: dict[tuple[int, str], int]) -> bool:
        return all(key in self.regions and self.regions[key][1] >= n
                   for key, n in needs.items())

    def _settle(self) -> None:
        """Complete a vote that no :meth:`reserve` took (every rank started it, so it ends)."""
        if self._vote is not None:
            self._vote[1].Wait()
            self._vote = None

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
        self._settle()
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
        node, self._index = _node_split(comm)
        #: one counter per node rank, in node-rank order; world rank -> its index
        self._win, self._values = _shared_int64s(node, node.Get_size())
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
        if values[at] < value:
            _spin(lambda: values[at] >= value, timeout,
                  lambda: f"rank {rank} did not reach point {value} within {timeout:g} s (it "
                          f"is at {int(values[at])})")


class NodeNotices:
    """Notices (tag number, rows, offset) from rank to rank of one node through shared memory:
    one ring of NOTICE_RING records per ordered pair of node ranks, with a written count its
    writer raises and a read count its reader raises. Notices of one (source, tag) are taken
    in the order they were posted, as MPI keeps messages; a notice of another tag read on the
    way waits in this rank's own queue. Made collectively over the world communicator
    ``comm``; ``split``: its node split where the caller has it (:class:`NodeMemory`'s ``node``
    and ``local``), else made here."""

    def __init__(self, comm: Any, split: tuple[Any, dict[int, int]] | None = None) -> None:
        node, self._index = split if split is not None else _node_split(comm)
        size = node.Get_size()
        self._win, rings = _shared_int64s(node, size * size * (2 + 3 * NOTICE_RING))
        #: [writer, reader]: written count, read count, then the records
        self._rings = rings.reshape(size, size, -1)
        self._me = self._index[int(comm.Get_rank())]
        self._rings[self._me, :, :2] = 0  # the counts of the rings this rank writes
        self._early: dict[tuple[int, int], deque[tuple[int, int]]] = {}
        node.Barrier()

    def shares(self, rank: int) -> bool:
        """Whether world rank ``rank`` is on this node."""
        return rank in self._index

    def post(self, dst: int, tag: int, rows: int, offset: int) -> None:
        """Post a notice to world rank ``dst`` (waits while its ring is full)."""
        ring = self._rings[self._me, self._index[dst]]
        written = int(ring[0])
        if written - ring[1] >= NOTICE_RING:
            _spin(lambda: written - ring[1] < NOTICE_RING, None, str)
        at = 2 + 3 * (written % NOTICE_RING)
        ring[at: at + 3] = (tag, rows, offset)
        ring[0] = written + 1  # publishes the record (written before it)

    def take(self, src: int, tag: int) -> tuple[int, int]:
        """The oldest notice (rows, offset) from world rank ``src`` with ``tag``; waits for it
        as a blocking receive does."""
        early = self._early.get((src, tag))
        if early:
            return early.popleft()
        ring = self._rings[self._index[src], self._me]
        while True:
            read = int(ring[1])
            if ring[0] == read:
                _spin(lambda read=read: ring[0] != read, None, str)
            at = 2 + 3 * (read % NOTICE_RING)
            got, rows, offset = (int(v) for v in ring[at: at + 3])
            ring[1] = read + 1
            if got == tag:
                return rows, offset
            self._early.setdefault((src, got), deque()).append((rows, offset))


def _spin(done: Callable[[], bool], timeout: float | None, late: Callable[[], str]) -> None:
    """Return once ``done()``; RuntimeError(``late()``) after ``timeout`` seconds (None: wait
    as long as it takes, as a blocking MPI receive does). A few thousand checks between looks
    at the clock; the core is given up now and then (a rank may share it), and after a second
    of waiting each look sleeps 50 microseconds."""
    start = time.monotonic()
    spins = 0
    while not done():
        spins += 1
        if spins % 4096 == 0:
            waited = time.monotonic() - start
            if timeout is not None and waited > timeout:
                raise RuntimeError(late())
            time.sleep(5e-5 if waited > 1.0 else 0)
