"""Progress bar for long runs: steps, throughput, residual and ETA (tqdm), or nothing."""

from __future__ import annotations

import sys
import time
from typing import Any


class RunProgress:
    """A tqdm bar over time steps that shows the throughput and the latest residual.

    ``cells``: work items per step (lattice cells, or atoms); ``unit``: what a million of them
    per second are called (``MLUPS``, ``Matom-steps/s``).
    """

    def __init__(self, total: int, start: int, enabled: bool, cells: int,
                 unit: str = "MLUPS") -> None:
        self.enabled, self.cells, self.last, self.unit = enabled, cells, start, unit
        self._bar: Any = None
        self._t = time.perf_counter()
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=start, unit="step", file=sys.stderr,
                             dynamic_ncols=True, smoothing=0.1, mininterval=0.5)

    def update(self, steps_done: int, residual: float | None) -> None:
        if self._bar is None:
            return
        now = time.perf_counter()
        dt = now - self._t
        post = {}
        if self.cells and dt > 0:
            rate = (steps_done - self.last) * self.cells / dt / 1e6
            post[self.unit] = f"{rate:.1f}" if rate >= 1 else f"{rate:.2g}"  # tiny MD, simulator
        if residual is not None:
            post["residual"] = f"{residual:.2e}"
        self._bar.set_postfix(post, refresh=False)
        self._bar.update(steps_done - self.last)
        self.last, self._t = steps_done, now

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
