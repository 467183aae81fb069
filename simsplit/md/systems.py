"""Atom types of an MD case: the system in ``md.init_file`` when it is a LAMMPS data file or the
last frame of a GSD or H5MD trajectory (read once and cached), its type ids and names for the
trajectory files, the mass it implies, and the check that refuses what the force kernels cannot
run yet.

Until pair coefficients per type pair reach the force kernels, every atom interacts through the
one ``md.potential`` and has the one mass ``md.mass``: a file with several types runs only when
its types are physically identical (equal masses; equal pair coefficients, or none given).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from simsplit.io.atoms import AtomSystem
from simsplit.io.lammps_data import is_lammps_data, read_lammps_data

#: what the refusal of a multi-type file says is missing
NOT_YET = ("several atom types with different {what} are not supported yet (per-type pair "
           "tables and masses are a later step); one type, or types with equal masses and pair "
           "coefficients, run")


def typed_file(path: str | Path | None) -> str | None:
    """``"lammps"``, ``"gsd"`` or ``"h5md"`` when ``path`` names a file with atom types (a
    LAMMPS data file, a GSD or H5MD trajectory), else None."""
    if path is None:
        return None
    suffix = Path(path).suffix.lower()
    if suffix in (".gsd", ".h5md"):
        return suffix[1:]
    return "lammps" if is_lammps_data(path) else None


def file_key(path: str | Path) -> tuple[str, int, str]:
    """What identifies a file's contents for the read caches: path, size and a SHA-1 of the
    bytes (modification times alone are too coarse: a file rewritten within a few ms keeps its
    time). ``ValueError`` naming ``md.init_file`` if it is missing or a directory."""
    p = Path(path)
    try:
        if p.is_dir():
            raise ValueError(f"md.init_file: '{path}' is a directory, expected a file")
        digest = hashlib.sha1()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        raise ValueError(f"md.init_file: '{path}' not found") from None
    return str(p), p.stat().st_size, digest.hexdigest()


@lru_cache(maxsize=4)
def _read(path: str, size: int, digest: str) -> AtomSystem:
    kind = typed_file(path)
    if kind == "gsd":
        from simsplit.io.gsd_trajectory import read_gsd_frame

        return read_gsd_frame(path)
    if kind == "h5md":
        return _last_h5md_frame(path)
    return read_lammps_data(path)


def _last_h5md_frame(path: str) -> AtomSystem:
    """The last frame of an H5MD trajectory (positions in float64: a run continues exactly)."""
    from simsplit.io.trajectory import open_trajectory

    with open_trajectory(path) as traj:
        if traj.n_frames == 0:
            raise ValueError(f"md.init_file: {path} holds no frames")
        k = traj.n_frames - 1
        ntypes = len(traj.type_names)
        return AtomSystem(positions=traj.positions(k), box=traj.boxes[k].copy(),
                          origin=np.zeros(3), typeid=traj.typeid.astype(np.int32),
                          type_names=list(traj.type_names), ids=np.arange(traj.n_atoms),
                          images=traj.images(k), velocities=traj.velocities(k),
                          masses=None if traj.mass is None else np.full(ntypes, traj.mass),
                          source=f"{path} frame {k} (step {int(traj.steps[k])})")


def read_system(path: str | Path) -> AtomSystem:
    """The system of a LAMMPS data file or the last frame of a GSD file (cached while the file
    is unchanged); ``ValueError`` naming ``md.init_file`` if it is missing or unreadable."""
    return _read(*file_key(path))


def atom_types(md: dict[str, Any], n_atoms: int) -> tuple[np.ndarray, list[str]]:
    """Type id (0-based) of each of ``n_atoms`` atoms in id order, and the type names: those of
    a LAMMPS data or GSD ``md.init_file``; one type named ``"1"`` (LAMMPS' type 1) otherwise."""
    path = md.get("init_file")
    if typed_file(path) is not None:
        system = read_system(path)
        return system.typeid.astype(np.int32), list(system.type_names)
    return np.zeros(n_atoms, np.int32), ["1"]


def file_mass(md: dict[str, Any]) -> float | None:
    """The one mass of a typed ``md.init_file`` (None: it gives none, or it is not typed)."""
    path = md.get("init_file")
    if typed_file(path) is None:
        return None
    system = read_system(path)
    masses = _used_masses(system)
    return None if masses is None or masses.size == 0 else float(masses[0])


def _used_masses(system: AtomSystem) -> np.ndarray | None:
    if system.atom_masses is not None:
        return np.unique(system.atom_masses)
    if system.masses is None:
        return None
    used = np.unique(system.typeid)
    return system.masses[used]


def check_typed_file(md: dict[str, Any]) -> None:
    """Refuse a typed ``md.init_file`` the kernels cannot run yet, or one that contradicts the
    case; ``ValueError`` with one line naming the key, the file and what is allowed."""
    path = md.get("init_file")
    if typed_file(path) is None:
        return
    s = read_system(path)
    if s.n_atoms == 0:
        raise ValueError(f"md.init_file: {path} holds no atoms")
    masses = _used_masses(s)
    if masses is not None and np.unique(masses).size > 1:
        if s.atom_masses is not None and s.masses is None:
            what = "masses within one type (per-atom masses)"
        else:
            what = "masses (" + ", ".join(
                f"type {s.type_names[t]}: {s.masses[t]:g}" for t in np.unique(s.typeid)) + ")"
        raise ValueError(f"md.init_file: {path}: " + NOT_YET.format(what=what))
    if masses is not None and md.get("mass") is not None and float(md["mass"]) != masses[0]:
        raise ValueError(f"md.mass: {md['mass']!r} differs from the mass {masses[0]:g} in "
                         f"{path}; leave md.mass out (null) to take the file's")
    _check_pair_coeffs(md, s, path)


def _check_pair_coeffs(md: dict[str, Any], s: AtomSystem, path: str) -> None:
    if s.pair_coeffs is None:
        return
    given = s.pair_coeffs[~np.isnan(s.pair_coeffs[..., 0])]
    if given.size == 0:
        return
    lj = given[:, :2]
    if np.unique(lj, axis=0).shape[0] > 1:
        pairs = ", ".join(f"epsilon {e:g} sigma {g:g}" for e, g in np.unique(lj, axis=0))
        raise ValueError(f"md.init_file: {path}: "
                         + NOT_YET.format(what=f"pair coefficients ({pairs})"))
    pot = md.get("potential", {})
    eps, sig = float(pot.get("epsilon", 1.0)), float(pot.get("sigma", 1.0))
    if (lj[0, 0], lj[0, 1]) != (eps, sig):
        raise ValueError(f"md.potential: epsilon {eps:g} sigma {sig:g} differ from the Pair "
                         f"Coeffs in {path} (epsilon {lj[0, 0]:g} sigma {lj[0, 1]:g}); "
                         "make them agree")
    cutoffs = np.unique(given[~np.isnan(given[:, 2]), 2])
    cut = float(pot.get("cutoff", 2.5))
    if cutoffs.size and (cutoffs.size > 1 or cutoffs[0] != cut):
        raise ValueError(f"md.potential.cutoff: {cut:g} differs from the cutoff"
                         f"{'s' if cutoffs.size > 1 else ''} "
                         f"{', '.join(f'{c:g}' for c in cutoffs)} in the Pair Coeffs of {path}; "
                         "per-pair cutoffs are not supported yet: make them agree")


def typed_file_box(md: dict[str, Any]) -> np.ndarray | None:
    """Box edges of a typed ``md.init_file`` (None for other inputs)."""
    path = md.get("init_file")
    return None if typed_file(path) is None else read_system(path).box


def typed_positions(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Unwrapped positions relative to the box's lower corner, box edges and velocities (or
    None) of a LAMMPS data file or the last frame of a GSD file."""
    s = read_system(path)
    return s.unwrapped(), s.box.copy(), None if s.velocities is None else s.velocities.copy()
