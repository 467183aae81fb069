"""Launches of one slab's cell list and neighbour lists: the counting sort of the atoms into
cells (count, scan, scatter, per-cell sort by global id), the rows reordered in cell order, the
list storage (``nl[k, i]``: neighbour ``k`` of all atoms contiguous) and the full lists in
canonical order.

:class:`CellLaunches` is a part of :class:`~simsplit.backends.cuda_c.md.DeviceMDKernels`: it
uses that class's ``_launch``, ``_zero``, ``zeros``, ``_read_small`` and its ``_worst`` and
``_no_cutsq`` arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from simsplit.backends.cuda_c.md_names import (
    MAX_NEIGHBORS,
    SCAN_CHUNK,
    box_args,
    scan_levels,
    scan_scratch,
    stencil_ranges,
)


@dataclass
class DeviceCells:
    """Cell-list scratch of one slab, reused while it is large enough."""

    atoms: int
    ncells: int
    cell_of: Any
    counts: Any
    cell_start: Any
    fill: Any
    cell_atoms: Any
    chunk_sums: Any
    #: whether cell_atoms is the identity (rows in cell order: :meth:`reorder_by_cell`)
    in_order: bool = False
    #: the other half of each double buffer of :meth:`CellLaunches.reorder_by_cell`
    spare: dict[str, Any] = field(default_factory=dict)


class CellLaunches:
    """The cell-list and neighbour-list launches of :class:`DeviceMDKernels`."""

    # --- cells and lists --------------------------------------------------------------------
    def neighbor_list(self, nl, cnt, n_own: int, capacity: int) -> tuple[Any, Any]:
        """Storage ``nl[capacity, rows]`` and ``cnt[rows]`` for ``n_own`` rows: the given
        arrays when they fit, else new ones with room for 1/8 more atoms."""
        if capacity > MAX_NEIGHBORS:
            raise ValueError(
                f"md.neighbor.capacity: GPU neighbour lists hold at most {MAX_NEIGHBORS} "
                f"atoms per row, {capacity} are needed (reduce the skin or the density)")
        if nl is not None and nl.shape[1] >= n_own and nl.shape[0] == capacity:
            return nl, cnt
        rows = max(n_own + n_own // 8 + 16, 0 if nl is None else nl.shape[1])
        return self.zeros((capacity, rows), np.int32), self.zeros((rows,), np.int32)

    def bin_atoms(self, x, gid, n: int, box: np.ndarray, ncell: np.ndarray,
                  cells: DeviceCells | None = None) -> DeviceCells:
        """Counting sort of the first ``n`` rows into cells; ascending global id ``gid``
        within a cell (the canonical order)."""
        nc = int(np.prod(ncell))
        if cells is None or cells.atoms < n or cells.ncells != nc:
            atoms = n + n // 8 + 16
            # counts start at zero and md_cell_sort leaves them so
            cells = DeviceCells(
                atoms, nc, self.zeros((atoms,), np.int32), self.zeros((nc,), np.int32),
                self.zeros((nc + 1,), np.int32), self.zeros((nc,), np.int32),
                self.zeros((atoms,), np.int32), self.zeros((scan_scratch(nc),), np.int32))
        nx, ny, nz = (np.int32(c) for c in ncell)
        n32, nc32 = np.int32(n), np.int32(nc)
        if n:
            self._launch("md_cell_count", x.dtype, n, x, n32, *box_args(box), nx, ny, nz,
                         cells.cell_of, cells.counts)
        cells.in_order = False
        self._exclusive_scan(cells.counts, nc, cells.chunk_sums, cells.cell_start, cells.fill)
        if n:
            self._launch("md_cell_scatter", None, n, cells.cell_of, n32, cells.fill,
                         cells.cell_atoms)
        self._launch("md_cell_sort", None, nc, cells.cell_start, nc32, gid, cells.cell_atoms,
                     cells.counts)
        return cells

    def _exclusive_scan(self, counts, nc: int, sums, cell_start, fill) -> None:
        """``cell_start`` (and ``fill``) = exclusive prefix sums of ``counts`` (the cell sort
        zeroes them after); ``sums`` holds the levels (:func:`scan_scratch` values)."""
        levels = scan_levels(nc)
        views, off = [], 0
        for m in levels:
            views.append(sums[off: off + m + 1])
            off += m + 1
        chunk = np.int32(SCAN_CHUNK)
        src, n = counts, nc
        for view, m in zip(views, levels, strict=True):
            self._launch("md_scan_chunks", None, m, src, np.int32(n), chunk, view)
            src, n = view, m
        self._launch("md_scan_serial", None, 1, views[-1], np.int32(levels[-1]))
        for i in range(len(levels) - 2, -1, -1):
            self._launch("md_scan_inplace", None, levels[i + 1], views[i],
                         np.int32(levels[i]), chunk, views[i + 1])
        self._launch("md_scan_write", None, nc, counts, np.int32(nc), chunk, views[0],
                     cell_start, fill)

    def reorder_by_cell(self, cells: DeviceCells, n: int, x, v, img, gid
                        ) -> tuple[Any, Any, Any, Any]:
        """Rows of ``x, v, img, gid`` (all ``n`` rows owned: one slab) in the cell order of
        :meth:`bin_atoms`; returns the new arrays (the old ones become the spare buffers) and
        updates ``cells`` to match. No result depends on the row order."""
        sp = cells.spare
        old = {"x": x, "v": v, "img": img, "gid": gid, "cell_of": cells.cell_of}
        for key, arr in old.items():
            have = sp.get(key)
            if have is None or have.shape != arr.shape or have.dtype != arr.dtype:
                sp[key] = self.zeros(arr.shape, arr.dtype)
        new = {key: sp[key] for key in old}
        if n:
            self._launch("md_permute", x.dtype, n, np.int32(n), cells.cell_atoms, cells.cell_of,
                         x, v, img, gid, new["cell_of"], new["x"], new["v"], new["img"],
                         new["gid"])
        cells.spare = old
        cells.cell_of = new["cell_of"]
        cells.in_order = True
        return new["x"], new["v"], new["img"], new["gid"]

    def build_neighbors(self, x, n_own: int, box: np.ndarray, ncell: np.ndarray,
                        cells: DeviceCells, offsets: Sequence[np.ndarray], cutsq: float, nl,
                        cnt, typ=None, type_shift: int = 0, list_cutsq=None) -> int:
        """Full lists of the owned atoms in canonical order. Waits for the device; returns
        the largest row count if some row overflowed the capacity ``nl.shape[0]``, else 0.
        ``type_shift`` > 0: each entry carries its row's type from ``typ`` (see
        :meth:`type_bits`), and ``list_cutsq`` (device, ``ntypes**2`` float64, each at most
        ``cutsq``) is every type pair's own squared list cutoff."""
        if n_own == 0:
            return 0
        typed = typ is not None and type_shift > 0
        if typed:
            ntypes = int(round(float(np.sqrt(list_cutsq.shape[0]))))
        else:
            list_cutsq, ntypes = self._no_cutsq, 0
        self._launch("md_build_neighbors", x.dtype, n_own, x, np.int32(n_own), *box_args(box),
                     *(np.int32(c) for c in ncell),
                     *(np.float64(float(b) / float(c)) for b, c in zip(box, ncell, strict=True)),
                     *(np.int32(v) for v in stencil_ranges(offsets)),
                     cells.cell_of, cells.cell_start, cells.cell_atoms,
                     np.int32(cells.in_order), np.float64(cutsq), nl,
                     np.int32(nl.shape[1]), np.int32(nl.shape[0]), cnt, self._worst,
                     typ if typed else cnt, np.int32(type_shift if typed else 0), list_cutsq,
                     np.int32(ntypes))
        worst = int(self._read_small(self._worst)[0])
        if worst:
            self._zero(self._worst)
        return worst
