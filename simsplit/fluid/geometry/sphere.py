"""Sphere (3D): ``centre: [x, y, z]`` and ``radius`` (or ``diameter``); solid where a cell
centre lies in the closed ball. Coefficients use the diameter and the cross-section pi r^2."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body, cell_centres
from simsplit.fluid.geometry.frame import Frame


def radius_of(spec: dict[str, Any], frame: Frame, key: str) -> float:
    """``radius`` or ``diameter`` (exactly one) in cells, > 0."""
    if ("radius" in spec) == ("diameter" in spec):
        raise CaseError(f"{key}: give one of radius or diameter")
    r = frame.cells(spec["radius"]) if "radius" in spec else frame.cells(spec["diameter"]) / 2
    if r <= 0:
        raise CaseError(f"{key}: radius must be > 0")
    return r


def ray_ball_entry(p: np.ndarray, d: np.ndarray, centre: np.ndarray, r: float) -> np.ndarray:
    """Smaller root t of |p + t d - centre|^2 = r^2 per row (p outside, p + d inside)."""
    o = p - centre
    a = np.einsum("ij,ij->i", d, d)
    b = np.einsum("ij,ij->i", o, d)
    c = np.einsum("ij,ij->i", o, o) - r * r
    return (-b - np.sqrt(np.maximum(b * b - a * c, 0.0))) / a


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, ...], key: str) -> Body:
    if len(grid) != 3:
        raise CaseError(f"{key}: a sphere needs a 3D grid (use a circle in 2D)")
    if "centre" not in spec:
        raise CaseError(f"{key}: a sphere needs centre: [x, y, z] and one of radius or "
                        "diameter")
    centre = np.array(frame.place(spec["centre"], 3, f"{key}.centre"))
    r = radius_of(spec, frame, key)
    x, y, z = cell_centres(grid)
    cells = (x - centre[0]) ** 2 + (y - centre[1]) ** 2 + (z - centre[2]) ** 2 <= r * r
    ref = spec.get("reference_length")
    given = spec.get("reference_area")

    def distance(p: np.ndarray, d: np.ndarray) -> np.ndarray:
        return ray_ball_entry(p, d, centre, r)

    extent = tuple(float(v) for c in centre for v in (c - r, c + r))
    return Body(spec["name"], "sphere", cells, frame.cells(ref) if ref else 2 * r, 2 * r,
                extent, key, distance, frame.area(given) if given else math.pi * r * r)
