"""Circle: ``centre: [x, y]`` and ``radius`` (or ``diameter``); solid where a cell centre lies
in the closed disc."""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body, cell_centres
from simsplit.fluid.geometry.frame import Frame


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, int], key: str) -> Body:
    if len(grid) != 2:
        raise CaseError(f"{key}: a circle needs a 2D grid (in 3D use a sphere or a cylinder)")
    if "centre" not in spec or ("radius" in spec) == ("diameter" in spec):
        raise CaseError(f"{key}: a circle needs centre: [x, y] and one of radius or diameter")
    cx, cy = frame.point(spec["centre"])
    r = frame.cells(spec["radius"]) if "radius" in spec else frame.cells(spec["diameter"]) / 2
    if r <= 0:
        raise CaseError(f"{key}: radius must be > 0")
    x, y = cell_centres(grid)
    cells = (x - cx) ** 2 + (y - cy) ** 2 <= r * r
    ref = spec.get("reference_length")

    def distance(p: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Smaller root of |p + t d - c|^2 = r^2 (p outside, p + d inside)."""
        ox, oy = p[:, 0] - cx, p[:, 1] - cy
        a = d[:, 0] ** 2 + d[:, 1] ** 2
        b = ox * d[:, 0] + oy * d[:, 1]
        c = ox * ox + oy * oy - r * r
        return (-b - np.sqrt(np.maximum(b * b - a * c, 0.0))) / a

    return Body(spec["name"], "circle", cells, frame.cells(ref) if ref else 2 * r, 2 * r,
                (cx - r, cx + r, cy - r, cy + r), key, distance)
