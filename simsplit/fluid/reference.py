"""Lid-driven cavity reference data (Ghia, Ghia & Shin 1982) and comparison with a simulation.

Velocities are in units of the lid speed; the lid is the wall at y = 1 moving in +x, and a
velocity field has shape ``(ny, nx, 2)`` with ``[j, i]`` the cell centred at
``((i + 0.5) / nx, (j + 0.5) / ny)``.
"""

from __future__ import annotations

import csv
import functools
import io
from importlib import resources

import numpy as np

from simsplit.numerics.profiles import compare_profile

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
