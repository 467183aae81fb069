"""Forces on the bodies of a fluid run (``domain.bodies``): measured every
``output.forces_every`` steps and at the end, written to ``forces.h5`` and ``forces.png``,
and reported per body (drag and lift coefficients) in the summary and ``run.json``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from simsplit.run.operations import Operation, RunningSimulation


class BodyForces:
    """The force series of every body of a run (every rank measures; rank 0 writes)."""

    def __init__(self, sim: RunningSimulation) -> None:
        from simsplit.fluid.forces import DeviceForces, body_links

        setup = sim.solver.setup
        self.setup, self.bodies = setup, list(setup.bodies)
        self.links = body_links(setup)
        #: reduced on each slab's device: a few numbers per body cross to the host
        self.reducer = DeviceForces(self.links)
        inlet = setup.inlet
        self.velocity = inlet.mean_velocity if inlet is not None else None
        self.direction = -1.0 if setup.x_kinds[1] == "inlet" else 1.0
        self.steps: list[int] = []
        self.forces: list[np.ndarray] = []

    def measure(self, sim: RunningSimulation) -> None:
        if self.steps and self.steps[-1] == sim.steps_done:
            return
        self.steps.append(sim.steps_done)
        self.forces.append(self.reducer.measure(sim.solver))

    def coefficients(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Drag and lift coefficient series of body ``k`` (NaN without an inlet)."""
        from simsplit.fluid.forces import coefficients

        pairs = [coefficients(f[k], self.velocity, self.bodies[k].reference, self.direction)
                 for f in self.forces]
        nan = float("nan")
        return (np.array([nan if d is None else d for d, _ in pairs]),
                np.array([nan if c is None else c for _, c in pairs]))

    def report(self) -> dict[str, dict[str, Any]]:
        """Per body: the last force and coefficients, the reference length and velocity."""
        out = {}
        for k, body in enumerate(self.bodies):
            drag, lift = self.coefficients(k)
            force = self.forces[-1][k] if self.forces else np.full(self.setup.dim, np.nan)
            out[body.name] = {
                "drag_coefficient": _number(drag[-1]) if len(drag) else None,
                "lift_coefficient": _number(lift[-1]) if len(lift) else None,
                "force": [_number(v) for v in force],
                "step": self.steps[-1] if self.steps else None,
                "reference_length_cells": body.reference_length,
                **({} if body.reference_area is None
                   else {"reference_area_cells": body.reference_area}),
                "reference_velocity": self.velocity,
                **self._physical_force(force),
                "cells": body.size,
                "walls": ("halfway (a mask without wall distances)"
                          if body in self.setup.halfway_bodies else self.setup.bounce_back),
                **self._shedding(k, drag, lift),
            }
        return out

    def _physical_force(self, force: np.ndarray) -> dict[str, Any]:
        """The force in physical units (N, per unit depth in 2D: N/m) where fluid.physical
        gives a density, else nothing."""
        units = self.setup.physical
        factor = None if units is None else units.force_factor(self.setup.dim)
        if factor is None:
            return {}
        return {"force_physical": [_number(v * factor) for v in force]}

    def _shedding(self, k: int, drag: np.ndarray, lift: np.ndarray) -> dict[str, Any]:
        """Strouhal number and the coefficients' max and mean over whole periods of the lift
        (None where the flow is steady or no inlet gives a reference velocity)."""
        from simsplit.fluid.shedding import analyse

        keys = ("strouhal", "drag_coefficient_max", "drag_coefficient_mean",
                "lift_coefficient_max", "lift_coefficient_mean", "periods")
        shed = None
        if self.velocity and len(self.steps) > 1:
            shed = analyse(np.array(self.steps), drag, lift, self.bodies[k].reference_length,
                           self.velocity)
        if shed is None:
            return dict.fromkeys(keys)
        return dict(zip(keys, (shed.strouhal, shed.drag_max, shed.drag_mean, shed.lift_max,
                               shed.lift_mean, shed.periods), strict=True))

    def write(self, directory: Path, plots: bool) -> None:
        from simsplit.io.forces import plot_force_coefficients, write_forces

        if not self.steps:
            return
        series, attrs, drags, lifts = {}, {}, {}, {}
        forces = np.array(self.forces)
        for k, body in enumerate(self.bodies):
            drag, lift = self.coefficients(k)
            series[body.name] = {f"force_{ax}": forces[:, k, a]
                                 for a, ax in enumerate("xyz"[:self.setup.dim])}
            series[body.name].update(drag_coefficient=drag, lift_coefficient=lift)
            attrs[body.name] = {"reference_length_cells": body.reference_length,
                                "reference_velocity": self.velocity, "kind": body.kind}
            if body.reference_area is not None:
                attrs[body.name]["reference_area_cells"] = body.reference_area
            drags[body.name], lifts[body.name] = drag, lift
        write_forces(directory / "forces.h5", np.array(self.steps), series, attrs,
                     {"units": "lattice units" + (", force per unit depth"
                                                  if self.setup.dim == 2 else ""),
                      "density": 1.0,
                      "method": "momentum exchange, Galilean invariant (Wen et al. 2014)"})
        if plots and self.velocity:
            cells = "x".join(str(n) for n in self.setup.shape)
            plot_force_coefficients(np.array(self.steps), drags, lifts,
                                    directory / "forces.png",
                                    title=f"{self.setup.lattice.name}, {cells}")


def _number(v: float) -> float | None:
    return None if not math.isfinite(float(v)) else float(v)


def attach_forces(sim: Any) -> BodyForces | None:
    """Measure the forces on a fluid run's bodies (None where it has none)."""
    setup = getattr(sim.solver, "setup", None)
    if sim.physics != "fluid" or setup is None or not setup.bodies:
        return None
    rec = BodyForces(sim)
    out = sim.case["output"]
    sim.attach(Operation("forces", int(out.get("forces_every", 50)), rec.measure))
    return rec
