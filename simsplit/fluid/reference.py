"""Lid-driven cavity reference data and comparison with a simulation: the square (Ghia, Ghia &
Shin 1982) and the cube (Albensoeder & Kuhlmann 2005).

Velocities are in units of the lid speed. In 2D the lid is the wall at y = 1 moving in +x, and a
velocity field has shape ``(ny, nx, 2)`` with ``[j, i]`` the cell centred at
``((i + 0.5) / nx, (j + 0.5) / ny)``. In 3D the lid is the wall at z = 1 moving in +x, a field
has shape ``(nz, ny, nx, 3)``, and both published centrelines lie in the mid-plane y = 0.5.
"""

from __future__ import annotations

import csv
import functools
import io
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from simsplit.numerics.profiles import compare_profile, compare_profile_v, midplane

if TYPE_CHECKING:
    from simsplit.fluid.setup import FluidSetup

_GHIA_CSV = "ghia1982_u_centreline.csv"
GHIA_CITATION = (
    "Ghia, Ghia & Shin (1982), J. Comput. Phys. 48:387-411, Table I (u along x = 0.5, 129x129 grid)"
)


@functools.cache
def _ghia_table() -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Parse the packaged CSV once: {reynolds: (y ascending, u)}."""
    text = (resources.files("simsplit.fluid") / "data" / _GHIA_CSV).read_text("utf-8")
    rows = [line for line in io.StringIO(text) if line.strip() and not line.startswith("#")]
    reader = csv.reader(rows)
    header = [name.strip() for name in next(reader)]
    data = np.array([[float(v) for v in row] for row in reader], dtype=np.float64)
    order = np.argsort(data[:, 0])
    y = data[order, 0]
    table = {}
    for col, name in enumerate(header[1:], start=1):
        if not name.startswith("Re"):
            raise ValueError(f"unexpected column {name!r} in {_GHIA_CSV}")
        table[int(name[2:])] = (y, data[order, col])
    return table


def available_reynolds() -> list[int]:
    """Reynolds numbers for which the packaged Ghia et al. table has a u-centreline."""
    return sorted(_ghia_table())


def ghia_u_centreline(reynolds: float) -> dict:
    """Ghia et al. (1982) u-velocity on the vertical centreline x = 0.5.

    Returns ``{"y", "u"}`` (17 points, y ascending, walls included: u(0) = 0, u(1) = 1) plus
    ``"reynolds"`` and ``"label"`` for plot legends. Raises ValueError for a Reynolds number
    not in the table.
    """
    table = _ghia_table()
    re_int = int(reynolds) if float(reynolds).is_integer() else None
    if re_int not in table:
        raise ValueError(
            f"no Ghia et al. (1982) data for Re = {reynolds}; available: {available_reynolds()}"
        )
    y, u = table[re_int]
    return {
        "y": y.copy(),
        "u": u.copy(),
        "reynolds": re_int,
        "label": "Ghia et al. (1982)",
    }


def compare_to_ghia(velocity: np.ndarray, reynolds: float) -> dict:
    """:func:`compare_profile` against Ghia et al. (1982) at their 17 y-points (plus ``reynolds``).

    Raises ValueError for a Reynolds number without data (see :func:`available_reynolds`).
    """
    ref = ghia_u_centreline(reynolds)
    result = compare_profile(velocity, ref["y"], ref["u"])
    result["reynolds"] = ref["reynolds"]
    return result


_CUBE_CSV = "albensoeder_kuhlmann2005_cube_re1000.csv"
CUBE_CITATION = (
    "Albensoeder & Kuhlmann (2005), J. Comput. Phys. 206:536-558, Tables 5 and 6 (cube, "
    "Re = 1000)"
)
#: Reynolds numbers of the packaged cube table
CUBE_REYNOLDS = (1000,)


@functools.cache
def _cube_tables() -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Parse the packaged CSV once: {table number: (position, velocity)} in the paper's frame."""
    text = (resources.files("simsplit.fluid") / "data" / _CUBE_CSV).read_text("utf-8")
    rows = [line for line in io.StringIO(text) if line.strip() and not line.startswith("#")]
    reader = csv.reader(rows)
    if [name.strip() for name in next(reader)] != ["table", "position", "velocity"]:
        raise ValueError(f"unexpected header in {_CUBE_CSV}")
    data = np.array([[float(v) for v in row] for row in reader], dtype=np.float64)
    return {int(t): (data[data[:, 0] == t, 1], data[data[:, 0] == t, 2]) for t in (5, 6)}


def cube_centrelines(reynolds: float) -> dict:
    """Albensoeder & Kuhlmann (2005) centrelines of the cubic cavity, in simsplit's frame.

    Their cube is [-1/2, 1/2]^3 with the lid at x = -1/2 moving in +y; simsplit's is [0, 1]^3
    with the lid at z = 1 moving in +x. Returned in the terms of the mid-plane y = 0.5 as the
    cavity plots use it (height first, lid direction second):

    - ``"y"``, ``"u"``: u_x along the vertical centreline x = y = 0.5, at heights z ascending
      (their Table 5: z = 1/2 - x, u_x = their v); z = 1 is the lid (u_x = 1).
    - ``"x"``, ``"v"``: u_z along the horizontal centreline y = z = 0.5 (their Table 6:
      x = their y + 1/2, u_z = minus their u, which points away from the lid).

    Plus ``"reynolds"``, ``"label"`` and ``"citation"``. Raises ValueError for a Reynolds number
    without data (:data:`CUBE_REYNOLDS`).
    """
    re_int = int(reynolds) if float(reynolds).is_integer() else None
    if re_int not in CUBE_REYNOLDS:
        raise ValueError(f"no Albensoeder & Kuhlmann (2005) cube data for Re = {reynolds}; "
                         f"available: {list(CUBE_REYNOLDS)}")
    tables = _cube_tables()
    x_ak, v_ak = tables[5]
    z = 0.5 - x_ak
    order = np.argsort(z)
    y_ak, u_ak = tables[6]
    return {"y": z[order], "u": v_ak[order].copy(), "x": y_ak + 0.5, "v": 0.0 - u_ak,
            "reynolds": re_int, "label": "Albensoeder & Kuhlmann (2005)",
            "citation": CUBE_CITATION}


def compare_to_cube(velocity: np.ndarray, reynolds: float) -> dict:
    """A 3D cavity field ``(nz, ny, nx, 3)`` against :func:`cube_centrelines` on its mid-plane:
    ``{"vertical": compare_profile(...), "horizontal": compare_profile_v(...), "reynolds"}``.

    Raises ValueError for a Reynolds number without data.
    """
    ref = cube_centrelines(reynolds)
    plane = midplane(velocity)
    return {"vertical": compare_profile(plane, ref["y"], ref["u"]),
            "horizontal": compare_profile_v(plane, ref["x"], ref["v"]),
            "reynolds": ref["reynolds"]}


def cavity_reference(setup: FluidSetup, reynolds: float | None) -> dict | None:
    """The published centrelines that fit this cavity, or None: Ghia et al. (1982) for a 2D
    flow (D2Q9, or D3Q19 periodic in y), Albensoeder & Kuhlmann (2005) for a cube with walls
    all round; either only at a Reynolds number they tabulate."""
    p = setup.params
    if not setup.lid or reynolds is None or p.periodic_x or not float(reynolds).is_integer():
        return None
    try:
        if setup.dim == 2 or p.periodic_y:  # 2D flow: Ghia's table applies
            return ghia_u_centreline(int(reynolds))
        if len(set(setup.shape)) == 1 and not setup.periodic_split:  # a closed cube
            return cube_centrelines(int(reynolds))
    except ValueError:  # no table for this Reynolds number
        return None
    return None
