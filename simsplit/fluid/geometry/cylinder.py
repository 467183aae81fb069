"""Cylinder (3D): a circular cylinder of ``radius`` (or ``diameter``) around an axis through
``centre: [x, y, z]`` along ``axis`` (x, y, z or a vector [ax, ay, az]). With ``length`` it is
finite, flat caps at length / 2 either side of the centre, along any axis; without, it spans the
domain, and the axis must then be x, y or z. Solid where a cell centre lies inside (closed).
Coefficients use the diameter and the area diameter x length inside the domain."""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body, cell_centres
from simsplit.fluid.geometry.frame import Frame
from simsplit.fluid.geometry.sphere import radius_of

AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}


def unit_axis(value: Any, key: str) -> np.ndarray:
    """The axis as a unit vector: a name (x, y, z) or three numbers, not all zero."""
    if isinstance(value, str) and value in AXES:
        return np.array(AXES[value])
    a = np.asarray(value, dtype=np.float64) if isinstance(value, (list, tuple)) else None
    if a is None or a.shape != (3,) or not np.linalg.norm(a) > 0:
        raise CaseError(f"{key}.axis: {value!r} is not allowed: expected x, y, z or a nonzero "
                        "vector [ax, ay, az]")
    return a / np.linalg.norm(a)


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, ...], key: str) -> Body:
    if len(grid) != 3:
        raise CaseError(f"{key}: a cylinder needs a 3D grid (use a circle in 2D)")
    if "centre" not in spec or "axis" not in spec:
        raise CaseError(f"{key}: a cylinder needs centre: [x, y, z], axis (x, y, z or "
                        "[ax, ay, az]) and one of radius or diameter")
    centre = np.array(frame.place(spec["centre"], 3, f"{key}.centre"))
    axis = unit_axis(spec["axis"], key)
    r = radius_of(spec, frame, key)
    size = np.array(grid[::-1], dtype=np.float64)  # (nx, ny, nz)
    if "length" in spec:
        half = frame.cells(spec["length"]) / 2
        if half <= 0:
            raise CaseError(f"{key}.length: must be > 0")
    elif np.count_nonzero(axis) != 1:
        raise CaseError(f"{key}: a cylinder without length spans the domain along x, y or z; "
                        f"give length for the axis {spec['axis']!r}")
    else:
        half = np.inf
    x, y, z = cell_centres(grid)
    rel = [x - centre[0], y - centre[1], z - centre[2]]
    along = rel[0] * axis[0] + rel[1] * axis[1] + rel[2] * axis[2]
    radial2 = sum(c * c for c in rel) - along * along
    cells = (radial2 <= r * r) & (np.abs(along) <= half)

    def distance(p: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Entry into the intersection of the infinite cylinder and the slab between the
        caps (both convex): the later of the two entries."""
        o = p - centre
        o_perp = o - np.outer(o @ axis, axis)
        d_perp = d - np.outer(d @ axis, axis)
        a = np.einsum("ij,ij->i", d_perp, d_perp)
        b = np.einsum("ij,ij->i", o_perp, d_perp)
        c = np.einsum("ij,ij->i", o_perp, o_perp) - r * r
        with np.errstate(divide="ignore", invalid="ignore"):
            lateral = (-b - np.sqrt(np.maximum(b * b - a * c, 0.0))) / a
        t = np.where((c <= 0) | (a == 0), 0.0, lateral)
        if np.isfinite(half):
            s, v = o @ axis, d @ axis
            with np.errstate(divide="ignore", invalid="ignore"):
                enter = np.minimum((-half - s) / v, (half - s) / v)
            t = np.maximum(t, np.where(v == 0, 0.0, enter))
        return t

    if np.isfinite(half):  # the box around the caps' discs
        spread = r * np.sqrt(np.maximum(1.0 - axis * axis, 0.0))
        lo, hi = centre - half * np.abs(axis) - spread, centre + half * np.abs(axis) + spread
        length = 2 * half
    else:
        k = int(np.flatnonzero(axis)[0])
        lo, hi = centre - r, centre + r
        lo[k], hi[k] = 0.0, size[k]
        length = float(size[k])
    extent = tuple(float(v) for a, b in zip(lo, hi, strict=True) for v in (a, b))
    ref, given = spec.get("reference_length"), spec.get("reference_area")
    return Body(spec["name"], "cylinder", cells, frame.cells(ref) if ref else 2 * r,
                min(2 * r, length), extent, key, distance,
                frame.area(given) if given else 2 * r * length)
