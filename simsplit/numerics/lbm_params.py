"""Lattice Boltzmann kernel parameters: everything a stream-collide kernel takes besides arrays.

Physics derives them from a case (:func:`simsplit.fluid.setup.setup_from_case`); every backend
passes them to its kernels unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from simsplit.numerics.lattice import CS2

#: domain.outlet.kind, in the order of the kernels' codes (the position is the code)
OUTLET_KINDS = ("pressure", "zero_gradient", "convective")
OUTLET_PRESSURE, OUTLET_ZERO_GRADIENT, OUTLET_CONVECTIVE = range(len(OUTLET_KINDS))


class _Rates:
    omega_plus: float
    outlet_courant: float

    @property
    def convective_weights(self) -> tuple[float, float]:
        """(previous value, neighbour's value) weights of the convective outlet's implicit
        upwind step, 1 / (1 + U) and U / (1 + U) with U = ``outlet_courant`` (float64 here;
        every backend rounds the same two numbers to its precision)."""
        u = float(self.outlet_courant)
        return 1.0 / (1.0 + u), u / (1.0 + u)

    @property
    def tau(self) -> float:
        return 1.0 / self.omega_plus

    @property
    def viscosity(self) -> float:
        return CS2 * (self.tau - 0.5)


@dataclass(frozen=True, kw_only=True)
class _InletOutlet(_Rates):
    """The inlet and outlet terms both lattices take; keyword-only, so each lattice's own
    fields come first and stay positional."""

    #: factor on the inlet velocities this step (ramp-up: 0 -> 1; 1 without a ramp)
    inlet_scale: float = 1.0
    #: density held at an outlet (pressure rho / 3)
    outlet_density: float = 1.0
    #: rule of the outlet's links: OUTLET_PRESSURE, OUTLET_ZERO_GRADIENT or OUTLET_CONVECTIVE
    outlet_kind: int = OUTLET_PRESSURE
    #: convective outlet: U dt / dx, the speed its populations leave at (this step's)
    outlet_courant: float = 0.0
    #: zero-gradient and convective outlets: weight of the pressure outlet's value mixed into
    #: theirs (0: none; holds the mean density where the open rule lets it drift)
    outlet_pressure_weight: float = 0.0


@dataclass(frozen=True)
class D2Q9Params(_InletOutlet):
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

    @property
    def forced(self) -> bool:
        """A body force acts: the CPU row kernel adds the Guo source terms only then."""
        return bool(self.force_x or self.force_y)


@dataclass(frozen=True)
class D3Q19Params(_InletOutlet):
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

    @property
    def forced(self) -> bool:
        """A body force acts: every backend's kernel adds the Guo source terms only then (they
        cost a tenth of the D3Q19 kernel's instructions)."""
        return bool(self.force_x or self.force_y or self.force_z)
