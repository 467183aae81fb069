"""What an MD run writes besides the solver's own H5MD trajectory and thermo.csv: a GSD
trajectory (``trajectory.gsd``: OVITO, HOOMD, MDAnalysis) with the same frames, and the atom
types (``species`` and their names) added to the H5MD file at the end of the run.

Frames are gathered in atom-id order (collective under MPI) and written by rank 0, at the same
steps as the H5MD frames (``output.every``, or its default) and at the end of the run.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from simsplit.errors import CaseWarning
from simsplit.run.operations import Operation, RunningSimulation

GSD_NAME = "trajectory.gsd"
H5MD_NAME = "trajectory.h5md"


def attach_md_files(sim: RunningSimulation, directory: Path) -> None:
    """Attach the GSD writer (when the ``gsd`` package is installed) and the H5MD type
    labels; call after the solver's ``open_output`` (which sets its frame interval)."""
    from simsplit.md.systems import atom_types

    solver = sim.solver
    typeid, names = atom_types(sim.case["md"], solver.n_atoms)
    _attach_gsd(sim, directory, typeid, names)

    def label_h5md(s: RunningSimulation) -> None:
        path = directory / H5MD_NAME
        if s.context.rank == 0 and path.exists():
            from simsplit.io.h5md import write_species

            write_species(path, typeid, names)

    sim.attach(Operation("h5md-types", 0, label_h5md, at_end=True))


def _attach_gsd(sim: RunningSimulation, directory: Path, typeid: Any, names: list[str]) -> None:
    from simsplit.io.gsd_trajectory import INSTALL_HINT, gsd_available

    if not gsd_available():
        if sim.context.rank == 0:
            warnings.warn(f"output.dir: no {GSD_NAME} (the gsd package is not installed: "
                          f"{INSTALL_HINT}); trajectory.h5md is written", CaseWarning,
                          stacklevel=2)
        return
    solver = sim.solver
    # resume: a restarted run continues the file from its checkpoint's step, and a second
    # run() of the same simulation from where the first ended
    state: dict[str, Any] = {"writer": None, "last": -1,
                             "resume": sim.steps_done if sim.restarted_from is not None else None}

    def frame(s: RunningSimulation) -> None:
        if s.steps_done == state["last"]:
            return
        state["last"] = s.steps_done
        x, v, img = solver.positions(), solver.velocities(), solver.images()  # collective
        if s.context.rank != 0:
            return
        if state["writer"] is None:
            from simsplit.io.gsd_trajectory import GSDWriter

            state["writer"] = GSDWriter(directory / GSD_NAME, solver.box, typeid, names,
                                        mass=solver.atom_mass, resume_step=state["resume"])
        state["writer"].box = solver.box  # an NPT run's box changes every step
        state["writer"].write_frame(s.steps_done, s.steps_done * solver.dt, x, v, img)
        state["writer"].flush()  # a run killed later keeps every frame written so far

    def close(s: RunningSimulation) -> None:
        frame(s)
        if state["writer"] is not None:
            state["writer"].close()
            state["writer"] = None
            state["resume"] = s.steps_done

    every = int(solver.output_every)
    sim.attach(Operation("gsd", every, frame, at_end=False))
    sim.attach(Operation("gsd-close", 0, close, at_end=True))
    if every > 0 and sim.steps_done % every == 0:
        frame(sim)
