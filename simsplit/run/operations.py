"""What a run attaches and what it returns: an :class:`Operation` fires every N steps (writers,
plots, checkpoints), a :class:`RunSummary` says how a run went, and :class:`RunningSimulation`
is what attached operations may use of the :class:`~simsplit.run.simulation.Simulation`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from simsplit.decomp.placement import Placement


@dataclass
class Operation:
    """Something done to a simulation every ``every`` steps (0: only at the end); ``action`` is
    called with the :class:`~simsplit.run.simulation.Simulation`."""

    name: str
    every: int
    action: Callable[[Any], None]
    at_end: bool = True


@dataclass
class RunSummary:
    """Steps, wall time and rate of one :meth:`Simulation.run`, why it stopped, and extras
    (timing breakdown, load balance)."""

    steps: int
    wall_seconds: float
    converged: bool
    residual: float | None
    cell_updates_per_second: float
    reason: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mlups(self) -> float:
        return self.cell_updates_per_second / 1e6


class RunningSimulation(Protocol):
    """The parts of a :class:`~simsplit.run.simulation.Simulation` that writers, checkpoints,
    the monitor and the summary use (they are attached to it, so they do not import it)."""

    case: dict[str, Any]
    context: Placement
    solver: Any
    physics: str
    monitor: Any
    monitor_summary: dict[str, Any] | None
    restarted_from: str | None
    on_finish: list[Callable[[str, dict[str, Any]], None]]

    @property
    def steps_done(self) -> int: ...

    def attach(self, op: Operation) -> None: ...

    def velocity(self) -> np.ndarray: ...

    def density(self) -> np.ndarray: ...
