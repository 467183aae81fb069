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

    def area(self, value: float) -> float:
        """An area in the case's unit, in cells^2."""
        return float(value) / (self.dx * self.dx)

    def point(self, xy: Any) -> tuple[float, ...]:
        """A point [x, y] or [x, y, z] in cells."""
        return tuple(self.cells(v) for v in xy)

    def place(self, value: Any, dim: int, key: str) -> tuple[float, ...]:
        """A point of a ``dim``-D grid in cells; CaseError (``key``: the entry) unless it has
        ``dim`` coordinates."""
        if not isinstance(value, (list, tuple)) or len(value) != dim:
            names = "[x, y]" if dim == 2 else "[x, y, z]"
            raise CaseError(f"{key}: {value!r} is not allowed: expected {names} on a {dim}D "
                            "grid")
        return self.point(value)

    def show(self, cells: float) -> str:
        """A length in cells, as the case file states it."""
        return f"{cells * self.dx:.6g}" + (" cells" if self.unit == "lattice" else "")


def cell_size(domain: dict[str, Any]) -> float:
    """The physical size of one cell: ``domain.size`` over ``domain.shape``, equal per axis."""
    size, shape = domain.get("size"), domain["shape"]
    if size is None:
        raise CaseError("domain.units: physical needs domain.size (the physical extent "
                        "[Lx, Ly] or [Lx, Ly, Lz] of the grid)")
    if len(size) != len(shape):
        raise CaseError(f"domain.size: {size!r} is not allowed: expected {len(shape)} "
                        "lengths, one per entry of domain.shape")
    dx = [float(s) / int(n) for s, n in zip(size, shape, strict=True)]
    if max(dx) - min(dx) > 1e-9 * max(dx):
        raise CaseError(f"domain.size: {size!r} over domain.shape {shape!r} gives cells of "
                        f"{' x '.join(f'{d:.6g}' for d in dx)}: cells must be square (choose "
                        "the shape in proportion to the size)")
    return dx[0]
