"""GSD trajectories (HOOMD-blue's format; OVITO, HOOMD and MDAnalysis read it) through the
``gsd`` package: :class:`GSDWriter` appends frames, :func:`read_gsd_frame` reads one frame as an
:class:`~simsplit.io.atoms.AtomSystem` (an MD input).

Each frame holds ``configuration/{step,box,dimensions}`` and ``particles/{N,types,typeid,mass,
position,velocity,image}``, plus ``log/simsplit/time`` and the thermo values of the frame
(``log/simsplit/<name>``). GSD follows HOOMD's conventions: the box is centred on the origin,
positions lie in ``[-L/2, L/2)`` and are stored in single precision (float32), as are velocities;
``position + image * L`` is the unwrapped position. simsplit's boxes start at 0, so the writer
subtracts ``L/2`` and the reader adds it back. Values that do not change (types, masses) are
stored in the first frame only (the ``gsd`` package reads them from there for every frame).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from simsplit.io.atoms import AtomSystem

#: the extra that brings the ``gsd`` package
INSTALL_HINT = "pip install gsd (or the simsplit extra: pip install \"simsplit[md]\")"


def gsd_available() -> bool:
    """Whether the ``gsd`` package can be imported."""
    try:
        import gsd.hoomd  # noqa: F401
    except ImportError:
        return False
    return True


def _hoomd() -> Any:
    try:
        import gsd.hoomd
    except ImportError:
        raise ValueError(f"GSD files need the gsd package: {INSTALL_HINT}") from None
    return gsd.hoomd


class GSDWriter:
    """Append frames of N atoms of fixed types in a fixed orthorhombic box to a GSD file.

    ``typeid`` (0-based) and ``type_names`` name each atom's type; ``mass`` is one number or
    one per atom. With ``resume_step`` an existing file is continued: frames after that step
    (written by a run killed after its last checkpoint) are dropped, and frames up to it are
    not written twice.
    """

    def __init__(self, path: str | Path, box: np.ndarray, typeid: np.ndarray,
                 type_names: list[str], mass: float | np.ndarray = 1.0,
                 resume_step: int | None = None) -> None:
        hoomd = _hoomd()
        self.path = Path(path)
        self.box = np.asarray(box, dtype=np.float64)
        self.typeid = np.asarray(typeid, dtype=np.uint32)
        self.n_atoms = int(self.typeid.shape[0])
        self.type_names = [str(n) for n in type_names]
        self.mass = np.broadcast_to(np.asarray(mass, np.float32), (self.n_atoms,)).copy()
        self._floor = -1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is not None and self.path.exists():
            self._keep_up_to(int(resume_step))
            self._file = hoomd.open(self.path, "a")
            self._floor = int(resume_step)
        else:
            self._file = hoomd.open(self.path, "w")

    def _keep_up_to(self, step: int) -> None:
        """Rewrite the file with its frames up to ``step`` (GSD files only grow)."""
        hoomd = _hoomd()
        tmp = self.path.with_name(self.path.name + ".tmp")
        with hoomd.open(self.path, "r") as old, hoomd.open(tmp, "w") as new:
            for frame in old:
                if frame.configuration.step <= step:
                    new.append(frame)
        os.replace(tmp, self.path)

    def write_frame(self, step: int, time: float, positions: np.ndarray,
                    velocities: np.ndarray, images: np.ndarray,
                    log: Mapping[str, float] | None = None) -> None:
        """Append a frame; arrays ``(N, 3)`` in atom-id order, positions wrapped in
        ``[0, L)``; ``log`` values go to ``log/simsplit/<name>``."""
        if step <= self._floor:
            return
        frame = _hoomd().Frame()
        frame.configuration.step = int(step)
        frame.configuration.dimensions = 3
        frame.configuration.box = [*self.box.tolist(), 0.0, 0.0, 0.0]
        p = frame.particles
        p.N = self.n_atoms
        p.types = self.type_names
        p.typeid = self.typeid
        p.mass = self.mass
        half = 0.5 * self.box
        centred = (np.asarray(positions, np.float64) - half).astype(np.float32)
        # rounding to float32 may land on +L/2; HOOMD wants [-L/2, L/2)
        top = half.astype(np.float32)
        p.position = np.where(centred >= top, -top, centred).astype(np.float32)
        p.velocity = np.asarray(velocities, np.float32)
        p.image = np.asarray(images, np.int32)
        frame.log["simsplit/time"] = np.array([time], np.float64)
        for key, value in (log or {}).items():
            frame.log[f"simsplit/{key}"] = np.array([value], np.float64)
        self._file.append(frame)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _frame_index(n_frames: int, frame: int, path: Path) -> int:
    k = frame + n_frames if frame < 0 else frame
    if not 0 <= k < n_frames:
        raise ValueError(f"md.init_frame: {frame} is not a frame of {path} "
                         f"({n_frames} frames: 0 to {n_frames - 1}, or -1 for the last)")
    return k


def read_gsd_frame(path: str | Path, frame: int = -1) -> AtomSystem:
    """One frame of a GSD file (default: the last) as an :class:`AtomSystem`.

    Velocities are None when the file stores none (HOOMD leaves them out unless asked); masses
    are per atom in ``atom_masses`` and per type in ``masses`` when every atom of a type has
    the same mass (else None). Only orthorhombic 3D boxes are read.
    """
    hoomd = _hoomd()
    path = Path(path)
    try:
        traj = hoomd.open(path, "r")
    except (OSError, RuntimeError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable GSD file ({exc})") from None
    with traj:
        if len(traj) == 0:
            raise ValueError(f"{path}: holds no frames")
        k = _frame_index(len(traj), frame, path)
        snap = traj[k]
        has_vel = any(traj.file.chunk_exists(frame=j, name="particles/velocity")
                      for j in {0, k})
    conf, p = snap.configuration, snap.particles
    box = np.asarray(conf.box, np.float64)
    if conf.dimensions != 3:
        raise ValueError(f"{path}: frame {k} is {conf.dimensions}D; MD needs a 3D box")
    if np.any(box[3:] != 0):
        raise ValueError(f"{path}: frame {k} has a tilted box (xy, xz, yz = "
                         f"{box[3:].tolist()}): orthorhombic boxes only")
    edges = box[:3]
    if not np.all(edges > 0):
        raise ValueError(f"{path}: frame {k} has box edges {edges.tolist()}, not all > 0")
    n = int(p.N)
    pos = np.asarray(p.position, np.float64) + 0.5 * edges
    typeid = np.asarray(p.typeid, np.int32)
    names = [str(t) for t in p.types] or ["A"]
    if n and (typeid.max() >= len(names)):
        raise ValueError(f"{path}: frame {k} has typeid {int(typeid.max())} but only "
                         f"{len(names)} type names")
    mass = np.asarray(p.mass, np.float64)
    per_type = np.full(len(names), np.nan)
    uniform = True
    for t in range(len(names)):
        m = mass[typeid == t]
        if m.size:
            uniform &= bool(np.all(m == m[0]))
            per_type[t] = m[0]
    if np.any(np.isnan(per_type)):
        per_type[np.isnan(per_type)] = 1.0  # a type without atoms: HOOMD's default mass
    return AtomSystem(positions=pos, box=edges, origin=-0.5 * edges, typeid=typeid,
                      type_names=names, ids=np.arange(n, dtype=np.int64),
                      images=np.asarray(p.image, np.int64), masses=per_type if uniform else None,
                      velocities=np.asarray(p.velocity, np.float64) if has_vel else None,
                      atom_masses=mass, source=f"{path} frame {k}")
