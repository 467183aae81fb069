"""Bodies in the flow: shapes from the case file (``domain.bodies``) rasterised to solid cells.

One module per shape kind (:mod:`.circle`, :mod:`.box`, :mod:`.polygon`, :mod:`.mask`), each
turning one body's entry into a :class:`~.body.Body` (its solid cells on the grid and its
reference length); :mod:`.frame` converts physical to lattice units and :mod:`.checks` refuses
bad geometry in one line. :func:`build_bodies` is the entry point; the solid cells become
``WALL`` flags (:mod:`simsplit.fluid.block`), so kernels never branch on shapes. Every shape
module has one ``make(spec, frame, grid, key)`` over the grid in array order, ``(ny, nx)`` in
2D (circle, polygon; box, mask) or ``(nz, ny, nx)`` in 3D (:mod:`.sphere`, :mod:`.cylinder`,
:mod:`.mesh` for STL files; box, mask).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry import box, circle, cylinder, mask, mesh, polygon, sphere
from simsplit.fluid.geometry.body import Body
from simsplit.fluid.geometry.checks import check_bodies
from simsplit.fluid.geometry.frame import Frame

SHAPES = {"circle": circle.make, "box": box.make, "polygon": polygon.make, "mask": mask.make,
          "sphere": sphere.make, "cylinder": cylinder.make, "stl": mesh.make}

__all__ = ["SHAPES", "Body", "Frame", "build_bodies", "solid_and_ids"]


def build_bodies(domain: dict[str, Any], open_faces: tuple[str, str]) -> list[Body]:
    """The bodies of a case's ``domain`` section, checked (:func:`.checks.check_bodies`);
    ``open_faces`` are the kinds of the faces x = 0 and x = 1 (a body may not touch an inlet
    or an outlet). Raises :class:`CaseError` naming the body's key."""
    specs = domain.get("bodies") or []
    if not specs:
        return []
    grid = tuple(int(n) for n in reversed(domain["shape"]))
    frame = Frame.from_domain(domain)
    bodies = []
    for k, spec in enumerate(specs):
        key = f"domain.bodies[{k}] ({spec.get('name', '?')})"
        if "values" in spec and spec["shape"] != "mask":
            raise CaseError(f"{key}.values: is not allowed for a {spec['shape']} (only a mask "
                            "takes values: solid, sdf or grey; shapes have exact walls)")
        bodies.append(SHAPES[spec["shape"]](spec, frame, grid, key))
    check_bodies(bodies, grid, open_faces)
    return bodies


def solid_and_ids(bodies: list[Body], grid: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(solid cells, body index of each cell or -1) over the whole grid, array order."""
    ids = np.full(grid, -1, dtype=np.int16)
    for k, b in enumerate(bodies):
        ids[b.cells] = k
    return ids >= 0, ids
