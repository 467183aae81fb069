"""Periodic forces (vortex shedding): the lift signal's frequency as a Strouhal number, and
the drag and lift coefficients' maxima and means over its last whole periods."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: a lift coefficient swinging less than this (peak to peak) is taken as steady
MIN_SWING = 1e-3
#: whole periods the signal's last half must hold to be called periodic
MIN_PERIODS = 2


@dataclass(frozen=True)
class Shedding:
    strouhal: float  #: f L / U, f the lift's frequency per step
    period_steps: float
    drag_max: float
    drag_mean: float
    lift_max: float
    lift_mean: float
    periods: int  #: whole periods the statistics cover


def upward_crossings(steps: np.ndarray, values: np.ndarray, level: float) -> np.ndarray:
    """Steps (linearly interpolated) where ``values`` rises through ``level``."""
    v = values - level
    k = np.flatnonzero((v[:-1] < 0) & (v[1:] >= 0))
    return steps[k] - v[k] * (steps[k + 1] - steps[k]) / (v[k + 1] - v[k])


def analyse(steps: np.ndarray, drag: np.ndarray, lift: np.ndarray, length: float,
            velocity: float) -> Shedding | None:
    """The shedding of a body from its coefficient series (every few steps), judged on the
    last half of the series; None where the lift is steady (swings less than MIN_SWING) or
    holds fewer than MIN_PERIODS whole periods there."""
    steps, drag, lift = (np.asarray(a, dtype=np.float64) for a in (steps, drag, lift))
    if len(steps) < 2:
        return None
    half = steps >= steps[-1] - (steps[-1] - steps[0]) / 2
    s, cl = steps[half], lift[half]
    if len(s) < 8 or not np.all(np.isfinite(cl)) or np.ptp(cl) < MIN_SWING:
        return None
    ups = upward_crossings(s, cl, 0.5 * (cl.max() + cl.min()))
    if len(ups) < MIN_PERIODS + 1:
        return None
    period = float(np.mean(np.diff(ups)))
    window = (steps >= ups[0]) & (steps <= ups[-1])  # whole periods only
    return Shedding(length / (period * velocity), period, float(drag[window].max()),
                    float(drag[window].mean()), float(lift[window].max()),
                    float(lift[window].mean()), len(ups) - 1)
