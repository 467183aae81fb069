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
GHOST_MARGIN = 1.0e-9


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
    #: the device reordered the rows since ``ids`` was set: ``gid`` holds the current order
    ids_stale: bool = False
    #: the kernel set (device) this slab runs on
    kernels: Any = None
    #: atom type of each local row (several types only; set after every rebuild)
    typ: Any = None
    #: where the neighbour's type starts in a list entry (0: entries are plain rows; see
    #: ``pack_types`` of the device kernel sets)
    type_shift: int = 0

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
        self.ids_stale = False
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
    cut = layout.reach * (1.0 + GHOST_MARGIN)
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


#: values of ``SIMSPLIT_MD_TRANSFER`` (see :func:`simsplit.md.solver.ghost_transfer_mode`)
TRANSFER_MODES = ("auto", "peer", "staged")


@dataclass
class GhostLink:
    """How the ghosts that slab ``owner`` sends slab ``dest`` are refreshed between rebuilds.

    ``mode``: ``same`` (one kernel set: a gather launch straight into the ghost rows),
    ``peer`` (gather into ``buf`` on the owner's GPU, device-to-device copy), ``staged``
    (gather, then through the pinned ``host`` buffer) or ``remote`` (the other slab is on
    another MPI rank: gather, download into ``host``, message; the receiver uploads through
    its own ``host`` buffer). Buffers are reused from rebuild to rebuild while they fit.
    """

    owner: int
    dest: int
    mode: str
    rows: int
    buf: Any = None
    host: np.ndarray | None = None


def _room(rows: int) -> int:
    return rows + rows // 8 + 16


def plan_ghost_links(slabs: list[SlabState], mode: str, remote: bool,
                     old: dict[tuple[int, int], GhostLink] | None = None
                     ) -> dict[tuple[int, int], GhostLink]:
    """Ghost refresh plan for the local ``slabs`` (after a rebuild picked the ghosts).

    In one process every (owner, receiver) pair of neighbours gets a link; under MPI
    (``remote``) each local slab has a sending link to every neighbour and a receiving link
    from it. ``mode`` is :data:`TRANSFER_MODES`' choice for slabs on different kernel sets.
    """
    old = old or {}
    by_index = {s.index: s for s in slabs}
    links: dict[tuple[int, int], GhostLink] = {}

    def reuse(key: tuple[int, int], kind: str, rows: int, owner: SlabState,
              host_kernels: Any) -> GhostLink:
        prev = old.get(key)
        link = GhostLink(key[0], key[1], kind, rows)
        if kind == "same":
            return link
        dtype = owner.x.dtype
        if kind != "remote" or key[0] in by_index:  # a device send buffer on the owner
            if prev is not None and prev.buf is not None and prev.buf.shape[0] >= rows \
                    and prev.buf.dtype == dtype:
                link.buf = prev.buf
            else:
                link.buf = owner.kernels.zeros((_room(rows), 3), dtype)
        if kind in ("staged", "remote"):
            if prev is not None and prev.host is not None and prev.host.shape[0] >= rows \
                    and prev.host.dtype == dtype:
                link.host = prev.host
            else:
                link.host = host_kernels.host_buffer((_room(rows), 3), dtype)
        return link

    for s in slabs:
        for nb in s.neighbours:
            if remote:  # s sends to nb; s receives from nb
                send_rows = int(s.send_idx[nb].shape[0])
                links[(s.index, nb)] = reuse((s.index, nb), "remote", send_rows, s, s.kernels)
                got = s.ghost_rows[nb]
                links[(nb, s.index)] = reuse((nb, s.index), "remote", got.stop - got.start, s,
                                             s.kernels)
                continue
            owner = by_index[nb]
            if mode == "auto":
                if owner.kernels is s.kernels:
                    kind = "same"
                else:
                    kind = "peer" if owner.kernels.peer_capable(s.kernels) else "staged"
            else:
                kind = mode
            rows = int(owner.send_idx[s.index].shape[0])
            links[(nb, s.index)] = reuse((nb, s.index), kind, rows, owner, owner.kernels)
    return links


def update_ghosts_device(slabs: list[SlabState], links: dict[tuple[int, int], GhostLink]
                         ) -> None:
    """:func:`update_ghosts` for slabs whose arrays live on GPUs, by the rebuild's plan
    (:func:`plan_ghost_links`). On one kernel set each ghost block is gathered straight from
    its owner's rows (owned rows are read, ghost rows written); across kernel sets through the
    link's buffers; across processes as messages (all sends, then the receives in the fixed
    neighbour order, as :func:`update_ghosts`). Host work is O(ghosts) at most."""
    by_index = {s.index: s for s in slabs}
    for s in slabs:  # s owns the atoms, nb keeps them as ghosts
        for nb in s.neighbours:
            link = links[(s.index, nb)]
            idx = s.send_dev[nb]
            if link.mode == "remote":
                s.comm.send(nb, s.kernels.pack_rows(s.x, idx, link.buf, link.host), "ghost_x")
                continue
            dest = by_index[nb]
            row0 = dest.ghost_rows[s.index].start
            if link.mode == "same":
                s.kernels.gather_rows(s.x, idx, dest.x, row0)
            else:
                s.kernels.send_rows(s.x, idx, link.buf, dest.kernels, dest.x, row0,
                                    link.host if link.mode == "staged" else None)
    for s in slabs:
        for nb in s.neighbours:
            link = links[(nb, s.index)]
            if link.mode == "remote":
                s.kernels.upload_rows(s.comm.recv(nb, "ghost_x"), s.x, s.ghost_rows[nb].start,
                                      link.host)


def update_ghosts(slabs: list[SlabState]) -> None:
    """Refresh ghost positions from their owners (every step between rebuilds)."""
    for s in slabs:
        for nb in s.neighbours:
            s.comm.send(nb, s.x[s.send_idx[nb]], "ghost_x")
    for s in slabs:
        for nb in s.neighbours:
            s.x[s.ghost_rows[nb]] = s.comm.recv(nb, "ghost_x")
