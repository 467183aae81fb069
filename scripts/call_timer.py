"""Host time per method, with less distortion than cProfile: wraps the methods of chosen
classes in perf_counter timers (about a microsecond a call) and reports, per method, its calls,
its inclusive time and its own time (less the wrapped methods it called).

    from call_timer import CallTimer
    timer = CallTimer.wrap([RankSlab, CupyMDKernels])
    ... run ...
    print(timer.table(per=("rebuild", rebuilds)))
"""

from __future__ import annotations

import functools
import inspect
import time
from typing import Any, Callable


class CallTimer:
    """Inclusive and own host seconds of each wrapped method."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.inclusive: dict[str, float] = {}
        self.own: dict[str, float] = {}
        self._stack: list[float] = []  # time spent in wrapped callees, per open frame

    @classmethod
    def wrap(cls, classes: list[type], module_prefix: str = "simsplit") -> CallTimer:
        """Wrap every plain method defined in ``classes`` and their bases from modules under
        ``module_prefix`` (each function once, however many classes inherit it)."""
        timer = cls()
        seen: set[int] = set()
        for c in classes:
            for klass in c.__mro__:
                if not klass.__module__.startswith(module_prefix):
                    continue
                for name, fn in list(vars(klass).items()):
                    if not inspect.isfunction(fn) or name.startswith("__") or id(fn) in seen:
                        continue
                    seen.add(id(fn))
                    setattr(klass, name, timer._timed(f"{klass.__name__}.{name}", fn))
        return timer

    def _timed(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append(0.0)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                inner = self._stack.pop()
                if self._stack:
                    self._stack[-1] += spent
                self.calls[label] = self.calls.get(label, 0) + 1
                self.inclusive[label] = self.inclusive.get(label, 0.0) + spent
                self.own[label] = self.own.get(label, 0.0) + spent - inner
        return timed

    def table(self, per: tuple[str, int], top: int = 120) -> str:
        """The methods by own time: calls, inclusive and own ms per ``per[0]`` (of which there
        were ``per[1]``) and own microseconds a call."""
        what, count = per
        count = max(count, 1)
        rows = sorted(self.own, key=self.own.get, reverse=True)[:top]  # type: ignore[arg-type]
        head = (f"{'method':<48} {'calls/' + what:>14} {'incl ms/' + what:>16} "
                f"{'own ms/' + what:>15} {'own us/call':>12}")
        lines = [head, "-" * len(head)]
        for label in rows:
            n = self.calls[label]
            lines.append(f"{label:<48} {n / count:>14.2f} "
                         f"{1e3 * self.inclusive[label] / count:>16.4f} "
                         f"{1e3 * self.own[label] / count:>15.4f} "
                         f"{1e6 * self.own[label] / n:>12.2f}")
        return "\n".join(lines)
