"""Drive load balancing through a run: probe per-slab update times, re-split, measure the gain.

The :class:`LoadBalancer` knows steps and seconds, not physics: it talks to a solver through
the small :class:`Balanceable` interface (per-slab clocks, a collective gather of their
seconds, a re-split). Every rank calls it at the same steps with the same gathered timings, so
every rank chooses the same split without further messages.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from simsplit.decomp.balance import BalancePlan, BalanceSchedule, BalanceSettings, plan_balance


class Balanceable(Protocol):
    """What a solver offers the balancer."""

    def slab_layers(self) -> list[int]: ...  # layers of every slab (global)

    def layer_cells(self) -> int: ...  # cells in one layer

    def balance_limits(self) -> tuple[int, int, bool]: ...  # (extent, min layers, concurrent)

    def set_slab_clock(self, on: bool) -> None: ...  # start (from zero) or stop slab clocks

    def slab_step_seconds(self) -> list[float]: ...  # every slab's seconds/step (collective)

    def reduce_max(self, value: float) -> float: ...  # max over ranks (collective)

    def barrier(self) -> None: ...  # wait for every rank (and its device)

    def split_fits(self, weights: list[float]) -> bool: ...  # memory suffices (collective)

    def resplit(self, weights: list[float]) -> None: ...  # move layers; results unchanged


class LoadBalancer:
    """Probe windows, decisions and their measured effect for one solver."""

    def __init__(self, settings: BalanceSettings) -> None:
        self.settings = settings
        self.schedule: BalanceSchedule | None = None
        self.plans: list[BalancePlan] = []
        self._handled = -1
        self._t0 = 0.0
        self._probe_wall = 0.0

    def chunk(self, step: int, n: int) -> int:
        """How many of ``n`` steps to run from ``step`` before the next event."""
        if self.schedule is None:
            self.schedule = BalanceSchedule(self.settings, step)
        nxt = self.schedule.next_event(step)
        return n if nxt is None else max(1, min(n, nxt - step))

    def update(self, step: int, target: Balanceable) -> None:
        """Handle the events due at ``step`` (once; call before and after each chunk)."""
        if self.schedule is None:
            self.schedule = BalanceSchedule(self.settings, step)
        if step == self._handled:
            return
        self._handled = step
        for event in self.schedule.events_at(step):
            getattr(self, "_" + event)(step, target)

    def _probe_start(self, step: int, target: Balanceable) -> None:
        target.set_slab_clock(True)
        target.barrier()  # a rank that re-split sooner must not start its window early
        self._t0 = time.perf_counter()

    def _probe_end(self, step: int, target: Balanceable) -> None:
        self._probe_wall = target.reduce_max(time.perf_counter() - self._t0)
        extent, min_size, concurrent = target.balance_limits()
        plan = plan_balance(extent, target.layer_cells(), target.slab_layers(),
                            target.slab_step_seconds(), 1, step=step,
                            concurrent=concurrent, min_size=min_size,
                            min_gain=self.settings.min_gain)
        if plan.applied and not target.split_fits(plan.weights):
            plan.keep("the new split would not fit in device memory")
        if plan.applied:
            t0 = time.perf_counter()
            target.resplit(plan.weights)
            plan.measured["resplit_seconds"] = target.reduce_max(time.perf_counter() - t0)
        self.plans.append(plan)
        self._probe_start(step, target)  # the next probe_steps steps measure the new split

    def _measure_end(self, step: int, target: Balanceable) -> None:
        wall = target.reduce_max(time.perf_counter() - self._t0)
        target.set_slab_clock(False)
        plan = self.plans[-1]
        cells = self.settings.probe_steps * target.layer_cells() * sum(plan.layers)
        plan.measured.update(mlups_before=cells / self._probe_wall / 1e6,
                             mlups_after=cells / wall / 1e6, gain=self._probe_wall / wall)

    def report(self) -> dict[str, Any] | None:
        """The latest decision plus the history (None before the first probe ends)."""
        if not self.plans:
            return None
        last = self.plans[-1].to_dict()
        last["probe_steps"] = self.settings.probe_steps
        last["rebalances"] = sum(p.applied for p in self.plans)
        last["history"] = [p.to_dict() for p in self.plans[:-1]]
        return last
