"""Load balance arithmetic: slab sizes from measured per-slab speeds, and when to measure.

Pure functions and small value types, no clocks, devices or transports. A slab's *speed* is
the cells it updates per second of its own update (compute only, not the time it waits for its
neighbours). Layers in proportion to speed make every slab take the same time per step, so
slabs that run at the same time (one per GPU or per MPI rank) finish together.

Step time of a split, given layers ``n_k`` and speeds ``v_k`` in layers per second:
``max_k n_k / v_k`` when slabs run concurrently, ``sum_k n_k / v_k`` when they run one after
another (several slabs sharing one device or CPU in one process).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from simsplit.decomp.slabs import split_extent


class BalanceError(ValueError):
    """Balance settings or measurements that cannot be used (message names the case key)."""


@dataclass(frozen=True)
class BalanceSettings:
    """``decomposition.balance`` of a case."""

    probe_steps: int  #: steps timed per slab before choosing a split (0: no balancing)
    skip_steps: int = 2  #: steps run first and not timed (JIT compilation, caches, clocks)
    every: int = 0  #: steps between the starts of later probes (0: balance once)
    min_gain: float = 0.02  #: re-split only if the predicted step time drops by this fraction

    @classmethod
    def from_case(cls, section: Mapping[str, Any] | None) -> BalanceSettings | None:
        """The settings, or None when the section is absent or ``probe_steps`` is 0."""
        if not section or not int(section.get("probe_steps", 0)):
            return None
        known = {k: section[k] for k in ("probe_steps", "skip_steps", "every", "min_gain")
                 if k in section}
        settings = cls(**known)
        if settings.every and settings.every < 2 * settings.probe_steps:
            raise BalanceError(
                f"decomposition.balance.every: {settings.every} is not allowed: expected 0 or "
                f"at least 2 x probe_steps ({2 * settings.probe_steps}): each probe is followed "
                "by as many steps that measure the new split")
        return settings


def slab_speeds(cells: Sequence[int], seconds: Sequence[float], steps: int) -> list[float]:
    """Cells per second of each slab that updated ``cells[k]`` cells per step for ``steps``
    steps in ``seconds[k]`` seconds of its own update."""
    if len(cells) != len(seconds):
        raise BalanceError(f"{len(seconds)} timings for {len(cells)} slabs")
    bad = [k for k, t in enumerate(seconds) if not (t > 0)]
    if bad or steps < 1:
        raise BalanceError(f"slab {bad[0] if bad else 0}: no update time was measured; "
                           "cannot balance")
    return [steps * c / t for c, t in zip(cells, seconds, strict=True)]


def balanced_weights(speeds: Sequence[float]) -> list[float]:
    """Slab weights proportional to ``speeds``, scaled to mean 1 (equal speeds: all 1.0)."""
    if not speeds or any(not (v > 0) for v in speeds):
        raise BalanceError(f"speeds must be positive, got {list(speeds)}")
    mean = sum(speeds) / len(speeds)
    return [v / mean for v in speeds]


def step_time(layers: Sequence[int], layer_speeds: Sequence[float], concurrent: bool) -> float:
    """Predicted seconds per step of a split (``layer_speeds`` in layers per second)."""
    times = [n / v for n, v in zip(layers, layer_speeds, strict=True)]
    return max(times) if concurrent else sum(times)


@dataclass
class BalancePlan:
    """One balancing decision: what was measured, what split follows, what it should gain."""

    step: int  #: step count at which the split was chosen
    speeds: list[float]  #: measured cells per second of each slab's own update
    weights: list[float]  #: weights proportional to ``speeds`` (mean 1)
    layers_before: list[int]
    layers: list[int]  #: layers per slab from now on (``layers_before`` if not applied)
    predicted_gain: float  #: step time before / after, from the measured speeds
    applied: bool
    concurrent: bool  #: whether the step time model is max (True) or sum (False) over slabs
    #: MLUPS before/after, their ratio ``gain``, seconds the re-split took
    measured: dict[str, float] = field(default_factory=dict)
    note: str = ""  #: why a worthwhile split was not applied

    @property
    def ideal_cells_per_second(self) -> float:
        """Combined throughput if no slab ever waited: the sum of the slab speeds when slabs
        run concurrently, the fastest slab alone otherwise (it could take every cell)."""
        return sum(self.speeds) if self.concurrent else max(self.speeds)

    def keep(self, note: str) -> None:
        """Do not apply this plan after all (``note`` says why)."""
        self.applied, self.layers, self.note = False, list(self.layers_before), note

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["speeds_mlups"] = [v / 1e6 for v in out.pop("speeds")]
        out["ideal_mlups"] = self.ideal_cells_per_second / 1e6
        return out


def plan_balance(extent: int, layer_cells: int, layers_before: Sequence[int],
                 seconds: Sequence[float], steps: int, *, step: int, concurrent: bool,
                 min_size: int = 1, min_gain: float = 0.0) -> BalancePlan:
    """Choose layers per slab from each slab's measured update ``seconds`` over ``steps``.

    The split is applied only if it differs and its predicted step time is at least
    ``min_gain`` (a fraction) below the current one.
    """
    before = list(layers_before)
    if sum(before) != extent:
        raise BalanceError(f"slab layers {before} do not add up to {extent}")
    speeds = slab_speeds([n * layer_cells for n in before], seconds, steps)
    weights = balanced_weights(speeds)
    after = [b - a for a, b in split_extent(extent, len(before), weights, min_size)]
    per_layer = [v / layer_cells for v in speeds]
    gain = step_time(before, per_layer, concurrent) / step_time(after, per_layer, concurrent)
    applied = after != before and gain >= 1.0 + min_gain
    return BalancePlan(step, speeds, weights, before, after if applied else before, gain,
                       applied, concurrent)


@dataclass(frozen=True)
class BalanceSchedule:
    """When to probe: window *j* times steps ``[p_j, p_j + P)`` with
    ``p_j = start + skip_steps + j * every`` (only *j* = 0 when ``every`` is 0) and the next
    ``P`` steps measure the split chosen at ``p_j + P``."""

    settings: BalanceSettings
    start: int

    def _probe_starts_near(self, step: int) -> list[int]:
        s = self.settings
        first = self.start + s.skip_steps
        if not s.every:
            return [first]
        j = max(0, (step - first) // s.every)
        return [first + (j + i) * s.every for i in (-1, 0, 1) if j + i >= 0]

    def events_at(self, step: int) -> list[str]:
        """Events due at ``step``, in the order to handle them:
        ``measure_end``, ``probe_end``, ``probe_start``."""
        p = self.settings.probe_steps
        starts = self._probe_starts_near(step)
        events = []
        if any(step == a + 2 * p for a in starts):
            events.append("measure_end")
        if any(step == a + p for a in starts):
            events.append("probe_end")
        if step in starts:
            events.append("probe_start")
        return events

    def next_event(self, step: int) -> int | None:
        """The first step after ``step`` with an event, or None when there is none."""
        p = self.settings.probe_steps
        later = [a + d for a in self._probe_starts_near(step) for d in (0, p, 2 * p)
                 if a + d > step]
        if self.settings.every:
            later.append(self._probe_starts_near(step)[-1] + self.settings.every)
        return min(later) if later else None
