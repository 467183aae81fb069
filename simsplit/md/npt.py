"""Isotropic NPT: a Nose-Hoover chain on the atoms and the Martyna-Tobias-Klein barostat with
its own chain (Martyna, Tobias and Klein, J. Chem. Phys. 101, 4177, 1994; the Trotter split of
Martyna, Tuckerman, Tobias and Klein, Mol. Phys. 87, 1117, 1996), the scheme of LAMMPS
``fix npt ... iso`` with ``tchain`` and ``pchain``.

The barostat is one number, the logarithmic box velocity omega_dot (LAMMPS keeps three equal
ones for ``iso``; its mass W = (N + 1) T tau_p^2 per axis, so the three carry 3 W), plus a
chain of ``pchain`` thermostats (masses T tau_p^2). A step reads, in LAMMPS' order::

    barostat chain dt/2; atom chain dt/2 (v *= a)
    omega_dot += dt/2 [(P - P_t) V / W + 2K / (3 N W)];  v *= exp(-dt/2 (omega_dot + omega_dot / N))
    v += dt/2m f;  x, L *= exp(dt omega_dot) around a drift x += dt exp(dt/2 omega_dot) v
    forces
    v += dt/2m f;  v *= exp(-dt/2 (omega_dot + omega_dot / N))
    omega_dot += dt/2 [...];  atom chain dt/2;  barostat chain dt/2

P = (2K + W_pair + W_tail(V)) / (3V) from the exact (correctly rounded) totals the solver sums,
so every split and a restart see the same numbers; the whole state is a handful of host
doubles (:meth:`NoseHooverNPT.state`). Conserved quantity: the atoms' energy + the atom chain's
energy + 3 W omega_dot^2 / 2 + P_t (V - V0) + the barostat chain's energy.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from simsplit.md.nose_hoover import NoseHooverChain
from simsplit.md.velocities import degrees_of_freedom

Kinetic = Callable[[], float]
Sums = Callable[[], tuple[float, float]]
Scale = Callable[[float], None]


class MTKBarostat:
    """The isotropic barostat's box velocity and its thermostat chain (host numbers)."""

    def __init__(self, n_atoms: int, temperature: float, pressure: float, tau: float,
                 chain: int, dt: float, volume: float) -> None:
        self.n, self.t, self.p, self.dt = n_atoms, temperature, pressure, dt
        self.w = (n_atoms + 1) * temperature * tau * tau  # LAMMPS omega_mass, per axis
        self.qp = np.full(chain, temperature * tau * tau)  # LAMMPS etap_mass
        self.omega_dot = 0.0
        self.mtk2 = 0.0  # LAMMPS mtk_term2: the omega_dot / N of the velocity factor
        self.etap = np.zeros(chain)
        self.etap_dot = np.zeros(chain + 1)  # a zero past the chain's end
        self.vol0 = volume

    def kick(self, two_ke: float, virial: float, volume: float) -> None:
        """Half a step of the box velocity, driven by the pressure ``(2K + W) / 3V``."""
        press = (two_ke + virial) / (3.0 * volume)
        force = (press - self.p) * volume / self.w + two_ke / (3.0 * self.n) / self.w
        self.omega_dot += force * 0.5 * self.dt
        self.mtk2 = self.omega_dot / self.n

    def velocity_factor(self) -> float:
        """What every velocity is multiplied by on each side of the step (LAMMPS
        ``nh_v_press``, its two factors of exp(-dt/4 ...) in one)."""
        return math.exp(-0.5 * self.dt * (self.omega_dot + self.mtk2))

    def half_box_factor(self) -> float:
        """exp(dt/2 omega_dot): box and positions scale by its square over the step (LAMMPS'
        two half remaps), the drift by it once (the remaps around it)."""
        return math.exp(0.5 * self.dt * self.omega_dot)

    def chain_half_step(self) -> None:
        """Half a step of the barostat's chain, which damps omega_dot (LAMMPS
        ``nhc_press_integrate`` with one loop)."""
        m = len(self.qp)
        if m == 0:
            return
        dt2, dt4, dt8 = 0.5 * self.dt, 0.25 * self.dt, 0.125 * self.dt
        q, v, t = self.qp, self.etap_dot, self.t
        acc = np.empty(m)
        acc[0] = (3.0 * self.w * self.omega_dot * self.omega_dot - t) / q[0]
        for i in range(1, m):
            acc[i] = (q[i - 1] * v[i - 1] * v[i - 1] - t) / q[i]
        for i in range(m - 1, -1, -1):
            damp = math.exp(-dt8 * v[i + 1])
            v[i] = (v[i] * damp + acc[i] * dt4) * damp
        self.etap += dt2 * v[:m]
        self.omega_dot *= math.exp(-dt2 * v[0])
        acc[0] = (3.0 * self.w * self.omega_dot * self.omega_dot - t) / q[0]
        for i in range(m):
            damp = math.exp(-dt8 * v[i + 1])
            if i > 0:
                acc[i] = (q[i - 1] * v[i - 1] * v[i - 1] - t) / q[i]
            v[i] = (v[i] * damp + acc[i] * dt4) * damp

    def energy(self, volume: float) -> float:
        """Barostat kinetic energy, P_t (V - V0) and the chain's energy."""
        chain = float(0.5 * np.sum(self.qp * self.etap_dot[:-1] ** 2)
                      + self.t * np.sum(self.etap))
        return 1.5 * self.w * self.omega_dot ** 2 + self.p * (volume - self.vol0) + chain

    def state(self) -> np.ndarray:
        return np.concatenate([[self.omega_dot, self.mtk2, self.vol0], self.etap,
                               self.etap_dot[:-1]])

    def load(self, state: np.ndarray) -> None:
        m = len(self.qp)
        if state.shape != (3 + 2 * m,):
            raise ValueError(f"state has a barostat of {state.shape[0]} numbers, this case's "
                             f"(md.barostat.chain {m}) has {3 + 2 * m}")
        self.omega_dot, self.mtk2, self.vol0 = (float(a) for a in state[:3])
        self.etap[:] = state[3:3 + m]
        self.etap_dot[:m] = state[3 + m:]


class NoseHooverNPT:
    """Isotropic NPT with the thermostat interface of :mod:`simsplit.md.thermostats`
    (``begin_step`` / ``end_step`` around a velocity Verlet step). :meth:`attach` hands it the
    solver's exact kinetic and virial totals (one reduction for both), its volume and its box
    scaling."""

    def __init__(self, n_atoms: int, temperature: float, tau_t: float, tchain: int,
                 pressure: float, tau_p: float, pchain: int, dt: float, volume: float) -> None:
        self.chain = NoseHooverChain(degrees_of_freedom(n_atoms), temperature, tau_t, tchain,
                                     dt)
        self.baro = MTKBarostat(n_atoms, temperature, pressure, tau_p, pchain, dt, volume)
        #: 2K after the last thermostat half step (LAMMPS t_current), kept in the state
        self.two_ke: float | None = None
        self._sums: Sums = _unattached
        self._volume: Kinetic = _unattached
        self._scale_box: Scale = _unattached

    def attach(self, sums: Sums, volume: Kinetic, scale_box: Scale) -> None:
        """``sums()``: the exact 2K and pair virial plus the tail virial at the current
        volume; ``volume()``; ``scale_box(e)``: box and positions times e^2, drift time step
        times e."""
        self._sums, self._volume, self._scale_box = sums, volume, scale_box

    def begin_step(self, step: int, kinetic: Kinetic, scale: Scale) -> None:
        self.baro.chain_half_step()
        if self.two_ke is None:
            self.two_ke = kinetic()
        scale(self.chain.half_step(self.two_ke))
        self.baro.kick(*self._sums(), self._volume())
        scale(self.baro.velocity_factor())
        self._scale_box(self.baro.half_box_factor())

    def end_step(self, step: int, kinetic: Kinetic, scale: Scale) -> None:
        scale(self.baro.velocity_factor())
        two_ke, virial = self._sums()
        self.baro.kick(two_ke, virial, self._volume())
        factor = self.chain.half_step(two_ke)
        scale(factor)
        self.two_ke = two_ke * factor * factor
        self.baro.chain_half_step()

    def energy(self) -> float:
        return self.chain.energy() + self.baro.energy(self._volume())

    def state(self) -> np.ndarray:
        return np.concatenate([self.chain.state(), self.baro.state(),
                               [np.nan if self.two_ke is None else self.two_ke]])

    def load(self, state: np.ndarray) -> None:
        state = np.asarray(state, dtype=np.float64)
        m = 2 * len(self.chain.q)
        if state.shape[0] < m + 1:
            raise ValueError(f"state has {state.shape[0]} thermostat numbers, too few for NPT")
        self.chain.load(state[:m])
        self.baro.load(state[m:-1])
        self.two_ke = None if np.isnan(state[-1]) else float(state[-1])


def _unattached(*_: Any) -> Any:
    raise RuntimeError("NoseHooverNPT used before attach()")


def make_npt(md: dict[str, Any], n_atoms: int, volume: float) -> NoseHooverNPT:
    """The NPT integrator of ``md.ensemble: npt`` (``md.nose_hoover`` for the atoms'
    thermostat, ``md.barostat`` for the pressure)."""
    nh, baro = md["nose_hoover"], md["barostat"]
    temperature = float(md["temperature"] if nh["temperature"] is None else nh["temperature"])
    return NoseHooverNPT(n_atoms, temperature, float(nh["damping"]), int(nh["chain"]),
                         float(baro["pressure"]), float(baro["damping"]), int(baro["chain"]),
                         float(md["timestep"]), volume)
