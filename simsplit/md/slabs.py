"""Slab decomposition of the MD box along z: geometry, ghost atoms and migration.

Every slab owns the atoms whose wrapped z lies in ``[lo, hi)``. At each neighbour-list
rebuild, owners hand atoms that left their slab to the new owner (migration) and send every
atom within ``reach = cutoff + skin`` of a neighbour's interval to that neighbour as a ghost.
Ghosts are exact copies of the owner's wrapped coordinates, refreshed every step; the pair
kernels take the minimum image, so the periodic wrap in z needs no special case and one slab
simply has no neighbours to talk to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from simsplit.md.exchange import Endpoint

#: ghosts are chosen a hair beyond the reach so rounding in the distance test never drops one
_GHOST_MARGIN = 1.0e-9


class SlabLayout:
    """``parts`` slabs of the periodic box along z, thicknesses proportional to ``weights``."""

    def __init__(self, box: np.ndarray, parts: int, weights: Sequence[float] | None,
                 reach: float) -> None:
        box = np.asarray(box, dtype=np.float64)
        if parts < 1:
            raise ValueError(f"decomposition.subdomains: need at least one slab, got {parts}")
        if weights is None:
            weights = [1.0] * parts
        if len(weights) != parts:
            raise ValueError(f"decomposition.weights: {len(weights)} weights for {parts} slabs")
        if any(not (w > 0) for w in weights):
            raise ValueError(f"decomposition.weights: must be positive, got {list(weights)}")
        for d, name in enumerate("xyz"):
            if box[d] < 2.0 * reach:
                raise ValueError(
                    f"box length {box[d]:.6g} along {name} is shorter than 2 * (cutoff + skin) "
                    f"= {2 * reach:.6g}: the minimum image would miss pairs; use more cells")
        w = np.asarray(weights, dtype=np.float64)
        edges = box[2] * np.concatenate([[0.0], np.cumsum(w)]) / w.sum()
        edges[0], edges[-1] = 0.0, box[2]
        thick = np.diff(edges)
        if thick.min() < reach:
            k = int(np.argmin(thick))
            raise ValueError(
                f"slab {k} would be {thick[k]:.6g} thick along z, less than cutoff + skin = "
                f"{reach:.6g}: ghosts would have to come from beyond the next slab; "
                f"use fewer slabs (at most {int(box[2] // reach)}) or more even weights")
        self.box = box
        self.parts = parts
        self.reach = reach
        self.edges = edges

    def interval(self, k: int) -> tuple[float, float]:
        return float(self.edges[k]), float(self.edges[k + 1])

    def neighbours(self, k: int) -> tuple[int, ...]:
        """Distinct other slabs across the low and high faces (periodic), low first."""
        out: list[int] = []
        for nb in ((k - 1) % self.parts, (k + 1) % self.parts):
            if nb != k and nb not in out:
                out.append(nb)
        return tuple(out)


@dataclass
class SlabState:
    """Arrays of one slab. Rows ``[0, n_own)`` of ``ids``/``x`` are owned, the rest ghosts."""

    index: int
    lo: float
    hi: float
    neighbours: tuple[int, ...]
    comm: Endpoint
    ids: np.ndarray
    x: np.ndarray
    v: np.ndarray
    img: np.ndarray
    n_own: int = 0
    f: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    x0: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    pe: np.ndarray = field(default_factory=lambda: np.zeros(0))
    vir: np.ndarray = field(default_factory=lambda: np.zeros(0))
    nl: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), np.int32))
    cnt: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    send_idx: dict[int, np.ndarray] = field(default_factory=dict)
    ghost_rows: dict[int, slice] = field(default_factory=dict)
    #: the kernel set's copies: global ids of all local rows, send_idx, cell-list scratch
    gid: Any = None
    send_dev: dict[int, Any] = field(default_factory=dict)
    cells: Any = None

    @property
    def n_local(self) -> int:
        return int(self.ids.shape[0])

    @property
    def n_ghost(self) -> int:
        return self.n_local - self.n_own

    def owned(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        n = self.n_own
        return self.ids[:n], self.x[:n], self.v[:n], self.img[:n]

    def set_owned(self, ids: np.ndarray, x: np.ndarray, v: np.ndarray, img: np.ndarray) -> None:
        """Replace the owned atoms (dropping all ghosts) and size the per-atom arrays."""
        n = ids.shape[0]
        self.n_own = n
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        self.x = np.ascontiguousarray(x)
        self.v = np.ascontiguousarray(v)
        self.img = np.ascontiguousarray(img, dtype=np.int64)
        self.f = np.zeros((n, 3), dtype=self.x.dtype)
        self.pe = np.zeros(n)
        self.vir = np.zeros(n)
        self.send_idx = {}
        self.ghost_rows = {}


def make_slabs(layout: SlabLayout, comms: Sequence[Endpoint], dtype: Any) -> list[SlabState]:
    """Empty slabs for ``layout``; fill them with :func:`scatter`."""
    slabs = []
    for k in range(layout.parts):
        lo, hi = layout.interval(k)
        slabs.append(SlabState(
            index=k, lo=lo, hi=hi, neighbours=layout.neighbours(k), comm=comms[k],
            ids=np.zeros(0, np.int64), x=np.zeros((0, 3), dtype), v=np.zeros((0, 3), dtype),
            img=np.zeros((0, 3), np.int64)))
    return slabs


def scatter(slabs: list[SlabState], layout: SlabLayout, kernels: Any, x: np.ndarray,
            v: np.ndarray, img: np.ndarray) -> None:
    """Give every slab its atoms from global arrays in id order (startup and restart)."""
    owner = kernels.owners(x[:, 2], x.shape[0], layout.edges)
    for s in slabs:
        ids = np.flatnonzero(owner == s.index)
        s.set_owned(ids, x[ids], v[ids], img[ids])


def migrate(slabs: list[SlabState], layout: SlabLayout, kernels: Any) -> int:
    """Move atoms whose wrapped z left their slab to the neighbour that now owns them.

    Two phases, as with non-blocking MPI: every slab posts its sends, then every slab
    receives from its neighbours in a fixed order. Returns the number of atoms moved.
    """
    moved = 0
    keep_masks = []
    for s in slabs:
        ids, x, v, img = s.owned()
        owner = kernels.owners(x[:, 2], s.n_own, layout.edges)
        keep = owner == s.index
        stray = ~keep & ~np.isin(owner, s.neighbours)
        if stray.any():
            i = int(np.flatnonzero(stray)[0])
            raise RuntimeError(
                f"atom {ids[i]} jumped from slab {s.index} to slab {owner[i]}, beyond a "
                "neighbour, between two rebuilds: the time step is far too large")
        for nb in s.neighbours:
            sel = owner == nb
            s.comm.send(nb, ids[sel], "mig_ids")
            s.comm.send(nb, x[sel], "mig_x")
            s.comm.send(nb, v[sel], "mig_v")
            s.comm.send(nb, img[sel], "mig_img")
            moved += int(sel.sum())
        keep_masks.append(keep)
    for s, keep in zip(slabs, keep_masks, strict=True):
        ids, x, v, img = s.owned()
        parts = [(ids[keep], x[keep], v[keep], img[keep])]
        for nb in s.neighbours:
            parts.append((s.comm.recv(nb, "mig_ids"), s.comm.recv(nb, "mig_x"),
                          s.comm.recv(nb, "mig_v"), s.comm.recv(nb, "mig_img")))
        s.set_owned(*(np.concatenate(p) for p in zip(*parts, strict=True)))
    return moved


def sort_owned(s: SlabState, box: np.ndarray, ncell: np.ndarray) -> None:
    """Reorder owned atoms by cell for memory locality (results never depend on row order)."""
    ids, x, v, img = s.owned()
    c = np.minimum((x * (ncell / box)).astype(np.int64), ncell - 1)
    key = (c[:, 2] * ncell[1] + c[:, 1]) * ncell[0] + c[:, 0]
    order = np.argsort(key, kind="stable")
    s.set_owned(ids[order], x[order], v[order], img[order])


def select_ghosts(slabs: list[SlabState], layout: SlabLayout, kernels: Any) -> None:
    """Choose ghost atoms for every neighbour, send ids and positions, append received ones."""
    cut = layout.reach * (1.0 + _GHOST_MARGIN)
    for s in slabs:
        ids, x, _, _ = s.owned()
        s.send_idx = {}
        for nb in s.neighbours:
            lo, hi = layout.interval(nb)
            sel = kernels.near_interval(x[:, 2], s.n_own, lo, hi, layout.box[2], cut)
            s.send_idx[nb] = sel
            s.comm.send(nb, ids[sel], "ghost_ids")
            s.comm.send(nb, x[sel], "ghost_x")
    for s in slabs:
        ids_parts = [s.ids[: s.n_own]]
        x_parts = [s.x[: s.n_own]]
        row = s.n_own
        s.ghost_rows = {}
        for nb in s.neighbours:
            gids = s.comm.recv(nb, "ghost_ids")
            x_parts.append(s.comm.recv(nb, "ghost_x"))
            ids_parts.append(gids)
            s.ghost_rows[nb] = slice(row, row + gids.shape[0])
            row += gids.shape[0]
        s.ids = np.concatenate(ids_parts)
        s.x = np.ascontiguousarray(np.concatenate(x_parts))


def update_ghosts_device(slabs: list[SlabState], kernels: Any) -> None:
    """:func:`update_ghosts` for slabs whose arrays live on one GPU: each ghost block is
    gathered straight from its owner's rows (owned rows are read, ghost rows written)."""
    by_index = {s.index: s for s in slabs}
    for s in slabs:
        for nb in s.neighbours:
            rows = s.ghost_rows[nb]
            kernels.gather_rows(by_index[nb].x, by_index[nb].send_dev[s.index], s.x, rows.start)


def update_ghosts(slabs: list[SlabState]) -> None:
    """Refresh ghost positions from their owners (every step between rebuilds)."""
    for s in slabs:
        for nb in s.neighbours:
            s.comm.send(nb, s.x[s.send_idx[nb]], "ghost_x")
    for s in slabs:
        for nb in s.neighbours:
            s.x[s.ghost_rows[nb]] = s.comm.recv(nb, "ghost_x")
