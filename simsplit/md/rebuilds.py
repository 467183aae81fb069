"""Atoms onto slabs and neighbour lists: hand the atoms to the slabs, decide when lists must be
rebuilt (the displacement flags, agreed over ranks), migrate atoms and pick ghosts, build each
slab's cell bins and Verlet list, and refresh ghost positions between rebuilds.

A part of :class:`~simsplit.md.solver.MDSolver` (which inherits it): the methods read the
solver's slabs, layout, kernel sets and exchange.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from simsplit.backends.cpu import md as cpu_md
from simsplit.errors import DivergenceError
from simsplit.md import slabs as sl

#: a displacement since the last build beyond this many skins means one step jumped a skin
JUMP_SKINS = 1.5


class NeighbourRebuilds:
    """Distribution, rebuild decision, migration, ghosts and lists of an MD solver's slabs."""

    def _distribute(self, x: np.ndarray, v: np.ndarray, img: np.ndarray,
                    built: np.ndarray | None = None) -> None:
        """Hand the atoms (global arrays in id order) to the slabs and build the lists: from
        ``x``, or from the positions ``built`` of the last build before a restart, so that
        ownership, ghosts, lists and the displacement reference are those the interrupted run
        had; the atoms are then moved to ``x``."""
        x = x.astype(self.dtype)
        start = x if built is None else np.asarray(built).astype(self.dtype)
        if self.arena is not None:
            self.arena.load(start, np.asarray(v, dtype=self.dtype), img.astype(np.int64))
        else:
            sl.scatter(self.slabs, self.layout, cpu_md, start, np.asarray(v, dtype=self.dtype),
                       img.astype(np.int64))
        self._on_device = self.arena is not None
        self._kick_pending = False
        self._rebuild()
        if built is not None:
            for s in self.slabs:  # ghosts are copies of their owners' positions too
                s.x = s.kernels.to_device(x[self.slab_ids(s)])
        if self._comm is not None:
            self.exchange.flush()  # type: ignore[union-attr]

    # --- neighbour lists --------------------------------------------------------------------
    def _needs_rebuild(self) -> bool:
        """Whether some atom moved more than skin / 2 since the last build, as flagged by this
        step's :meth:`advance` launch (on a GPU: one 8-byte read, which waits for the step's
        queued work)."""
        if self.skin <= 0.0:
            return True
        moved = jumped = False
        for k in self.kernel_sets:  # every set, so that every set's flags are reset
            m, j = k.displacement_flags()
            moved, jumped = moved or m, jumped or j
        if not self._any_rank(moved):
            return False
        # The previous step ended within skin / 2 of the last build (or it would have rebuilt),
        # so a displacement beyond 1.5 skin now means one step carried an atom over a skin.
        if jumped:
            self._raise_jump()  # under MPI the failing rank aborts the job
        return True

    def _any_rank(self, flag: bool) -> bool:
        """``flag`` or'ed over all ranks (an allreduce max under MPI): every rank agrees."""
        if self._comm is None:
            return flag
        return self.exchange.allreduce_max(1.0 if flag else 0.0) > 0.0  # type: ignore[union-attr]

    def _raise_jump(self) -> None:
        limit = JUMP_SKINS * self.skin
        for s in self.slabs:
            x = np.asarray(s.kernels.to_host(s.x))[: s.n_own]
            x0 = np.asarray(s.kernels.to_host(s.x0))[: s.n_own]
            d = x - x0
            d -= self.box * np.round(d / self.box)
            dist = np.sqrt((d * d).sum(axis=1))
            bad = np.flatnonzero(~(dist <= limit))
            if bad.size:
                i = bad[np.argmax(np.nan_to_num(dist[bad], nan=np.inf))]
                gid = int(np.asarray(s.kernels.to_host(s.gid))[i])
                raise DivergenceError(
                    self.steps_done + 1, self._slab_index(s, x0[i, 2]),
                    f"atom id {gid} moved {dist[i]:.3g} in one step, more than the neighbour "
                    f"skin {self.skin:g} (time step {self.dt:g} too large)")

    def _slab_index(self, s: sl.SlabState, z_built: float) -> int:
        """The slab a row belongs to: its own, or in an arena the one that owned its position
        at the last build."""
        if self.arena is None:
            return s.index
        return int(cpu_md.owners(np.array([z_built]), 1, self.layout.edges)[0])

    def check_health(self) -> None:
        """Raise :class:`DivergenceError` for non-finite positions or velocities (on a GPU one
        integer is read; the atoms only when one is bad, to name it)."""
        for s in self.slabs:
            finite = getattr(s.kernels, "all_finite", None)
            if finite is not None and finite(s.x, s.v, s.n_own):
                continue
            x = np.asarray(s.kernels.to_host(s.x))[: s.n_own]
            v = np.asarray(s.kernels.to_host(s.v))[: s.n_own]
            bad = np.flatnonzero(~(np.isfinite(x).all(axis=1) & np.isfinite(v).all(axis=1)))
            if bad.size:
                i = int(bad[0])
                gid = int(np.asarray(s.kernels.to_host(s.gid))[i])
                z0 = float(np.asarray(s.kernels.to_host(s.x0))[i, 2])
                raise DivergenceError(self.steps_done, self._slab_index(s, z0),
                                      f"atom id {gid} has a non-finite position or velocity "
                                      f"(time step {self.dt:g} too large?)")

    def _rebuild(self, then: Callable[[], None] | None = None) -> None:
        """Migrate, pick ghosts and build the lists; ``then`` (work on the new lists, such as
        a step's forces) is queued once they are built (on a rank slab before the host waits
        for the build, so the device goes straight on)."""
        if self.arena is not None:  # every slab on one GPU: nothing leaves the device
            def on_new_lists() -> None:
                self._update_row_types()
                if then is not None:
                    then()

            self.capacity, grew, moved = self.arena.rebuild(self.capacity,
                                                            self.reach * self.reach,
                                                            on_new_lists)
            self._stats["capacity_growths"] += grew
            self._stats["migrations"] += moved
            self._stats["rebuilds"] += 1
            return
        # On a GPU, migration and ghost selection run on the host (download, NumPy, upload).
        # One slab on a GPU has neither (and row order never matters): its rebuild stays on
        # the device.
        if not (self._on_device and self.layout.parts == 1):
            self._pull()
            self._stats["migrations"] += sl.migrate(self.slabs, self.layout, cpu_md)
            for s in self.slabs:
                sl.sort_owned(s, self.box, self.ncell)
            sl.select_ghosts(self.slabs, self.layout, cpu_md)
            self._push()
        for s in self.slabs:
            self._build_list(s)
        self._stats["rebuilds"] += 1
        if then is not None:
            then()

    def _pull(self) -> None:
        """Bring the arrays migration needs back to the host (device kernel sets only)."""
        if not self._on_device:
            return
        for s in self.slabs:
            k = s.kernels
            s.x, s.v, s.img = k.to_host(s.x), k.to_host(s.v), k.to_host(s.img)
        self._on_device = False

    def _push(self) -> None:
        """Hand each slab's host arrays to its kernel set (uploads them to its GPU) and plan
        the ghost refreshes until the next rebuild."""
        for s in self.slabs:
            k = s.kernels
            if k.is_device:
                s.x, s.v, s.img, s.f, s.pe, s.vir = (
                    k.to_device(a) for a in (s.x, s.v, s.img, s.f, s.pe, s.vir))
                if isinstance(s.nl, np.ndarray):  # the host default: no device list yet
                    s.nl = s.cnt = None
            s.gid = k.to_device(s.ids)
            s.send_dev = {nb: k.to_device(idx) for nb, idx in s.send_idx.items()}
        self._on_device = self.kernels.is_device
        if self._on_device:
            self._links = sl.plan_ghost_links(self.slabs, self.ghost_transfer,
                                              remote=self._comm is not None, old=self._links)

    def slab_ids(self, s: sl.SlabState) -> np.ndarray:
        """Global ids of a slab's rows in their current order (downloaded once after the
        device reordered the rows: observation only, never per step)."""
        if s.ids_stale:
            s.ids = np.asarray(s.kernels.to_host(s.gid))
            s.ids_stale = False
        return s.ids

    def _build_list(self, s: sl.SlabState) -> None:
        k = s.kernels
        s.cells = k.bin_atoms(s.x, s.gid, s.n_local, self.box, self.ncell, s.cells)
        if self._on_device and self.layout.parts == 1 and self.reorder:
            # rows in cell order for locality; the host ids follow lazily (see slab_ids)
            s.x, s.v, s.img, s.gid = k.reorder_by_cell(s.cells, s.n_own, s.x, s.v, s.img,
                                                       s.gid)
            s.ids_stale = True
        shift = self._row_types(s)  # the lists carry the neighbours' types where they can
        while True:
            s.nl, s.cnt = k.neighbor_list(s.nl, s.cnt, s.n_own, self.capacity)
            worst = self._build_neighbors(s, shift)
            if worst <= self.capacity:
                break
            self.capacity = int(worst * 1.2) + 8
            self._stats["capacity_growths"] += 1
        s.x0 = k.snapshot(s.x, s.n_own, s.x0)

    def _build_neighbors(self, s: sl.SlabState, shift: int) -> int:
        """One list build of slab ``s`` into its current list arrays; the longest row if one
        overflowed, else 0. A typed run passes each type pair's list cutoff: the kernels keep
        each pair within its own where they can (device lists with type bits, ``shift`` > 0;
        the CPU's lists of two types) and ignore it otherwise."""
        k = s.kernels
        cut = self._on_kernels(k, "list_cutsq", self.pairs.list_cutsq(self.skin)) \
            if self.typed else None
        return k.build_neighbors(s.x, s.n_own, self.box, self.ncell, s.cells, self._offsets,
                                 self.reach * self.reach, s.nl, s.cnt, s.typ, shift, cut)

    def _update_ghosts(self) -> None:
        if self.arena is not None:
            self.arena.refresh_ghosts()
            return
        if self._on_device:
            sl.update_ghosts_device(self.slabs, self._links)
        else:
            sl.update_ghosts(self.slabs)
