"""Box (axis-aligned rectangle): corners ``lower: [x0, y0]`` and ``upper: [x1, y1]``; solid
where a cell centre lies in the closed rectangle."""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body, cell_centres
from simsplit.fluid.geometry.frame import Frame


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, int], key: str) -> Body:
    if "lower" not in spec or "upper" not in spec:
        raise CaseError(f"{key}: a box needs lower: [x0, y0] and upper: [x1, y1]")
    (x0, y0), (x1, y1) = frame.point(spec["lower"]), frame.point(spec["upper"])
    if not (x1 > x0 and y1 > y0):
        raise CaseError(f"{key}: upper {spec['upper']!r} must exceed lower {spec['lower']!r} "
                        "along both axes")
    x, y = cell_centres(grid)
    cells = (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
    ref = spec.get("reference_length")

    def distance(p: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Entry of the segment into the box: the latest entry over the two slabs."""
        t = np.zeros(len(p))
        for ax, (lo, hi) in enumerate(((x0, x1), (y0, y1))):
            with np.errstate(divide="ignore", invalid="ignore"):
                enter = np.minimum((lo - p[:, ax]) / d[:, ax], (hi - p[:, ax]) / d[:, ax])
            t = np.maximum(t, np.where(d[:, ax] == 0, 0.0, enter))
        return t

    return Body(spec["name"], "box", cells, frame.cells(ref) if ref else y1 - y0,
                min(x1 - x0, y1 - y0), (x0, x1, y0, y1), key, distance)
