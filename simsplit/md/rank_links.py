"""Device links of a rank slab: between rebuilds, each step's ghost positions go from a slab's
device memory straight into its neighbour's ghost rows, with no host copy and no host wait, so
rank slabs step in batches as one slab in one process does.

A link's sender owns a device buffer of two slots, which the receiver (a process of the same
node) opens in place (``shared_buffer`` / ``open_shared`` of the kernel set: CUDA IPC), and
each slot has two events both processes use: *packed*, recorded by the sender, and *landed*,
recorded by the receiver. Pack round ``n`` (one per step; every rank counts the same rounds)
uses slot ``n mod 2``:

* the sender's queue waits for the slot's *landed* event (the receiver's landing of round
  ``n - 2``), packs its rows near the receiver with its rebuild tick in a trailer row
  (``md_rank_pack``), records *packed*, and the host raises its node counter to ``n``;
* the receiver's host waits until the sender's counter reaches ``n`` (the record has been
  queued; the device work need not be done), its queue waits for *packed*, lands the rows and
  merges the tick into its own flags (``md_rank_land``), and records *landed*.

A wait on an event waits for its last record, so each wait must come after the record it
means and before the next one. The receiver raises its counter to ``n + 1`` only after it has
queued its wait for *packed* (``n``) and recorded *landed* (``n``); the sender reaches round
``n + 2`` only after waiting for that counter. So the slot is never overwritten before its
landing, and no wait sees a later record. The merged tick halts every slab's batch at the
same step (exact for up to three slabs, all neighbours of each other).

At each rebuild a sender tells each neighbour its row count and, when its buffer had to grow,
the new buffer's handle; a replaced buffer stays allocated until the next rebuild, when the
neighbour has let go of it. Transport-free: the endpoint carries those few bytes, the node
counters the ordering.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from simsplit.md.exchange import Endpoint
from simsplit.md.rank_rounds import room_for
from simsplit.transport.node_memory import NodeCounters

#: message tag of the row counts and handles sent at a rebuild
LINK_TAG = "device_link"


def _encode(*items: bytes) -> np.ndarray:
    """Byte strings as one uint8 message (each after its 4-byte length)."""
    return np.frombuffer(b"".join(len(b).to_bytes(4, "little") + b for b in items) or b"\0",
                         np.uint8)


def _decode(msg: np.ndarray) -> list[bytes]:
    raw, items, at = msg.tobytes(), [], 0
    while at + 4 <= len(raw):
        n = int.from_bytes(raw[at: at + 4], "little")
        items.append(raw[at + 4: at + 4 + n])
        at += 4 + n
    return items


class DeviceLinks:
    """The device links of one rank slab to its neighbours ``links`` (see the module
    docstring): ``kernels`` must share memory (``kernels.shares_memory``) and every link
    must be on this node (``counters.shares``)."""

    def __init__(self, kernels: Any, endpoint: Endpoint, links: tuple[int, ...],
                 counters: NodeCounters) -> None:
        self.kernels, self.endpoint, self.links, self.counters = kernels, endpoint, links, counters
        #: pack rounds so far (the same on every rank)
        self.rounds = 0
        self._send: dict[int, Any] = {}  # nb -> own buffer (2, rows, 3)
        self._recv: dict[int, Any] = {}  # nb -> nb's buffer, opened
        self._retired: list[Any] = []
        self._retiring: list[Any] = []
        #: per link and slot: events recorded here (packed for nb, landed from nb) and the
        #: neighbour's (its packed for us, its landed of our pack)
        self._packed: dict[int, list[Any]] = {}
        self._landed: dict[int, list[Any]] = {}
        self._their_packed: dict[int, list[Any]] = {}
        self._their_landed: dict[int, list[Any]] = {}

    @staticmethod
    def possible(kernels: Any, endpoint: Endpoint, links: tuple[int, ...], parts: int) -> bool:
        """Whether a rank slab with these neighbours can use device links (the same answer
        on every rank: the counters are made collectively when the kernel set shares
        memory). Asked for with ``SIMSPLIT_DEVICE_LINKS=1``: with the ranks on one H200 under
        MPS the host path is faster (its rebuilds start beside a step's interior forces; see
        BENCHMARKS.md), so it stays the default until ranks on GPUs of their own can be
        measured."""
        if parts > 3 or not getattr(kernels, "shares_memory", False) or \
                os.environ.get("SIMSPLIT_DEVICE_LINKS", "0") != "1":
            return False
        counters = endpoint.node_counters()
        return counters is not None and all(counters.shares(nb) for nb in links)

    def _connect(self) -> None:
        """Make this rank's events and trade handles with every neighbour (once)."""
        k = self.kernels
        for nb in self.links:
            made = [k.shared_event() for _ in range(4)]
            self._packed[nb] = [e for e, _ in made[:2]]
            self._landed[nb] = [e for e, _ in made[2:]]
            self.endpoint.send(nb, _encode(*(h for _, h in made)), LINK_TAG)
        for nb in self.links:
            handles = _decode(self.endpoint.recv(nb, LINK_TAG))
            opened = [k.open_event(h) for h in handles]
            # the neighbour's packed events are those it records for us; its landed events
            # are those it records after landing our pack
            self._their_packed[nb], self._their_landed[nb] = opened[:2], opened[2:]

    def refit(self, send_rows: dict[int, Any], recv_rows: dict[int, Any], dtype: Any) -> None:
        """After a rebuild (every rank at once): buffers large enough for this build's rows,
        and the neighbours' row counts and buffers."""
        if not self._packed:
            self._connect()
        k = self.kernels
        self._retired, self._retiring = self._retiring, []  # the neighbours closed these
        for nb in self.links:
            m = int(send_rows[nb].shape[0])
            buf, handle = self._send.get(nb), b""
            if buf is None or buf.shape[1] < m + 1 or buf.dtype != np.dtype(dtype):
                if buf is not None:
                    self._retiring.append(buf)
                buf, handle = k.shared_buffer((2, room_for(m + 1), 3), dtype)
                self._send[nb] = buf
            self.endpoint.send(nb, _encode(np.array([m, buf.shape[1]], np.int64).tobytes(),
                                           handle), LINK_TAG)
        for nb in self.links:
            sizes, handle = _decode(self.endpoint.recv(nb, LINK_TAG))
            m, rows = (int(v) for v in np.frombuffer(sizes, np.int64))
            if m != int(recv_rows[nb].shape[0]):
                raise RuntimeError(f"slab {self.endpoint.rank}: slab {nb} sends {m} ghost "
                                   f"positions, {recv_rows[nb].shape[0]} expected")
            if handle:
                if nb in self._recv:
                    k.close_shared(self._recv[nb])
                self._recv[nb] = k.open_shared(handle, (2, rows, 3), dtype)

    def pack(self, x: Any, send_rows: dict[int, Any]) -> None:
        """Queue this step's packs (one round) and tell the neighbours they are queued."""
        k = self.kernels
        self.rounds += 1
        slot = self.rounds % 2
        for nb in self.links:
            k.wait_event(self._their_landed[nb][slot])
            k.rank_pack(x, send_rows[nb], 1, self._send[nb][slot])
            k.record_event(self._packed[nb][slot])
        self.counters.publish(self.rounds)

    def land(self, x: Any, recv_rows: dict[int, Any]) -> None:
        """Queue the landing of this round's neighbour packs into the ghost rows of ``x``
        (after each neighbour has queued its pack)."""
        k = self.kernels
        slot = self.rounds % 2
        for nb in self.links:
            self.counters.wait(nb, self.rounds)
            k.wait_event(self._their_packed[nb][slot])
            k.rank_land(self._recv[nb][slot], recv_rows[nb], x)
            k.record_event(self._landed[nb][slot])
