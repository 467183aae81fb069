"""Write the STL meshes the project's cases use, from first principles (no mesh library).

    python scripts/make_stl.py            # cases/sphere.stl (binary), cases/cube.stl (ASCII)

``sphere.stl``: a unit-diameter icosphere (an icosahedron whose faces are split into four,
``--levels`` times, new vertices pushed onto the sphere; 1,280 triangles at 3 levels), outward
normals. ``cube.stl``: the unit cube [0, 1]^3, 12 triangles, in ASCII STL.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

import numpy as np

CASES = Path(__file__).resolve().parents[1] / "cases"


def icosahedron() -> tuple[np.ndarray, np.ndarray]:
    """Vertices (12, 3) on the unit sphere and faces (20, 3), counter-clockwise outside."""
    g = (1 + 5 ** 0.5) / 2
    v = np.array([[-1, g, 0], [1, g, 0], [-1, -g, 0], [1, -g, 0], [0, -1, g], [0, 1, g],
                  [0, -1, -g], [0, 1, -g], [g, 0, -1], [g, 0, 1], [-g, 0, -1], [-g, 0, 1]],
                 dtype=np.float64)
    f = np.array([[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9],
                  [5, 11, 4], [11, 10, 2], [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2],
                  [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10],
                  [8, 6, 7], [9, 8, 1]])
    return v / np.linalg.norm(v, axis=1, keepdims=True), f


def subdivide(v: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each face into four; the edge midpoints (shared between neighbours) onto the sphere."""
    verts = [tuple(p) for p in v]
    index = {p: k for k, p in enumerate(verts)}
    midpoint_of: dict[tuple[int, int], int] = {}

    def mid(a: int, b: int) -> int:
        key = (min(a, b), max(a, b))
        if key not in midpoint_of:
            p = (v[a] + v[b]) / 2
            p = tuple(p / np.linalg.norm(p))
            index.setdefault(p, len(verts))
            if index[p] == len(verts):
                verts.append(p)
            midpoint_of[key] = index[p]
        return midpoint_of[key]

    faces = []
    for a, b, c in f:
        ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
        faces += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
    return np.array(verts), np.array(faces)


def icosphere(levels: int, diameter: float = 1.0) -> np.ndarray:
    """Triangles (n, 3, 3) of an icosphere of ``diameter`` around the origin."""
    v, f = icosahedron()
    for _ in range(levels):
        v, f = subdivide(v, f)
    return v[f] * (diameter / 2)


def cube() -> np.ndarray:
    """Triangles (12, 3, 3) of the unit cube, counter-clockwise seen from outside."""
    c = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                  [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], dtype=np.float64)
    quads = [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (2, 3, 7, 6), (1, 2, 6, 5), (0, 4, 7, 3)]
    return np.array([c[list(t)] for a, b, cc, d in quads for t in ((a, b, cc), (a, cc, d))])


def normals(tris: np.ndarray) -> np.ndarray:
    n = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    return n / np.linalg.norm(n, axis=1, keepdims=True)


def write_binary(path: Path, tris: np.ndarray, name: str) -> None:
    with path.open("wb") as out:
        out.write(name.encode("ascii")[:80].ljust(80, b" "))
        out.write(struct.pack("<I", len(tris)))
        for n, t in zip(normals(tris), tris, strict=True):
            out.write(struct.pack("<12fH", *n, *t.ravel(), 0))


def write_ascii(path: Path, tris: np.ndarray, name: str) -> None:
    lines = [f"solid {name}"]
    for n, t in zip(normals(tris), tris, strict=True):
        lines += [f"  facet normal {n[0]:.9g} {n[1]:.9g} {n[2]:.9g}", "    outer loop",
                  *(f"      vertex {p[0]:.9g} {p[1]:.9g} {p[2]:.9g}" for p in t),
                  "    endloop", "  endfacet"]
    path.write_text("\n".join([*lines, f"endsolid {name}", ""]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, default=3)
    ap.add_argument("--out", type=Path, default=CASES)
    args = ap.parse_args()
    sphere = icosphere(args.levels)
    write_binary(args.out / "sphere.stl", sphere, "simsplit icosphere, unit diameter")
    write_ascii(args.out / "cube.stl", cube(), "unit_cube")
    print(f"{args.out / 'sphere.stl'}: {len(sphere)} triangles; {args.out / 'cube.stl'}: 12")


if __name__ == "__main__":
    main()
