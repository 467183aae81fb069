"""What a slab needs of the geometry: solid cells, open x faces, inflow speeds per row."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simsplit.numerics import flags as fl

#: flag painted on the ghost column of each open face kind
FACE_FLAGS = {"inlet": fl.INLET, "outlet": fl.OUTLET}


@dataclass(eq=False)
class GridGeometry:
    """The whole grid's geometry (2D, array order ``(ny, nx)``); each slab takes its rows."""

    solid: np.ndarray  #: bool (ny, nx): cells of bodies
    x_kinds: tuple[str, str]  #: faces x = 0 and x = 1: wall, periodic, inlet or outlet
    inflow: np.ndarray  #: float64 (ny,): signed x velocity of the inlet at each row (0: none)
    periodic_split: bool  #: rows wrap around (y periodic)
    #: interpolated bounce-back weight of every link (q, ny, nx) (simsplit/fluid/geometry/
    #: links.py), None: halfway bounce-back everywhere
    links: np.ndarray | None = None

    @property
    def curved(self) -> np.ndarray | None:
        """Fluid cells with an interpolated link (CURVED), or None."""
        if self.links is None:
            return None
        return (self.links != -1.0).any(axis=0)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Indices of rows ``start - 1 .. stop`` (a slab and its ghost rows) in the global grid,
        wrapped where y is periodic, -1 beyond a non-periodic end."""
        ny = self.solid.shape[0]
        idx = np.arange(start - 1, stop + 1)
        if self.periodic_split:
            return idx % ny
        return np.where((idx >= 0) & (idx < ny), idx, -1)

    def paint(self, flags: np.ndarray, start: int, stop: int, halo: tuple[bool, bool]) -> None:
        """Paint a slab's flags ``(stop - start + 2, nx + 2)`` (one ghost row and column all
        round): body cells WALL, open faces' ghost columns INLET / OUTLET. Ghost rows are
        painted only across halo faces (``halo``: low, high), where they stand for the
        neighbour's rows; a wall's or the lid's ghost row stays what it is."""
        idx = self.rows(start, stop)
        for r, g in enumerate(idx):
            ghost = r == 0 or r == len(idx) - 1
            if g < 0 or (ghost and not halo[0 if r == 0 else 1]):
                continue
            flags[r, 1:-1][self.solid[g]] = fl.WALL
            if self.links is not None:
                flags[r, 1:-1][self.curved[g]] |= fl.CURVED
            for col, kind in zip((0, -1), self.x_kinds, strict=True):
                if kind in FACE_FLAGS:
                    flags[r, col] = FACE_FLAGS[kind]

    def inflow_rows(self, start: int, stop: int) -> np.ndarray:
        """Inflow speed of a slab's rows, ghost rows included (0 beyond the grid)."""
        idx = self.rows(start, stop)
        return np.where(idx >= 0, self.inflow[np.maximum(idx, 0)], 0.0)

    def link_rows(self, start: int, stop: int) -> np.ndarray:
        """Interpolation weights of a slab ``(q, stop - start + 2, nx + 2)``, ghosts halfway
        (a kernel reads only its own interior cells' weights)."""
        assert self.links is not None
        q, _, nx = self.links.shape
        out = np.full((q, stop - start + 2, nx + 2), -1.0)
        out[:, 1:-1, 1:-1] = self.links[:, start:stop]
        return out
