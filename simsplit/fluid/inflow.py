"""Open faces of a 2D channel: which x faces are walls, inlets or outlets, the inlet's profile
and ramp-up, and the reference velocity of Reynolds numbers and force coefficients."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.params import (
    MAX_CELL_REYNOLDS,
    MAX_LID_VELOCITY,
    WARN_CELL_REYNOLDS,
    UnstableSetup,
)

OPEN = ("inlet", "outlet")


@dataclass(frozen=True)
class Inlet:
    """A velocity inlet: speed ``velocity`` (lattice units; a parabola's maximum), normal to
    its face, ramped up from rest over ``ramp_steps`` steps."""

    profile: str
    velocity: float
    ramp_steps: int = 0
    start: str = "rest"  #: initial state: rest, or the inflow profile everywhere

    @property
    def mean_velocity(self) -> float:
        """Mean over the channel height: U for a uniform inflow, 2 U / 3 for a parabola (the
        reference velocity of Schäfer & Turek's coefficients)."""
        return self.velocity * (2.0 / 3.0 if self.profile == "parabolic" else 1.0)

    def row_velocities(self, ny: int) -> np.ndarray:
        """Inflow speed at each row's cell centre y = j + 1/2 (float64), walls at 0 and ny."""
        if self.profile == "uniform":
            return np.full(ny, self.velocity)
        y = np.arange(ny, dtype=np.float64) + 0.5
        return 4.0 * self.velocity * y * (ny - y) / (ny * ny)

    def scale(self, step: int) -> float:
        """Factor on the inflow during time step ``step`` (1-based): sin^2(pi t / 2T) while
        ramping, then 1."""
        if step >= self.ramp_steps:
            return 1.0
        return math.sin(0.5 * math.pi * step / self.ramp_steps) ** 2


def x_faces(case: dict[str, Any]) -> tuple[str, str]:
    """Kinds of the faces x = 0 and x = 1: wall, periodic, inlet or outlet."""
    bounds = case["domain"]["boundaries"]
    axis = bounds.get("x", "wall")
    low, high = bounds.get("x_low"), bounds.get("x_high")
    if axis == "periodic" and (low or high):
        raise CaseError("domain.boundaries.x_low: a face of its own is not allowed with "
                        "domain.boundaries.x: periodic")
    return low or axis, high or axis


def inlet_of(case: dict[str, Any]) -> Inlet | None:
    """The case's inlet (``domain.inlet``) where a face is one; refuses what cannot run."""
    domain = case["domain"]
    faces = x_faces(case)
    if any(f in OPEN for f in faces) and len(domain["shape"]) != 2:
        raise CaseError("domain.boundaries.x_low: inlets and outlets are not yet available in "
                        "3D (D2Q9 only so far; issue #21)")
    spec = domain.get("inlet")
    if "inlet" not in faces:
        if spec is not None:
            raise CaseError("domain.inlet: no face is an inlet (set domain.boundaries.x_low: "
                            "inlet)")
        return None
    if spec is None:
        raise CaseError("domain.inlet: required where a face is an inlet (give "
                        "domain.inlet.velocity)")
    if faces == ("inlet", "inlet"):
        raise CaseError("domain.boundaries.x_high: inlet on both faces is not allowed: make "
                        "one an outlet")
    if spec["velocity"] > MAX_LID_VELOCITY:
        raise CaseError(f"domain.inlet.velocity: {spec['velocity']!r} is not allowed: expected "
                        f"<= {MAX_LID_VELOCITY} lattice units (Mach number too high)")
    if domain["boundaries"]["lid"]:
        raise CaseError("domain.boundaries.lid: a lid with an inlet is not allowed: set "
                        "domain.boundaries.lid: false")
    return Inlet(spec.get("profile", "parabolic"), float(spec["velocity"]),
                 int(spec.get("ramp_steps", 0)), spec.get("start", "rest"))


def outlet_density(case: dict[str, Any]) -> float:
    domain = case["domain"]
    if "outlet" not in x_faces(case):
        if domain.get("outlet") is not None:
            raise CaseError("domain.outlet: no face is an outlet (set domain.boundaries.x_high: "
                            "outlet)")
        return 1.0
    return float((domain.get("outlet") or {}).get("density", 1.0))


def inflow_advisories(velocity: float, viscosity: float) -> list[str]:
    """The inflow's cell Reynolds number U dx / nu: refused beyond MAX_CELL_REYNOLDS
    (:class:`UnstableSetup`), warned about beyond WARN_CELL_REYNOLDS."""
    cell_re = velocity / viscosity
    text = (f"the inflow's cell Reynolds number U / nu = {cell_re:.3g} (U = "
            f"{velocity:g}, nu = {viscosity:.4g} lattice units)")
    if cell_re > MAX_CELL_REYNOLDS:
        raise UnstableSetup(f"{text} is beyond {MAX_CELL_REYNOLDS:g}: refine the grid or "
                            "lower the Reynolds number")
    if cell_re > WARN_CELL_REYNOLDS:
        return [f"{text} is close to the stability limit: refine the grid or lower the "
                "Reynolds number"]
    return []
