"""Mask: solid cells from a file, ``file: body.npy`` or ``body.h5`` (an array indexed [j, i] in
2D, [k, j, i] in 3D, y up: row 0 is y = 0; nonzero = solid; in HDF5 the dataset ``dataset:``,
default ``mask``) or, in 2D, ``file: body.png`` (dark = solid: grey level below half; fully
transparent pixels are fluid; the image's top row is the highest y, so it reads as drawn), one
voxel per cell, its lowest cell at ``origin: [i, j(, k)]`` (cells; default all 0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body
from simsplit.fluid.geometry.frame import Frame

SUFFIXES = (".npy", ".png", ".h5", ".hdf5")


def _array(arr: np.ndarray, dim: int) -> np.ndarray:
    if arr.ndim != dim or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"expected a {dim}D numeric or boolean array, got shape {arr.shape} "
                         f"of {arr.dtype}")
    return np.asarray(arr != 0)


def read_mask(path: Path, key: str, dataset: str = "mask", dim: int = 2) -> np.ndarray:
    """The file's solid cells as a bool array indexed [j, i] ([k, j, i] for ``dim`` 3) with
    j = 0 the lowest row."""
    if path.suffix.lower() not in SUFFIXES:
        raise CaseError(f"{key}.file: {str(path)!r} is not allowed: expected a .npy, .h5 "
                        "or .png file")
    if not path.is_file():
        raise CaseError(f"{key}.file: {str(path)!r} does not exist")
    try:
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
        solid = (grey < 127.5) & (rgba[..., 3] > 0)
        return solid[::-1].copy()  # image rows run top-down; the grid's run bottom-up
    except CaseError:
        raise
    except Exception as exc:  # a damaged file, a wrong format, a permission problem
        raise CaseError(f"{key}.file: cannot read {str(path)!r}: {exc}") from None


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, ...], key: str) -> Body:
    dim = len(grid)
    if "file" not in spec:
        raise CaseError(f"{key}: a mask needs file: (a .npy, .h5 or (2D) .png file)")
    data = read_mask(Path(spec["file"]), key, spec.get("dataset", "mask"), dim)
    origin = [int(v) for v in spec.get("origin", [0] * dim)][::-1]  # array order
    if len(origin) != dim:
        raise CaseError(f"{key}.origin: expected {dim} cell indices")
    if any(o < 0 or o + n > g for o, n, g in zip(origin, data.shape, grid, strict=True)):
        mask_size = " x ".join(map(str, data.shape[::-1]))
        raise CaseError(f"{key}: leaves the domain: the mask's {mask_size} cells at origin "
                        f"{origin[::-1]} do not fit the {' x '.join(map(str, grid[::-1]))} grid")
    cells = np.zeros(grid, dtype=bool)
    cells[tuple(slice(o, o + n) for o, n in zip(origin, data.shape, strict=True))] = data
    if not cells.any():
        raise CaseError(f"{key}: the mask {spec['file']!r} has no solid (dark) cell")
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
                frame.cells(ref) if ref else sides[1], None, extent, key, None, area)
