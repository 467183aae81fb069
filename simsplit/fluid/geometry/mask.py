"""Mask: solid cells from a file, ``file: body.npy`` or ``body.h5`` (an array indexed [j, i] in
2D, [k, j, i] in 3D, y up: row 0 is y = 0; in HDF5 the dataset ``dataset:``, default ``mask``)
or, in 2D, ``file: body.png`` (the image's top row is the highest y, so it reads as drawn), one
voxel per cell, its lowest cell at ``origin: [i, j(, k)]`` (cells; default all 0).

``values:`` says what the file's numbers mean:

- ``solid`` (the default): nonzero = solid (.npy, .h5); in a PNG dark = solid (grey level
  below half), fully transparent pixels fluid. No wall distances: links stay halfway under
  interpolated bounce-back.
- ``sdf`` (.npy, .h5): a signed distance field phi sampled at the cell centres, negative in
  the solid, positive in the fluid, zero on the wall; solid cells are those with phi < 0.
- ``grey`` (.png): the grey level g in [0, 1] (dark = solid) as a smooth indicator whose
  anti-aliased edge holds the wall at g = 1/2: the same solid cells as ``solid``, phi = g - 1/2.

With ``sdf`` or ``grey`` the wall crosses a link from a fluid cell x to a solid cell x + c
where phi, interpolated along the link, is zero (:func:`level_distance`; only ratios of phi
enter, so its unit does not matter). ``grey``: linearly, delta = phi(x) / (phi(x) - phi(x +
c)) (an anti-aliased edge is a ramp a pixel wide; beyond it the grey level saturates and
says nothing more). ``sdf``: the zero of the parabola through phi at x - c, x and x + c (a
distance field holds its information away from the wall too; the linear rule misses links
that graze a circle of radius 5 cells by up to 0.4 of a link, the parabola by 0.025). A link
from a fluid cell outside the mask's array (the mask reaches its edge) has no phi(x) and
stays halfway.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body, Distance
from simsplit.fluid.geometry.frame import Frame

SUFFIXES = (".npy", ".png", ".h5", ".hdf5")
#: ``values:`` each kind of file takes (the first: the default)
VALUES = {".npy": ("solid", "sdf"), ".h5": ("solid", "sdf"), ".hdf5": ("solid", "sdf"),
          ".png": ("solid", "grey")}


def _array(arr: np.ndarray, dim: int) -> np.ndarray:
    if arr.ndim != dim or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"expected a {dim}D numeric or boolean array, got shape {arr.shape} "
                         f"of {arr.dtype}")
    return np.asarray(arr)


def _load(path: Path, dataset: str, dim: int) -> np.ndarray:
    """The file's numbers: an array of ``dim`` axes, or a PNG's grey level minus one half
    (in [-1/2, 1/2]; transparent pixels 1/2), rows bottom-up."""
    if path.suffix.lower() == ".npy":
        return _array(np.load(path, allow_pickle=False), dim)
    if path.suffix.lower() in (".h5", ".hdf5"):
        import h5py

        with h5py.File(path, "r") as h5:
            if dataset not in h5:
                raise ValueError(f"no dataset {dataset!r} (it has: "
                                 f"{', '.join(sorted(h5)) or 'nothing'})")
            return _array(np.asarray(h5[dataset]), dim)
    if dim != 2:
        raise ValueError("a PNG image is a 2D mask: give a 3D mask as .npy or HDF5")
    from PIL import Image

    with Image.open(path) as img:
        rgba = np.asarray(img.convert("RGBA"), dtype=np.float64)
    grey = rgba[..., :3] @ np.array([0.299, 0.587, 0.114])
    # the sign of grey - 127.5 is exact, so the solid cells are those below half, as drawn
    level = np.where(rgba[..., 3] > 0, (grey - 127.5) / 255.0, 0.5)
    return level[::-1].copy()  # image rows run top-down; the grid's run bottom-up


def read_mask(path: Path, key: str, dataset: str = "mask", dim: int = 2,
              values: str = "solid") -> tuple[np.ndarray, np.ndarray | None]:
    """(solid cells as a bool array indexed [j, i] ([k, j, i] for ``dim`` 3) with j = 0 the
    lowest row, the level set phi (float64, negative in the solid) or None for ``values:
    solid``)."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise CaseError(f"{key}.file: {str(path)!r} is not allowed: expected a .npy, .h5 "
                        "or .png file")
    if values not in VALUES[suffix]:
        other = "a .npy or HDF5 array" if values == "sdf" else "a PNG image"
        raise CaseError(f"{key}.values: {values} is not allowed for a {suffix} file (allowed: "
                        f"{', '.join(VALUES[suffix])}; values: {values} takes {other})")
    if not path.is_file():
        raise CaseError(f"{key}.file: {str(path)!r} does not exist")
    try:
        data = _load(path, dataset, dim)
    except CaseError:
        raise
    except Exception as exc:  # a damaged file, a wrong format, a permission problem
        raise CaseError(f"{key}.file: cannot read {str(path)!r}: {exc}") from None
    if values == "solid":
        return (data < 0 if suffix == ".png" else data != 0), None
    level = data.astype(np.float64)
    bad = int((~np.isfinite(level)).sum())
    if bad:
        raise CaseError(f"{key}.file: {str(path)!r} holds {bad} NaN or infinite values: "
                        f"values: {values} needs a finite level at every cell")
    if values == "sdf" and not (level < 0).any():
        raise CaseError(f"{key}.file: {str(path)!r} has no negative value, so no solid cell "
                        "under values: sdf (negative inside the solid; a 0/1 mask takes "
                        "values: solid)")
    return level < 0, level


def _parabola_root(back: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The zero in [0, 1] of the parabola through (-1, ``back``), (0, ``a``), (1, ``b``) (a >= 0
    > b: exactly one there), NaN where rounding puts neither root in [0, 1]."""
    slope, bend = (b - back) / 2.0, (b + back) / 2.0 - a
    disc = np.sqrt(np.maximum(slope * slope - 4.0 * a * bend, 0.0))
    half = -(slope + np.where(slope >= 0.0, disc, -disc)) / 2.0  # no cancellation
    with np.errstate(divide="ignore", invalid="ignore"):
        roots = (a / half, half / bend)  # of bend t^2 + slope t + a
    out = np.full(len(a), np.nan)
    for t in roots[::-1]:  # the first root wins where both are in [0, 1] (a = 0)
        out = np.where((t >= 0.0) & (t <= 1.0), t, out)
    return out


def level_distance(level: np.ndarray, parabola: bool) -> Distance:
    """Wall distances from a level set over the whole grid (array order, NaN where unknown):
    where phi crosses zero between the centres of p (phi >= 0) and p + d (phi < 0), as a
    fraction of d: linear between the two; with ``parabola`` the zero of the parabola through
    phi at p - d, p and p + d (exact for a plane; tests/test_bodies_masks.py measures it
    against circles and spheres), linear
    where p - d is outside the grid, unknown or solid (a gap a link wide). 1/2 (halfway) where
    phi(p) is unknown. Points are cell centres and d lattice vectors, so the ends are cells;
    p + d beyond the grid wraps (the link crossed a periodic face)."""
    grid = level.shape

    def cell(p: np.ndarray, wrap: bool) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """Array indices of the cells with centres p (wrapped, or clipped and flagged)."""
        idx, ok = [], np.ones(len(p), dtype=bool)
        for ax, n in zip(range(p.shape[1] - 1, -1, -1), grid, strict=True):
            i = np.floor(p[:, ax]).astype(np.intp)
            if wrap:
                i %= n
            else:
                ok &= (i >= 0) & (i < n)
            idx.append(i if wrap else np.where(ok, i, 0))
        return tuple(idx), ok

    def distance(p: np.ndarray, d: np.ndarray) -> np.ndarray:
        near, inside = cell(p, wrap=False)
        a = np.where(inside, level[near], np.nan)
        b = level[cell(p + d, wrap=True)[0]]
        known = np.isfinite(a) & (a > b)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(known, a / np.where(known, a - b, 1.0), 0.5)
        if parabola:
            back_cell, ok = cell(p - d, wrap=False)
            back = np.where(ok, level[back_cell], np.nan)
            use = known & np.isfinite(back) & (back >= 0.0)
            root = _parabola_root(back[use], a[use], b[use])
            t[use] = np.where(np.isnan(root), t[use], root)
        return t

    return distance


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, ...], key: str) -> Body:
    dim = len(grid)
    if "file" not in spec:
        raise CaseError(f"{key}: a mask needs file: (a .npy, .h5 or (2D) .png file)")
    solid, level = read_mask(Path(spec["file"]), key, spec.get("dataset", "mask"), dim,
                             spec.get("values", "solid"))
    origin = [int(v) for v in spec.get("origin", [0] * dim)][::-1]  # array order
    if len(origin) != dim:
        raise CaseError(f"{key}.origin: expected {dim} cell indices")
    if any(o < 0 or o + n > g for o, n, g in zip(origin, solid.shape, grid, strict=True)):
        mask_size = " x ".join(map(str, solid.shape[::-1]))
        raise CaseError(f"{key}: leaves the domain: the mask's {mask_size} cells at origin "
                        f"{origin[::-1]} do not fit the {' x '.join(map(str, grid[::-1]))} grid")
    place = tuple(slice(o, o + n) for o, n in zip(origin, solid.shape, strict=True))
    cells = np.zeros(grid, dtype=bool)
    cells[place] = solid
    if not cells.any():
        raise CaseError(f"{key}: the mask {spec['file']!r} has no solid (dark) cell")
    distance = None
    if level is not None:
        field = np.full(grid, np.nan)
        field[place] = level
        distance = level_distance(field, parabola=spec.get("values") == "sdf")
    spans = []  # (first, last + 1) along x, y(, z)
    for axis in range(dim - 1, -1, -1):
        other = tuple(a for a in range(dim) if a != axis)
        idx = np.flatnonzero(cells.any(axis=other))
        spans.append((float(idx[0]), float(idx[-1] + 1)))
    ref, given = spec.get("reference_length"), spec.get("reference_area")
    extent = tuple(v for span in spans for v in span)
    sides = [b - a for a, b in spans]
    area = None if dim == 2 else (frame.area(given) if given else sides[1] * sides[2])
    return Body(spec["name"], "mask", cells,
                frame.cells(ref) if ref else sides[1], None, extent, key, distance, area)
