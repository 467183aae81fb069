"""STL mesh (3D): ``file: body.stl`` (binary or ASCII), its vertices in the case's length unit,
scaled by ``scale`` (default 1) and moved by ``offset: [x, y, z]`` (default 0). Solid where a
cell centre lies inside the closed surface: the parity of the crossings of a ray along +x from
the centre (NumPy, :func:`inside_mesh`); wall distances for interpolated bounce-back where each
lattice link first crosses a triangle (:func:`first_hit`, Moller-Trumbore).

Written here rather than taken from a mesh library (trimesh 5.2 and numpy-stl 4.1 are on the
package index): a binary or ASCII STL is a list of triangles, and the two queries the solver
needs, parity at cell centres and the first crossing along each link, are a few vectorised
lines; trimesh's ray queries need its optional embree build to be fast, and either library
would be one more dependency on every machine (the GPU image included). Rays start a tiny,
irrational fraction of a cell off the centres, so that one through an edge or a vertex of the
mesh (a cube with vertices on cell faces) has probability zero.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body, cell_centres
from simsplit.fluid.geometry.frame import Frame

#: the rays' offset from cell centres in (y, z), cells: irrational, far below any geometry
RAY_JITTER = (3.14159265e-7, 2.71828183e-7)
_CHUNK = 1 << 22  #: pairs (point x triangle) per vectorised block


def read_stl(path: Path, key: str) -> np.ndarray:
    """Triangles ``(n, 3, 3)`` (float64) of a binary or ASCII STL file; CaseError naming ``key``
    for a missing, unreadable or empty file."""
    if not path.is_file():
        raise CaseError(f"{key}.file: {str(path)!r} does not exist")
    try:
        data = path.read_bytes()
        tris = _binary(data)
        if tris is None:
            tris = _ascii(data.decode("ascii"))
    except CaseError:
        raise
    except Exception as exc:  # a damaged file, a wrong format, a permission problem
        raise CaseError(f"{key}.file: cannot read {str(path)!r} as STL: {exc}") from None
    if len(tris) == 0 or not np.isfinite(tris).all():
        raise CaseError(f"{key}.file: {str(path)!r} holds no triangles (or non-finite ones)")
    return tris


def _binary(data: bytes) -> np.ndarray | None:
    """Triangles of a binary STL (80-byte header, count, 50 bytes per triangle), or None where
    the size does not fit its count (an ASCII file)."""
    if len(data) < 84:
        return None
    (count,) = struct.unpack("<I", data[80:84])
    if len(data) != 84 + 50 * count:
        return None
    rec = np.dtype([("normal", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
    return np.frombuffer(data, dtype=rec, count=count, offset=84)["v"].astype(np.float64)


def _ascii(text: str) -> np.ndarray:
    """Triangles of an ASCII STL: every ``vertex x y z`` line, three per facet."""
    if not text.lstrip().lower().startswith("solid"):
        raise ValueError("neither a binary STL (size and triangle count disagree) nor ASCII "
                         "(no 'solid' at the start)")
    verts = [line.split()[1:4] for line in text.splitlines()
             if line.strip().lower().startswith("vertex")]
    if len(verts) % 3:
        raise ValueError(f"{len(verts)} vertices: not three per facet")
    return np.array(verts, dtype=np.float64).reshape(-1, 3, 3)


def open_edges(tris: np.ndarray) -> int:
    """Edges of the mesh that do not belong to exactly two triangles (0: closed), vertices
    merged where their coordinates are equal."""
    _, ids = np.unique(tris.reshape(-1, 3), axis=0, return_inverse=True)
    ids = ids.reshape(-1, 3)
    edges = np.sort(np.concatenate([ids[:, [0, 1]], ids[:, [1, 2]], ids[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return int((counts != 2).sum())


def _ray_hits(p: np.ndarray, d: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Moller-Trumbore: t of the segment p + t d (rows) against every triangle, ``(n, m)``,
    inf where it misses (or runs parallel to the triangle)."""
    a, e1, e2 = tris[:, 0], tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]
    h = np.cross(d[:, None, :], e2[None, :, :])
    det = np.einsum("mk,nmk->nm", e1, h)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / det
        s = p[:, None, :] - a[None, :, :]
        u = np.einsum("nmk,nmk->nm", s, h) * inv
        qv = np.cross(s, e1[None, :, :])
        v = np.einsum("nk,nmk->nm", d, qv) * inv
        t = np.einsum("mk,nmk->nm", e2, qv) * inv
        hit = (det != 0) & (u >= 0) & (v >= 0) & (u + v <= 1)
    return np.where(hit, t, np.inf)


def _chunks(n: int, m: int) -> list[slice]:
    """Row blocks of n rows whose pairs with m triangles fit one vectorised block."""
    step = max(1, _CHUNK // max(m, 1))
    return [slice(a, min(a + step, n)) for a in range(0, n, step)]


def inside_mesh(points: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Whether each point (rows x, y, z) lies inside the closed mesh: odd crossings of the ray
    from it along +x (started ``RAY_JITTER`` off in y and z)."""
    out = np.zeros(len(points), dtype=bool)
    lo, hi = tris.min(axis=1), tris.max(axis=1)
    d = np.array([1.0, 0.0, 0.0])
    for s in _chunks(len(points), len(tris)):
        p = points[s].copy()
        p[:, 1] += RAY_JITTER[0]
        p[:, 2] += RAY_JITTER[1]
        near = ((hi[None, :, 1] >= p[:, None, 1]) & (lo[None, :, 1] <= p[:, None, 1])
                & (hi[None, :, 2] >= p[:, None, 2]) & (lo[None, :, 2] <= p[:, None, 2]))
        cols = np.flatnonzero(near.any(axis=0))
        if len(cols) == 0:
            continue
        t = _ray_hits(p, np.tile(d, (len(p), 1)), tris[cols])
        out[s] = ((t > 0) & np.isfinite(t)).sum(axis=1) % 2 == 1
    return out


def first_hit(p: np.ndarray, d: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Where each segment p + t d (rows) first crosses the mesh, t in (0, 1] (p outside, p + d
    inside); 0.5 (halfway) where none is found (a crossing through an edge, numerically
    missed by both triangles)."""
    out = np.empty(len(p))
    for s in _chunks(len(p), len(tris)):
        t = _ray_hits(p[s], d[s], tris)
        t = np.where((t >= 0) & (t <= 1), t, np.inf).min(axis=1)
        out[s] = np.where(np.isfinite(t), t, 0.5)
    return out


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, ...], key: str) -> Body:
    if len(grid) != 3:
        raise CaseError(f"{key}: an STL mesh needs a 3D grid")
    if "file" not in spec:
        raise CaseError(f"{key}: an STL body needs file: (a binary or ASCII .stl file)")
    tris = read_stl(Path(spec["file"]), key)
    gaps = open_edges(tris)
    if gaps:
        raise CaseError(f"{key}.file: the mesh {spec['file']!r} is not closed (watertight): "
                        f"{gaps} of its edges do not join exactly two triangles")
    offset = np.array(frame.place(spec.get("offset", [0.0, 0.0, 0.0]), 3, f"{key}.offset"))
    tris = tris * float(spec.get("scale", 1.0)) / frame.dx + offset
    lo, hi = tris.min(axis=(0, 1)), tris.max(axis=(0, 1))
    sides = hi - lo
    x, y, z = (np.broadcast_to(c, grid) for c in cell_centres(grid))
    cells = np.zeros(grid, dtype=bool)
    box = tuple(slice(max(int(np.floor(a - 0.5)), 0), max(int(np.ceil(b + 0.5)), 0))
                for a, b in zip(lo[::-1], hi[::-1], strict=True))  # array order (k, j, i)
    pts = np.column_stack([c[box].ravel() for c in (x, y, z)])
    if len(pts):
        cells[box] = inside_mesh(pts, tris).reshape(cells[box].shape)
    if sides.min() < 1.0:
        raise CaseError(f"{key}: is thinner than a cell ({sides.min():.3g} cells across its "
                        "bounding box): refine the grid or scale the mesh up")

    def distance(p: np.ndarray, d: np.ndarray) -> np.ndarray:
        return first_hit(p, d, tris)

    ref, given = spec.get("reference_length"), spec.get("reference_area")
    extent = tuple(float(v) for a, b in zip(lo, hi, strict=True) for v in (a, b))
    return Body(spec["name"], "stl", cells, frame.cells(ref) if ref else float(sides[1]), None,
                extent, key, distance,
                frame.area(given) if given else float(sides[1] * sides[2]))
