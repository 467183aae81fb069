"""Atom types of an MD case: the system in ``md.init_file`` when it is a LAMMPS data file or the
last frame of a GSD or H5MD trajectory (read once and cached), its type ids and names for the
trajectory files, the masses it implies, and the check that refuses what the kernels cannot
run (masses that differ within one type).

Pair coefficients per type pair come from :mod:`simsplit.md.pair_table`, masses per type from
:mod:`simsplit.md.masses`.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from simsplit.io.atoms import AtomSystem
from simsplit.io.lammps_data import is_lammps_data, read_lammps_data

#: what the refusal of per-atom masses says
NOT_YET = ("atoms of one type with different masses are not supported (masses are per type: "
           "give each mass its own type)")


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
                          masses=None if traj.mass is None else np.broadcast_to(
                              np.asarray(traj.mass, np.float64), (ntypes,)).copy(),
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
    fractions = (md.get("lattice") or {}).get("fractions")
    if fractions:
        return lattice_types(fractions, n_atoms, int(md.get("seed", 0))), [
            str(t + 1) for t in range(len(fractions))]
    return np.zeros(n_atoms, np.int32), ["1"]


def lattice_types(fractions: list[float], n_atoms: int, seed: int) -> np.ndarray:
    """Types of lattice sites in the given shares (rounded; the last type takes the rest), on
    sites picked by a permutation seeded by ``seed``."""
    share = np.asarray(fractions, dtype=np.float64)
    counts = np.rint(share / share.sum() * n_atoms).astype(np.int64)
    counts[-1] = n_atoms - counts[:-1].sum()
    order = np.random.default_rng(seed).permutation(n_atoms)
    out = np.empty(n_atoms, np.int32)
    start = 0
    for t, c in enumerate(counts):
        out[order[start: start + c]] = t
        start += c
    return out


def file_pair_coeffs(md: dict[str, Any]) -> np.ndarray | None:
    """A typed ``md.init_file``'s Pair Coeffs (epsilon, sigma, cutoff per pair; NaN where not
    given), or None."""
    path = md.get("init_file")
    return None if typed_file(path) is None else read_system(path).pair_coeffs


def file_mass(md: dict[str, Any]) -> float | None:
    """The one mass of a typed ``md.init_file`` (None: it gives none, its types differ in
    mass, or it is not typed)."""
    path = md.get("init_file")
    if typed_file(path) is None:
        return None
    system = read_system(path)
    masses = _used_masses(system)
    if masses is None or masses.size == 0 or np.unique(masses).size > 1:
        return None
    return float(masses[0])


def file_type_masses(md: dict[str, Any]) -> np.ndarray | None:
    """Mass per type of a typed ``md.init_file`` whose atom types differ in mass (None
    otherwise: one mass, none given, or not typed)."""
    path = md.get("init_file")
    if typed_file(path) is None:
        return None
    system = read_system(path)
    masses = _used_masses(system)
    if masses is None or np.unique(masses).size < 2 or system.masses is None:
        return None
    return np.asarray(system.masses, dtype=np.float64)


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
    several = masses is not None and np.unique(masses).size > 1
    if several and s.masses is None:
        raise ValueError(f"md.init_file: {path}: " + NOT_YET)
    if masses is not None and not several and md.get("mass") is not None \
            and float(md["mass"]) != masses[0]:
        raise ValueError(f"md.mass: {md['mass']!r} differs from the mass {masses[0]:g} in "
                         f"{path}; leave md.mass out (null) to take the file's")


def typed_file_box(md: dict[str, Any]) -> np.ndarray | None:
    """Box edges of a typed ``md.init_file`` (None for other inputs)."""
    path = md.get("init_file")
    return None if typed_file(path) is None else read_system(path).box


def typed_positions(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Unwrapped positions relative to the box's lower corner, box edges and velocities (or
    None) of a LAMMPS data file or the last frame of a GSD file."""
    s = read_system(path)
    return s.unwrapped(), s.box.copy(), None if s.velocities is None else s.velocities.copy()
