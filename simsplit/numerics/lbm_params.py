"""Lattice Boltzmann kernel parameters: everything a stream-collide kernel takes besides arrays.

Physics derives them from a case (:func:`simsplit.fluid.setup.setup_from_case`); every backend
passes them to its kernels unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from simsplit.numerics.lattice import CS2


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
    #: factor on the inlet velocities this step (ramp-up: 0 -> 1; 1 without a ramp)
    inlet_scale: float = 1.0
    #: density held at an outlet (pressure rho / 3)
    outlet_density: float = 1.0

    @property
    def periodic(self) -> tuple[bool, ...]:
        """Periodicity of the in-slab axes in array order (x)."""
        return (bool(self.periodic_x),)

    @property
    def forced(self) -> bool:
        """A body force acts: the CPU row kernel adds the Guo source terms only then."""
        return bool(self.force_x or self.force_y)


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
    #: factor on the inlet velocities this step (ramp-up: 0 -> 1; 1 without a ramp)
    inlet_scale: float = 1.0
    #: density held at an outlet (pressure rho / 3)
    outlet_density: float = 1.0

    @property
    def periodic(self) -> tuple[bool, ...]:
        """Periodicity of the in-slab axes in array order (y, x)."""
        return (bool(self.periodic_y), bool(self.periodic_x))

    @property
    def forced(self) -> bool:
        """A body force acts: every backend's kernel adds the Guo source terms only then (they
        cost a tenth of the D3Q19 kernel's instructions)."""
        return bool(self.force_x or self.force_y or self.force_z)
