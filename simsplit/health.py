"""Run health: the error a diverging run stops with, whatever its physics."""

from __future__ import annotations


class DivergenceError(RuntimeError):
    """The run produced non-finite or unphysical values at ``step`` in subdomain ``slab``."""

    def __init__(self, step: int, slab: int, detail: str) -> None:
        super().__init__(f"run diverged at step {step} in subdomain {slab}: {detail}")
        self.step, self.slab, self.detail = step, slab, detail
