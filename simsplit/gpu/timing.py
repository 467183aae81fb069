"""Where a run's time goes: compute, pack, exchange, wait, other; NVTX ranges for Nsight;
per-slab update clocks for load balancing (:class:`SlabClock`).

The time loop wraps each phase in :meth:`PhaseTimer.phase`. Host timers are always on (they
cost well under a microsecond); with ``sync`` (``run.timing: true``) the device is synchronised
at each phase end so GPU work is charged to the phase that queued it, at the price of
serialising the overlap. Without it a GPU run's compute time shows up mostly as ``wait``.

With device clocks (``run.timing: device``) each phase instead records a CUDA event pair on the
compute stream of every device and nothing is synchronised: a phase's time is how long that
stream spent on it. The overlap is then measured as it runs: ``wait`` is the time the compute
stream stalled for halos still in flight, i.e. the exchange left on the critical path.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol, Sequence

PHASES = ("compute", "pack", "exchange", "wait", "other")


def _nvtx() -> tuple[Callable[[str], Any], Callable[[], Any]] | None:
    try:
        from cupy.cuda import nvtx
    except Exception:  # no cupy: ranges are a no-op
        return None
    return nvtx.RangePush, nvtx.RangePop


class DeviceClock(Protocol):
    """Timestamps on one device's current stream."""

    def record(self) -> Any:
        """Queue a timestamp after the work queued so far; returns its handle."""

    def elapsed(self, start: Any, end: Any) -> float:
        """Seconds between two recorded timestamps (waits for ``end``)."""


#: pending event pairs folded into the totals beyond this many (bounds memory, rarely waits)
_MAX_PENDING = 4096


class TimingBreakdown(dict):
    """Seconds per phase (max over ranks) with the run's wall time; prints as one line."""

    def __str__(self) -> str:
        wall = self.get("wall", 0.0) or 0.0
        parts = []
        for name in PHASES:
            sec = self.get(name, 0.0)
            share = f" ({100 * sec / wall:.0f}%)" if wall > 0 else ""
            parts.append(f"{name} {sec:.3f} s{share}")
        if self.get("clock") == "device":
            note = "device events on the compute stream, unsynchronised"
        elif self.get("synchronised"):
            note = "device synchronised per phase"
        else:
            note = "host timers"
        return ", ".join(parts) + f" [{note}]"

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


class PhaseTimer:
    """Accumulates seconds per phase; ``sync`` is called at phase ends when enabled."""

    def __init__(self, sync: Callable[[], None] | None = None, nvtx: bool = False,
                 clocks: Sequence[DeviceClock] = ()) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._sync = sync
        self._ranges = _nvtx() if nvtx else None
        self._clocks = list(clocks)
        self._device = [dict.fromkeys(PHASES, 0.0) for _ in self._clocks]
        self._pending: list[tuple[str, int, Any, Any]] = []

    @property
    def synchronised(self) -> bool:
        return self._sync is not None

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        ranges = self._ranges
        if ranges is not None:
            ranges[0](name)
        marks = [c.record() for c in self._clocks]
        t0 = time.perf_counter()
        try:
            yield
            if self._sync is not None:
                self._sync()
        finally:
            self.seconds[name] += time.perf_counter() - t0
            for k, (clock, start) in enumerate(zip(self._clocks, marks, strict=True)):
                self._pending.append((name, k, start, clock.record()))
            if len(self._pending) > _MAX_PENDING:
                self._fold()
            if ranges is not None:
                ranges[1]()

    def _fold(self) -> None:
        for name, k, start, end in self._pending:
            self._device[k][name] += self._clocks[k].elapsed(start, end)
        self._pending.clear()

    def device_seconds(self) -> dict[str, float]:
        """Seconds per phase on the compute streams (slowest device each); waits for them."""
        self._fold()
        return {name: max((d[name] for d in self._device), default=0.0) for name in PHASES}

    def reset(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._pending.clear()
        self._device = [dict.fromkeys(PHASES, 0.0) for _ in self._clocks]

    def breakdown(self, wall: float, reduce_max: Callable[[float], float] = float,
                  ranks: int = 1) -> TimingBreakdown:
        """Phase seconds (slowest rank each, through ``reduce_max``), ``other`` = the rest.

        With device clocks the phases are device times and ``host`` keeps the host timers."""
        out = TimingBreakdown()
        phases = self.seconds
        if self._clocks:
            phases = self.device_seconds()
            out["clock"] = "device"
            out["host"] = {n: float(reduce_max(self.seconds[n])) for n in PHASES[:-1]}
        for name in PHASES[:-1]:
            out[name] = float(reduce_max(phases[name]))
        wall = float(reduce_max(wall))
        out["other"] = max(0.0, wall - sum(out[n] for n in PHASES[:-1]))
        out["wall"] = wall
        out["ranks"] = ranks
        out["synchronised"] = self.synchronised
        return out


def busy_wait_until(deadline: float) -> None:
    """Spin until ``time.perf_counter()`` reaches ``deadline``.

    A throttled slab stays busy, like one on a slower device: a sleep would overshoot short
    waits and, on a shared machine, earn the process the scheduler's sleeper credit, so the
    throttled rank would take CPU from the others and look faster than it is.
    """
    while time.perf_counter() < deadline:
        pass


class SlabClock:
    """Seconds each slab spends in its own update (compute only, not waiting on neighbours).

    Off until :meth:`start`; a load-balance probe turns it on. ``throttle = (slab, factor)`` is
    a testing aid (``run.debug_throttle``): after each update that slab waits ``factor - 1``
    times the update's own duration, as if it ran on a device ``factor`` times slower; the
    wait counts as that slab's update time. Device work is synchronised before a timed update
    ends, so a GPU slab is charged its kernel time.

    The solver calls :meth:`lap` after each step; :meth:`step_seconds` is the median over the
    steps, so a step that another process or a pause disturbed does not skew the estimate.
    """

    def __init__(self, throttle: tuple[int, float] | None = None) -> None:
        self.seconds: dict[int, float] | None = None  #: this step's seconds so far, per slab
        self.laps: dict[int, list[float]] = {}
        self.throttle = throttle

    @property
    def running(self) -> bool:
        return self.seconds is not None

    def start(self) -> None:
        self.seconds, self.laps = {}, {}

    def stop(self) -> None:
        self.seconds = None

    def lap(self) -> None:
        """End a step: file each slab's seconds of this step."""
        if self.seconds is not None:
            for slab, sec in self.seconds.items():
                self.laps.setdefault(slab, []).append(sec)
            self.seconds = {}

    def step_seconds(self, slab: int) -> float:
        """Median seconds per step of ``slab`` since :meth:`start` (0.0 if none was timed)."""
        laps = sorted(self.laps.get(slab, []))
        if not laps:
            return 0.0
        mid = len(laps) // 2
        return laps[mid] if len(laps) % 2 else 0.5 * (laps[mid - 1] + laps[mid])

    def times(self, slab: int) -> bool:
        """Whether updates of ``slab`` go through :meth:`update` (timed or throttled)."""
        return self.seconds is not None or (self.throttle is not None
                                            and self.throttle[0] == slab)

    @contextmanager
    def update(self, slab: int, sync: Callable[[], None] | None = None) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        if sync is not None:
            sync()
        if self.throttle is not None and self.throttle[0] == slab:
            busy_wait_until(t0 + self.throttle[1] * (time.perf_counter() - t0))
        if self.seconds is not None:
            self.seconds[slab] = self.seconds.get(slab, 0.0) + time.perf_counter() - t0
