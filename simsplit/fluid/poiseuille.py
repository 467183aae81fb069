"""Plane Poiseuille flow: a channel driven by a uniform body force between two halfway
bounce-back walls, its analytic profile and how far a run is from it.

With walls on one axis (H cells apart) and the force g along a periodic axis, the steady
velocity along the force is ``u(s) = g / (2 nu) s (H - s)``, ``s`` measured from the wall in
cells. Halfway bounce-back puts the wall half a cell outside the first fluid cell, so cell k
sits at ``s = k + 0.5``. TRT with the magic parameter 3/16 reproduces this parabola to
round-off, BGK to second order in 1 / H (``tests/test_poiseuille.py``). Velocities here are in
lattice units, as a case without a lid reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

AXES = "xyz"


@dataclass(frozen=True)
class Channel:
    """The channel a case describes: axes are indices into ``domain.shape`` (0 = x)."""

    flow_axis: int
    wall_axis: int
    force: float  #: body force per unit volume along the flow axis, lattice units
    viscosity: float  #: kinematic viscosity, lattice units
    height: int  #: cells between the walls

    @property
    def positions(self) -> np.ndarray:
        """Distance of each cell centre from the first wall, in cells."""
        return np.arange(self.height) + 0.5

    def exact(self) -> np.ndarray:
        """The analytic velocity along the flow at each cell centre."""
        s = self.positions
        return self.force / (2.0 * self.viscosity) * s * (self.height - s)

    @property
    def names(self) -> tuple[str, str]:
        """(flow axis, wall axis) as letters: ``("x", "y")``."""
        return AXES[self.flow_axis], AXES[self.wall_axis]


def channel_of(case: dict[str, Any]) -> Channel | None:
    """The channel of a fluid case, or None where the analytic profile does not apply.

    It applies with no lid, a viscosity given, walls on exactly one axis, every other axis
    periodic, and a force along one periodic axis only.
    """
    fluid, domain = case["fluid"], case["domain"]
    shape, bounds = domain["shape"], domain["boundaries"]
    if bounds["lid"] or fluid.get("viscosity") is None:
        return None
    if domain.get("bodies") or bounds.get("x_low") or bounds.get("x_high"):
        return None  # bodies, inlets or outlets: not a plane channel
    walls = [a for a in range(len(shape)) if bounds.get(AXES[a], "wall") == "wall"]
    pushed = [a for a, g in enumerate(fluid["body_force"]) if g != 0]
    if len(walls) != 1 or len(pushed) != 1 or pushed[0] == walls[0]:
        return None
    return Channel(pushed[0], walls[0], float(fluid["body_force"][pushed[0]]),
                   float(fluid["viscosity"]), int(shape[walls[0]]))


def measured_profile(velocity: np.ndarray, channel: Channel) -> np.ndarray:
    """The velocity along the flow, averaged over the periodic axes, at each wall distance.

    ``velocity`` is a run's field in array order, ``(ny, nx, 2)`` or ``(nz, ny, nx, 3)``.
    """
    dim = velocity.ndim - 1
    along = np.asarray(velocity, dtype=np.float64)[..., channel.flow_axis]
    wall_dim = dim - 1 - channel.wall_axis  # array axes run z, y, x
    others = tuple(a for a in range(dim) if a != wall_dim)
    return along.mean(axis=others)


def compare_to_poiseuille(velocity: np.ndarray, channel: Channel) -> dict[str, float]:
    """Relative L2 error of the measured profile against the parabola, and both maxima."""
    measured, exact = measured_profile(velocity, channel), channel.exact()
    error = float(np.sqrt(np.sum((measured - exact) ** 2) / np.sum(exact ** 2)))
    return {"l2_error": error, "u_max": float(exact.max()),
            "u_max_measured": float(measured.max())}
