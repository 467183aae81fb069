"""Velocity profiles of a simulation against reference points: the cavity centreline, local
cubic interpolation and the comparison a validation prints (max absolute deviation).

Velocities are in units of the lid speed; a field has shape ``(ny, nx, 2)`` with ``[j, i]`` the
cell centred at ``((i + 0.5) / nx, (j + 0.5) / ny)`` and the lid at y = 1. A 3D cavity (shape
``(nz, ny, nx, 3)``, lid at z = 1 moving +x) is compared on its mid-plane y = 0.5
(:func:`midplane`), which has the same form with z as the height.
"""

from __future__ import annotations

import numpy as np


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


def centreline_v(velocity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """v (the second component) along the horizontal line y = 0.5, at the cell-centre x
    positions plus both walls (v = 0); the mean of the two middle rows for even ny.

    Returns ``(x, v)`` of length nx + 2.
    """
    vel = np.asarray(velocity)
    if vel.ndim != 3 or vel.shape[2] != 2:
        raise ValueError(f"velocity must have shape (ny, nx, 2), got {vel.shape}")
    ny, nx = vel.shape[:2]
    v = vel[:, :, 1].astype(np.float64)
    v_line = v[ny // 2] if ny % 2 else 0.5 * (v[ny // 2 - 1] + v[ny // 2])
    x = np.concatenate(([0.0], (np.arange(nx) + 0.5) / nx, [1.0]))
    return x, np.concatenate(([0.0], v_line, [0.0]))


def midplane(velocity: np.ndarray) -> np.ndarray:
    """The plane y = 0.5 of a 3D field ``(nz, ny, nx, 3)`` as ``(nz, nx, 2)`` holding
    (u_x, u_z): the mean of the two middle layers in y where ny is even."""
    vel = np.asarray(velocity, dtype=np.float64)
    if vel.ndim != 4 or vel.shape[3] != 3:
        raise ValueError(f"velocity must have shape (nz, ny, nx, 3), got {vel.shape}")
    ny = vel.shape[1]
    return vel[:, (ny - 1) // 2:ny // 2 + 1].mean(axis=1)[..., (0, 2)]


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


def compare_profile_v(velocity: np.ndarray, x_ref: np.ndarray, v_ref: np.ndarray) -> dict:
    """:func:`compare_profile` for v along the horizontal centreline y = 0.5
    (:func:`centreline_v`): keys ``x``, ``v_ref``, ``v_interp``, ``errors``,
    ``max_abs_error``."""
    x_ref = np.asarray(x_ref, dtype=np.float64)
    v_ref = np.asarray(v_ref, dtype=np.float64)
    if x_ref.shape != v_ref.shape or x_ref.ndim != 1:
        raise ValueError("x_ref and v_ref must be 1-D arrays of equal length")
    x, v = centreline_v(velocity)
    v_interp = lagrange4_interp(x_ref, x, v)
    errors = v_interp - v_ref
    return {"x": x_ref.copy(), "v_ref": v_ref.copy(), "v_interp": v_interp, "errors": errors,
            "max_abs_error": float(np.max(np.abs(errors)))}
