"""Mask: solid cells from a file, ``file: body.npy`` or ``body.h5`` (a 2D array indexed [j, i],
y up: row 0 is y = 0; nonzero = solid; in HDF5 the dataset ``dataset:``, default ``mask``) or
``file: body.png`` (dark = solid: grey level below half; fully transparent pixels are fluid;
the image's top row is the highest y, so it reads as drawn), one pixel per cell, its lower left
cell at ``origin: [i, j]`` (cells; default [0, 0])."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.body import Body
from simsplit.fluid.geometry.frame import Frame

SUFFIXES = (".npy", ".png", ".h5", ".hdf5")


def _array(arr: np.ndarray) -> np.ndarray:
    if arr.ndim != 2 or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"expected a 2D numeric or boolean array, got shape {arr.shape} of "
                         f"{arr.dtype}")
    return np.asarray(arr != 0)


def read_mask(path: Path, key: str, dataset: str = "mask") -> np.ndarray:
    """The file's solid cells as a bool array indexed [j, i] with j = 0 the lowest row."""
    if path.suffix.lower() not in SUFFIXES:
        raise CaseError(f"{key}.file: {str(path)!r} is not allowed: expected a .npy, .h5 "
                        "or .png file")
    if not path.is_file():
        raise CaseError(f"{key}.file: {str(path)!r} does not exist")
    try:
        if path.suffix.lower() == ".npy":
            return _array(np.load(path, allow_pickle=False))
        if path.suffix.lower() in (".h5", ".hdf5"):
            import h5py

            with h5py.File(path, "r") as h5:
                if dataset not in h5:
                    raise ValueError(f"no dataset {dataset!r} (it has: "
                                     f"{', '.join(sorted(h5)) or 'nothing'})")
                return _array(np.asarray(h5[dataset]))
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


def make(spec: dict[str, Any], frame: Frame, grid: tuple[int, int], key: str) -> Body:
    if "file" not in spec:
        raise CaseError(f"{key}: a mask needs file: (a .npy or .png file)")
    data = read_mask(Path(spec["file"]), key, spec.get("dataset", "mask"))
    i0, j0 = (int(v) for v in spec.get("origin", [0, 0]))
    h, w = data.shape
    ny, nx = grid
    if i0 < 0 or j0 < 0 or i0 + w > nx or j0 + h > ny:
        raise CaseError(f"{key}: leaves the domain: the mask's {w} x {h} cells at origin "
                        f"[{i0}, {j0}] do not fit the {nx} x {ny} grid")
    cells = np.zeros(grid, dtype=bool)
    cells[j0:j0 + h, i0:i0 + w] = data
    if not cells.any():
        raise CaseError(f"{key}: the mask {spec['file']!r} has no solid (dark) cell")
    rows = np.flatnonzero(cells.any(axis=1))
    cols = np.flatnonzero(cells.any(axis=0))
    ref = spec.get("reference_length")
    extent = (float(cols[0]), float(cols[-1] + 1), float(rows[0]), float(rows[-1] + 1))
    return Body(spec["name"], "mask", cells,
                frame.cells(ref) if ref else extent[3] - extent[2], None, extent, key)
