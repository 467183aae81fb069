"""What a slab needs of the geometry: solid cells, open x faces, inflow speeds per row (2D) or
per (k, j) line of cells along x (3D)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simsplit.numerics import flags as fl

#: flag painted on the ghost column of each open face kind (slip: a free-slip wall)
FACE_FLAGS = {"inlet": fl.INLET, "outlet": fl.OUTLET, "slip": fl.SLIP}


@dataclass(eq=False)
class GridGeometry:
    """The whole grid's geometry (array order ``(ny, nx)`` or ``(nz, ny, nx)``); each slab takes
    its layers (rows in 2D, planes in 3D) along the first axis."""

    solid: np.ndarray  #: bool, the grid's shape: cells of bodies
    x_kinds: tuple[str, str]  #: faces x = 0 and x = 1: wall, periodic, inlet, outlet or slip
    #: float64 ``grid[:-1]``: signed x velocity of the inlet at each row (2D, (ny,)) or each
    #: line (k, j) along x (3D, (nz, ny)); 0: none
    inflow: np.ndarray
    periodic_split: bool  #: layers wrap around (y periodic in 2D, z in 3D)
    #: interpolated bounce-back weight of every link (q, *grid) (simsplit/fluid/geometry/
    #: links.py; quadratic: (3 q, *grid)), None: halfway bounce-back everywhere
    links: np.ndarray | None = None
    quadratic: bool = False  #: links holds quadratic weights (w0, w1, w2 per link)
    y_slip: bool = False  #: 3D: the faces y = 0 and y = 1 are free-slip walls

    @property
    def curved(self) -> np.ndarray | None:
        """Fluid cells with an interpolated link (CURVED), or None (a link is halfway exactly
        where its first weight is -1, in both forms)."""
        if self.links is None:
            return None
        q = self.links.shape[0] // 3 if self.quadratic else self.links.shape[0]
        return (self.links[:q] != -1.0).any(axis=0)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Indices of layers ``start - 1 .. stop`` (a slab and its ghost layers) in the global
        grid, wrapped where the split axis is periodic, -1 beyond a non-periodic end."""
        ny = self.solid.shape[0]
        idx = np.arange(start - 1, stop + 1)
        if self.periodic_split:
            return idx % ny
        return np.where((idx >= 0) & (idx < ny), idx, -1)

    def paint(self, flags: np.ndarray, start: int, stop: int, halo: tuple[bool, bool]) -> None:
        """Paint a slab's flags ``(stop - start + 2, *(n + 2 for n in cross))`` (one ghost
        layer all round): body cells WALL, open faces' ghost columns INLET / OUTLET / SLIP (in
        3D along the interior rows; the ghost rows of y walls stay walls), in 3D the ghost rows
        of free-slip y faces SLIP, edges included (docs/bodies.md: the corners). Ghost layers are
        painted only across halo faces (``halo``: low, high), where they stand for the
        neighbour's layers; a wall's or the lid's ghost layer stays what it is."""
        idx = self.rows(start, stop)
        inner = (slice(1, -1),) * (flags.ndim - 1)
        curved = self.curved
        for r, g in enumerate(idx):
            ghost = r == 0 or r == len(idx) - 1
            if g < 0 or (ghost and not halo[0 if r == 0 else 1]):
                continue
            layer = flags[r][inner]
            layer[self.solid[g]] = fl.WALL
            if curved is not None:
                layer[curved[g]] |= fl.CURVED
            if self.y_slip:
                flags[r, 0] = flags[r, -1] = fl.SLIP
            for col, kind in zip((0, -1), self.x_kinds, strict=True):
                if kind in FACE_FLAGS:
                    flags[(r, *inner[:-1], col)] = FACE_FLAGS[kind]

    def inflow_rows(self, start: int, stop: int) -> np.ndarray:
        """Inflow speed of a slab's rows, ghost rows included (0 beyond the grid): ``(stop -
        start + 2,)`` in 2D; in 3D ``(stop - start + 2, ny + 2)``, ghost rows of y 0."""
        idx = self.rows(start, stop)
        rows = np.where((idx >= 0).reshape(-1, *[1] * (self.inflow.ndim - 1)),
                        self.inflow[np.maximum(idx, 0)], 0.0)
        if self.inflow.ndim == 1:
            return rows
        out = np.zeros((len(idx), self.inflow.shape[1] + 2))
        out[:, 1:-1] = rows
        return out

    def link_rows(self, start: int, stop: int) -> np.ndarray:
        """Interpolation weights of a slab ``(q, stop - start + 2, *(n + 2 for n in cross))``,
        ghosts halfway (a kernel reads only its own interior cells' weights)."""
        assert self.links is not None
        q, _, *cross = self.links.shape
        out = np.full((q, stop - start + 2, *(n + 2 for n in cross)), -1.0)
        if self.quadratic:
            out[q // 3:] = 0.0
        out[(slice(None), slice(1, -1), *(slice(1, -1) for _ in cross))] = \
            self.links[:, start:stop]
        return out
