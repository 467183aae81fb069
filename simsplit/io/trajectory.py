"""Read MD trajectories frame by frame, whatever wrote them: H5MD (simsplit's, or any H5MD 1.x
file with one particle group) and GSD (simsplit's or HOOMD's), as one :class:`Trajectory`.

Positions come out wrapped into ``[0, L)`` relative to the box's lower corner, in float64, with
their image counts, so ``positions + images * box`` are unwrapped positions. Types are 0-based ids
with names: H5MD ``species`` (and its ``names`` attribute, which simsplit writes), GSD
``typeid``/``types``; a file without types has one type ``"1"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simsplit.errors import InputFileError

H5MD_SUFFIXES = (".h5md", ".h5", ".hdf5")


@dataclass
class Trajectory:
    """Frames of N atoms: ``steps`` (F,), ``times`` (F,) or None when the file has none,
    ``boxes`` (F, 3) edges, ``typeid`` (N,) and ``type_names``; per-frame arrays through
    :meth:`positions`, :meth:`images` and :meth:`unwrapped`. Use as a context manager."""

    path: Path
    steps: np.ndarray
    times: np.ndarray | None
    boxes: np.ndarray
    typeid: np.ndarray
    type_names: list[str]
    has_images: bool
    _reader: Any = field(repr=False, default=None)
    #: the atom mass the file records (simsplit's H5MD: /parameters mass): one number, one
    #: per type (a run with masses per type), or None
    mass: float | np.ndarray | None = None

    @property
    def n_frames(self) -> int:
        return int(self.steps.shape[0])

    @property
    def n_atoms(self) -> int:
        return int(self.typeid.shape[0])

    def positions(self, k: int) -> np.ndarray:
        """Wrapped positions of frame ``k`` in ``[0, L)``, (N, 3) float64."""
        x = self._reader.positions(k)
        return x - np.floor(x / self.boxes[k]) * self.boxes[k]

    def images(self, k: int) -> np.ndarray:
        """Image counts of frame ``k`` (zeros when the file has none), (N, 3) int64."""
        if not self.has_images:
            return np.zeros((self.n_atoms, 3), np.int64)
        x = self._reader.positions(k)
        return self._reader.images(k) + np.floor(x / self.boxes[k]).astype(np.int64)

    def velocities(self, k: int) -> np.ndarray | None:
        """Velocities of frame ``k`` (N, 3) float64, or None when the file has none."""
        return self._reader.velocities(k)

    def unwrapped(self, k: int) -> np.ndarray:
        """``positions + images * box`` of frame ``k``."""
        x = self._reader.positions(k)
        img = self._reader.images(k) if self.has_images else 0
        return x + img * self.boxes[k]

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> Trajectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_trajectory(path: str | Path) -> Trajectory:
    """Open an H5MD (``.h5md``, ``.h5``, ``.hdf5``) or GSD (``.gsd``) trajectory."""
    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such trajectory file")
    suffix = p.suffix.lower()
    if suffix == ".gsd":
        return _open_gsd(p)
    if suffix in H5MD_SUFFIXES:
        return _open_h5md(p)
    raise InputFileError(f"{p}: unknown trajectory type '{suffix}' (use .h5md, .h5 or .gsd)")


class _H5MDReader:
    def __init__(self, path: Path, group: Any, h5: Any) -> None:
        self.h5, self.group = h5, group
        self.pos = group["position/value"]
        self.img = group["image/value"] if "image" in group else None
        self.vel = group["velocity/value"] if "velocity" in group else None

    def positions(self, k: int) -> np.ndarray:
        return np.asarray(self.pos[k], np.float64)

    def images(self, k: int) -> np.ndarray:
        return np.asarray(self.img[k], np.int64)

    def velocities(self, k: int) -> np.ndarray | None:
        return None if self.vel is None else np.asarray(self.vel[k], np.float64)

    def close(self) -> None:
        self.h5.close()


def _open_h5md(p: Path) -> Trajectory:
    import h5py

    try:
        h5 = h5py.File(p, "r")
    except OSError as exc:
        raise InputFileError(f"{p}: not a readable HDF5 file ({exc})") from None
    try:
        groups = list(h5.get("particles", {}).keys())
        if not groups:
            raise InputFileError(f"{p}: no /particles group: not an H5MD trajectory")
        name = "trajectory" if "trajectory" in groups else groups[0]
        g = h5[f"particles/{name}"]
        if "position" not in g or "value" not in g["position"]:
            raise InputFileError(f"{p}: /particles/{name} has no position/value")
        steps = np.asarray(g["position/step"][()], np.int64)
        times = np.asarray(g["position/time"][()], np.float64) if "time" in g["position"] \
            else None
        n_frames, n_atoms = g["position/value"].shape[:2]
        boxes = _h5md_boxes(p, g, n_frames)
        species = g.get("species")
        if species is not None and isinstance(species, h5py.Dataset):
            typeid = np.asarray(species[()], np.int64).reshape(-1)
            names = [n.decode() if isinstance(n, bytes) else str(n)
                     for n in species.attrs.get("names", [])]
        else:
            typeid, names = np.zeros(n_atoms, np.int64), []
        if typeid.shape != (n_atoms,) or (typeid.size and typeid.min() < 0):
            raise InputFileError(f"{p}: species must be (N,) non-negative type ids")
        ntypes = int(typeid.max()) + 1 if typeid.size else 1
        names = names or [str(t + 1) for t in range(ntypes)]
        if len(names) < ntypes:
            raise InputFileError(f"{p}: {ntypes} species but {len(names)} names")
    except InputFileError:
        h5.close()
        raise
    mass = h5["parameters"].attrs.get("mass") if "parameters" in h5 else None
    return Trajectory(p, steps, times, boxes, typeid, names, "image" in g,
                      _H5MDReader(p, g, h5), _mass_attribute(mass))


def _mass_attribute(mass: Any) -> float | np.ndarray | None:
    if mass is None:
        return None
    mass = np.asarray(mass, dtype=np.float64)
    return float(mass) if mass.ndim == 0 else mass


def _h5md_boxes(p: Path, g: Any, n_frames: int) -> np.ndarray:
    import h5py

    edges = g.get("box/edges")
    if edges is None:
        raise InputFileError(f"{p}: no box/edges: the box is needed for periodic distances")
    if isinstance(edges, h5py.Group):
        value = np.asarray(edges["value"][()], np.float64)
    else:
        value = np.broadcast_to(np.asarray(edges[()], np.float64), (n_frames, 3))
    if value.ndim == 3:  # full matrices per frame
        if np.any(value - np.einsum("fii->fi", value)[:, :, None] * np.eye(3)):
            raise InputFileError(f"{p}: a triclinic box: orthorhombic boxes only")
        value = np.einsum("fii->fi", value)
    if value.shape != (n_frames, 3):
        raise InputFileError(f"{p}: box/edges has shape {value.shape}, expected "
                             f"({n_frames}, 3)")
    return value.copy()


class _GSDReader:
    def __init__(self, traj: Any) -> None:
        self.traj = traj

    def positions(self, k: int) -> np.ndarray:
        frame = self.traj[k]
        half = 0.5 * np.asarray(frame.configuration.box[:3], np.float64)
        return np.asarray(frame.particles.position, np.float64) + half

    def images(self, k: int) -> np.ndarray:
        return np.asarray(self.traj[k].particles.image, np.int64)

    def velocities(self, k: int) -> np.ndarray | None:
        return np.asarray(self.traj[k].particles.velocity, np.float64)

    def close(self) -> None:
        self.traj.close()


def _open_gsd(p: Path) -> Trajectory:
    try:
        import gsd.hoomd
    except ImportError:
        raise InputFileError(f"{p}: reading GSD needs the gsd package (pip install gsd)") \
            from None
    try:
        traj = gsd.hoomd.open(p, "r")
    except (OSError, RuntimeError, ValueError) as exc:
        raise InputFileError(f"{p}: not a readable GSD file ({exc})") from None
    n = len(traj)
    if n == 0:
        traj.close()
        raise InputFileError(f"{p}: holds no frames")
    steps = np.empty(n, np.int64)
    boxes = np.empty((n, 3))
    times = np.empty(n)
    has_time = True
    for k in range(n):
        conf = traj.file.read_chunk(frame=k, name="configuration/step") \
            if traj.file.chunk_exists(frame=k, name="configuration/step") else np.array([0])
        steps[k] = int(conf[0])
        box = traj.file.read_chunk(frame=k, name="configuration/box") \
            if traj.file.chunk_exists(frame=k, name="configuration/box") else None
        if box is None:
            box = traj[k].configuration.box
        if np.any(np.asarray(box[3:]) != 0):
            traj.close()
            raise InputFileError(f"{p}: frame {k} has a tilted box: orthorhombic boxes only")
        boxes[k] = box[:3]
        if traj.file.chunk_exists(frame=k, name="log/simsplit/time"):
            times[k] = traj.file.read_chunk(frame=k, name="log/simsplit/time")[0]
        else:
            has_time = False
    first = traj[0].particles
    typeid = np.asarray(first.typeid, np.int64)
    names = [str(t) for t in first.types] or ["A"]
    return Trajectory(p, steps, times if has_time else None, boxes, typeid, names, True,
                      _GSDReader(traj))
