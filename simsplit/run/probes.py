"""Probes of a fluid run (``output.probes``): density, pressure and velocity at named points
every ``output.forces_every`` steps and at the end, written to ``probes.h5`` and reported (the
last reading) in the summary and ``run.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simsplit.run.operations import Operation, RunningSimulation


class ProbeSeries:
    """The readings of every probe of a run (every rank reads; rank 0 writes)."""

    def __init__(self, probes: list[Any]) -> None:
        self.probes = probes
        self.steps: list[int] = []
        self.values: list[np.ndarray] = []

    def measure(self, sim: RunningSimulation) -> None:
        from simsplit.fluid.probes import read_probes

        if self.steps and self.steps[-1] == sim.steps_done:
            return
        self.steps.append(sim.steps_done)
        self.values.append(read_probes(sim.solver, self.probes))

    def report(self) -> dict[str, dict[str, Any]]:
        """Per probe: its cell and the last reading (lattice units)."""
        from simsplit.fluid.probes import QUANTITIES

        out = {}
        for n, p in enumerate(self.probes):
            last = self.values[-1][n] if self.values else np.full(len(QUANTITIES), np.nan)
            out[p.name] = {"cell": list(p.cell), "step": self.steps[-1] if self.steps else None,
                           **{q: float(v) for q, v in zip(QUANTITIES, last, strict=True)}}
        return out

    def write(self, directory: Path) -> None:
        import h5py

        from simsplit.fluid.probes import QUANTITIES

        if not self.steps:
            return
        values = np.array(self.values)
        tmp = directory / "probes.h5.tmp"
        with h5py.File(tmp, "w") as h5:
            h5.attrs["units"] = "lattice units (pressure = density / 3)"
            h5["step"] = np.array(self.steps, dtype=np.int64)
            for n, p in enumerate(self.probes):
                group = h5.create_group(p.name)
                group.attrs["cell"] = np.array(p.cell)
                for k, q in enumerate(QUANTITIES):
                    group[q] = values[:, n, k]
        tmp.replace(directory / "probes.h5")


def probe_lines(probes: dict | None) -> list[str]:
    """One summary line per probe: its last reading."""
    return [f"probe        {name} (cell {p['cell'][0]}, {p['cell'][1]}): density "
            f"{p['density']:.6g}, velocity ({p['velocity_x']:.5g}, {p['velocity_y']:.5g}) at "
            f"step {p['step']}" for name, p in (probes or {}).items()]


def attach_probes(sim: Any) -> ProbeSeries | None:
    """Read a fluid run's probes (None where it has none)."""
    if sim.physics != "fluid":
        return None
    from simsplit.fluid.probes import probes_of

    probes = probes_of(sim.case)
    if not probes:
        return None
    series = ProbeSeries(probes)
    sim.attach(Operation("probes", int(sim.case["output"].get("forces_every", 50)),
                         series.measure))
    return series
