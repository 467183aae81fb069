"""Bad geometry, refused in one line naming the body: duplicate names, a body leaving the
domain, touching an inlet or outlet, thinner than a cell, or overlapping another."""

from __future__ import annotations

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body

#: faces a body may not touch: its populations there would come from the boundary rule
OPEN_FACES = ("inlet", "outlet")
_EPS = 1e-9


def check_bodies(bodies: list[Body], grid: tuple[int, int], open_faces: tuple[str, str]) -> None:
    ny, nx = grid
    seen: dict[str, Body] = {}
    taken = np.full(grid, -1, dtype=np.int32)
    for k, b in enumerate(bodies):
        if b.name in seen:
            raise CaseError(f"{b.key}: name {b.name!r} is already used by {seen[b.name].key}")
        seen[b.name] = b
        x0, x1, y0, y1 = b.extent
        if x0 < -_EPS or y0 < -_EPS or x1 > nx + _EPS or y1 > ny + _EPS:
            raise CaseError(f"{b.key}: leaves the domain: it spans x {x0:.6g}..{x1:.6g}, "
                            f"y {y0:.6g}..{y1:.6g} cells, the domain [0, {nx}] x [0, {ny}]")
        if b.thickness is not None and b.thickness < 1.0:
            raise CaseError(f"{b.key}: is thinner than a cell ({b.thickness:.3g} cells across "
                            "at its narrowest): refine the grid or thicken the body")
        if not b.cells.any():
            raise CaseError(f"{b.key}: is thinner than a cell: no cell centre lies inside it "
                            "(refine the grid or enlarge the body)")
        leak = diagonal_leak(b.cells)
        if leak is not None:
            raise CaseError(f"{b.key}: is thinner than a cell at cells {leak}: two of its "
                            "cells meet only at a corner, so fluid streams through between "
                            "them (refine the grid or thicken the body)")
        for face, col in zip(open_faces, (0, nx - 1), strict=True):
            if face in OPEN_FACES and b.cells[:, col].any():
                side = "x = 0" if col == 0 else "x = 1"
                raise CaseError(f"{b.key}: touches the {face} at {side} (cells in column "
                                f"i = {col}): leave at least one fluid cell between them")
        clash = taken[b.cells]
        if (clash >= 0).any():
            other = bodies[int(clash[clash >= 0][0])]
            raise CaseError(f"{b.key}: overlaps {other.key}: bodies may not share cells")
        taken[b.cells] = k


def diagonal_leak(cells: np.ndarray) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Two solid cells that touch only at a corner, with both cells beside that corner fluid:
    a diagonal population streams between them, through the body. ((i, j), (i', j')) of the
    first such pair, or None."""
    a, b = cells[:-1, :-1], cells[1:, 1:]  # (i, j) and (i + 1, j + 1)
    c, d = cells[:-1, 1:], cells[1:, :-1]  # (i + 1, j) and (i, j + 1)
    for rising, found in ((True, a & b & ~c & ~d), (False, c & d & ~a & ~b)):
        hit = np.argwhere(found)
        if len(hit):
            j, i = (int(v) for v in hit[0])
            return ((i, j), (i + 1, j + 1)) if rising else ((i + 1, j), (i, j + 1))
    return None
