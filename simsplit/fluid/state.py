"""Save and restore the complete state of a D2Q9 run, whatever its split.

The state is global (populations of every interior cell, the macroscopic fields of the last
stored step and the velocity of the last residual check), so a run saved on N slabs resumes
on M slabs and continues bit for bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from simsplit.fluid.solver import FluidSolver


def save_state(solver: FluidSolver) -> dict[str, np.ndarray]:
    """Global arrays describing the run now (collective under MPI)."""
    def host(name):
        return lambda b: b.backend.to_host(getattr(b, name))

    state = {
        "populations": solver.populations(),
        "rho": solver._gather(host("rho")),
        "ux": solver._gather(host("ux")),
        "uy": solver._gather(host("uy")),
    }
    prev = solver._u_prev
    if prev is not None:
        state["ux_prev"] = solver._gather(lambda b: b.backend.to_host(prev[_key(solver, b)][0]))
        state["uy_prev"] = solver._gather(lambda b: b.backend.to_host(prev[_key(solver, b)][1]))
    return state


def _key(solver: FluidSolver, block) -> int:
    return next(k for k, b in solver.blocks.items() if b is block)


def load_state(solver: FluidSolver, state: dict[str, np.ndarray], step: int) -> None:
    """Scatter a global state onto this solver's slabs and set its step counter."""
    f = state["populations"]
    expect = (9, solver.setup.ny, solver.setup.nx)
    if f.shape != expect:
        raise ValueError(f"checkpoint populations have shape {f.shape}, the case needs {expect}")
    has_prev = "ux_prev" in state
    solver._u_prev = {} if has_prev else None
    for k, blk in solver.blocks.items():
        rows = slice(blk.row0, blk.row0 + blk.ny)
        blk.set_populations(f[:, rows, :])
        be = blk.backend
        with be.activate():
            for name in ("rho", "ux", "uy"):
                be.copy(getattr(blk, name), be.asarray(state[name][rows].astype(blk.dtype)))
            if has_prev:
                solver._u_prev[k] = tuple(be.asarray(state[n][rows].astype(blk.dtype))
                                          for n in ("ux_prev", "uy_prev"))
    solver.steps_done = int(step)
