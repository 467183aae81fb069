"""Point-to-point message passing between slabs that live in one process.

Slab code talks only through :class:`Endpoint` ``send(dst, array, tag)`` / ``recv(src, tag)``,
so an MPI transport (``comm.Isend``/``comm.Recv`` keyed by rank and tag) can replace
:class:`InProcessExchange` without touching the physics. Messages between one pair of slabs
with one tag arrive in the order they were sent, as with MPI.
"""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np


class InProcessExchange:
    """Mailboxes keyed by (source slab, destination slab, tag)."""

    def __init__(self, n_slabs: int) -> None:
        self.n_slabs = n_slabs
        self._boxes: defaultdict[tuple[int, int, str], deque[np.ndarray]] = defaultdict(deque)
        self.messages = 0
        self.bytes = 0

    def send(self, src: int, dst: int, array: np.ndarray, tag: str = "") -> None:
        """Queue a copy of ``array`` (the sender may reuse its buffer at once, as with MPI)."""
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

    def __init__(self, exchange: InProcessExchange, rank: int) -> None:
        self.exchange = exchange
        self.rank = rank

    def send(self, dst: int, array: np.ndarray, tag: str = "") -> None:
        self.exchange.send(self.rank, dst, array, tag)

    def recv(self, src: int, tag: str = "") -> np.ndarray:
        return self.exchange.recv(self.rank, src, tag)
