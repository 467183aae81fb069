"""The checkpointable state of a simulation, whatever its physics: global arrays plus a step.

Every array is global and in a split-independent order (cells by position, atoms by id), so a
state saved on N slabs or ranks restores onto M.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simsplit.run.operations import RunningSimulation


def capture_state(sim: RunningSimulation) -> dict[str, np.ndarray]:
    """Global state arrays (collective under MPI: every rank must call it)."""
    if sim.physics == "fluid":
        from simsplit.fluid.state import save_state

        return save_state(sim.solver)
    state = sim.solver.state()
    return {k: np.asarray(v) for k, v in state.items()}


def restore_state(sim: RunningSimulation, arrays: dict[str, Any], step: int) -> None:
    if sim.physics == "fluid":
        from simsplit.fluid.state import load_state

        load_state(sim.solver, arrays, step)
        return
    sim.solver.load_state(arrays)
    if sim.steps_done != step:
        raise ValueError(f"checkpoint of step {step} restored as step {sim.steps_done}")
