"""Bodies in the flow: shapes from the case file (``domain.bodies``) rasterised to solid cells.

One module per shape kind (:mod:`.circle`, :mod:`.box`, :mod:`.polygon`, :mod:`.mask`), each
turning one body's entry into a :class:`~.body.Body` (its solid cells on the grid and its
reference length); :mod:`.frame` converts physical to lattice units and :mod:`.checks` refuses
bad geometry in one line. :func:`build_bodies` is the entry point; the solid cells become
``WALL`` flags (:mod:`simsplit.fluid.block`), so kernels never branch on shapes. 2D (D2Q9)
for now: every shape module works on a grid of rows ``(ny, nx)``; a 3D shape adds a module
with the same ``make(spec, frame, grid, key)`` function over ``(nz, ny, nx)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry import box, circle, mask, polygon
from simsplit.fluid.geometry.body import Body
from simsplit.fluid.geometry.checks import check_bodies
from simsplit.fluid.geometry.frame import Frame

SHAPES = {"circle": circle.make, "box": box.make, "polygon": polygon.make, "mask": mask.make}

__all__ = ["SHAPES", "Body", "Frame", "build_bodies", "solid_and_ids"]


def build_bodies(domain: dict[str, Any], open_faces: tuple[str, str]) -> list[Body]:
    """The bodies of a case's ``domain`` section, checked (:func:`.checks.check_bodies`);
    ``open_faces`` are the kinds of the faces x = 0 and x = 1 (a body may not touch an inlet
    or an outlet). Raises :class:`CaseError` naming the body's key."""
    specs = domain.get("bodies") or []
    if not specs:
        return []
    grid = tuple(int(n) for n in reversed(domain["shape"]))
    if len(grid) != 2:
        raise CaseError("domain.bodies: not yet for 3D grids (D2Q9 only so far; issue #21)")
    frame = Frame.from_domain(domain)
    bodies = []
    for k, spec in enumerate(specs):
        key = f"domain.bodies[{k}] ({spec.get('name', '?')})"
        bodies.append(SHAPES[spec["shape"]](spec, frame, grid, key))
    check_bodies(bodies, grid, open_faces)
    return bodies


def solid_and_ids(bodies: list[Body], grid: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(solid cells, body index of each cell or -1) over the whole grid, array order."""
    ids = np.full(grid, -1, dtype=np.int16)
    for k, b in enumerate(bodies):
        ids[b.cells] = k
    return ids >= 0, ids
