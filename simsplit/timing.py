"""Where a run's time goes: compute, pack, exchange, wait, other; NVTX ranges for Nsight.

The time loop wraps each phase in :meth:`PhaseTimer.phase`. Host timers are always on (they
cost well under a microsecond); with ``sync`` (``run.timing: true``) the device is synchronised
at each phase end so GPU work is charged to the phase that queued it, at the price of
serialising the overlap. Without it a GPU run's compute time shows up mostly as ``wait``.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

PHASES = ("compute", "pack", "exchange", "wait", "other")


def _nvtx() -> tuple[Callable[[str], Any], Callable[[], Any]] | None:
    try:
        from cupy.cuda import nvtx
    except Exception:  # no cupy: ranges are a no-op
        return None
    return nvtx.RangePush, nvtx.RangePop


class TimingBreakdown(dict):
    """Seconds per phase (max over ranks) with the run's wall time; prints as one line."""

    def __str__(self) -> str:
        wall = self.get("wall", 0.0) or 0.0
        parts = []
        for name in PHASES:
            sec = self.get(name, 0.0)
            share = f" ({100 * sec / wall:.0f}%)" if wall > 0 else ""
            parts.append(f"{name} {sec:.3f} s{share}")
        note = "device synchronised per phase" if self.get("synchronised") else "host timers"
        return ", ".join(parts) + f" [{note}]"

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


class PhaseTimer:
    """Accumulates seconds per phase; ``sync`` is called at phase ends when enabled."""

    def __init__(self, sync: Callable[[], None] | None = None, nvtx: bool = False) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._sync = sync
        self._ranges = _nvtx() if nvtx else None

    @property
    def synchronised(self) -> bool:
        return self._sync is not None

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        ranges = self._ranges
        if ranges is not None:
            ranges[0](name)
        t0 = time.perf_counter()
        try:
            yield
            if self._sync is not None:
                self._sync()
        finally:
            self.seconds[name] += time.perf_counter() - t0
            if ranges is not None:
                ranges[1]()

    def reset(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)

    def breakdown(self, wall: float, reduce_max: Callable[[float], float] = float,
                  ranks: int = 1) -> TimingBreakdown:
        """Phase seconds (slowest rank each, through ``reduce_max``), ``other`` = the rest."""
        out = TimingBreakdown()
        for name in PHASES[:-1]:
            out[name] = float(reduce_max(self.seconds[name]))
        wall = float(reduce_max(wall))
        out["other"] = max(0.0, wall - sum(out[n] for n in PHASES[:-1]))
        out["wall"] = wall
        out["ranks"] = ranks
        out["synchronised"] = self.synchronised
        return out
