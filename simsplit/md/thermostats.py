"""Thermostats that rescale all velocities by one factor around each time step: Bussi's
stochastic rescaling (:mod:`simsplit.md.bussi`) and Nose-Hoover chains
(:mod:`simsplit.md.nose_hoover`).

The solver calls :meth:`begin_step` before a step's first half kick and :meth:`end_step` after
its second, handing over the exact total ``2K = sum m v^2`` and a function that scales every
velocity. The thermostats keep their own few numbers, which :meth:`state` returns for
checkpoints, and the energy they exchanged (``etotal + exchanged / N`` is conserved).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from simsplit.md.bussi import rescale_factor
from simsplit.md.nose_hoover import NoseHooverChain
from simsplit.md.npt import NoseHooverNPT, make_npt
from simsplit.md.velocities import degrees_of_freedom

Kinetic = Callable[[], float]
Scale = Callable[[float], None]


class Bussi:
    """Stochastic velocity rescaling once per step, at its end."""

    def __init__(self, n_atoms: int, temperature: float, tau: float, seed: int, dt: float
                 ) -> None:
        self.dof = degrees_of_freedom(n_atoms)
        self.temperature, self.tau, self.seed, self.dt = temperature, tau, seed, dt
        self.exchanged = 0.0

    def begin_step(self, step: int, kinetic: Kinetic, scale: Scale) -> None:
        """Nothing before the step."""

    def end_step(self, step: int, kinetic: Kinetic, scale: Scale) -> None:
        ke = 0.5 * kinetic()
        alpha = rescale_factor(ke, 0.5 * self.dof * self.temperature, self.dof, self.dt,
                               self.tau, self.seed, step)
        scale(alpha)
        self.exchanged += ke - alpha * alpha * ke

    def energy(self) -> float:
        return self.exchanged

    def state(self) -> np.ndarray:
        return np.array([self.exchanged])

    def load(self, state: np.ndarray) -> None:
        self.exchanged = float(np.asarray(state, dtype=np.float64).reshape(-1)[0])


class NoseHoover:
    """A Nose-Hoover chain: half a chain step before the step and half after it (LAMMPS
    ``fix nvt``). The kinetic energy at a step's start is the previous step's end value
    times the rescaling factor squared, as LAMMPS tracks it (so it is kept in the state)."""

    def __init__(self, n_atoms: int, temperature: float, tau: float, length: int,
                 dt: float) -> None:
        self.chain = NoseHooverChain(degrees_of_freedom(n_atoms), temperature, tau, length, dt)
        self.two_ke: float | None = None

    def begin_step(self, step: int, kinetic: Kinetic, scale: Scale) -> None:
        if self.two_ke is None:
            self.two_ke = kinetic()
        scale(self.chain.half_step(self.two_ke))

    def end_step(self, step: int, kinetic: Kinetic, scale: Scale) -> None:
        two_ke = kinetic()
        factor = self.chain.half_step(two_ke)
        scale(factor)
        self.two_ke = two_ke * factor * factor

    def energy(self) -> float:
        return self.chain.energy()

    def state(self) -> np.ndarray:
        return np.concatenate([self.chain.state(),
                               [np.nan if self.two_ke is None else self.two_ke]])

    def load(self, state: np.ndarray) -> None:
        state = np.asarray(state, dtype=np.float64)
        self.chain.load(state[:-1])
        self.two_ke = None if np.isnan(state[-1]) else float(state[-1])


def make_thermostat(md: dict[str, Any], n_atoms: int, volume: float = 0.0
                    ) -> Bussi | NoseHoover | NoseHooverNPT | None:
    """The rescaling thermostat ``md.ensemble`` asks for (None for nve and langevin); for npt
    the barostat with its thermostat (``volume``: the initial volume, the zero of its PV
    term)."""
    dt = float(md["timestep"])
    if md["ensemble"] == "bussi":
        sec = md["bussi"]
        return Bussi(n_atoms, _target(md, sec), float(sec["damping"]),
                     int(md["seed"] if sec["seed"] is None else sec["seed"]), dt)
    if md["ensemble"] == "nose-hoover":
        sec = md["nose_hoover"]
        return NoseHoover(n_atoms, _target(md, sec), float(sec["damping"]), int(sec["chain"]),
                          dt)
    if md["ensemble"] == "npt":
        return make_npt(md, n_atoms, volume)
    return None


def _target(md: dict[str, Any], section: dict[str, Any]) -> float:
    return float(md["temperature"] if section["temperature"] is None else section["temperature"])
