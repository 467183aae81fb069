"""Point-to-point message passing between slabs: in one process or one slab per MPI rank.

Slab code talks only through :class:`Endpoint` ``send(dst, array, tag)`` / ``recv(src, tag)``;
:class:`InProcessExchange` keeps mailboxes in one process, :class:`MPIExchange` sends NumPy
buffers between ranks (``Isend`` / ``Recv`` keyed by rank and tag) without touching the
physics. Messages between one pair of slabs with one tag arrive in the order they were sent.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

import numpy as np


class InProcessExchange:
    """Mailboxes keyed by (source slab, destination slab, tag)."""

    def __init__(self, n_slabs: int) -> None:
        self.n_slabs = n_slabs
        self._boxes: defaultdict[tuple[int, int, str], deque[np.ndarray]] = defaultdict(deque)
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
_TAGS = {"mig_ids": 1, "mig_x": 2, "mig_v": 3, "mig_img": 4, "ghost_ids": 5, "ghost_x": 6}
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

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.n_slabs = int(comm.Get_size())
        self.rank = int(comm.Get_rank())
        self._sends: list[Any] = []
        self._keep: list[np.ndarray] = []
        self._receiving = False
        self.messages = 0
        self.bytes = 0

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
        self.flush()

    def _check(self, rank: int) -> None:
        if not 0 <= rank < self.n_slabs:
            raise ValueError(f"slab {rank} does not exist (have {self.n_slabs} ranks)")

    def _check_local(self, rank: int) -> None:
        if rank != self.rank:
            raise ValueError(f"slab {rank} is not on this rank ({self.rank})")
