"""Nose-Hoover chain thermostat (NVT), integrated as in Martyna, Tuckerman and Klein (Mol. Phys.
87, 1117, 1996), the scheme of LAMMPS ``fix nvt`` with ``tchain``.

The chain's positions eta_i and velocities xi_i (masses Q_1 = N_f T tau^2, Q_i = T tau^2) are a
handful of host numbers. Each time step opens and closes with a half step of the chain, which
rescales all atomic velocities by one factor exp(-xi_1 dt / 2); between them is the usual
velocity Verlet step. The chain is driven by the kinetic energy 2K = sum m v^2, which the solver
sums exactly (correctly rounded), so the chain, the factors and the trajectory are the same on
every split and after a restart (the chain state is part of the checkpoint).

Conserved quantity: E + sum Q_i xi_i^2 / 2 + N_f T eta_1 + T sum_{i>1} eta_i.
"""

from __future__ import annotations

import math

import numpy as np


class NoseHooverChain:
    """A chain of ``length`` thermostats at ``temperature``, time constant ``tau``."""

    def __init__(self, dof: int, temperature: float, tau: float, length: int, dt: float
                 ) -> None:
        self.dof = dof
        self.t = temperature
        self.dt = dt
        w = 1.0 / tau
        self.q = np.array([dof * temperature / (w * w)]
                          + [temperature / (w * w)] * (length - 1), dtype=np.float64)
        self.eta = np.zeros(length)
        self.xi = np.zeros(length)  # thermostat velocities (LAMMPS eta_dot)

    def half_step(self, two_ke: float) -> float:
        """Advance the chain by dt / 2 driven by the atoms' ``2K``; returns the factor every
        atomic velocity is to be multiplied by."""
        q, xi, eta, t = self.q, self.xi, self.eta, self.t
        m = len(q)
        dt2, dt4, dt8 = 0.5 * self.dt, 0.25 * self.dt, 0.125 * self.dt
        force = np.empty(m)
        force[0] = (two_ke - self.dof * t) / q[0]
        for i in range(1, m):
            force[i] = (q[i - 1] * xi[i - 1] * xi[i - 1] - t) / q[i]
        # from the chain's end down to the first thermostat
        for i in range(m - 1, -1, -1):
            damp = math.exp(-dt8 * xi[i + 1]) if i + 1 < m else 1.0
            xi[i] = (xi[i] * damp + force[i] * dt4) * damp
        factor = math.exp(-dt2 * xi[0])
        two_ke *= factor * factor
        eta += dt2 * xi
        # and back up, each thermostat driven by the one below it
        force[0] = (two_ke - self.dof * t) / q[0]
        for i in range(m):
            damp = math.exp(-dt8 * xi[i + 1]) if i + 1 < m else 1.0
            if i > 0:
                force[i] = (q[i - 1] * xi[i - 1] * xi[i - 1] - t) / q[i]
            xi[i] = (xi[i] * damp + force[i] * dt4) * damp
        return factor

    def energy(self) -> float:
        """The chain's energy (added to the system's for the conserved quantity)."""
        return float(0.5 * np.sum(self.q * self.xi * self.xi) + self.dof * self.t * self.eta[0]
                     + self.t * np.sum(self.eta[1:]))

    def state(self) -> np.ndarray:
        return np.concatenate([self.eta, self.xi])

    def load(self, state: np.ndarray) -> None:
        m = len(self.q)
        state = np.asarray(state, dtype=np.float64)
        if state.shape != (2 * m,):
            raise ValueError(f"state has a Nose-Hoover chain of {state.shape[0] // 2} "
                             f"thermostats, this case has {m}")
        self.eta[:], self.xi[:] = state[:m], state[m:]
