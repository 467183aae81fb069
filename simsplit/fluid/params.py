"""Derived lattice parameters (relaxation rates, forcing) and the stability checks on them."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from simsplit.fluid.lattice import CS2

#: TRT magic parameter that puts halfway bounce-back walls exactly halfway for Poiseuille flow
DEFAULT_TRT_MAGIC = 3.0 / 16.0
#: cell Reynolds number U dx / nu beyond which no lattice Boltzmann run survives: refused
MAX_CELL_REYNOLDS = 1000.0
#: cell Reynolds number beyond which runs tend to go unstable: warned
WARN_CELL_REYNOLDS = 20.0
#: body force per unit volume above which one step alone changes velocity by a sizeable
#: fraction of the lattice speed of sound: refused
MAX_BODY_FORCE = 0.01
#: above this lid speed (lattice units, Mach ~0.35) compressibility errors dominate
MAX_LID_VELOCITY = 0.2


class UnstableSetup(ValueError):
    """The parameters would give an unstable or meaningless lattice Boltzmann run."""


class _Rates:
    omega_plus: float

    @property
    def tau(self) -> float:
        return 1.0 / self.omega_plus

    @property
    def viscosity(self) -> float:
        return CS2 * (self.tau - 0.5)


@dataclass(frozen=True)
class D2Q9Params(_Rates):
    """Everything a stream-collide kernel needs besides arrays; identical on every slab."""

    omega_plus: float
    omega_minus: float
    lid_velocity: float
    force_x: float
    force_y: float
    periodic_x: bool

    @property
    def periodic(self) -> tuple[bool, ...]:
        """Periodicity of the in-slab axes in array order (x)."""
        return (bool(self.periodic_x),)


@dataclass(frozen=True)
class D3Q19Params(_Rates):
    """D3Q19 kernel parameters; the split axis is z, so x and y may be periodic in-slab."""

    omega_plus: float
    omega_minus: float
    lid_velocity: float
    force_x: float
    force_y: float
    force_z: float
    periodic_x: bool
    periodic_y: bool

    @property
    def periodic(self) -> tuple[bool, ...]:
        """Periodicity of the in-slab axes in array order (y, x)."""
        return (bool(self.periodic_y), bool(self.periodic_x))


def relaxation_rates(viscosity: float, collision: str, magic: float) -> tuple[float, float]:
    """(omega_plus, omega_minus) for BGK (equal) or TRT (omega_minus from the magic parameter)."""
    tau = viscosity / CS2 + 0.5
    if tau <= 0.5:
        raise UnstableSetup(f"relaxation time tau = {tau:.6g} must exceed 0.5")
    omega_plus = 1.0 / tau
    if collision == "bgk":
        return omega_plus, omega_plus
    tau_minus = magic / (tau - 0.5) + 0.5
    return omega_plus, 1.0 / tau_minus


def check_stability(tau: float, lid_velocity: float) -> None:
    """Refuse tau <= 0.5 outright; warn where accuracy degrades."""
    if tau <= 0.5:
        raise UnstableSetup(f"relaxation time tau = {tau:.6g} must exceed 0.5")
    if abs(lid_velocity) > MAX_LID_VELOCITY:
        raise UnstableSetup(
            f"lid velocity {lid_velocity:g} exceeds {MAX_LID_VELOCITY} lattice units "
            "(Mach number too high): refine the grid or lower fluid.lid_velocity"
        )
    cell_re = abs(lid_velocity) / (CS2 * (tau - 0.5))
    if cell_re > MAX_CELL_REYNOLDS:
        raise UnstableSetup(
            f"relaxation time tau = {tau:.6g} gives a cell Reynolds number of {cell_re:.3g} "
            f"(limit {MAX_CELL_REYNOLDS:g}): refine the grid or lower the Reynolds number"
        )
    if tau < 0.51 or cell_re > WARN_CELL_REYNOLDS:
        warnings.warn(
            f"relaxation time tau = {tau:.6g} (cell Reynolds number {cell_re:.3g}) is close to "
            "the stability limit: refine the grid or lower the Reynolds number",
            stacklevel=3,
        )
