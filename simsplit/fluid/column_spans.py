"""Column spans of a slab with and without open rules: the GPU kernel sets launch the kernel
with the open rules (inlets, outlets, free-slip walls, interpolated links) only on the spans
that need it, and a box kernel on the others (:meth:`SlabBlock.stream_collide`)."""

from __future__ import annotations

import numpy as np

from simsplit.numerics import flags as fl
from simsplit.numerics.lattice import Lattice

#: column granule of the spans (a warp: 128-byte float32 rows)
SPAN_COLUMNS = 32


def column_spans(flags: np.ndarray, lattice: Lattice) -> list[tuple[int, int, bool]]:
    """1-based interior column spans ``(i0, i1, open)`` covering a slab's ``flags`` (ghost
    cells all round): ``open`` where some cell of the columns (on any row and plane) takes an
    open rule (curved itself, or next to an inlet, outlet or free-slip cell), widened to whole
    spans of SPAN_COLUMNS so that launches stay aligned."""
    n = flags.shape[-1] - 2
    own = flags[(slice(1, -1),) * flags.ndim]
    need = (own & fl.CURVED) != 0
    near = (own & fl.NEAR_WALL) != 0
    for c in lattice.c:  # pull sources x - c (ghosts as painted: none wraps)
        src = flags[tuple(slice(1 - d, s - 1 - d)
                          for d, s in zip(c[::-1].tolist(), flags.shape, strict=True))]
        need |= near & ((src & (fl.INLET | fl.OUTLET | fl.SLIP)) != 0)
    chunk = need.any(axis=tuple(range(flags.ndim - 1)))
    chunk = np.pad(chunk, (0, -n % SPAN_COLUMNS)).reshape(-1, SPAN_COLUMNS).any(axis=1)
    spans: list[tuple[int, int, bool]] = []
    for k, is_open in enumerate(chunk.tolist()):
        i0, i1 = 1 + k * SPAN_COLUMNS, min(1 + (k + 1) * SPAN_COLUMNS, n + 1)
        if spans and spans[-1][2] == is_open:
            spans[-1] = (spans[-1][0], i1, is_open)
        else:
            spans.append((i0, i1, is_open))
    return spans
