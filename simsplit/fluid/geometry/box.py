"""Box (axis-aligned rectangle or cuboid): corners ``lower: [x0, y0(, z0)]`` and ``upper: [x1,
y1(, z1)]``; solid where a cell centre lies in the closed box."""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body, cell_centres
from simsplit.fluid.geometry.frame import Frame


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, ...], key: str) -> Body:
    dim = len(grid)
    if "lower" not in spec or "upper" not in spec:
        corner = "[x0, y0]" if dim == 2 else "[x0, y0, z0]"
        raise CaseError(f"{key}: a box needs lower: {corner} and upper (the opposite corner)")
    lo = frame.place(spec["lower"], dim, f"{key}.lower")
    hi = frame.place(spec["upper"], dim, f"{key}.upper")
    if not all(b > a for a, b in zip(lo, hi, strict=True)):
        raise CaseError(f"{key}: upper {spec['upper']!r} must exceed lower {spec['lower']!r} "
                        "along every axis")
    cells = np.ones(grid, dtype=bool)
    for c, a, b in zip(cell_centres(grid), lo, hi, strict=True):
        cells = cells & (c >= a) & (c <= b)
    ref = spec.get("reference_length")

    def distance(p: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Entry of the segment into the box: the latest entry over the slabs of its axes."""
        t = np.zeros(len(p))
        for ax, (a, b) in enumerate(zip(lo, hi, strict=True)):
            with np.errstate(divide="ignore", invalid="ignore"):
                enter = np.minimum((a - p[:, ax]) / d[:, ax], (b - p[:, ax]) / d[:, ax])
            t = np.maximum(t, np.where(d[:, ax] == 0, 0.0, enter))
        return t

    sides = [b - a for a, b in zip(lo, hi, strict=True)]
    extent = tuple(v for a, b in zip(lo, hi, strict=True) for v in (a, b))
    length = frame.cells(ref) if ref else sides[1]
    area = None
    if dim == 3:  # the cross-section the flow (x) meets, unless the case gives one
        given = spec.get("reference_area")
        area = frame.area(given) if given else sides[1] * sides[2]
    return Body(spec["name"], "box", cells, length, min(sides), extent, key, distance, area)
