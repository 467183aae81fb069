"""Split one axis of a grid into contiguous slabs, optionally weighted, and wire their faces.

The decomposition is pure bookkeeping: it knows extents and neighbours, never fields,
devices or transports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

LOW, HIGH = 0, 1  #: face indices along the split axis
#: smallest fluid slab: the overlap scheme updates the two face rows apart from the interior
MIN_SLAB_ROWS = 2


class DecompositionError(ValueError):
    """The grid cannot be split as asked."""


def split_extent(
    n: int, parts: int, weights: Sequence[float] | None = None, min_size: int = 1
) -> list[tuple[int, int]]:
    """Split ``range(n)`` into ``parts`` contiguous ``(start, stop)`` pieces.

    Sizes follow ``weights`` (relative, positive) as closely as integers allow, using
    largest-remainder rounding so the result is deterministic and sums exactly to ``n``.
    """
    if parts < 1:
        raise DecompositionError(f"need at least one slab, got {parts}")
    if weights is None:
        weights = [1.0] * parts
    if len(weights) != parts:
        raise DecompositionError(f"{len(weights)} weights given for {parts} slabs")
    if any(not (w > 0) for w in weights):
        raise DecompositionError(f"weights must be positive, got {list(weights)}")
    if n < parts * min_size:
        raise DecompositionError(
            f"{n} cells cannot be split into {parts} slabs of at least {min_size} cells each"
        )
    total = float(sum(weights))
    ideal = [n * w / total for w in weights]
    sizes = [int(x) for x in ideal]
    order = sorted(range(parts), key=lambda k: (-(ideal[k] - sizes[k]), k))
    for k in order[: n - sum(sizes)]:
        sizes[k] += 1
    for k in range(parts):  # lift slabs below the minimum at the expense of the largest
        while sizes[k] < min_size:
            donor = max(range(parts), key=lambda m: (sizes[m], -m))
            sizes[donor] -= 1
            sizes[k] += 1
    bounds, start = [], 0
    for s in sizes:
        bounds.append((start, start + s))
        start += s
    return bounds


@dataclass(frozen=True)
class Slab:
    """One slab: global rows ``[start, stop)`` and the slabs across its low and high faces."""

    index: int
    start: int
    stop: int
    neighbours: tuple[int | None, int | None]  #: slab index across (LOW, HIGH), None at a wall

    @property
    def size(self) -> int:
        return self.stop - self.start


class SlabDecomposition:
    """N slabs along the slowest axis of a grid; periodic wraps the last slab to the first."""

    def __init__(
        self,
        extent: int,
        parts: int,
        weights: Sequence[float] | None = None,
        periodic: bool = False,
        min_size: int = 1,
    ) -> None:
        self.extent = extent
        self.periodic = periodic
        bounds = split_extent(extent, parts, weights, min_size)
        self.slabs: list[Slab] = []
        for k, (a, b) in enumerate(bounds):
            low = k - 1 if k > 0 else (parts - 1 if periodic else None)
            high = k + 1 if k < parts - 1 else (0 if periodic else None)
            self.slabs.append(Slab(k, a, b, (low, high)))

    def __len__(self) -> int:
        return len(self.slabs)

    def links(self) -> list[tuple[int, int, int, int]]:
        """Every halo transfer as ``(src_slab, src_face, dst_slab, dst_face)``.

        The layer next to ``src_face`` of ``src_slab`` fills the ghost layer at ``dst_face``
        of ``dst_slab``. Order is fixed, so every transport processes links identically.
        """
        out = []
        for s in self.slabs:
            for face in (LOW, HIGH):
                nb = s.neighbours[face]
                if nb is not None:
                    out.append((s.index, face, nb, 1 - face))
        return out

    def sizes(self) -> list[int]:
        return [s.size for s in self.slabs]
