"""Polygon: ``vertices: [[x, y], ...]`` (three or more, either orientation, not closed by
repeating the first); solid where a cell centre lies inside (even-odd rule)."""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body, cell_centres
from simsplit.fluid.geometry.frame import Frame


def inside(px: np.ndarray, py: np.ndarray, vx: np.ndarray, vy: np.ndarray) -> np.ndarray:
    """Even-odd test of points (broadcast ``px``, ``py``) against a closed polygon: count the
    edges a ray towards +x crosses; an edge counts where its end points straddle the point's
    y (half-open, so a vertex on the ray is counted once)."""
    result = np.zeros(np.broadcast(px, py).shape, dtype=bool)
    n = len(vx)
    for k in range(n):
        ax, ay, bx, by = vx[k], vy[k], vx[(k + 1) % n], vy[(k + 1) % n]
        if ay == by:
            continue  # horizontal edge: never crossed by a horizontal ray
        straddle = (ay > py) != (by > py)
        x_cross = ax + (py - ay) * (bx - ax) / (by - ay)
        result ^= straddle & (px < x_cross)
    return result


def hull_width(vx: np.ndarray, vy: np.ndarray) -> float:
    """Smallest width of the polygon's convex hull: over each hull edge, the farthest vertex
    from the edge's line (the minimum is attained along an edge's normal)."""
    pts = sorted(set(zip(vx.tolist(), vy.tolist(), strict=True)))

    def half(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        out: list[tuple[float, float]] = []
        for p in points:
            while len(out) >= 2 and ((out[-1][0] - out[-2][0]) * (p[1] - out[-2][1])
                                     - (out[-1][1] - out[-2][1]) * (p[0] - out[-2][0])) <= 0:
                out.pop()
            out.append(p)
        return out[:-1]

    hull = half(pts) + half(pts[::-1])
    if len(hull) < 3:
        return 0.0
    h = np.array(hull)
    best = np.inf
    for k in range(len(h)):
        a, b = h[k], h[(k + 1) % len(h)]
        edge = b - a
        length = float(np.hypot(*edge))
        dist = np.abs(edge[0] * (h[:, 1] - a[1]) - edge[1] * (h[:, 0] - a[0])) / length
        best = min(best, float(dist.max()))
    return best


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, int], key: str) -> Body:
    if len(grid) != 2:
        raise CaseError(f"{key}: a polygon needs a 2D grid (in 3D use a box, sphere, cylinder "
                        "or mask)")
    verts = spec.get("vertices")
    if not verts or len(verts) < 3 or any(len(v) != 2 for v in verts):
        raise CaseError(f"{key}: a polygon needs vertices: [[x, y], ...] with at least 3 "
                        "points")
    v = np.array([frame.point(p) for p in verts], dtype=np.float64)
    x, y = cell_centres(grid)
    cells = inside(x, y, v[:, 0], v[:, 1])
    y0, y1 = float(v[:, 1].min()), float(v[:, 1].max())
    ref = spec.get("reference_length")

    def distance(p: np.ndarray, d: np.ndarray) -> np.ndarray:
        """First crossing of the segment with any edge (solving p + t d = a + s (b - a))."""
        t = np.full(len(p), np.inf)
        for k in range(len(v)):
            a, e = v[k], v[(k + 1) % len(v)] - v[k]
            den = d[:, 0] * e[1] - d[:, 1] * e[0]
            with np.errstate(divide="ignore", invalid="ignore"):
                rx, ry = a[0] - p[:, 0], a[1] - p[:, 1]
                tt = (rx * e[1] - ry * e[0]) / den
                ss = (rx * d[:, 1] - ry * d[:, 0]) / den
            hit = (den != 0) & (tt >= 0) & (tt <= 1) & (ss >= 0) & (ss <= 1)
            t = np.where(hit & (tt < t), tt, t)
        return np.where(np.isfinite(t), t, 0.5)

    return Body(spec["name"], "polygon", cells, frame.cells(ref) if ref else y1 - y0,
                hull_width(v[:, 0], v[:, 1]), (float(v[:, 0].min()), float(v[:, 0].max()),
                                               y0, y1), key, distance)
