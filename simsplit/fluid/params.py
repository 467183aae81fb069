"""Derived lattice parameters (relaxation rates, forcing) and the stability checks on them."""

from __future__ import annotations

from simsplit.numerics.lattice import CS2

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
#: lid speed x viscosity (lattice units) beyond which the pressure singularity at the lid's
#: corners empties the corner cells: the density dip there is about 7 nu U (measured on the
#: cavity at Re 100: nu U = 0.077 left density 0.42 at the corner after 50 steps, 0.1 left
#: 0.26; 0.051 ran). Large grids at low Reynolds numbers get there (nu = U N / Re). Refused
#: beyond the first, warned beyond the second.
MAX_LID_VISCOUS = 0.06
WARN_LID_VISCOUS = 0.02


class UnstableSetup(ValueError):
    """The parameters would give an unstable or meaningless lattice Boltzmann run."""


def relaxation_rates(viscosity: float, collision: str, magic: float) -> tuple[float, float]:
    """(omega_plus, omega_minus) for BGK (equal) or TRT (omega_minus from the magic parameter)."""
    tau = viscosity / CS2 + 0.5
    if tau <= 0.5:
        raise UnstableSetup(f"relaxation time tau = {tau:.6g} must exceed 0.5")
    if not tau < 1e12:  # an overflowed viscosity (tiny Reynolds number) would give omega = 0
        raise UnstableSetup(f"viscosity {viscosity:.6g} (relaxation time tau = {tau:.6g}) is "
                            "too large: raise the Reynolds number or lower the viscosity")
    omega_plus = 1.0 / tau
    if collision == "bgk":
        return omega_plus, omega_plus
    tau_minus = magic / (tau - 0.5) + 0.5
    return omega_plus, 1.0 / tau_minus


def check_stability(tau: float, lid_velocity: float) -> list[str]:
    """Refuse tau <= 0.5 outright (:class:`UnstableSetup`); return what to warn about where
    accuracy degrades (the case checks warn, once, not every setup of the solver)."""
    advisories = []
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
    corner = abs(lid_velocity) * CS2 * (tau - 0.5)
    if corner > WARN_LID_VISCOUS:
        text = (f"lid velocity x viscosity = {corner:.3g} puts a density dip of about "
                f"{7 * corner:.2g} at the lid's corners (their pressure grows with viscosity x "
                "lid velocity)")
        fix = ("lower fluid.lid_velocity (at a fixed Reynolds number the viscosity falls with "
               "it) or use fewer cells")
        if corner > MAX_LID_VISCOUS:
            raise UnstableSetup(f"{text}, beyond the {MAX_LID_VISCOUS:g} limit: {fix}")
        advisories.append(f"{text}: {fix}")
    if tau < 0.51 or cell_re > WARN_CELL_REYNOLDS:
        advisories.append(
            f"relaxation time tau = {tau:.6g} (cell Reynolds number {cell_re:.3g}) is close to "
            "the stability limit: refine the grid or lower the Reynolds number")
    return advisories
