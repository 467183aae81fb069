"""A body as the solver sees it: a name, its solid cells and the length its coefficients use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

#: where a segment from points p (n, 2) along d (n, 2) first meets a shape's boundary, as a
#: fraction t of d (p outside, p + d inside: one crossing at least in (0, 1])
Distance = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(eq=False)
class Body:
    """One named body rasterised to the grid (array order ``(ny, nx)``)."""

    name: str
    kind: str  #: circle, box, polygon or mask
    cells: np.ndarray  #: bool, the grid's shape: True where the body is solid
    #: reference length in cells for drag and lift coefficients (a circle's diameter, else
    #: the extent across the flow, along y, unless the case gives one)
    reference_length: float
    #: smallest width of the shape in cells (None: judged from the cells alone, masks)
    thickness: float | None
    #: (x0, x1, y0, y1) extent of the exact shape in lattice units (cells; the domain is
    #: [0, nx] x [0, ny])
    extent: tuple[float, float, float, float]
    key: str  #: where the case file defines it, for messages
    #: exact wall distances for interpolated bounce-back (None: masks, no shape to measure)
    distance: Distance | None = None

    @property
    def size(self) -> int:
        """Number of solid cells."""
        return int(self.cells.sum())


def cell_centres(grid: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Lattice coordinates (x, y) of every cell centre, broadcastable to ``grid``: cell (i, j)
    is centred at (i + 0.5, j + 0.5), so walls (halfway) lie at 0 and n."""
    ny, nx = grid
    return (np.arange(nx, dtype=np.float64) + 0.5)[None, :], \
        (np.arange(ny, dtype=np.float64) + 0.5)[:, None]
