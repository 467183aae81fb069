"""A body as the solver sees it: a name, its solid cells and the length (2D) or area (3D) its
coefficients use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

#: where a segment from points p (n, dim) along d (n, dim) first meets a shape's boundary, as
#: a fraction t of d (p outside, p + d inside: one crossing at least in (0, 1])
Distance = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(eq=False)
class Body:
    """One named body rasterised to the grid (array order ``(ny, nx)`` or ``(nz, ny, nx)``)."""

    name: str
    kind: str  #: circle, box, polygon, mask, sphere, cylinder or stl
    cells: np.ndarray  #: bool, the grid's shape: True where the body is solid
    #: reference length in cells for drag and lift coefficients (a circle's diameter, else
    #: the extent across the flow, along y, unless the case gives one)
    reference_length: float
    #: smallest width of the shape in cells (None: judged from the cells alone, masks)
    thickness: float | None
    #: (x0, x1, y0, y1[, z0, z1]) extent of the exact shape in lattice units (cells; the
    #: domain is [0, nx] x [0, ny] (x [0, nz]))
    extent: tuple[float, ...]
    key: str  #: where the case file defines it, for messages
    #: wall distances for interpolated bounce-back: exact for shapes, from the level set of a
    #: mask with values sdf or grey; None: a mask of solid cells alone (its links stay halfway)
    distance: Distance | None = None
    #: 3D: the area (cells^2) of the coefficients, 2 F / (rho U^2 A) (a sphere's cross-section,
    #: a cylinder's diameter times its length in the domain); None in 2D (the length is used)
    reference_area: float | None = None

    @property
    def reference(self) -> float:
        """What a force is divided by besides rho U^2 / 2: the length in 2D, the area in 3D."""
        return self.reference_area if self.reference_area is not None else self.reference_length

    @property
    def size(self) -> int:
        """Number of solid cells."""
        return int(self.cells.sum())


def cell_centres(grid: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Lattice coordinates (x, y[, z]) of every cell centre, broadcastable to ``grid`` (array
    order): cell (i, j, k) is centred at (i + 0.5, j + 0.5, k + 0.5), so walls (halfway) lie at
    0 and n."""
    dim = len(grid)
    out = []
    for axis, n in enumerate(reversed(grid)):  # x, y, z
        shape = [1] * dim
        shape[dim - 1 - axis] = n
        out.append((np.arange(n, dtype=np.float64) + 0.5).reshape(shape))
    return tuple(out)
