"""Units of body placement: lattice (cells) or physical (the units of ``domain.size``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simsplit.errors import CaseError


@dataclass(frozen=True)
class Frame:
    """How a length in the case file becomes cells: ``cells = value / dx``."""

    dx: float  #: one cell in the case's length unit (1 in lattice units)
    unit: str  #: "lattice" or "physical"

    @classmethod
    def from_domain(cls, domain: dict[str, Any]) -> Frame:
        """``domain.units``: lattice, or physical with the cell size from ``domain.size``
        (the same along every axis, else refused)."""
        unit = domain.get("units", "lattice")
        if unit == "lattice":
            return cls(1.0, unit)
        return cls(cell_size(domain), unit)

    def cells(self, value: float) -> float:
        return float(value) / self.dx

    def point(self, xy: Any) -> tuple[float, float]:
        return self.cells(xy[0]), self.cells(xy[1])

    def show(self, cells: float) -> str:
        """A length in cells, as the case file states it."""
        return f"{cells * self.dx:.6g}" + (" cells" if self.unit == "lattice" else "")


def cell_size(domain: dict[str, Any]) -> float:
    """The physical size of one cell: ``domain.size`` over ``domain.shape``, equal per axis."""
    size, shape = domain.get("size"), domain["shape"]
    if size is None:
        raise CaseError("domain.units: physical needs domain.size (the physical extent "
                        "[Lx, Ly] of the grid)")
    if len(size) != len(shape):
        raise CaseError(f"domain.size: {size!r} is not allowed: expected {len(shape)} "
                        "lengths, one per entry of domain.shape")
    dx = [float(s) / int(n) for s, n in zip(size, shape, strict=True)]
    if max(dx) - min(dx) > 1e-9 * max(dx):
        raise CaseError(f"domain.size: {size!r} over domain.shape {shape!r} gives cells of "
                        f"{' x '.join(f'{d:.6g}' for d in dx)}: cells must be square (choose "
                        "the shape in proportion to the size)")
    return dx[0]
