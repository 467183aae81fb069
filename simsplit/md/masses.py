"""Per-type masses (``md.masses``, or the Masses section of a LAMMPS data file whose types
differ in mass): the solver's side.

One mass for every atom keeps the scalar path unchanged (``dt / 2m`` in the drift and kick
kernels, ``m`` in the kinetic sums). With several masses the half kicks run as their own
launch, ``v += table[type] f`` with ``table = dt / 2m`` per type (``kick_typed`` on every
backend, the row types the typed force kernel already keeps), and the drift launch is given a
kick of 0 (``v + 0 f`` leaves v as it is). The kinetic energy ``sum m v^2``: on a device the
exact sums with each row's mass (``md_kinetic_typed``), elsewhere the per-atom ``|v|^2``
gathered by id times the atom's mass, summed with ``math.fsum``: the same correctly rounded
total on every split and backend. Langevin drag and noise go by type too
(``langevin_forces_typed``).

A part of :class:`~simsplit.md.solver.MDSolver` (which inherits it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.md.systems import file_type_masses


def type_masses(md: dict[str, Any], ntypes: int) -> np.ndarray:
    """Mass of each atom type: ``md.masses``, else a typed ``md.init_file``'s per-type
    masses where they differ, else ``md.mass`` for all."""
    if md.get("masses") is not None:
        return np.asarray(md["masses"], dtype=np.float64)
    from_file = file_type_masses(md)
    if from_file is not None:
        return from_file
    return np.full(ntypes, float(md["mass"]))


class TypeMasses:
    """Per-type masses of an MD solver's atoms (see the module docstring)."""

    #: atoms differ in mass: kicks per type, kinetic sums per atom
    multi_mass = False

    def _init_masses(self, md: dict[str, Any]) -> None:
        """After the time step is known, before the first list build."""
        #: mass of each type and of each atom (id order)
        self.type_mass = type_masses(md, self.pairs.ntypes)
        self.atom_mass = self.type_mass[self.atom_type]
        self.multi_mass = bool(np.unique(self.atom_mass).size > 1)
        if self.multi_mass:
            self.typed = True  # the kicks need each row's type
            self._dtf_by_type = 0.5 * self.dt / self.type_mass

    def _init_langevin_masses(self, damping: float) -> None:
        """Langevin drag ``m / damping`` and noise ``sqrt(2 m T / (damping dt))`` per type
        (the scalar path's expressions, type by type)."""
        m = self.type_mass
        self._drag_by_type = m / damping
        self._noise_by_type = np.sqrt(2.0 * m * self.target_temperature / (damping * self.dt))

    def _langevin_tables(self, kernels: Any) -> tuple[Any, Any]:
        return (self._on_kernels(kernels, "langevin_drag", self._drag_by_type),
                self._on_kernels(kernels, "langevin_noise", self._noise_by_type))

    def _typed_kicks(self, times: int, tick: int = 0) -> None:
        """``times`` half kicks of every owned atom with its own mass (``tick``: of that
        step of a batch, see :meth:`BatchedSteps._step_batch`)."""
        for s in self.slabs:
            table = self._on_kernels(s.kernels, "dtf_by_type", self._dtf_by_type)
            for _ in range(times):
                s.kernels.kick_typed(s.v, s.f, s.typ, s.n_own, table, tick)

    def _drift_kick(self, kick: bool, tick: int = 0) -> tuple[bool, float]:
        """The drift launch's kick flag and dt / 2m: with one mass the drift applies the
        deferred kick (if ``kick``) and its own; with several the half kicks are queued here
        first, per type, and the drift kicks by 0."""
        if not self.multi_mass:
            return kick, self._dtf
        self._typed_kicks(2 if kick else 1, tick)
        return False, 0.0

    def _row_masses(self, s: Any) -> dict[str, Any]:
        """The extra arguments of a device's exact thermo sums: each row's type and the mass
        table (nothing with one mass)."""
        if not self.multi_mass:
            return {}
        return {"typ": s.typ, "masses": self._on_kernels(s.kernels, "type_mass",
                                                          self.type_mass)}

    def _mv2_by_id(self) -> np.ndarray:
        """``m |v|^2`` of every atom in id order (collective under MPI)."""
        if not self.multi_mass:
            return self._gather([s.kernels.kinetic_per_atom(s.v, s.n_own, self.mass)
                                 for s in self.slabs])
        v2 = self._gather([s.kernels.kinetic_per_atom(s.v, s.n_own, 1.0) for s in self.slabs])
        return self.atom_mass * v2
