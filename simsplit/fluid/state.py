"""Save and restore the complete state of a lattice Boltzmann run, whatever its split.

The state is global (populations of every interior cell, the macroscopic fields of the last
stored step, the velocity of the last residual check and a convective outlet's previous
values), so a run saved on N slabs resumes
on M slabs and continues bit for bit. Populations are saved as stored (``run.storage``: fp16
keeps its 2-byte shifted encoding, attribute-free: the dtype says which), since decoding and
encoding again would not give back every value.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from simsplit.fluid.block import SlabBlock
from simsplit.fluid.setup import FluidSetup
from simsplit.numerics.storage import storage_name
from simsplit.transport.base import Transport


class FluidSolverState(Protocol):
    """What saving and restoring reads and sets of a :class:`~simsplit.fluid.solver.FluidSolver`
    (the solver imports this module, so it is named by this protocol, not imported)."""

    setup: FluidSetup
    blocks: dict[int, SlabBlock]
    transport: Transport
    steps_done: int
    _u_prev: dict[int, tuple[Any, ...]] | None
    _fresh_src: list[Any] | None
    _fresh_deep: list[Any] | None

    def _gather(self, pick: Callable[[SlabBlock], np.ndarray]) -> np.ndarray: ...


def save_state(solver: FluidSolverState) -> dict[str, np.ndarray]:
    """Global arrays describing the run now (collective under MPI)."""
    def host(name):
        return lambda b: b.backend.to_host(getattr(b, name))

    names = _velocity_names(solver)
    state = {"populations": raw_populations(solver), "rho": solver._gather(host("rho"))}
    for d, name in enumerate(names):
        state[name] = solver._gather(lambda b, d=d: b.backend.to_host(b.u[d]))
    if any(b.outlet_slots is not None for b in solver.blocks.values()):
        state["outlet_slots"] = np.moveaxis(
            solver._gather(lambda b: np.moveaxis(b.outlet_values(), 0, 1)), 0, 1)
    prev = solver._u_prev
    if prev is not None:
        for d, name in enumerate(names):
            state[name + "_prev"] = solver._gather(
                lambda b, d=d: b.backend.to_host(prev[_key(solver, b)][d]))
    return state


def raw_populations(solver: FluidSolverState) -> np.ndarray:
    """Global populations ``(q, *grid)`` as stored (storage type and encoding)."""
    pieces = solver.transport.gather(
        {k: np.moveaxis(b.raw_populations(), 0, 1) for k, b in solver.blocks.items()})
    return np.moveaxis(np.concatenate([p for _, p in sorted(pieces.items())], axis=0), 1, 0)


def _velocity_names(solver: FluidSolverState) -> tuple[str, ...]:
    return ("ux", "uy", "uz")[:solver.setup.dim]


def _key(solver: FluidSolverState, block) -> int:
    return next(k for k, b in solver.blocks.items() if b is block)


def load_state(solver: FluidSolverState, state: dict[str, np.ndarray], step: int) -> None:
    """Scatter a global state onto this solver's slabs and set its step counter."""
    f = state["populations"]
    q = solver.setup.lattice.q
    slots = {b.storage.slots(q) for b in solver.blocks.values()} or {q}  # neq16: records
    expect = (slots.pop(), *solver.setup.grid)
    if f.shape != expect:
        raise ValueError(f"checkpoint populations have shape {f.shape}, the case needs {expect}")
    stored = {b.storage.dtype for b in solver.blocks.values()}
    if stored and f.dtype not in stored:
        raise ValueError(f"checkpoint populations are stored as {storage_name(f.dtype)}, the "
                         f"run stores {', '.join(map(storage_name, stored))} (run.storage)")
    names = _velocity_names(solver)
    has_prev = "ux_prev" in state
    solver._u_prev = {} if has_prev else None
    for k, blk in solver.blocks.items():
        rows = slice(blk.layer0, blk.layer0 + blk.layers)
        blk.set_raw_populations(f[:, rows])  # a convective outlet's memory from them, unless
        if blk.outlet_slots is not None and "outlet_slots" in state:  # the state holds it
            blk.set_outlet_slots(state["outlet_slots"][:, rows])
        be = blk.backend
        with be.activate():
            for name, arr in zip(("rho", *names), (blk.rho, *blk.u), strict=True):
                be.copy(arr, be.asarray(state[name][rows].astype(blk.dtype)))
            if has_prev:
                solver._u_prev[k] = tuple(be.asarray(state[n + "_prev"][rows].astype(blk.dtype))
                                          for n in names)
    solver.steps_done = int(step)
    solver._fresh_src = solver._fresh_deep = None  # populations written in place (depth 2)
