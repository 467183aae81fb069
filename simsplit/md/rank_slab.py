"""One slab per MPI rank on a GPU: migration, ghosts and lists on the device, messages of
leavers and ghosts only.

A rebuild (``kernels/md_ranks.cuh``) finds each owned atom's owner after migration on the
device and sends the leavers (position, velocity, image, id) and the ghosts (position, id) to
the neighbours, in one message round where that finds every ghost, else in two
(:mod:`simsplit.md.rank_rounds`); the arrivals follow the kept rows, the ghosts the owned
rows. The rows are sorted as a one-slab arena (owned and ghost runs of each cell, by id) and
the lists built as in :mod:`simsplit.md.arena`, so every owned atom's list is in canonical
order and the bits are those of one slab. Each pack is gathered over its list's whole room
and downloaded into an outbox before the host reads the list's counts, so the host waits once
per round and once for the longest list row (with the interior rows and the lengths of the
ghost refresh lists), and traffic is O(leavers + ghosts), never O(N). A rebuild runs on the
kernel set's side queue, beside the interior forces its step queued before the rebuild was
agreed. Outboxes are memory the neighbour reads in place where it shares the node
(:meth:`Endpoint.outbox`), else messages.

Each step, :meth:`RankSlab.start_step` queues the ghost positions each neighbour needs, the
first pack carrying the step's displacement flags, and their download into the outboxes;
:meth:`RankSlab.trade_step` waits for them (the solver has queued the interior rows' forces
meanwhile: ``interior`` rows list no ghost), posts them and agrees on a rebuild;
:meth:`RankSlab.land_ghosts` scatters the positions received into their rows.
Messages go through the rank's :class:`~simsplit.md.exchange.Endpoint`; this module knows
nothing of forces, and the solver sees one slab state (``state``).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from simsplit.backends.cpu import md as cpu_md
from simsplit.md import rank_message
from simsplit.md.arena import ArenaState
from simsplit.md.exchange import Endpoint
from simsplit.md.rank_links import DeviceLinks
from simsplit.md.rank_rounds import (
    REFRESH_TAG,
    ROUND_TAGS,
    RankRounds,
    one_round_exact,
    room_for,
)
from simsplit.md.slabs import GHOST_MARGIN, SlabLayout


class RankSlab(RankRounds):
    """Slab ``rank`` of ``layout`` on the device of ``kernels`` (see the module docstring)."""

    #: how this slab's ghosts travel (the solver's stats report it)
    transfer = "remote-device"

    def __init__(self, layout: SlabLayout, kernels: Any, ncell: np.ndarray,
                 offsets: Sequence[np.ndarray], rank: int, endpoint: Endpoint,
                 max_move: float | None = None, device_links: bool = False) -> None:
        self.layout, self.kernels, self.ncell, self.offsets = layout, kernels, ncell, offsets
        self.rank = rank
        self.endpoint = endpoint
        parts = layout.parts
        self.lo, self.hi = (rank - 1) % parts, (rank + 1) % parts
        #: message partners in a fixed order (low first); the low one alone with two slabs
        self.links: tuple[int, ...] = layout.neighbours(rank)
        self.cut = layout.reach * (1.0 + GHOST_MARGIN)
        #: message rounds per rebuild (see :mod:`simsplit.md.rank_rounds`; ``max_move``: the
        #: farthest an atom moves between rebuilds, None where unbounded)
        self.rounds = 1 if one_round_exact(layout, self.cut, max_move) else 2
        lo, hi = layout.interval(rank)
        self.state = ArenaState(index=rank, lo=lo, hi=hi, neighbours=self.links, comm=endpoint,
                                ids=np.zeros(0, np.int64), x=None, v=None, img=None)
        self.state.kernels = kernels
        endpoint.use_device(kernels.host_buffer, kernels.pin_host, kernels.unpin_host)
        self._edges = kernels.to_device(np.asarray(layout.edges, np.float64))
        self._counts = kernels.zeros((10,), np.int32)
        #: ghosts this slab relayed in one round (a leaver to one neighbour near the other)
        self.relayed = 0
        #: host seconds of the rebuilds so far by phase: ``rounds`` (the message rounds less
        #: their messages: lists, packs, downloads, placing the arrivals; of which
        #: ``round_waits`` waiting for the counts), ``messages`` (waiting for the packs'
        #: downloads, posting them, taking the neighbours'), ``build`` (sort and lists until
        #: the rebuild's queue is done; of which ``build_waits`` waiting for the longest row)
        self.phase_seconds = dict.fromkeys(
            ("rounds", "round_waits", "messages", "build", "build_waits"), 0.0)
        #: rows the leaver and ghost lists make room for (grown when a count outgrows them)
        self._rooms = {"leavers": 16, "near": 16}
        self._buffers: dict[str, Any] = {}
        self._views: dict[Any, tuple[Any, Any, Any]] = {}
        self._sort: Any = None
        self._scan: dict[str, Any] = {}
        #: per link: the sorted rows whose positions it gets each step, and the rows its
        #: ghosts land in (int64 device arrays)
        self.send_rows: dict[int, Any] = {}
        self.recv_rows: dict[int, Any] = {}
        self._pinned: dict[str, np.ndarray] = {}
        #: owned rows whose lists hold no ghost (see :meth:`_interior_rows`)
        self.interior = (0, 0)
        self._pending: list[tuple[int, int, Any]] = []
        self._received: dict[int, np.ndarray] = {}
        #: marks on the main queue of this step: after its ghost pack, after its interior
        #: forces (see :meth:`rebuild`); reused events
        self._marks: dict[str, Any] = {}
        self._stepping = False
        #: node-memory room the last rebuild asked for, reserved before the next outbox use
        self._needs: dict[tuple[int, str], int] | None = None
        #: the per-step ghost positions straight between the devices of the node (asked for
        #: with ``device_links`` where the solver steps in batches; None: through the host)
        self.device_links = DeviceLinks(kernels, endpoint, self.links,
                                        endpoint.node_counters()) \
            if device_links and DeviceLinks.possible(kernels, endpoint, self.links, parts) \
            else None

    # --- setup ------------------------------------------------------------------------------
    def load(self, x: np.ndarray, v: np.ndarray, img: np.ndarray) -> None:
        """Take this slab's atoms from global host arrays in id order (storage type); the next
        :meth:`rebuild` picks the ghosts."""
        k, s = self.kernels, self.state
        ids = np.flatnonzero(cpu_md.owners(x[:, 2], x.shape[0], self.layout.edges) == self.rank)
        s.n_own, s.n_ghosts = int(ids.size), 0
        s.x = k.to_device(np.ascontiguousarray(x[ids]))
        s.v = k.to_device(np.ascontiguousarray(v[ids]))
        s.img = k.to_device(np.ascontiguousarray(img[ids], dtype=np.int64))
        s.gid = k.to_device(ids.astype(np.int64))
        s.ids, s.ids_stale = ids.astype(np.int64), False
        s.key = None
        self._size_owned(s.n_own, x.dtype)

    # --- rebuild ----------------------------------------------------------------------------
    def rebuild(self, capacity: int, cutsq: float, then: Callable[[], None] | None = None
                ) -> tuple[int, int, int]:
        """Migrate, exchange ghosts, sort and build every owned row's list (and x0), growing
        ``capacity`` until every row fits. ``then`` (the caller's work on the new lists, such
        as every row's forces) is queued behind the build before the host waits for it, so
        the device goes on from the build without waiting for the host; after a list outgrew
        ``capacity`` it is queued again behind the new build (the first run's results, from
        rows cut at the old capacity, are overwritten). Returns the capacity, how many times it
        grew and how many atoms left this slab. Raises RuntimeError for an atom that crossed a
        whole slab since the last rebuild."""
        k, s = self.kernels, self.state
        dtype = s.x.dtype
        self._reserve()
        # On a side queue: a step's interior forces (queued before the host knew that this
        # step rebuilds, and then thrown away; skipped on the device where this rank's own
        # check asked for the rebuild) run beside the migration and ghost rounds instead of
        # ahead of them. Those rounds read the positions (after the step's pack) and write
        # only rebuild scratch; the sort and the build wait for the interior forces, whose
        # arrays they replace.
        packed, interior = self._step_marks()
        t0 = time.perf_counter()
        messages = self.phase_seconds["messages"]
        with k.side_queue():
            k.wait_mark(packed)
            n, g, old, leavers = (self._one_round if self.rounds == 1 else
                                  self._two_rounds)(dtype)
            t1 = time.perf_counter()
            k.wait_mark(interior)
            queued = self._sort_and_build(n, g, old, capacity, cutsq)
            built = k.mark()
        k.wait_mark(built)
        capacity, growths = self._finish_build(queued, capacity, cutsq, then)
        self.phase_seconds["rounds"] += t1 - t0 - (self.phase_seconds["messages"] - messages)
        self.phase_seconds["build"] += time.perf_counter() - t1
        self._needs = self._outbox_needs(leavers)
        self.endpoint.announce(self._needs)
        if self.device_links is not None:
            self.device_links.refit(self.send_rows, self.recv_rows, dtype)
        return capacity, growths, sum(leavers.values())

    def _step_marks(self) -> tuple[Any, Any]:
        """Marks on the main queue that a rebuild's first kernels and its sort wait for: this
        step's pack and interior forces when the rebuild follows :meth:`interior_queued`,
        else the main queue's end for both."""
        k = self.kernels
        if self._stepping:
            self._stepping = False
            return self._marks["packed"], self._marks["interior"]
        end = k.mark()
        return end, end

    def begin_batch(self) -> None:
        """Before a batch of linked steps: the collective point where :meth:`_reserve`
        happens (every rank starts the same batches)."""
        self._reserve()

    def pack_linked(self) -> None:
        """Queue this step's ghost packs into the device links (:class:`DeviceLinks`)."""
        assert self.device_links is not None
        self.device_links.pack(self.state.x, self.send_rows)

    def land_linked(self) -> None:
        """Queue the landing of the neighbours' packs of this step into the ghost rows."""
        assert self.device_links is not None
        self.device_links.land(self.state.x, self.recv_rows)

    def _reserve(self) -> None:
        """Reserve the node memory the last rebuild asked for (collective; every rank gets
        here at the same point: the next step's pack or rebuild, whichever comes first). Every
        rank has waited for its rebuild's queue by then, so no copy out of node memory is in
        flight and the segments may be replaced; the forces queued since touch none."""
        if self._needs is not None:
            needs, self._needs = self._needs, None
            self.endpoint.reserve(needs)

    def _sort_and_build(self, n: int, g: int, old: dict[str, Any], capacity: int,
                        cutsq: float) -> tuple[Any, Any, Any]:
        """Sort the rows as a one-slab arena (they become this slab's rows), plan the ghost
        refresh and queue the list build; returns the queued reads :meth:`_finish_build`
        takes (the host does not wait here)."""
        k, s = self.kernels, self.state
        self._sort = k.rank_sort(old["x"], n, n + g, self.layout.box, self.ncell, old["gid"],
                                 self._sort)
        new = self._rows("b", n, g, old["x"].dtype)
        k.rank_place(self._sort, n, g, old, new)
        planned = self._plan_refresh(n, g, new["x"])
        self._size_owned(n, old["x"].dtype)
        bounds = self._queue_interior_bounds()
        s.x, s.v, s.img, s.gid, s.key = (new["x"], new["v"], new["img"], new["gid"],
                                         new["key"])
        s.n_own, s.n_ghosts = n, g
        s.ids_stale = True
        return self._queue_build(capacity, cutsq), bounds, planned

    def _queue_build(self, capacity: int, cutsq: float) -> Any:
        """Queue the lists of the sorted rows at ``capacity`` entries a row, and the read of
        the longest row if one overflowed (its rows then stop at ``capacity``)."""
        k, s = self.kernels, self.state
        s.nl, s.cnt = k.neighbor_list(s.nl, s.cnt, s.n_own, capacity)
        k.arena_build_neighbors(s.x, s.n_own, s.n_own + s.n_ghosts, self.layout.box,
                                self.ncell, self.offsets, self._sort, s.key, s.gid, cutsq,
                                s.nl, s.cnt, s.x0)
        return k.queue_arena_counts(self._sort)

    def _finish_build(self, queued: tuple[Any, Any, Any], capacity: int, cutsq: float,
                      then: Callable[[], None] | None) -> tuple[int, int]:
        """Queue ``then`` behind the build :meth:`_sort_and_build` queued, then wait for the
        build (one wait, and more only when a row outgrew ``capacity``: the lists again, and
        ``then``); take the interior rows and the refresh lists."""
        k = self.kernels
        counts, bounds, planned = queued
        growths = 0
        while True:
            if then is not None:
                then()
            t0 = time.perf_counter()
            worst = int(k.queued_read(counts)[-1])
            self.phase_seconds["build_waits"] += time.perf_counter() - t0
            if worst <= capacity:
                break
            capacity = int(worst * 1.2) + 8
            growths += 1
            counts = self._queue_build(capacity, cutsq)
        self.interior = (0, 0) if bounds is None else \
            tuple(int(k.queued_read(b)[0]) for b in bounds)  # type: ignore[assignment]
        self._refresh_lists(k.queued_read(planned))
        return capacity, growths

    def _queue_interior_bounds(self) -> Any:
        """Queue the read of the sorted owned rows ``[r0, r1)`` whose lists hold no ghost
        (None: no such rows): rows of the cell planes whose atoms were, at this build, farther
        than the ghost cut from both faces, with a plane to spare for rounding (rows are in
        z-major cell order, so such planes form one run). Their forces need no fresh ghost
        positions. The build's wait covers the read."""
        lo, hi = self.layout.interval(self.rank)
        nz = int(self.ncell[2])
        h = float(self.layout.box[2]) / nz
        p_lo = int(np.ceil((lo + self.cut) / h)) + 1
        p_hi = int(np.floor((hi - self.cut) / h)) - 2
        if p_lo > p_hi:
            return None
        plane = int(self.ncell[0] * self.ncell[1])
        # two one-element views (a list index would upload the index array: a host wait)
        return [self.kernels.queue_read(self._sort.cell_start[r: r + 1])
                for r in (p_lo * plane, (p_hi + 1) * plane)]

    def _plan_refresh(self, n: int, g: int, x: Any) -> Any:
        """Queue each link's refresh lists on the sorted rows ``x``: the owned rows near it
        (sent every step) and the ghost rows it owns (received every step), both in row
        order, which is (cell, id) order on both sides; returns the queued read of their
        offsets (:meth:`_refresh_lists` takes it after the build's wait)."""
        k, links = self.kernels, self.links
        bounds = self._device("refresh_bounds", (2 * len(links) + 1,), np.int32, exact=True)
        out = self._device("refresh_rows", (max(len(links) * (n + g), 1),), np.int64)
        k.rank_refresh_lists(x, n, n + g, self._edges, self.layout.parts, links,
                             float(self.layout.box[2]), self.cut, self._scan, out, bounds)
        for nb in links:
            # made here, before the build's wait: the ghost positions may land in it on a
            # copy stream that does not wait for the kernels
            self._device(f"recv_x_{nb}", (max(g, 1), 3), self.state.x.dtype)
        return k.queue_read(bounds)

    def _refresh_lists(self, bounds: np.ndarray) -> None:
        """The refresh lists :meth:`_plan_refresh` queued, views of one buffer."""
        rows = self._buffers["refresh_rows"]
        for j, nb in enumerate(self.links):
            self.send_rows[nb] = rows[int(bounds[2 * j]): int(bounds[2 * j + 1])]
            self.recv_rows[nb] = rows[int(bounds[2 * j + 1]): int(bounds[2 * j + 2])]

    def _outbox_needs(self, leavers: dict[int, int]) -> dict[tuple[int, str], int]:
        """Bytes of each outbox the steps until the next rebuild and that rebuild fill: the
        refresh rows, and the round messages laid out for the ghost list's room and the
        leaver list's (at least twice this rebuild's leavers and 256 rows)."""
        dtype = self.state.x.dtype
        needs = {}
        for nb in self.links:
            m = int(self.send_rows[nb].shape[0])
            needs[(nb, REFRESH_TAG)] = (m + 1) * 3 * np.dtype(dtype).itemsize
            rooms = (max(2 * leavers[nb], 256, self._rooms["leavers"]),
                     max(m, self._rooms["near"]))
            tags = ROUND_TAGS[self.rounds]
            wanted = {tags[0]: rooms} if self.rounds == 1 else \
                {tags[0]: (rooms[0], 0), tags[1]: (0, rooms[1])}
            needs.update({(nb, tag): 8 * rank_message.layout(dtype, r)[1]
                          for tag, r in wanted.items()})
        return needs

    # --- ghost refresh between rebuilds -----------------------------------------------------
    def start_step(self) -> None:
        """Queue this step's ghost packs and their downloads into pinned memory, each with the
        step's displacement flags in a trailer row (the host does not wait: the interior
        rows' forces go on the device meanwhile)."""
        k, s = self.kernels, self.state
        self._reserve()
        self._pending = []
        for j, nb in enumerate(self.links):
            rows = self.send_rows[nb]
            m = int(rows.shape[0])
            buf = self._device(f"send_x_{nb}", (m + 1, 3), s.x.dtype)
            host = self.endpoint.outbox(nb, REFRESH_TAG, (m + 1, 3), s.x.dtype)
            k.rank_pack(s.x, rows, 2 if j == len(self.links) - 1 else 1, buf)
            self._pending.append((nb, m, k.download_async(buf, m + 1, host)))
        self._marks["packed"] = k.mark(self._marks.get("packed"))
        self._stepping = False

    def interior_queued(self) -> None:
        """Note that the solver queued this step's interior forces after :meth:`start_step`
        (a rebuild of this step then lets them run beside its message rounds)."""
        self._marks["interior"] = self.kernels.mark(self._marks.get("interior"))
        self._stepping = True

    def trade_step(self, any_rank: Callable[[bool], bool]) -> tuple[bool, bool]:
        """Wait for the downloads and send them; receive the neighbours' positions and
        flags; agree on a rebuild. With at most three slabs every slab hears every other one
        through the trailers; with more, ``any_rank`` or's this slab's flag over the ranks.
        Returns (rebuild, this rank saw an atom jump a skin)."""
        k = self.kernels
        flags = np.zeros(2, np.int32)
        for nb, m, handle in self._pending:
            host = k.wait_download(handle)
            flags = host[m].view(np.int32)[:2].copy()
            # the outbox of the post before last is free: the neighbour's upload from it
            # ended before the download behind the message we received from it since
            self.endpoint.post(nb, REFRESH_TAG, m + 1)
        # in place where the neighbour shares the node; else straight into pinned memory,
        # whose upload last step ended before this step's download (one stream)
        dtype = self.state.x.dtype
        got = {nb: self.endpoint.inbox(nb, REFRESH_TAG, (3,), dtype, self._host(
            f"recv_x_{nb}", (int(self.recv_rows[nb].shape[0]) + 1, 3), dtype))
            for nb in self.links}
        self._received = {nb: rows[:-1] for nb, rows in got.items()}
        if self.layout.parts <= 3:
            moved = bool(flags[0]) or any(bool(rows[-1].view(np.int32)[0])
                                          for rows in got.values())
        else:
            moved = any_rank(bool(flags[0]))
        return moved, bool(flags[1])

    def land_ghosts(self) -> None:
        """Write the positions :meth:`trade_step` received into this slab's ghost rows."""
        k, s = self.kernels, self.state
        self._stepping = False  # no rebuild this step: later work on the main queue counts
        for nb, got in self._received.items():
            rows = self.recv_rows[nb]
            if int(rows.shape[0]) != got.shape[0]:
                raise RuntimeError(f"slab {self.rank}: {got.shape[0]} ghost positions from "
                                   f"slab {nb}, {rows.shape[0]} expected")
            if not got.shape[0]:
                continue
            buf = self._device(f"recv_x_{nb}", got.shape, s.x.dtype)
            k.land_rows(got, buf, rows, s.x)

    def refresh_ghosts(self) -> None:
        """The ghost refresh on its own (the solver's generic step; its flags stay unread)."""
        self.start_step()
        self.trade_step(bool)
        self.land_ghosts()

    # --- storage ----------------------------------------------------------------------------
    def _device(self, name: str, shape: tuple[int, ...], dtype: Any, exact: bool = False
                ) -> Any:
        """A reused device buffer: at least ``shape[0]`` rows (a view of exactly that many
        rows with ``exact``, cut once while the buffer and row count stay), grown with room to
        spare."""
        have = self._buffers.get(name)
        if have is None or have.dtype != np.dtype(dtype) or have.shape[1:] != shape[1:] or \
                have.shape[0] < shape[0]:
            have = self._buffers[name] = self.kernels.zeros((room_for(shape[0]), *shape[1:]),
                                                            dtype)
        if not exact:
            return have
        return self._cut_once(("exact", name), have, shape[0], lambda: have[: shape[0]])

    def _host(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A reused pinned host buffer of at least ``shape[0]`` rows."""
        have = self._pinned.get(name)
        if have is None or have.dtype != np.dtype(dtype) or have.shape[1:] != shape[1:] or \
                have.shape[0] < shape[0]:
            have = self._pinned[name] = self.kernels.host_buffer(
                (room_for(shape[0]), *shape[1:]), dtype)
        return have

    def _rows(self, which: str, n: int, g: int, dtype: Any, force: bool = False
              ) -> dict[str, Any]:
        """Arrays of one arrangement (``a``: after migration, ``b``: sorted): x and gid for
        ``n + g`` rows, v, img, key and ghost_of for ``n``."""
        shapes = {"x": ((n + g, 3), dtype), "gid": ((n + g,), np.int64),
                  "v": ((n, 3), dtype), "img": ((n, 3), np.int64), "key": ((n,), np.int32),
                  "ghost_of": ((2 * n,), np.int32)}
        if force:
            for name in shapes:
                self._buffers.pop(f"{which}_{name}", None)
        return {name: self._device(f"{which}_{name}", shape, dt, exact=name not in ("x", "gid"))
                for name, (shape, dt) in shapes.items()}

    def _ghost_room(self) -> int:
        """Ghost rows to make room for before their count is known: the last rebuild's with
        1/8 to spare (half the atoms at the first)."""
        g = self.state.n_ghosts
        return self.state.n_own // 2 + 16 if g == 0 else room_for(g)

    def _identity(self, n: int) -> Any:
        ident = self._buffers.get("identity")
        if ident is None or ident.shape[0] < n:
            ident = self._buffers["identity"] = self.kernels.to_device(
                np.arange(room_for(n), dtype=np.int32))
        return ident

    def _size_owned(self, n: int, dtype: Any) -> None:
        """Forces, energies, virials and x0 of ``n`` owned rows (views of reused buffers)."""
        s = self.state
        s.f = self._device("f", (n, 3), dtype, exact=True)
        s.pe = self._device("pe", (n,), np.float64, exact=True)
        s.vir = self._device("vir", (n,), np.float64, exact=True)
        s.x0 = self._device("x0", (n, 3), np.float64, exact=True)

    def _raise_stray(self, row: int) -> None:
        k, s = self.kernels, self.state
        gid = int(k.to_host(s.gid[row: row + 1])[0])
        z = float(k.to_host(s.x[row: row + 1])[0, 2])
        raise RuntimeError(
            f"atom {gid} (z = {z:.6g}) crossed a whole slab between two rebuilds: the time "
            "step is far too large")

    # --- bookkeeping --------------------------------------------------------------------------
    def atoms_per_slab(self) -> list[int]:
        return [self.state.n_own]

    def ghosts_per_slab(self) -> list[int]:
        return [self.state.n_ghosts]
