"""Probes: density, pressure and velocity at named points of a 2D or 3D flow, read from the slab
that holds each point's cell (no field is gathered)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.frame import Frame
from simsplit.numerics.lattice import CS2


def quantities(dim: int) -> tuple[str, ...]:
    """What a probe records, in order: density, pressure and the ``dim`` velocity components."""
    return ("density", "pressure", *(f"velocity_{ax}" for ax in "xyz"[:dim]))


@dataclass(frozen=True)
class Probe:
    name: str
    cell: tuple[int, ...]  #: (i, j) or (i, j, k) of the cell whose centre is nearest the point


def probes_of(case: dict[str, Any]) -> list[Probe]:
    """``output.probes`` as cells of the grid (points [x, y] or [x, y, z] in
    ``domain.units``); a point outside the domain or with the wrong number of coordinates is
    refused in one line."""
    specs = case.get("output", {}).get("probes") or []
    if not specs:
        return []
    domain = case["domain"]
    shape = tuple(int(n) for n in domain["shape"])
    frame = Frame.from_domain(domain)
    out, names = [], set()
    for k, spec in enumerate(specs):
        key = f"output.probes[{k}] ({spec['name']})"
        if spec["name"] in names:
            raise CaseError(f"{key}: the name is already used by another probe")
        names.add(spec["name"])
        point = frame.place(spec["point"], len(shape), f"{key}.point")
        if not all(0 <= x <= n for x, n in zip(point, shape, strict=True)):
            raise CaseError(f"{key}: point {spec['point']!r} lies outside the domain")
        out.append(Probe(spec["name"], tuple(min(int(x), n - 1)
                                             for x, n in zip(point, shape, strict=True))))
    return out


def read_probes(solver: Any, probes: list[Probe]) -> np.ndarray:
    """``(len(probes), 2 + dim)`` values of :func:`quantities` at the probes now, in lattice
    units (collective: every slab reports its own points, every rank gets all)."""
    dim = solver.setup.dim
    pieces = {}
    for k, blk in solver.blocks.items():
        rows = []
        for n, p in enumerate(probes):
            layer = p.cell[-1]  # slabs are cut along the last axis
            if blk.layer0 <= layer < blk.layer0 + blk.layers:
                at = (slice(layer - blk.layer0, layer - blk.layer0 + 1),
                      *(slice(c, c + 1) for c in reversed(p.cell[:-1])))
                cell = [float(blk.backend.to_host(a[at]).ravel()[0]) for a in (blk.rho, *blk.u)]
                rows.append([n, cell[0], CS2 * cell[0], *cell[1:]])
        pieces[k] = np.array(rows, dtype=np.float64).reshape(-1, 3 + dim)
    got = solver.transport.gather(pieces)
    out = np.full((len(probes), 2 + dim), np.nan)
    for rows in got.values():
        for row in rows:
            out[int(row[0])] = row[1:]
    return out


def check_probes(probes: list[Probe], solid: np.ndarray | None) -> None:
    """Refuse a probe in a body's cell (it would read a cell that is never updated)."""
    for p in probes:
        if solid is not None and solid[p.cell[::-1]]:
            raise CaseError(f"output.probes ({p.name}): cell {list(p.cell)} is inside a body")
