"""The message rounds of a rank slab's rebuild (a part of
:class:`~simsplit.md.rank_slab.RankSlab`, which inherits it): the new owned rows and the ghost
rows, before they are sorted.

One round (:meth:`RankRounds._one_round`, ``md_rank_route``): on the old rows, each slab
lists its leavers and its kept rows near each neighbour, packs both and sends them in one
round; leavers near this slab stay here as ghosts (a local gather), and with three slabs a
leaver to one neighbour near the other goes to that one as a ghost. The ghost set equals the
two rounds' as long as no atom arrives at a neighbour from beyond this slab's reach: always with
two or three slabs, and with more when every slab is thicker than the ghost cut plus the
farthest an atom may move between rebuilds (:func:`one_round_exact`). Else two rounds
(:meth:`RankRounds._two_rounds`): migrants first, then the ghosts picked on the new owned rows.
Each round's packs are gathered over their lists' whole room into one message per link
(:mod:`~simsplit.md.rank_message`: one launch, one download, one post) and downloaded into the
outboxes before the host reads the counts: one host wait per round.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

import numpy as np

from simsplit.md import rank_message
from simsplit.md.exchange import Endpoint
from simsplit.md.slabs import GHOST_MARGIN, SlabLayout

#: message tags of a rebuild's round (one round: migrants and ghosts; two rounds: migrants,
#: then ghosts), and of the per-step ghost refresh
ROUND_TAG, MIGRANT_TAG, GHOST_TAG = "rank_round", "rank_migrants", "rank_ghosts"
ROUND_TAGS = {1: (ROUND_TAG,), 2: (MIGRANT_TAG, GHOST_TAG)}
REFRESH_TAG = "ghost_refresh"

#: md_rank_route's lists: to lo, to hi, near lo, near hi, this slab's own ghosts
_ROUTE_LISTS = 5


def room_for(rows: int) -> int:
    """Rows to allocate for ``rows`` (room to spare for the next rebuild)."""
    return rows + rows // 8 + 16


def one_round_exact(layout: SlabLayout, cut: float, max_move: float | None) -> bool:
    """Whether one message round finds every ghost: with at most three slabs every slab
    neighbours every other; with more, an atom that reached a neighbour from beyond this slab's
    other side must have crossed that neighbour's whole thickness less the ghost cut, more than
    ``max_move`` (the farthest an atom moves between rebuilds; None: no bound, rebuilds every
    step) when every slab is thicker than the cut plus it (with a margin for rounding)."""
    if layout.parts <= 3:
        return True
    if max_move is None:
        return False
    thick = float(np.diff(layout.edges).min())
    return thick - cut > max_move * (1.0 + 1.0e-6) + GHOST_MARGIN * float(layout.box[2])


class RankRounds:
    """The message rounds of :class:`~simsplit.md.rank_slab.RankSlab`'s rebuild."""

    kernels: Any
    state: Any
    layout: SlabLayout
    endpoint: Endpoint
    rank: int
    lo: int
    hi: int
    links: tuple[int, ...]
    cut: float
    _edges: Any
    _counts: Any
    _rooms: dict[str, int]
    relayed: int
    phase_seconds: dict[str, float]
    _staged: dict[str, Any]
    _buffers: dict[str, Any]
    #: views of reused buffers by use: (the buffer, what they were cut for, the views)
    _views: dict[Any, tuple[Any, Any, Any]]

    def _device(self, name: str, shape: tuple[int, ...], dtype: Any, exact: bool = False
                ) -> Any:
        raise NotImplementedError

    def _rows(self, which: str, n: int, g: int, dtype: Any, force: bool = False
              ) -> dict[str, Any]:
        raise NotImplementedError

    def _ghost_room(self) -> int:
        raise NotImplementedError

    def _identity(self, n: int) -> Any:
        raise NotImplementedError

    def _raise_stray(self, row: int) -> None:
        raise NotImplementedError

    def _old_rows(self) -> dict[str, Any]:
        s = self.state
        return {"x": s.x, "v": s.v, "img": s.img, "gid": s.gid}

    # --- one round ---------------------------------------------------------------------------
    def _one_round(self, dtype: Any) -> tuple[int, int, dict[str, Any], dict[int, int]]:
        """Leavers and ghosts in one round: the owned and ghost rows of the new arrangement
        (unsorted), their counts and each link's leaver count."""
        k, s = self.kernels, self.state
        n_old, old = s.n_own, self._old_rows()
        while True:
            room, near_room = self._rooms["leavers"], self._rooms["near"]
            kept = self._device("kept", (max(n_old, 1),), np.int32)
            lists, part = self._route_lists(room, near_room)
            k.rank_route(s.x, n_old, self._edges, self.layout.parts, self.rank, self.lo,
                         self.hi, float(self.layout.box[2]), self.cut, (room, near_room),
                         self._counts, kept, lists)
            full = (room, near_room) if n_old else (0, 0)
            queued = self._queue_messages(ROUND_TAG, old,
                                          self._by_link((part[0], full[0]), (part[1], full[0])),
                                          self._by_link((part[3], full[1]), (part[4], full[1])))
            got = self._read_counts()
            if got[6]:
                self._raise_stray(got[7])
            if got[8]:
                raise RuntimeError(
                    f"slab {self.rank}: an atom reached a neighbour near the slab beyond it, "
                    "whose ghost one message round cannot deliver (slabs too thin for the "
                    "distance atoms moved between rebuilds)")
            if max(got[1:4]) <= room and max(got[4:6]) <= near_room:
                break
            self._rooms["leavers"] = max(room, room_for(max(got[1:4])))
            self._rooms["near"] = max(near_room, room_for(max(got[4:6])))
        self.relayed += got[9]
        leavers = self._by_link((part[0], got[1]), (part[1], got[2]))
        near = self._by_link((part[3], got[4]), (part[4], got[5]))
        received = self._post_and_receive(queued, leavers, near, dtype)
        arrived = [rank_message.header(msg)[0] for msg in received.values()]
        n = got[0] + sum(c[0] for c in arrived)
        g = got[3] + sum(c[1] for c in arrived)
        new = self._rows("a", n, g, dtype)
        k.rank_gather(kept, got[0], old, new, motion=True)
        row = self._place(new, got[0], n, received, dtype)[1]
        # this slab's leavers near it: their new owners send their positions from now on
        k.rank_gather(part[2], got[3], old, {"x": new["x"][row:], "gid": new["gid"][row:]},
                      motion=False)
        return n, g, new, {nb: m for nb, (_, m) in leavers.items()}

    # --- two rounds --------------------------------------------------------------------------
    def _two_rounds(self, dtype: Any) -> tuple[int, int, dict[str, Any], dict[int, int]]:
        """Migrants, then the ghosts picked on the new owned rows (as :meth:`_one_round`)."""
        kept, leavers, queued = self._classify(self.state.n_own)
        arrivals = self._post_and_receive(queued, leavers, None, dtype)
        n = kept[1] + sum(rank_message.header(msg)[0][0] for msg in arrivals.values())
        near, queued = self._select_ghosts(n, kept, arrivals, dtype)
        ghosts = self._post_and_receive(queued, None, near, dtype)
        g = sum(rank_message.header(msg)[0][1] for msg in ghosts.values())
        return n, g, self._receive_ghosts(n, g, ghosts, dtype), \
            {nb: m for nb, (_, m) in leavers.items()}

    def _classify(self, n: int) -> tuple[tuple[Any, int], dict[int, tuple[Any, int]], list]:
        """Owner test of the owned rows and the leavers' packs, downloaded into the outboxes
        (one wait): the kept rows, each link's leavers and the queued downloads."""
        k, s = self.kernels, self.state
        while True:
            room = self._rooms["leavers"]
            kept = self._device("kept", (max(n, 1),), np.int32)
            to_lo = self._device("to_lo", (room,), np.int32)
            to_hi = self._device("to_hi", (room,), np.int32)
            k.rank_classify(s.x, n, self._edges, self.layout.parts, self.rank, self.lo,
                            self.hi, room, self._counts, kept, to_lo, to_hi)
            full = room if n else 0
            queued = self._queue_messages(MIGRANT_TAG, self._old_rows(),
                                          self._by_link((to_lo, full), (to_hi, full)), None)
            got = self._read_counts()
            if got[3]:
                self._raise_stray(got[4])
            if max(got[1], got[2]) <= room:
                break
            self._rooms["leavers"] = room_for(max(got[1], got[2]))
        return (kept, got[0]), self._by_link((to_lo, got[1]), (to_hi, got[2])), queued

    def _select_ghosts(self, n: int, kept: tuple[Any, int], arrivals: dict[int, np.ndarray],
                       dtype: Any) -> tuple[dict[int, tuple[Any, int]], list]:
        """Build the owned rows of the new arrangement (kept rows compacted, arrivals after
        them), list those near each neighbour and queue their packs as :meth:`_classify`
        does (one wait)."""
        k = self.kernels
        new = self._rows("a", n, self._ghost_room(), dtype)
        k.rank_gather(kept[0], kept[1], self._old_rows(), new, motion=True)
        self._place(new, kept[1], n, arrivals, dtype)
        self._staged = new
        while True:
            room = self._rooms["near"]
            to_lo = self._device("near_lo", (room,), np.int32)
            to_hi = self._device("near_hi", (room,), np.int32)
            k.rank_select(new["x"], n, self._edges, self.lo, self.hi,
                          float(self.layout.box[2]), self.cut, room, self._counts, to_lo,
                          to_hi)
            full = room if n else 0
            queued = self._queue_messages(GHOST_TAG, new, None,
                                          self._by_link((to_lo, full), (to_hi, full)))
            got = self._read_counts()[:2]
            if max(got) <= room:
                break
            self._rooms["near"] = room_for(max(got))
        return self._by_link((to_lo, got[0]), (to_hi, got[1])), queued

    def _receive_ghosts(self, n: int, g: int, ghosts: dict[int, np.ndarray], dtype: Any
                        ) -> dict[str, Any]:
        """The received ghost rows after the ``n`` owned rows of the new arrangement (grown
        when they outgrow its room)."""
        new = self._staged
        if new["x"].shape[0] < n + g:
            grown = self._rows("a", n, g, dtype, force=True)
            self.kernels.rank_gather(self._identity(n), n, new, grown, motion=True)
            new = grown
        self._place(new, n, n, ghosts, dtype)
        return new

    def _read_counts(self) -> list[int]:
        """The round's counts (a host wait for the queue, timed as ``round_waits``)."""
        t0 = time.perf_counter()
        got = [int(c) for c in self.kernels.read_ints(self._counts)]
        self.phase_seconds["round_waits"] += time.perf_counter() - t0
        return got

    # --- messages ----------------------------------------------------------------------------
    def _by_link(self, low: tuple[Any, int], high: tuple[Any, int]
                 ) -> dict[int, tuple[Any, int]]:
        """A kernel's (rows, count) lists for the low and high neighbour, keyed by link in
        link order (with two slabs both are one neighbour, whose rows the low list holds)."""
        return {nb: low if nb == self.lo else high for nb in self.links}

    def _queue_messages(self, tag: str, src: dict[str, Any],
                        mig: dict[int, tuple[Any, int]] | None,
                        near: dict[int, tuple[Any, int]] | None) -> list:
        """Queue each link's message (:mod:`~simsplit.md.rank_message`): one gather of its
        migrant rows ``mig[nb]`` (x, v, img, gid of ``src``) and ghost rows ``near[nb]`` (x,
        gid) over the lists' rooms, and one download into its outbox; the host does not
        wait."""
        k = self.kernels
        dtype = src["x"].dtype
        queued = []
        for nb in self.links:
            lists = [(None, 0) if by is None else by[nb] for by in (mig, near)]
            rooms = (lists[0][1], lists[1][1])
            words = rank_message.layout(dtype, rooms)[1]
            name = f"message_{tag}_{nb}"
            buf = self._device(name, (words, 1), np.int64)
            views = self._cut_once(name, buf, (dtype, rooms), functools.partial(
                rank_message.sections, buf, dtype, rooms, rooms))
            k.rank_gather_message((lists[0][0], lists[1][0]), rooms, src, views)
            host = self.endpoint.outbox(nb, tag, (words, 1), np.int64)
            queued.append((nb, tag, k.download_async(buf, words, host), rooms))
        return queued

    def _post_and_receive(self, queued: list, mig: dict[int, tuple[Any, int]] | None,
                          near: dict[int, tuple[Any, int]] | None, dtype: Any
                          ) -> dict[int, np.ndarray]:
        """Post each queued message with its counts (the rows of ``mig[nb]`` and ``near[nb]``
        to send) in its header, then return each link's received message (words, shape
        (words, 1)), in link order: read in place where the neighbour shares the node (valid
        until the neighbour's next rebuild but one)."""
        t0 = time.perf_counter()
        for nb, tag, handle, rooms in queued:
            counts = tuple(0 if by is None else by[nb][1] for by in (mig, near))
            host = self.kernels.wait_download(handle)
            rank_message.write_header(host, rooms, counts)
            self.endpoint.post(nb, tag, rank_message.used_words(dtype, rooms, counts))
        received = {nb: self.endpoint.inbox(nb, tag, (1,), np.int64) for nb, tag, *_ in queued}
        self.phase_seconds["messages"] += time.perf_counter() - t0
        return received

    def _place(self, new: dict[str, Any], at_mig: int, at_near: int,
               received: dict[int, np.ndarray], dtype: Any) -> tuple[int, int]:
        """Queue the rows of the messages ``received`` from each link (in link order) into
        ``new``: migrants from row ``at_mig`` on, ghosts from ``at_near`` on. Each message goes
        up whole, straight from its inbox (unchanged until the neighbour's next rebuild but
        one; the host does not wait), and one launch places its rows. Returns the rows after
        the migrants and after the ghosts."""
        for nb, msg in received.items():
            counts, rooms = rank_message.header(msg)
            if max(counts):
                used = rank_message.used_words(dtype, rooms, counts)
                buf = self._device(f"arrived_{nb}", (used, 1), np.int64)
                self.kernels.upload_rows_queued(msg[:used], buf, 0)
                self.kernels.rank_place_message(buf, dtype,
                                                rank_message.place_offsets(dtype, rooms),
                                                counts, new, (at_mig, at_near))
            at_mig, at_near = at_mig + counts[0], at_near + counts[1]
        return at_mig, at_near

    def _route_lists(self, room: int, near_room: int) -> tuple[Any, list[Any]]:
        """md_rank_route's lists (``3 room + 2 near_room`` entries) and its five parts: to
        lo, to hi, own ghosts (``room`` each), near lo, near hi (``near_room`` each); views
        cut once while the buffer and rooms stay."""
        buf = self._device("route", (3 * room + 2 * near_room,), np.int32)

        def cut() -> tuple[Any, list[Any]]:
            lists = buf[: 3 * room + 2 * near_room]
            return lists, [lists[j * room: (j + 1) * room] for j in range(3)] + \
                [lists[3 * room + j * near_room: 3 * room + (j + 1) * near_room]
                 for j in range(2)]

        return self._cut_once("route", buf, (room, near_room), cut)

    def _cut_once(self, key: Any, buf: Any, spec: Any, cut: Callable[[], Any]) -> Any:
        """The views ``cut()`` of the reused buffer ``buf`` for ``spec``, cut once while the
        buffer and ``spec`` stay (a rebuild asks for the same views every time, and each
        device slice costs the host a few microseconds)."""
        got = self._views.get(key)
        if got is None or got[0] is not buf or got[1] != spec:
            got = self._views[key] = (buf, spec, cut())
        return got[2]
