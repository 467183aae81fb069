"""Initial positions: an fcc lattice (LAMMPS ``lattice fcc`` convention) or a file (HDF5, XYZ,
LAMMPS data, the last frame of a GSD or H5MD trajectory)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from simsplit.md.systems import file_key, typed_file, typed_positions

#: fcc basis in units of the lattice constant, in LAMMPS order
FCC_BASIS = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]])


def fcc_lattice(density: float, cells: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Atoms of an fcc crystal at reduced ``density`` filling ``cells`` unit cells.

    The lattice constant is ``a = (4 / density)**(1/3)`` as in LAMMPS ``lattice fcc <rho>``.
    Atoms are ordered x fastest, then y, then z, basis atom innermost (LAMMPS order), and the
    returned ids are this row order. Returns ``(positions (N, 3), box edges (3,))``.
    """
    if not density > 0:
        raise ValueError(f"md.lattice.density: must be > 0, got {density!r}")
    nx, ny, nz = (int(c) for c in cells)
    if min(nx, ny, nz) < 1:
        raise ValueError(f"md.lattice.cells: need at least one cell per axis, got {list(cells)}")
    a = (4.0 / density) ** (1.0 / 3.0)
    iz, iy, ix = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    corners = np.stack([ix.ravel(), iy.ravel(), iz.ravel()], axis=1).astype(np.float64)
    pos = (corners[:, None, :] + FCC_BASIS[None, :, :]).reshape(-1, 3) * a
    box = np.array([nx * a, ny * a, nz * a])
    return pos, box


def _box_from_array(raw: np.ndarray, source: str) -> np.ndarray:
    raw = np.asarray(raw, dtype=np.float64)
    if raw.shape == (3, 3):
        if np.any(raw - np.diag(np.diag(raw))):
            raise ValueError(f"{source}: only orthorhombic boxes are supported")
        raw = np.diag(raw)
    if raw.shape == ():
        raw = np.full(3, float(raw))
    if raw.shape != (3,) or not np.all(raw > 0):
        raise ValueError(f"{source}: box must be 3 positive edge lengths, got {raw.tolist()}")
    return raw


def read_h5(path: str | Path) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Read dataset ``positions`` (N, 3), optional ``box`` (edges, (3,) or diagonal (3, 3))
    and optional ``velocities`` (N, 3) from an HDF5 file. Returns ``(pos, box, vel)``."""
    import h5py

    with h5py.File(path, "r") as h5:
        if "positions" not in h5:
            raise ValueError(f"{path}: no dataset 'positions'")
        pos = np.asarray(h5["positions"][()], dtype=np.float64)
        box = _box_from_array(h5["box"][()], f"{path}: box") if "box" in h5 else None
        vel = np.asarray(h5["velocities"][()], dtype=np.float64) if "velocities" in h5 else None
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError(f"{path}: positions must have shape (N, 3), got {pos.shape}")
    if vel is not None and vel.shape != pos.shape:
        raise ValueError(f"{path}: velocities shape {vel.shape} differs from {pos.shape}")
    return pos, box, vel


_LATTICE = re.compile(r'Lattice\s*=\s*"([^"]*)"', re.IGNORECASE)


def read_xyz(path: str | Path) -> tuple[np.ndarray, np.ndarray | None]:
    """Read the first frame of an XYZ file (``N``, comment, ``element x y z`` lines).

    An extended-XYZ ``Lattice="ax ay az bx by bz cx cy cz"`` in the comment line gives the
    box. Returns ``(positions (N, 3), box edges or None)``.
    """
    lines = Path(path).read_text().splitlines()
    try:
        n = int(lines[0].split()[0])
    except (IndexError, ValueError):
        raise ValueError(f"{path}: first line must be the number of atoms") from None
    if len(lines) < n + 2:
        raise ValueError(f"{path}: expected {n} atom lines, found {len(lines) - 2}")
    box = None
    m = _LATTICE.search(lines[1])
    if m:
        box = _box_from_array(np.array(m.group(1).split(), float).reshape(3, 3),
                              f"{path}: Lattice")
    pos = np.empty((n, 3))
    for k in range(n):
        parts = lines[2 + k].split()
        if len(parts) < 4:
            raise ValueError(f"{path}: line {k + 3} needs 'element x y z'")
        pos[k] = [float(p) for p in parts[1:4]]
    return pos, box


def read_positions(path: str | Path) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Positions, box (or None) and velocities (or None) from an ``.xyz`` or HDF5 file, a
    LAMMPS data file or the last frame of a GSD or H5MD trajectory (the last three unwrapped by
    their image counts and relative to the box's lower corner; see :mod:`simsplit.md.systems`).

    A missing, unreadable or malformed file is a ``ValueError`` naming ``md.init_file``. The
    file is read once while its contents are unchanged (the case check and the solver share the
    read; :func:`simsplit.md.systems.file_key`); each call returns fresh arrays."""
    pos, box, vel = _read_cached(*file_key(path))
    return pos.copy(), None if box is None else box.copy(), None if vel is None else vel.copy()


@lru_cache(maxsize=2)
def _read_cached(path: str, size: int, digest: str
                 ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    if typed_file(path) is not None:
        return typed_positions(path)
    suffix = Path(path).suffix.lower()
    try:
        if suffix == ".xyz":
            pos, box = read_xyz(path)
            return pos, box, None
        if suffix in (".h5", ".hdf5"):
            return read_h5(path)
    except (OSError, UnicodeDecodeError, IndexError) as exc:
        raise ValueError(f"md.init_file: {path} cannot be read as {suffix}: {exc}") from None
    raise ValueError(f"md.init_file: unknown file type '{suffix}' (use .xyz, .h5, .hdf5, .gsd, "
                     ".h5md, or a LAMMPS data file: .data, .lmp or data.*)")


def wrap_into_box(pos: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    img = np.floor(pos / box).astype(np.int64)
    pos = pos - img * box
    over = pos >= box
    pos[over] -= np.broadcast_to(box, pos.shape)[over]
    img[over] += 1
    return np.maximum(pos, 0.0), img
