"""Physical units at the front door (``fluid.physical``): a case gives the inflow speed and the
kinematic viscosity in physical units (the length unit of ``domain.size`` per second) and one
lattice choice (the lattice inflow speed, the Mach number or the time step); this module derives
the cell size dx, the time step dt, the lattice velocity and viscosity (and so tau), refuses
choices that are unstable or inaccurate, and converts results back.

The conversion, with dx = domain.size / domain.shape and U the inflow speed:
``u_lattice = U dt / dx`` and ``nu_lattice = nu dt / dx^2``. A lattice choice fixes one of
u_lattice (``lattice_velocity``, or ``mach`` = u_lattice / c_s) or dt (``time_step``); the
other follows. The lattice values are computed so that a given ``lattice_velocity`` enters the
kernels unchanged (bit for bit the value a lattice-units case would give).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from simsplit.errors import CaseError
from simsplit.fluid.geometry.frame import cell_size
from simsplit.numerics.lattice import CS2

#: Mach number u / c_s above which compressibility errors dominate: refused
MAX_MACH = 0.3
#: relaxation times tau = 3 nu + 1/2 accepted from physical units: closer to 1/2 the run is at
#: the edge of stability (cell Reynolds numbers in the hundreds at Mach 0.3), beyond 2 the
#: walls' positions and the flow's Knudsen number make it inaccurate
TAU_RANGE = (0.505, 2.0)
#: the keys of fluid.physical that make the lattice choice (exactly one is given)
LATTICE_CHOICES = ("lattice_velocity", "mach", "time_step")
SOUND_SPEED = math.sqrt(CS2)


@dataclass(frozen=True)
class PhysicalUnits:
    """How lattice and physical units of a case relate (``fluid.physical``)."""

    dx: float  #: cell size, in ``length_unit``
    dt: float  #: time step, in s
    velocity: float  #: the inflow speed, physical (the uniform speed or the parabola's max)
    lattice_velocity: float  #: the same in cells per step
    viscosity: float | None  #: kinematic viscosity, physical (None: from fluid.reynolds)
    lattice_viscosity: float | None  #: the same in cells^2 per step (None: fluid.reynolds)
    density: float | None = None  #: fluid density, physical (None: not given)
    length_unit: str = "m"
    choice: str = "lattice_velocity"  #: the key of the lattice choice (LATTICE_CHOICES)
    choice_value: float = 0.0  #: its value as given

    def check_viscosity(self, lattice_viscosity: float) -> None:
        """Refuse a lattice viscosity set otherwise (fluid.reynolds) whose tau lies outside
        TAU_RANGE, naming the lattice choice's range that would pass."""
        speed, u = self.velocity, self.lattice_velocity
        _check_range(self.choice, self.choice_value, u, speed, self.dx,
                     lattice_viscosity * speed * self.dx / u)

    @property
    def mach(self) -> float:
        return self.lattice_velocity / SOUND_SPEED

    @property
    def velocity_factor(self) -> float:
        """Physical velocity of one lattice unit (dx / dt)."""
        return self.dx / self.dt

    def to_physical_velocity(self, lattice: float) -> float:
        return lattice * self.dx / self.dt

    def to_lattice_velocity(self, physical: float) -> float:
        return physical * self.dt / self.dx

    def to_physical_viscosity(self, lattice: float) -> float:
        return lattice * self.dx * self.dx / self.dt

    def force_factor(self, dim: int) -> float | None:
        """Physical force of one lattice unit of force (per unit depth in 2D): rho dx^(dim+1)
        / dt^2; None without ``density``."""
        if self.density is None:
            return None
        return self.density * self.dx ** (dim + 1) / (self.dt * self.dt)

    def gauge_pressure(self, lattice_density: float, reference: float = 1.0) -> float | None:
        """Physical pressure relative to the reference density's (c_s^2 (rho - rho_0) in
        lattice units, times rho dx^2 / dt^2); None without ``density``."""
        if self.density is None:
            return None
        return CS2 * (lattice_density - reference) * self.density * self.velocity_factor ** 2


def _choice(spec: dict[str, Any]) -> str:
    given = [k for k in LATTICE_CHOICES if k in spec]
    if len(given) != 1:
        raise CaseError("fluid.physical: give exactly one lattice choice of "
                        f"{', '.join(LATTICE_CHOICES)} (given: {', '.join(given) or 'none'})")
    return given[0]


def _from_lattice(key: str, u: float, speed: float, dx: float) -> float:
    """The value of lattice choice ``key`` that gives the lattice inflow speed ``u``."""
    if key == "lattice_velocity":
        return u
    if key == "mach":
        return u / SOUND_SPEED
    return u * dx / speed  # time_step


def physical_units(case: dict[str, Any]) -> PhysicalUnits | None:
    """``fluid.physical`` turned into lattice values (None where a case has none); a choice
    outside the stable and accurate range is refused in one line naming its key and the
    range the key allows."""
    spec = case["fluid"].get("physical")
    if spec is None:
        return None
    domain = case["domain"]
    bounds = domain["boundaries"]
    if "inlet" not in (bounds.get("x_low"), bounds.get("x_high")):
        raise CaseError("fluid.physical: needs an inlet (domain.boundaries.x_low: inlet): "
                        "fluid.physical.velocity is the inflow speed")
    if "size" not in domain:
        raise CaseError("fluid.physical: needs domain.size (the physical extent of the grid, "
                        "which sets the cell size)")
    if case["fluid"].get("viscosity") is not None:
        raise CaseError("fluid.viscosity: not with fluid.physical (give "
                        "fluid.physical.viscosity in physical units)")
    if "viscosity" in spec and case["fluid"].get("reynolds") is not None:
        raise CaseError("fluid.reynolds: give it or fluid.physical.viscosity, not both")
    dx = cell_size(domain)
    key = _choice(spec)
    speed = float(spec["velocity"])
    value = float(spec[key])
    if key == "lattice_velocity":
        u = value
    elif key == "mach":
        u = value * SOUND_SPEED
    else:
        u = speed * value / dx
    dt = value if key == "time_step" else u * dx / speed
    nu = spec.get("viscosity")
    nu_lattice = None if nu is None else float(nu) * u / (speed * dx)
    _check_range(key, value, u, speed, dx, nu)
    return PhysicalUnits(dx, dt, speed, u, None if nu is None else float(nu), nu_lattice,
                         None if spec.get("density") is None else float(spec["density"]),
                         spec.get("length_unit", "m"), key, value)


def _check_range(key: str, value: float, u: float, speed: float, dx: float,
                 nu: float | None) -> None:
    """Refuse a lattice speed above Mach MAX_MACH or, with a physical viscosity, a tau
    outside TAU_RANGE, naming the range of ``key`` that passes both."""
    lo, hi = 0.0, MAX_MACH * SOUND_SPEED
    if nu is not None:  # nu_lattice = nu u / (U dx) grows with u: tau bounds u both ways
        per_u = float(nu) / (speed * dx)
        lo = max(lo, (TAU_RANGE[0] - 0.5) * CS2 / per_u)
        hi = min(hi, (TAU_RANGE[1] - 0.5) * CS2 / per_u)
    if lo <= u <= hi:
        return
    mach = u / SOUND_SPEED
    what = f"Mach {mach:.3g}"
    if nu is not None:
        tau = float(nu) * u / (speed * dx) / CS2 + 0.5
        what += f", tau {tau:.5g}"
    need = (f"Mach <= {MAX_MACH:g}" + (f" and tau {TAU_RANGE[0]:g}-{TAU_RANGE[1]:g}"
                                        if nu is not None else ""))
    if lo > hi:
        raise CaseError(f"fluid.physical.{key}: {value!r} is not allowed: no lattice choice "
                        f"gives {need} at dx = {dx:.6g} (the grid is too coarse for this "
                        "viscosity: refine domain.shape)")
    low, high = (_from_lattice(key, b, speed, dx) for b in (lo, hi))
    raise CaseError(f"fluid.physical.{key}: {value!r} is not allowed ({what}): expected "
                    f"{low:.6g} to {high:.6g} ({need})")


def unit_report(units: PhysicalUnits | None, *, tau: float, viscosity: float,
                inflow_max: float, inflow_mean: float, length_cells: float,
                length_name: str) -> dict[str, Any]:
    """The lattice values of an inflow case, its Mach and Reynolds numbers and, with
    ``fluid.physical``, dx, dt and the physical values (``run.json``'s ``units``)."""
    out: dict[str, Any] = {
        "lattice": {"tau": tau, "viscosity": viscosity, "inflow_velocity": inflow_max,
                    "inflow_mean_velocity": inflow_mean},
        "mach": inflow_max / SOUND_SPEED,
        "reynolds": inflow_mean * length_cells / viscosity,
        "reference_length": {"cells": length_cells, "of": length_name},
    }
    if units is None:
        out["physical"] = None
        return out
    out["reference_length"]["physical"] = length_cells * units.dx
    out["physical"] = {
        "dx": units.dx, "dt": units.dt, "length_unit": units.length_unit, "time_unit": "s",
        "inflow_velocity": units.velocity,
        "inflow_mean_velocity": units.to_physical_velocity(inflow_mean),
        "viscosity": units.to_physical_viscosity(viscosity), "density": units.density,
    }
    return out
