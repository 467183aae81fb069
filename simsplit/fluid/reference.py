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


def centreline_u(velocity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """u along the vertical line x = 0.5, at the cell-centre heights plus both walls.

    For even nx the line runs between the two middle columns and u is their mean (linear in x,
    exact at the midpoint). Returns ``(y, u)`` of length ny + 2 with y = 0 (u = 0, resting
    wall) and y = 1 (u = 1, lid) as end points.
    """
    vel = np.asarray(velocity)
    if vel.ndim != 3 or vel.shape[2] != 2:
        raise ValueError(f"velocity must have shape (ny, nx, 2), got {vel.shape}")
    ny, nx = vel.shape[:2]
    u = vel[:, :, 0].astype(np.float64)
    if nx % 2:
        u_line = u[:, nx // 2]
    else:
        u_line = 0.5 * (u[:, nx // 2 - 1] + u[:, nx // 2])
    y = np.concatenate(([0.0], (np.arange(ny) + 0.5) / ny, [1.0]))
    return y, np.concatenate(([0.0], u_line, [1.0]))


def lagrange4_interp(x_new: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Piecewise-cubic interpolation through the 4 nearest nodes (local Lagrange).

    ``x`` must be strictly increasing (spacing may vary) with at least 4 nodes; ``x_new`` must
    lie in ``[x[0], x[-1]]``. Exact for cubic polynomials. Cubic rather than linear because the
    cavity profile is steep under the lid, where linear interpolation errs by ~0.01 at 128 cells.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xq = np.asarray(x_new, dtype=np.float64)
    n = x.size
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError("x and y must be 1-D arrays of equal length")
    if n < 4:
        raise ValueError(f"need at least 4 nodes for cubic interpolation, got {n}")
    if np.any(np.diff(x) <= 0):
        raise ValueError("x must be strictly increasing")
    if np.any(xq < x[0]) or np.any(xq > x[-1]):
        raise ValueError(f"interpolation points outside [{x[0]}, {x[-1]}]")
    # interval k holds x[k] <= xq <= x[k+1]; the stencil k-1..k+2 is shifted inwards at the ends
    k = np.clip(np.searchsorted(x, xq, side="right") - 1, 0, n - 2)
    start = np.clip(k - 1, 0, n - 4)
    idx = start[..., None] + np.arange(4)
    xs = x[idx]
    ys = y[idx]
    result = np.zeros(xq.shape, dtype=np.float64)
    for a in range(4):
        weight = np.ones(xq.shape, dtype=np.float64)
        for b in range(4):
            if b != a:
                weight *= (xq - xs[..., b]) / (xs[..., a] - xs[..., b])
        result += weight * ys[..., a]
    return result


def compare_profile(velocity: np.ndarray, y_ref: np.ndarray, u_ref: np.ndarray) -> dict:
    """Compare the simulated centreline u with a reference profile ``(y_ref, u_ref)``.

    Returns ``y``, ``u_ref``, ``u_interp`` (simulation interpolated at ``y_ref``), ``errors``
    (``u_interp - u_ref``) and ``max_abs_error`` (NaN if the simulation has NaNs there, so a
    diverged run never passes a tolerance check).
    """
    y_ref = np.asarray(y_ref, dtype=np.float64)
    u_ref = np.asarray(u_ref, dtype=np.float64)
    if y_ref.shape != u_ref.shape or y_ref.ndim != 1:
        raise ValueError("y_ref and u_ref must be 1-D arrays of equal length")
    y, u = centreline_u(velocity)
    u_interp = lagrange4_interp(y_ref, y, u)
    errors = u_interp - u_ref
    return {
        "y": y_ref.copy(),
        "u_ref": u_ref.copy(),
        "u_interp": u_interp,
        "errors": errors,
        "max_abs_error": float(np.max(np.abs(errors))),
    }


def compare_to_ghia(velocity: np.ndarray, reynolds: float) -> dict:
    """:func:`compare_profile` against Ghia et al. (1982) at their 17 y-points (plus ``reynolds``).

    Raises ValueError for a Reynolds number without data (see :func:`available_reynolds`).
    """
    ref = ghia_u_centreline(reynolds)
    result = compare_profile(velocity, ref["y"], ref["u"])
    result["reynolds"] = ref["reynolds"]
    return result
