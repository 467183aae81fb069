"""Probes of a fluid run (``output.probes``): density, pressure and velocity at named points
every ``output.forces_every`` steps and at the end, written to ``probes.h5`` and reported (the
last reading) in the summary and ``run.json``; in lattice units, and with ``fluid.physical``
also the time, velocity and (with a density) gauge pressure in physical units."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simsplit.run.operations import Operation, RunningSimulation

if TYPE_CHECKING:
    from simsplit.fluid.probes import Probe
    from simsplit.fluid.units import PhysicalUnits


class ProbeSeries:
    """The readings of every probe of a run (every rank reads; rank 0 writes)."""

    def __init__(self, probes: list[Probe], dim: int,
                 physical: PhysicalUnits | None = None) -> None:
        from simsplit.fluid.probes import quantities

        self.probes, self.dim, self.physical = probes, dim, physical
        self.quantities = quantities(dim)
        self.steps: list[int] = []
        self.values: list[np.ndarray] = []

    def measure(self, sim: RunningSimulation) -> None:
        from simsplit.fluid.probes import read_probes

        if self.steps and self.steps[-1] == sim.steps_done:
            return
        self.steps.append(sim.steps_done)
        self.values.append(read_probes(sim.solver, self.probes))

    def _physical(self, reading: np.ndarray) -> dict[str, Any]:
        """One probe's reading in physical units (nothing without fluid.physical)."""
        units = self.physical
        if units is None:
            return {}
        return {"velocity_physical": [units.to_physical_velocity(float(v))
                                      for v in reading[2:]],
                "pressure_physical": units.gauge_pressure(float(reading[0]))}

    def report(self) -> dict[str, dict[str, Any]]:
        """Per probe: its cell and the last reading (lattice units; physical ones too with
        fluid.physical)."""
        out = {}
        for n, p in enumerate(self.probes):
            last = self.values[-1][n] if self.values else np.full(len(self.quantities), np.nan)
            out[p.name] = {"cell": list(p.cell), "step": self.steps[-1] if self.steps else None,
                           **{q: float(v) for q, v in zip(self.quantities, last, strict=True)},
                           **self._physical(last)}
            if self.physical is not None and self.steps:
                out[p.name]["time"] = self.steps[-1] * self.physical.dt
        return out

    def write(self, directory: Path) -> None:
        import h5py

        if not self.steps:
            return
        values = np.array(self.values)
        units = self.physical
        tmp = directory / "probes.h5.tmp"
        with h5py.File(tmp, "w") as h5:
            h5.attrs["units"] = "lattice units (pressure = density / 3)"
            h5["step"] = np.array(self.steps, dtype=np.int64)
            if units is not None:
                h5.attrs["physical_units"] = (f"time in s, velocity_physical in "
                                              f"{units.length_unit}/s, pressure_physical "
                                              "(gauge, with fluid.physical.density) in Pa")
                h5.attrs["dx"], h5.attrs["dt"] = units.dx, units.dt
                h5["time"] = np.array(self.steps, dtype=np.float64) * units.dt
            for n, p in enumerate(self.probes):
                group = h5.create_group(p.name)
                group.attrs["cell"] = np.array(p.cell)
                for k, q in enumerate(self.quantities):
                    group[q] = values[:, n, k]
                if units is not None:
                    group["velocity_physical"] = values[:, n, 2:] * units.velocity_factor
                    if units.density is not None:
                        group["pressure_physical"] = np.array(
                            [units.gauge_pressure(float(r)) for r in values[:, n, 0]])
        tmp.replace(directory / "probes.h5")


def probe_lines(probes: dict | None, velocity_unit: str | None = None) -> list[str]:
    """One summary line per probe: its last reading (and its velocity in physical units)."""
    lines = []
    for name, p in (probes or {}).items():
        cell = ", ".join(map(str, p["cell"]))
        u = ", ".join(f"{v:.5g}" for k, v in p.items() if k.startswith("velocity_")
                      and k != "velocity_physical")
        text = f"probe        {name} (cell {cell}): density {p['density']:.6g}, velocity ({u})"
        if p.get("velocity_physical") is not None:
            phys = ", ".join(f"{v:.5g}" for v in p["velocity_physical"])
            text += f" = ({phys}) {velocity_unit or 'physical units'}"
        lines.append(f"{text} at step {p['step']}")
    return lines


def attach_probes(sim: Any) -> ProbeSeries | None:
    """Read a fluid run's probes (None where it has none)."""
    if sim.physics != "fluid":
        return None
    from simsplit.fluid.probes import probes_of

    probes = probes_of(sim.case)
    if not probes:
        return None
    setup = sim.solver.setup
    series = ProbeSeries(probes, setup.dim, setup.physical)
    sim.attach(Operation("probes", int(sim.case["output"].get("forces_every", 50)),
                         series.measure))
    return series
