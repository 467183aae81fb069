"""Every slab of the box on one GPU in one arena: migration, ghosts and lists without the host.

Rows ``[0, N)`` of the arena are the owned atoms of all slabs (slab by slab, cell order within a
slab); rows ``[N, N + G)`` the slabs' ghost atoms, each a copy of an owned row (``ghost_of``
lists each owned row's copies, at most two).
One rebuild sorts the owned rows by (new owner, cell, global id) and emits each atom again as a
ghost of every neighbour slab whose interval it is near (``kernels/md_arena.cuh``); the host
reads a handful of counts (slab and ghost region sizes, stray and migration counters) and the
longest list row, never an atom. Between rebuilds the drift launch writes each moved position
into the row's ghost copies too: the ghost refresh costs no launch of its own.
Integration, forces and thermo run once over all owned rows: a row's list holds rows of its own
slab only (its owned and ghost atoms), so the bits are those of the one-slab run, and launches
per step do not grow with the number of slabs.

The solver sees the arena as one slab state (``state``) with per-slab bookkeeping on the side.
It knows nothing of forces; slabs on several devices or ranks take the host path of
:mod:`simsplit.md.slabs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from simsplit.md.slabs import GHOST_MARGIN, SlabLayout, SlabState


@dataclass
class ArenaState(SlabState):
    """One arena seen as a slab: ``n_own`` owned rows of every slab, then ``n_ghosts``."""

    n_ghosts: int = 0
    #: device: bucket key (slab * ncells + cell) of each owned row
    key: Any = None
    #: device int32 (2 per owned row): the row's ghost copies, -1 for none
    ghost_of: Any = None

    @property
    def n_local(self) -> int:
        return self.n_own + self.n_ghosts


def _room(rows: int) -> int:
    return rows + rows // 8 + 16


class SlabArena:
    """The slabs of ``layout`` on the device of ``kernels`` (see the module docstring)."""

    #: how the ghosts travel (the solver's stats report it)
    transfer = "arena"

    def __init__(self, layout: SlabLayout, kernels: Any, ncell: np.ndarray,
                 offsets: Sequence[np.ndarray]) -> None:
        self.layout = layout
        self.kernels = kernels
        self.ncell = ncell
        self.offsets = offsets
        self.cut = layout.reach * (1.0 + GHOST_MARGIN)
        self.state = ArenaState(index=0, lo=0.0, hi=float(layout.box[2]), neighbours=(),
                                comm=None, ids=np.zeros(0, np.int64), x=None, v=None, img=None)
        self.state.kernels = kernels
        #: region boundaries of the last rebuild: owned rows of slab k are
        #: [bounds[k], bounds[k + 1]), its ghost rows [bounds[P + k], bounds[P + k + 1])
        self.bounds = np.zeros(2 * layout.parts + 1, np.int64)
        self._scratch: Any = None
        self._spare: dict[str, Any] = {}

    # --- setup ------------------------------------------------------------------------------
    def load(self, x: np.ndarray, v: np.ndarray, img: np.ndarray) -> None:
        """All atoms (host arrays in id order, storage type) as unsorted owned rows; the next
        :meth:`rebuild` hands them to their slabs."""
        k, s = self.kernels, self.state
        n = int(x.shape[0])
        s.n_own, s.n_ghosts = n, 0
        s.x = k.to_device(np.ascontiguousarray(x))
        s.v = k.to_device(np.ascontiguousarray(v))
        s.img = k.to_device(np.ascontiguousarray(img, dtype=np.int64))
        s.gid = k.to_device(np.arange(n, dtype=np.int64))
        s.ids, s.ids_stale = np.arange(n, dtype=np.int64), False
        s.f = k.zeros((n, 3), x.dtype)
        s.pe, s.vir = k.zeros((n,), np.float64), k.zeros((n,), np.float64)
        s.key = None
        self._spare = {}

    # --- rebuild ----------------------------------------------------------------------------
    def rebuild(self, capacity: int, cutsq: float, then: Callable[[], None] | None = None
                ) -> tuple[int, int, int]:
        """Migrate, pick ghosts, sort the arena by (slab, cell, id) and build every owned row's
        Verlet list (and x0), growing the row ``capacity`` until every row fits; then queue
        ``then`` (the caller's work on the new lists). Returns the capacity, how many times it
        grew and how many atoms changed slab. Raises RuntimeError for an atom that crossed a
        whole slab since the last rebuild.

        The host waits once: the ghost count is not known when the ghost rows are copied and
        the lists built, so they get the room of the last rebuild (1/8 spare); the one read
        after the build says whether it sufficed (it nearly always does), else the copies and
        the build run again with room for all."""
        k, s = self.kernels, self.state
        n, parts = s.n_own, self.layout.parts
        self._scratch = k.arena_sort(s.x, n, self.layout.box, self.ncell, self.layout.edges,
                                     self.cut, s.key, s.gid, self._scratch)
        old = {"x": s.x, "v": s.v, "img": s.img, "gid": s.gid, "key": s.key,
               "ghost_of": s.ghost_of}
        g_room = self._ghost_room(n)
        growths = moved = 0
        while True:
            new = self._buffers(n, g_room, s.x.dtype)
            k.arena_place(self._scratch, n, g_room, old, new)
            s.nl, s.cnt = k.neighbor_list(s.nl, s.cnt, n, capacity)
            if s.x0 is None or s.x0.shape != (n, 3):
                s.x0 = k.zeros((n, 3), np.float64)
            k.arena_build_neighbors(new["x"], n, n + g_room, self.layout.box, self.ncell,
                                    self.offsets, self._scratch, new["key"], new["gid"], cutsq,
                                    s.nl, s.cnt, s.x0)
            got = k.arena_counts(self._scratch)
            bounds = got[: 2 * parts + 1]
            # the classify counters come with the first read (a redo reads them cleared)
            stray, row, crossed, worst = (int(v) for v in got[2 * parts + 1:])
            moved += crossed
            if stray:
                self._raise_stray(old, row)
            g = int(bounds[-1]) - n
            if g > g_room:
                g_room = g
            elif worst > capacity:
                capacity = int(worst * 1.2) + 8
                growths += 1
            else:
                break
        if int(bounds[parts]) != n:
            raise AssertionError(f"arena: {bounds[parts]} owned rows after sorting, {n} before")
        self._spare = {name: arr for name, arr in old.items() if arr is not None}
        s.x, s.v, s.img, s.gid, s.key, s.ghost_of = (
            new["x"], new["v"], new["img"], new["gid"], new["key"], new["ghost_of"])
        s.n_ghosts = g
        s.ids_stale = True
        self.bounds = bounds
        if then is not None:
            then()
        return capacity, growths, moved

    def _ghost_room(self, n: int) -> int:
        """Ghost rows the spare buffers hold (at the first build: half the atoms)."""
        have = self._spare.get("x")
        if have is None or have.shape[0] <= n:
            return n // 2 + 16
        return int(have.shape[0]) - n

    def _raise_stray(self, old: dict[str, Any], row: int) -> None:
        k = self.kernels
        gid = int(k.to_host(old["gid"][row: row + 1])[0])
        z = float(k.to_host(old["x"][row: row + 1])[0, 2])
        raise RuntimeError(
            f"atom {gid} (z = {z:.6g}) crossed a whole slab between two rebuilds: the time "
            "step is far too large")

    def _buffers(self, n: int, g: int, dtype: Any) -> dict[str, Any]:
        """The other half of each double buffer, grown when the ghosts outgrow it."""
        k, sp = self.kernels, self._spare
        rows = n + g

        def fits(name: str, shape: tuple[int, ...], dt: Any, grow: bool) -> Any:
            have = sp.get(name)
            if have is not None and have.dtype == dt and have.shape[1:] == shape[1:] and (
                    have.shape[0] >= shape[0] if grow else have.shape[0] == shape[0]):
                return have
            if grow:
                shape = (_room(shape[0]), *shape[1:])
            arr = sp[name] = k.zeros(shape, dt)
            return arr

        return {"x": fits("x", (rows, 3), np.dtype(dtype), True),
                "gid": fits("gid", (rows,), np.dtype(np.int64), True),
                "v": fits("v", (n, 3), np.dtype(dtype), False),
                "img": fits("img", (n, 3), np.dtype(np.int64), False),
                "key": fits("key", (n,), np.dtype(np.int32), False),
                "ghost_of": fits("ghost_of", (2 * n,), np.dtype(np.int32), False)}

    def refresh_ghosts(self) -> None:
        """Nothing to do: the drift launch writes every ghost copy."""

    # --- bookkeeping --------------------------------------------------------------------------
    def atoms_per_slab(self) -> list[int]:
        return np.diff(self.bounds[: self.layout.parts + 1]).tolist()

    def ghosts_per_slab(self) -> list[int]:
        return np.diff(self.bounds[self.layout.parts:]).tolist()
