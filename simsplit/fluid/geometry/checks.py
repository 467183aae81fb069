"""Bad geometry, refused in one line naming the body: duplicate names, a body leaving the
domain, touching an inlet or outlet, thinner than a cell, or overlapping another."""

from __future__ import annotations

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body

#: faces a body may not touch: its populations there would come from the boundary rule
OPEN_FACES = ("inlet", "outlet")
_EPS = 1e-9


def check_bodies(bodies: list[Body], grid: tuple[int, ...], open_faces: tuple[str, str]) -> None:
    size = grid[::-1]  # (nx, ny(, nz))
    seen: dict[str, Body] = {}
    taken = np.full(grid, -1, dtype=np.int32)
    for k, b in enumerate(bodies):
        if b.name in seen:
            raise CaseError(f"{b.key}: name {b.name!r} is already used by {seen[b.name].key}")
        seen[b.name] = b
        spans = list(zip(b.extent[::2], b.extent[1::2], strict=True))
        if any(lo < -_EPS or hi > n + _EPS for (lo, hi), n in zip(spans, size, strict=True)):
            where = ", ".join(f"{ax} {lo:.6g}..{hi:.6g}"
                              for ax, (lo, hi) in zip("xyz", spans, strict=False))
            domain = " x ".join(f"[0, {n}]" for n in size)
            raise CaseError(f"{b.key}: leaves the domain: it spans {where} cells, the domain "
                            f"{domain}")
        if b.thickness is not None and b.thickness < 1.0:
            raise CaseError(f"{b.key}: is thinner than a cell ({b.thickness:.3g} cells across "
                            "at its narrowest): refine the grid or thicken the body")
        if not b.cells.any():
            raise CaseError(f"{b.key}: is thinner than a cell: no cell centre lies inside it "
                            "(refine the grid or enlarge the body)")
        # in 3D only where no exact width is known (masks): a shape at least a cell wide
        # leaves edge contacts only on its surface (a tilted cylinder's rims), where the two
        # fluid cells beside them are both outside it, so no fluid crosses the body
        leak = (diagonal_leak_nd(b.cells) if b.cells.ndim == 2 or b.thickness is None
                else None)
        if leak is not None:
            raise CaseError(f"{b.key}: is thinner than a cell at cells {leak}: two of its "
                            "cells meet only at a corner, so fluid streams through between "
                            "them (refine the grid or thicken the body)")
        for face, col in zip(open_faces, (0, size[0] - 1), strict=True):
            if face in OPEN_FACES and b.cells[..., col].any():
                side = "x = 0" if col == 0 else "x = 1"
                raise CaseError(f"{b.key}: touches the {face} at {side} (cells in column "
                                f"i = {col}): leave at least one fluid cell between them")
        clash = taken[b.cells]
        if (clash >= 0).any():
            other = bodies[int(clash[clash >= 0][0])]
            raise CaseError(f"{b.key}: overlaps {other.key}: bodies may not share cells")
        taken[b.cells] = k


def diagonal_leak_nd(cells: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """:func:`diagonal_leak` in 2D; in 3D the same in every plane of two axes (D3Q19's
    diagonal links lie in such planes). Cells (i, j(, k)) of the first pair, or None."""
    if cells.ndim == 2:
        return diagonal_leak(cells)
    for fixed in range(3):  # the array axis the plane is normal to
        for n in range(cells.shape[fixed]):
            plane = np.take(cells, n, axis=fixed)  # the other two axes, in array order
            leak = diagonal_leak(plane)
            if leak is not None:
                return tuple(_lift(c, fixed, n) for c in leak)  # type: ignore[return-value]
    return None


def _lift(cell: tuple[int, int], fixed: int, n: int) -> tuple[int, ...]:
    """Cell (a, b) of a plane (its faster axis first) as (i, j, k) of the grid."""
    fast, slow = cell
    idx = [slow, fast]  # array order of the plane's two axes
    idx.insert(fixed, n)  # array order (k, j, i)
    return tuple(idx[::-1])


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
