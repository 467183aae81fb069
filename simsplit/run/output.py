"""Operations that write a run's results: snapshots (HDF5 + XDMF), plots, checkpoints, run.json."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from simsplit.run.operations import Operation, RunningSimulation
from simsplit.version import __version__

if TYPE_CHECKING:
    import numpy as np

    from simsplit.fluid.poiseuille import Channel


def case_yaml(case: dict) -> str:
    return yaml.safe_dump(case, sort_keys=False)


def attach_output(sim: RunningSimulation) -> None:
    """Attach the writers a case asks for; nothing when ``output.dir`` is null."""
    out = sim.case["output"]
    if not out["dir"] or getattr(sim, "_output_attached", False):
        return
    sim._output_attached = True
    directory = Path(out["dir"])
    if sim.context.rank == 0:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "case.yaml").write_text(case_yaml(sim.case))
        _attach_manifest(sim, directory)
    if sim.physics == "fluid":
        _attach_fluid(sim, directory, out)
    else:
        finish = sim.solver.open_output(directory, out)
        sim.attach(Operation("h5md", 0, lambda _: finish(), at_end=True))
        from simsplit.run.md_output import attach_md_files

        attach_md_files(sim, directory)
    _attach_checkpoints(sim, directory / CHECKPOINT_DIR, out)


CHECKPOINT_DIR = "checkpoints"
#: frames of vorticity.gif: the run's last ones (150 x 10 per second: 15 s of animation)
ANIMATION_FRAMES = 150


def _attach_manifest(sim: RunningSimulation, directory: Path) -> None:
    from simsplit.run.manifest import Manifest

    ctx = sim.context
    info = {
        "physics": sim.physics,
        "backend": ctx.backend_name,
        "devices": sorted({ctx.device_of(k) for k in range(int(sim.case["decomposition"]
                                                                ["subdomains"]))}),
        "ranks": ctx.size,
        "subdomains": sim.case["decomposition"]["subdomains"],
        "transport": getattr(getattr(sim.solver, "transport", None), "name", None),
        "placement": ctx.describe(),
        "restarted_from": sim.restarted_from,
        "start_step": sim.steps_done,
    }
    if sim.physics == "fluid":  # an inflow's lattice values, Mach, Reynolds, dx and dt
        from simsplit.fluid.setup import inflow_report

        info["units"] = inflow_report(sim.solver.setup)
    manifest = Manifest(directory, sim.case, info)
    manifest.write()
    sim.on_finish.append(lambda status, extra: manifest.update(status=status, **extra))


def _attach_checkpoints(sim: RunningSimulation, directory: Path, out: dict) -> None:
    """Checkpoints every ``output.checkpoint_every`` steps (and at the start), at the end and on
    a stop signal; a diverged run keeps its last good one."""
    from simsplit.run.checkpoint import checkpoint_path, write_checkpoint
    from simsplit.run.state import capture_state

    def save(s: RunningSimulation) -> None:
        arrays = capture_state(s)  # collective under MPI
        if s.context.rank == 0 and not checkpoint_path(directory, s.steps_done).exists():
            write_checkpoint(directory, s.steps_done, s.case, arrays,
                             {"physics": s.physics}, keep=out["keep_checkpoints"])

    def on_finish(status: str, _info: dict) -> None:
        if status == "interrupted":
            save(sim)

    if out["checkpoint_every"] > 0:
        save(sim)  # a run that diverges early still leaves a restartable state
    sim.attach(Operation("checkpoint", out["checkpoint_every"], save))
    sim.on_finish.insert(0, on_finish)  # before run.json records the stop


def _plot_channel(sim: RunningSimulation, velocity: np.ndarray, channel: Channel,
                  path: Path) -> None:
    """The velocity profile across a channel against its parabola (``profile.png``)."""
    from simsplit.fluid.poiseuille import measured_profile
    from simsplit.io.plots import plot_channel_profile

    setup = sim.solver.setup
    cells = "x".join(str(n) for n in setup.shape)
    collision = sim.case["fluid"]["collision"].upper()
    title = f"{setup.lattice.name} {collision} channel, {cells}, step {sim.steps_done}"
    plot_channel_profile(channel.positions, measured_profile(velocity, channel), channel.exact(),
                         path, channel.names, title)


def _attach_fluid(sim: RunningSimulation, directory: Path, out: dict) -> None:
    from simsplit.io.fields import FieldWriter

    setup = sim.solver.setup
    state: dict[str, Any] = {"writer": None, "last": -1,
                             "frames": deque(maxlen=ANIMATION_FRAMES)}

    def snapshot(s: RunningSimulation) -> None:
        if s.steps_done == state["last"]:
            return
        state["last"] = s.steps_done
        rho, u = s.density(), s.velocity()  # collective under MPI
        if s.context.rank != 0:
            return
        if state["writer"] is None:
            units = setup.units
            attrs = {"case": case_yaml(s.case), "simsplit_version": __version__,
                     "velocity_unit": units["velocity"], "length_unit": units["length"]}
            state["writer"] = FieldWriter(directory, setup.grid, setup.spacing, attrs,
                                          append=s.restarted_from is not None,
                                          time_unit=units["time"])
        if s.steps_done in state["writer"].steps:
            return  # written before an interruption; a restart reproduces it bit for bit
        state["writer"].write(s.steps_done, s.steps_done * setup.time_step,
                              {"density": rho, "velocity": u})

    def plot(s: RunningSimulation) -> None:
        u = s.velocity()
        if s.context.rank != 0 or not out["plots"]:
            return
        from simsplit.fluid.poiseuille import channel_of

        channel = channel_of(s.case)
        if channel is not None:
            _plot_channel(s, u, channel, directory / "profile.png")
            return
        if setup.geometry is not None:  # bodies, inlets, outlets (3D: the plane z = 1/2)
            from simsplit.io.plots import plot_flow

            cells = "x".join(str(n) for n in setup.shape)
            solid, where = setup.geometry.solid, ""
            if setup.dim == 3:
                k = setup.nz // 2
                u, solid, where = u[k, ..., :2], solid[k], f", plane k = {k}"
            plot_flow(u, solid, directory / "velocity.png",
                      f"{setup.lattice.name}, {cells}{where}, step {s.steps_done}")
            return
        from simsplit.fluid.reference import cavity_reference
        from simsplit.io.plots import plot_cavity, plot_cavity_midplane

        re = s.case["fluid"].get("reynolds")
        ref = cavity_reference(setup, re)
        collision = s.case["fluid"]["collision"].upper()
        cells = "x".join(str(n) for n in setup.shape)
        title = f"{setup.lattice.name} {collision}, {cells}, step {s.steps_done}"
        plot = plot_cavity if setup.dim == 2 else plot_cavity_midplane
        plot(u, directory / "velocity.png", re, ref, title=title)

    def close(s: RunningSimulation) -> None:
        if state["frames"] and s.context.rank == 0:
            from simsplit.io.animation import write_gif

            geometry = setup.geometry
            write_gif(list(state["frames"]), directory / "vorticity.gif",
                      geometry.solid if geometry is not None else None)
            state["frames"].clear()
        forces = getattr(s, "body_forces", None)
        if forces is not None and s.context.rank == 0:
            forces.write(directory, out["plots"])
        probes = getattr(s, "probes", None)
        if probes is not None and s.context.rank == 0:
            probes.write(directory)
        if state["writer"] is not None:
            state["writer"].close()
            state["writer"] = None

    def frame(s: RunningSimulation) -> None:
        if s.steps_done == state.get("last_frame"):
            return
        state["last_frame"] = s.steps_done
        u = s.velocity()  # collective under MPI
        if s.context.rank == 0:
            from simsplit.io.animation import vorticity

            state["frames"].append(vorticity(u).astype(np.float32))

    animation = int(out.get("animation") or 0)
    if animation > 0 and setup.dim == 2:  # before "close", which writes the frames
        sim.attach(Operation("animation", animation, frame))
        if sim.steps_done % animation == 0:
            frame(sim)
    every = out["every"] or 0  # null: the final state only
    sim.attach(Operation("snapshot", every, snapshot))
    if every > 0 and sim.steps_done % every == 0:
        snapshot(sim)  # the series starts where the run does (step 0, or a restart on the grid)
    sim.attach(Operation("plot", 0, plot))
    sim.attach(Operation("close", 0, close))
