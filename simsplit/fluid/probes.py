"""Probes: density, pressure and velocity at named points of a 2D flow, read from the slab that
holds each point's cell (no field is gathered)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.geometry.frame import Frame
from simsplit.numerics.lattice import CS2

#: what a probe records, in order
QUANTITIES = ("density", "pressure", "velocity_x", "velocity_y")


@dataclass(frozen=True)
class Probe:
    name: str
    cell: tuple[int, int]  #: (i, j) of the cell whose centre is nearest the point


def probes_of(case: dict[str, Any]) -> list[Probe]:
    """``output.probes`` as cells of the grid (points in ``domain.units``); a point outside
    the domain or in a body's cell is refused in one line."""
    specs = case.get("output", {}).get("probes") or []
    if not specs:
        return []
    domain = case["domain"]
    if len(domain["shape"]) != 2:
        raise CaseError("output.probes: not yet available in 3D")
    frame = Frame.from_domain(domain)
    nx, ny = (int(n) for n in domain["shape"])
    out, names = [], set()
    for k, spec in enumerate(specs):
        key = f"output.probes[{k}] ({spec['name']})"
        if spec["name"] in names:
            raise CaseError(f"{key}: the name is already used by another probe")
        names.add(spec["name"])
        x, y = frame.point(spec["point"])
        if not (0 <= x <= nx and 0 <= y <= ny):
            raise CaseError(f"{key}: point {spec['point']!r} lies outside the domain")
        out.append(Probe(spec["name"], (min(int(x), nx - 1), min(int(y), ny - 1))))
    return out


def read_probes(solver: Any, probes: list[Probe]) -> np.ndarray:
    """(len(probes), 4) values of QUANTITIES at the probes now, in lattice units (collective:
    every slab reports its own points, every rank gets all)."""
    pieces = {}
    for k, blk in solver.blocks.items():
        rows = []
        for n, p in enumerate(probes):
            i, j = p.cell
            if blk.layer0 <= j < blk.layer0 + blk.layers:
                r = j - blk.layer0
                cell = [float(blk.backend.to_host(a[r:r + 1, i:i + 1])[0, 0])
                        for a in (blk.rho, *blk.u)]
                rows.append([n, cell[0], CS2 * cell[0], cell[1], cell[2]])
        pieces[k] = np.array(rows, dtype=np.float64).reshape(-1, 5)
    got = solver.transport.gather(pieces)
    out = np.full((len(probes), len(QUANTITIES)), np.nan)
    for rows in got.values():
        for row in rows:
            out[int(row[0])] = row[1:]
    return out


def check_probes(probes: list[Probe], solid: np.ndarray | None) -> None:
    """Refuse a probe in a body's cell (it would read a cell that is never updated)."""
    for p in probes:
        if solid is not None and solid[p.cell[1], p.cell[0]]:
            raise CaseError(f"output.probes ({p.name}): cell {list(p.cell)} is inside a body")
