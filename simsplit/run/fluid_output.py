"""What a fluid run writes: density and velocity snapshots (HDF5 + XDMF, every
``output.every`` steps), the velocity plot of the final state (a channel's profile against its
parabola, the flow around bodies, or the cavity against its published reference), the vorticity
animation of a 2D run (``output.animation``), and at the end the body forces and probe series.

Fields are gathered on every rank (collective under MPI); rank 0 writes.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simsplit.run.operations import Operation, RunningSimulation
from simsplit.version import __version__

if TYPE_CHECKING:
    from simsplit.fluid.poiseuille import Channel

#: frames of vorticity.gif: the run's last ones (150 x 10 per second: 15 s of animation)
ANIMATION_FRAMES = 150


class FluidOutputs:
    """The fluid writers of one run in ``directory``, as operations of the simulation."""

    def __init__(self, sim: RunningSimulation, directory: Path, out: dict,
                 case_text: str) -> None:
        self.setup = sim.solver.setup
        self.directory = directory
        self.out = out
        self.case_text = case_text
        self.writer: Any = None
        self.last_snapshot = -1
        self.last_frame: int | None = None
        self.frames: deque = deque(maxlen=ANIMATION_FRAMES)

    def attach(self, sim: RunningSimulation) -> None:
        """Attach the writers as operations (and write what is due at the current step)."""
        animation = int(self.out.get("animation") or 0)
        if animation > 0 and self.setup.dim == 2:  # before "close", which writes the frames
            sim.attach(Operation("animation", animation, self.frame))
            if sim.steps_done % animation == 0:
                self.frame(sim)
        every = self.out["every"] or 0  # null: the final state only
        sim.attach(Operation("snapshot", every, self.snapshot))
        if every > 0 and sim.steps_done % every == 0:
            self.snapshot(sim)  # the series starts where the run does (step 0, or a restart)
        sim.attach(Operation("plot", 0, self.plot))
        sim.attach(Operation("close", 0, self.close))

    def snapshot(self, s: RunningSimulation) -> None:
        """Density and velocity of the current step into fields.h5 (once a step)."""
        if s.steps_done == self.last_snapshot:
            return
        self.last_snapshot = s.steps_done
        rho, u = s.density(), s.velocity()  # collective under MPI
        if s.context.rank != 0:
            return
        setup = self.setup
        if self.writer is None:
            from simsplit.io.fields import FieldWriter

            units = setup.units
            attrs = {"case": self.case_text, "simsplit_version": __version__,
                     "velocity_unit": units["velocity"], "length_unit": units["length"]}
            self.writer = FieldWriter(self.directory, setup.grid, setup.spacing, attrs,
                                      append=s.restarted_from is not None,
                                      time_unit=units["time"])
        if s.steps_done in self.writer.steps:
            return  # written before an interruption; a restart reproduces it bit for bit
        self.writer.write(s.steps_done, s.steps_done * setup.time_step,
                          {"density": rho, "velocity": u})

    def plot(self, s: RunningSimulation) -> None:
        """The final state's plot (``output.plots``)."""
        u = s.velocity()  # collective under MPI
        if s.context.rank != 0 or not self.out["plots"]:
            return
        from simsplit.fluid.poiseuille import channel_of

        channel = channel_of(s.case)
        if channel is not None:
            self._plot_channel(s, u, channel)
        elif self.setup.geometry is not None:  # bodies, inlets, outlets
            self._plot_bodies(s, u)
        else:
            self._plot_cavity(s, u)

    def close(self, s: RunningSimulation) -> None:
        """The animation, forces and probes files; the fields file closed."""
        if self.frames and s.context.rank == 0:
            from simsplit.io.animation import write_gif

            geometry = self.setup.geometry
            write_gif(list(self.frames), self.directory / "vorticity.gif",
                      geometry.solid if geometry is not None else None)
            self.frames.clear()
        forces = getattr(s, "body_forces", None)
        if forces is not None and s.context.rank == 0:
            forces.write(self.directory, self.out["plots"])
        probes = getattr(s, "probes", None)
        if probes is not None and s.context.rank == 0:
            probes.write(self.directory)
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def frame(self, s: RunningSimulation) -> None:
        """One vorticity frame of the animation (once a step)."""
        if s.steps_done == self.last_frame:
            return
        self.last_frame = s.steps_done
        u = s.velocity()  # collective under MPI
        if s.context.rank == 0:
            from simsplit.io.animation import vorticity

            self.frames.append(vorticity(u).astype(np.float32))

    def _title(self, s: RunningSimulation, what: str = "") -> str:
        setup = self.setup
        cells = "x".join(str(n) for n in setup.shape)
        collision = s.case["fluid"]["collision"].upper()
        return f"{setup.lattice.name} {collision}{what}, {cells}, step {s.steps_done}"

    def _plot_channel(self, s: RunningSimulation, velocity: np.ndarray,
                      channel: Channel) -> None:
        """The velocity profile across a channel against its parabola (``profile.png``)."""
        from simsplit.fluid.poiseuille import measured_profile
        from simsplit.io.plots import plot_channel_profile

        plot_channel_profile(channel.positions, measured_profile(velocity, channel),
                             channel.exact(), self.directory / "profile.png", channel.names,
                             self._title(s, " channel"))

    def _plot_bodies(self, s: RunningSimulation, u: np.ndarray) -> None:
        """Speed and streamlines around the bodies (``velocity.png``; 3D: the plane z = 1/2)."""
        from simsplit.io.plots import plot_flow

        setup = self.setup
        cells = "x".join(str(n) for n in setup.shape)
        solid, where = setup.geometry.solid, ""
        if setup.dim == 3:
            k = setup.nz // 2
            u, solid, where = u[k, ..., :2], solid[k], f", plane k = {k}"
        plot_flow(u, solid, self.directory / "velocity.png",
                  f"{setup.lattice.name}, {cells}{where}, step {s.steps_done}")

    def _plot_cavity(self, s: RunningSimulation, u: np.ndarray) -> None:
        """The centreline velocities against the published reference (``velocity.png``)."""
        from simsplit.fluid.reference import cavity_reference
        from simsplit.io.plots import plot_cavity, plot_cavity_midplane

        re = s.case["fluid"].get("reynolds")
        ref = cavity_reference(self.setup, re)
        plot = plot_cavity if self.setup.dim == 2 else plot_cavity_midplane
        plot(u, self.directory / "velocity.png", re, ref, title=self._title(s))
