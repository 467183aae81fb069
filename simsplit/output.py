"""Operations that write a run's results: field snapshots (HDF5 + XDMF) and PNG plots."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from simsplit import __version__

if TYPE_CHECKING:
    from simsplit.simulation import Simulation


def case_yaml(case: dict) -> str:
    return yaml.safe_dump(case, sort_keys=False)


def attach_output(sim: "Simulation") -> None:
    """Attach the writers a case asks for; nothing when ``output.dir`` is null."""
    out = sim.case["output"]
    if not out["dir"] or getattr(sim, "_output_attached", False):
        return
    sim._output_attached = True
    directory = Path(out["dir"])
    if sim.context.rank == 0:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "case.yaml").write_text(case_yaml(sim.case))
    if sim.physics == "fluid":
        _attach_fluid(sim, directory, out)
    else:
        sim.solver.attach_output(sim, directory, out)


def _attach_fluid(sim: "Simulation", directory: Path, out: dict) -> None:
    from simsplit.io.fields import FieldWriter

    setup = sim.solver.setup
    state = {"writer": None, "last": -1}

    def snapshot(s: "Simulation") -> None:
        if s.steps_done == state["last"]:
            return
        state["last"] = s.steps_done
        rho, u = s.density(), s.velocity()  # collective under MPI
        if s.context.rank != 0:
            return
        if state["writer"] is None:
            attrs = {"case": case_yaml(s.case), "simsplit_version": __version__}
            state["writer"] = FieldWriter(directory, (setup.nx, setup.ny),
                                          (1.0 / setup.nx, 1.0 / setup.ny), attrs)
        state["writer"].write(s.steps_done, float(s.steps_done), {"density": rho, "velocity": u})

    def plot(s: "Simulation") -> None:
        u = s.velocity()
        if s.context.rank != 0 or not out["plots"]:
            return
        from simsplit.fluid.reference import ghia_u_centreline
        from simsplit.io.plots import plot_cavity

        re = s.case["fluid"].get("reynolds")
        ref = None
        if setup.lid and re is not None and not setup.params.periodic_x:
            try:
                ref = ghia_u_centreline(int(re)) if float(re).is_integer() else None
            except ValueError:
                ref = None
        title = f"D2Q9 {s.case['fluid']['collision'].upper()}, {setup.nx}x{setup.ny}, step {s.steps_done}"
        plot_cavity(u, directory / "velocity.png", re, ref, title=title)

    def close(s: "Simulation") -> None:
        if state["writer"] is not None:
            state["writer"].close()
            state["writer"] = None

    from simsplit.simulation import Operation

    sim.attach(Operation("snapshot", out["every"], snapshot))
    sim.attach(Operation("plot", 0, plot))
    sim.attach(Operation("close", 0, close))
