"""Attaches the writers of a run's results: case.yaml and run.json, the fluid's snapshots and plots
(simsplit.run.fluid_output) or MD's trajectories (simsplit.run.md_output), and checkpoints."""

from __future__ import annotations

from pathlib import Path

import yaml

from simsplit.run.operations import Operation, RunningSimulation


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
        from simsplit.run.fluid_output import FluidOutputs

        FluidOutputs(sim, directory, out, case_yaml(sim.case)).attach(sim)
    else:
        finish = sim.solver.open_output(directory, out)
        sim.attach(Operation("h5md", 0, lambda _: finish(), at_end=True))
        from simsplit.run.md_output import attach_md_files

        attach_md_files(sim, directory)
    _attach_checkpoints(sim, directory / CHECKPOINT_DIR, out)


CHECKPOINT_DIR = "checkpoints"


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
