"""An atomic configuration as a file holds it: positions, box, atom types, masses, velocities
and image flags (what LAMMPS data files and GSD frames carry), in one format-free record.

Readers (:mod:`simsplit.io.lammps_data`, :mod:`simsplit.io.gsd_trajectory`) return an
:class:`AtomSystem`; the MD set-up takes positions, velocities and types from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class AtomSystem:
    """N atoms in an orthorhombic periodic box, rows sorted by the file's atom ids.

    ``positions`` are relative to the box's lower corner ``origin`` (in ``[0, L)`` for a
    wrapped file); ``images`` count box lengths, so ``positions + images * box`` are the
    unwrapped positions. ``typeid`` is 0-based; ``type_names[t]`` names type ``t`` (LAMMPS
    type ``t + 1`` is named ``"t + 1"`` unless the file labels it). ``masses`` holds one mass per
    type, or None when the file gives none. ``pair_coeffs`` are (epsilon, sigma, cutoff) per type
    pair ``[t1, t2]`` where the file gives them (NaN elsewhere, and for a cutoff not given), or
    None.
    """

    positions: np.ndarray
    box: np.ndarray
    origin: np.ndarray
    typeid: np.ndarray
    type_names: list[str]
    ids: np.ndarray
    images: np.ndarray
    masses: np.ndarray | None = None
    velocities: np.ndarray | None = None
    pair_coeffs: np.ndarray | None = None
    #: per-atom masses where the file has them per atom (GSD); None otherwise
    atom_masses: np.ndarray | None = None
    source: str = ""

    @property
    def n_atoms(self) -> int:
        return int(self.positions.shape[0])

    @property
    def n_types(self) -> int:
        return len(self.type_names)

    def unwrapped(self) -> np.ndarray:
        """Positions with the image flags applied, relative to the lower corner."""
        return self.positions + self.images * self.box
