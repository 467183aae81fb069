"""Point-to-point message passing between slabs: in one process or one slab per MPI rank.

Slab code talks only through :class:`Endpoint` ``send(dst, array, tag)`` / ``recv(src, tag)``;
:class:`InProcessExchange` keeps mailboxes in one process, :class:`MPIExchange` sends NumPy
buffers between ranks (``Isend`` / ``Recv`` keyed by rank and tag) without touching the
physics. Messages between one pair of slabs with one tag arrive in the order they were sent.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict, deque
from typing import Any, Callable

import numpy as np

from simsplit.transport.node_memory import NodeCounters, NodeMemory, NodeNotices


class InProcessExchange:
    """Mailboxes keyed by (source slab, destination slab, tag)."""

    def __init__(self, n_slabs: int) -> None:
        self.n_slabs = n_slabs
        self._boxes: defaultdict[tuple[int, int, str], deque[np.ndarray]] = defaultdict(deque)
        self._outboxes: dict[tuple[int, int, str], np.ndarray] = {}
        self.messages = 0
        self.bytes = 0

    def send(self, src: int, dst: int, array: np.ndarray, tag: str = "",
             keep: bool = False) -> None:
        """Queue a copy of ``array`` (the sender may reuse its buffer at once, as with MPI;
        ``keep`` changes nothing here)."""
        self._check(src)
        self._check(dst)
        buf = np.array(array, copy=True)
        self._boxes[(src, dst, tag)].append(buf)
        self.messages += 1
        self.bytes += buf.nbytes

    def recv(self, dst: int, src: int, tag: str = "") -> np.ndarray:
        """Take the oldest message from ``src`` to ``dst`` with ``tag``."""
        box = self._boxes.get((src, dst, tag))
        if not box:
            raise RuntimeError(f"slab {dst}: no message from slab {src} with tag {tag!r}")
        return box.popleft()

    def recv_into(self, dst: int, src: int, out: np.ndarray, tag: str = "") -> np.ndarray:
        """:meth:`recv` into the first rows of ``out``; returns that view."""
        return _fill(out, self.recv(dst, src, tag))

    def pending(self) -> int:
        """Messages sent but not yet received (0 between exchange phases)."""
        return sum(len(b) for b in self._boxes.values())

    def outbox(self, src: int, dst: int, tag: str, shape: tuple[int, ...], dtype: Any
               ) -> np.ndarray:
        """A buffer to fill and hand to :meth:`post` (here: this exchange's own array)."""
        return _grown(self._outboxes, (src, dst, tag), shape, dtype, np.empty)

    def post(self, src: int, dst: int, tag: str, rows: int) -> None:
        """Send the first ``rows`` rows of the last :meth:`outbox` of (src, dst, tag)."""
        self.send(src, dst, self._outboxes[(src, dst, tag)][:rows], tag)

    def inbox(self, dst: int, src: int, tag: str, row_shape: tuple[int, ...], dtype: Any,
              out: np.ndarray | None = None) -> np.ndarray:
        """The rows ``src`` posted to ``dst`` with ``tag`` (in ``out`` if given)."""
        return self.recv(dst, src, tag) if out is None else self.recv_into(dst, src, out, tag)

    def reserve(self, src: int, needs: dict[tuple[int, str], int]) -> None:
        """Nothing to reserve in one process."""

    def announce(self, src: int, needs: dict[tuple[int, str], int]) -> None:
        """Nothing to vote on in one process."""

    def use_device(self, host_buffer: Callable[[tuple[int, ...], Any], np.ndarray],
                   pin: Callable[[np.ndarray], Any], unpin: Callable[[Any], None]) -> None:
        """Nothing to pin: messages are copies in one process."""

    def node_counters(self) -> NodeCounters | None:
        """None: slabs of one process share no memory between processes."""
        return None

    def endpoint(self, rank: int) -> Endpoint:
        """The view of this exchange that slab ``rank`` uses."""
        self._check(rank)
        return Endpoint(self, rank)

    def _check(self, rank: int) -> None:
        if not 0 <= rank < self.n_slabs:
            raise ValueError(f"slab {rank} does not exist (have {self.n_slabs})")


class Endpoint:
    """One slab's handle on an exchange: the only way slabs talk to each other."""

    def __init__(self, exchange: InProcessExchange | MPIExchange, rank: int) -> None:
        self.exchange = exchange
        self.rank = rank

    def send(self, dst: int, array: np.ndarray, tag: str = "", keep: bool = False) -> None:
        """Send ``array``; ``keep``: the caller leaves it unchanged until the exchange's
        ``flush`` (MPI then sends it without a copy)."""
        self.exchange.send(self.rank, dst, array, tag, keep)

    def recv(self, src: int, tag: str = "") -> np.ndarray:
        return self.exchange.recv(self.rank, src, tag)

    def recv_into(self, src: int, out: np.ndarray, tag: str = "") -> np.ndarray:
        """Receive into the first rows of ``out`` (say pinned memory); returns that view."""
        return self.exchange.recv_into(self.rank, src, out, tag)

    def outbox(self, dst: int, tag: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Host rows (at least ``shape``) to fill, then hand over with :meth:`post`. They may
        be memory ``dst`` reads in place (same node): a post reuses the outbox of the post
        before last, so the caller must know that ``dst`` has finished with that one."""
        return self.exchange.outbox(self.rank, dst, tag, shape, dtype)

    def post(self, dst: int, tag: str, rows: int) -> None:
        """Hand the first ``rows`` rows of the last :meth:`outbox` to ``dst``."""
        self.exchange.post(self.rank, dst, tag, rows)

    def inbox(self, src: int, tag: str, row_shape: tuple[int, ...], dtype: Any,
              out: np.ndarray | None = None) -> np.ndarray:
        """The rows (each of ``row_shape`` and ``dtype``) ``src`` posted with ``tag``: read in
        place where ``src`` shares this node (valid until ``src`` posts twice more), else
        received (into ``out`` if given)."""
        return self.exchange.inbox(self.rank, src, tag, row_shape, dtype, out)

    def use_device(self, host_buffer: Callable[[tuple[int, ...], Any], np.ndarray],
                   pin: Callable[[np.ndarray], Any], unpin: Callable[[Any], None]) -> None:
        """Hooks of the device the slab's outboxes and inboxes are copied to and from
        (collective, like :meth:`reserve`)."""
        self.exchange.use_device(host_buffer, pin, unpin)

    def reserve(self, needs: dict[tuple[int, str], int]) -> None:
        """Room for outboxes of ``needs[(dst, tag)]`` bytes; collective: every slab calls it
        at the same point."""
        self.exchange.reserve(self.rank, needs)

    def announce(self, needs: dict[tuple[int, str], int]) -> None:
        """Say early what a later :meth:`reserve` of the same ``needs`` will ask for
        (collective, like it, but no slab waits here): the slabs' agreement on growing goes
        on meanwhile."""
        self.exchange.announce(self.rank, needs)

    def node_counters(self) -> NodeCounters | None:
        """Counters shared with the ranks of this node (made once; collective, like
        :meth:`reserve`), or None where slabs share no memory across processes."""
        return self.exchange.node_counters()


def _grown(pool: dict, key: Any, shape: tuple[int, ...], dtype: Any,
           alloc: Callable[[tuple[int, ...], Any], np.ndarray]) -> np.ndarray:
    """``pool[key]``, replaced by ``alloc`` (with room to spare) when it is smaller than
    ``shape`` or of another type."""
    have = pool.get(key)
    if have is None or have.dtype != np.dtype(dtype) or have.shape[1:] != tuple(shape[1:]) or \
            have.shape[0] < shape[0]:
        have = pool[key] = alloc((shape[0] + shape[0] // 8 + 16, *shape[1:]), dtype)
    return have


def _fill(out: np.ndarray, got: np.ndarray) -> np.ndarray:
    if got.shape[1:] != out.shape[1:] or got.shape[0] > out.shape[0] or got.dtype != out.dtype:
        raise ValueError(f"a message of {got.shape} {got.dtype} does not fit {out.shape} "
                         f"{out.dtype}")
    view = out[: got.shape[0]]
    view[...] = got
    return view


#: dtypes a message may carry (the header names one by its index here)
_DTYPES = (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.int32),
           np.dtype(np.bool_), np.dtype(np.uint8))
#: fixed MPI tags of the slab messages; other names hash into [64, 16384)
_TAGS = {"mig_ids": 1, "mig_x": 2, "mig_v": 3, "mig_img": 4, "ghost_ids": 5, "ghost_x": 6,
         "rank_round": 7, "rank_migrants": 8, "rank_ghosts": 9}
_HEADER_LEN = 4  # ndim, shape[0], shape[1] (or 0), dtype index


def _tag_number(tag: str) -> int:
    if tag in _TAGS:
        return _TAGS[tag]
    import zlib

    return 64 + zlib.crc32(tag.encode()) % (16384 - 64)


class MPIExchange:
    """:class:`InProcessExchange` over MPI: slab ``k`` lives on rank ``k`` of ``comm``.

    ``send`` posts a non-blocking header (shape, dtype) and a non-blocking copy of the data;
    ``recv`` blocks on the header, then on the data, from one source with one tag. MPI keeps
    messages of one (source, tag) in order, and receivers call ``recv`` in a fixed neighbour
    order, so the exchange is deterministic. Sends of the previous phase are completed
    (``Waitall``) when the next phase starts sending: every phase's messages are received in
    that phase, so this never waits on a peer that is waiting on us.
    """

    name = "mpi"

    def __init__(self, comm: Any, node_memory: bool | None = None) -> None:
        self.comm = comm
        self.n_slabs = int(comm.Get_size())
        self.rank = int(comm.Get_rank())
        self._sends: list[Any] = []
        self._keep: list[np.ndarray] = []
        self._receiving = False
        self.messages = 0
        self.bytes = 0
        #: whether outboxes to ranks of this node live in shared memory (:meth:`use_device`);
        #: by default yes, unless SIMSPLIT_NODE_MEMORY=0 (to compare with plain messages)
        self.node_memory = node_memory if node_memory is not None else \
            os.environ.get("SIMSPLIT_NODE_MEMORY", "1") != "0"
        self._node: NodeMemory | None = None
        #: notices of posts to and from the ranks of this node (with node memory)
        self._notices: NodeNotices | None = None
        self._counters: NodeCounters | None = None
        self._host_buffer: Callable[[tuple[int, ...], Any], np.ndarray] = np.empty
        self._outboxes: dict[tuple[int, str], np.ndarray] = {}
        self._posted: dict[tuple[int, str], int] = {}
        #: posts read in place from node memory (the rest went as messages)
        self.posts_in_place = 0

    def use_device(self, host_buffer: Callable[[tuple[int, ...], Any], np.ndarray],
                   pin: Callable[[np.ndarray], Any], unpin: Callable[[Any], None]) -> None:
        """Device hooks for outboxes (collective): private ones from ``host_buffer`` (pinned
        memory), node-shared ones registered with ``pin``."""
        self._host_buffer = host_buffer
        if self.node_memory and self._node is None:
            self._node = NodeMemory(self.comm, pin, unpin)
            # SIMSPLIT_NODE_NOTICES=0: notices as messages (to compare)
            if os.environ.get("SIMSPLIT_NODE_NOTICES", "1") != "0":
                self._notices = NodeNotices(self.comm, (self._node.node, self._node.local))

    def outbox(self, src: int, dst: int, tag: str, shape: tuple[int, ...], dtype: Any
               ) -> np.ndarray:
        """Rows to fill for :meth:`post`: a slot of this rank's node-shared segment when
        ``dst`` shares the node and the outbox was reserved large enough, else a private
        pinned buffer (sent as a message)."""
        self._check_local(src)
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize  # (np.prod: 3 us a step)
        slot = self._node.outbox(dst, tag, nbytes) if self._node is not None else None
        if slot is None:
            self._posted[(dst, tag)] = -1
            return _grown(self._outboxes, (dst, tag), shape, dtype, self._host_buffer)
        raw, self._posted[(dst, tag)] = slot
        return raw.view(dtype).reshape(shape)

    def post(self, src: int, dst: int, tag: str, rows: int) -> None:
        """A notice of ``rows`` rows at an offset of this rank's segment, or (offset -1) the
        rows themselves as a message that follows, sent without a copy (see :meth:`send`).
        The notice goes through node memory to a rank of this node, else as a message."""
        offset = self._posted[(dst, tag)]
        if self._notices is not None and self._notices.shares(dst):
            self._check_local(src)
            self._notices.post(dst, _tag_number(tag), rows, offset)
        else:
            self.send(src, dst, np.array([rows, offset], np.int64), tag)
        self.posts_in_place += offset >= 0
        if offset < 0:
            self.send(src, dst, self._outboxes[(dst, tag)][:rows], tag + "/rows", keep=True)

    def inbox(self, dst: int, src: int, tag: str, row_shape: tuple[int, ...], dtype: Any,
              out: np.ndarray | None = None) -> np.ndarray:
        """The rows ``src`` posted: in place in its segment, or received (into ``out``)."""
        if self._notices is not None and self._notices.shares(src):
            self._check_local(dst)
            rows, offset = self._notices.take(src, _tag_number(tag))
        else:
            rows, offset = (int(v) for v in self.recv(dst, src, tag))
        if offset < 0:
            got = self.recv(dst, src, tag + "/rows") if out is None else \
                self.recv_into(dst, src, out, tag + "/rows")
            return got.reshape((rows, *row_shape))
        assert self._node is not None
        dtype = np.dtype(dtype)
        row_bytes = math.prod(row_shape) * dtype.itemsize
        raw = self._node.inbox(src, offset, rows * row_bytes)
        return raw.view(dtype).reshape((rows, *row_shape))

    def reserve(self, src: int, needs: dict[tuple[int, str], int]) -> None:
        """Room in node memory for the outboxes of ``needs`` (collective over the ranks)."""
        self._check_local(src)
        if self._node is not None:
            self._node.reserve(needs)

    def announce(self, src: int, needs: dict[tuple[int, str], int]) -> None:
        """Start node memory's vote on ``needs`` (collective, non-blocking)."""
        self._check_local(src)
        if self._node is not None:
            self._node.announce(needs)

    def node_counters(self) -> NodeCounters:
        """The node's shared step counters (made at the first call: collective)."""
        if self._counters is None:
            self._counters = NodeCounters(self.comm)
        return self._counters


    def send(self, src: int, dst: int, array: np.ndarray, tag: str = "",
             keep: bool = False) -> None:
        """Post ``array`` from slab ``src``: copied, so the caller may reuse its buffer at
        once, unless ``keep`` promises it stays unchanged until :meth:`flush`."""
        self._check_local(src)
        self._check(dst)
        if self._receiving:
            self.flush()
        buf = np.ascontiguousarray(array) if keep else np.array(array, copy=True, order="C")
        if buf.dtype not in _DTYPES or buf.ndim > 2:
            raise TypeError(f"MPIExchange: cannot send an array of {buf.dtype} and shape "
                            f"{buf.shape}")
        shape = list(buf.shape) + [0] * (2 - buf.ndim)
        hdr = np.array([buf.ndim, *shape, _DTYPES.index(buf.dtype)], dtype=np.int64)
        t = _tag_number(tag)
        self._sends.append(self.comm.Isend(hdr, dest=dst, tag=2 * t))
        self._sends.append(self.comm.Isend(buf, dest=dst, tag=2 * t + 1))
        self._keep += [hdr, buf]
        self.messages += 1
        self.bytes += buf.nbytes

    def recv(self, dst: int, src: int, tag: str = "") -> np.ndarray:
        """The oldest message from slab ``src`` to the local slab ``dst`` with ``tag``."""
        shape, dtype, t = self._header(dst, src, tag)
        buf = np.empty(shape, dtype=dtype)
        self.comm.Recv(buf, source=src, tag=t + 1)
        return buf

    def recv_into(self, dst: int, src: int, out: np.ndarray, tag: str = "") -> np.ndarray:
        """:meth:`recv` straight into the first rows of ``out``; returns that view."""
        shape, dtype, t = self._header(dst, src, tag)
        if len(shape) != out.ndim or shape[1:] != out.shape[1:] or shape[0] > out.shape[0] \
                or dtype != out.dtype:
            raise ValueError(f"MPIExchange: a message of {shape} {dtype} from slab {src} does "
                             f"not fit {out.shape} {out.dtype}")
        view = out[: shape[0]]
        self.comm.Recv(view, source=src, tag=t + 1)
        return view

    def _header(self, dst: int, src: int, tag: str) -> tuple[tuple[int, ...], np.dtype, int]:
        """Receive the next header from ``src`` with ``tag``: the data's shape, dtype and the
        header's MPI tag (the data's is one more)."""
        self._check_local(dst)
        self._check(src)
        self._receiving = True
        t = 2 * _tag_number(tag)
        hdr = np.empty(_HEADER_LEN, dtype=np.int64)
        self.comm.Recv(hdr, source=src, tag=t)
        ndim, n0, n1, code = (int(h) for h in hdr)
        return (n0, n1)[:ndim], _DTYPES[code], t

    def flush(self) -> None:
        """Complete every posted send (their buffers are then free)."""
        if self._sends:
            from mpi4py import MPI

            MPI.Request.Waitall(self._sends)
        self._sends, self._keep = [], []
        self._receiving = False

    def pending(self) -> int:
        """Posted sends not yet known to be complete."""
        return len(self._sends) // 2

    def endpoint(self, rank: int) -> Endpoint:
        self._check(rank)
        return Endpoint(self, rank)

    def allreduce_max(self, value: float) -> float:
        from mpi4py import MPI

        return float(self.comm.allreduce(float(value), op=MPI.MAX))

    def allreduce_sum(self, value: float) -> float:
        from mpi4py import MPI

        return float(self.comm.allreduce(float(value), op=MPI.SUM))

    def allgather_rows(self, ids: np.ndarray, values: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
        """Every rank's ``ids`` and ``values`` (rows), concatenated in rank order on every rank."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        values = np.ascontiguousarray(values)
        counts = [int(c) for c in self.comm.allgather(int(ids.shape[0]))]
        all_ids = np.empty(sum(counts), dtype=np.int64)
        self.comm.Allgatherv(ids, [all_ids, counts])
        width = int(np.prod(values.shape[1:], dtype=np.int64))
        all_vals = np.empty((sum(counts),) + values.shape[1:], dtype=values.dtype)
        self.comm.Allgatherv(values, [all_vals, [c * width for c in counts]])
        return all_ids, all_vals

    def close(self) -> None:
        """Complete the sends. Node memory stays until the process ends: freeing it is
        collective, and a rank may close alone on its way out of a failed run."""
        self.flush()

    def _check(self, rank: int) -> None:
        if not 0 <= rank < self.n_slabs:
            raise ValueError(f"slab {rank} does not exist (have {self.n_slabs} ranks)")

    def _check_local(self, rank: int) -> None:
        if rank != self.rank:
            raise ValueError(f"slab {rank} is not on this rank ({self.rank})")
