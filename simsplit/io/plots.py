"""PNG plots of simulation results: the lid-driven cavity (2D, or the mid-plane y = 0.5 of a 3D
one), a channel's velocity profile against its parabola, general time series, and the radial
distribution functions and mean-squared displacements of ``simsplit analyze``.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot), so importing or calling this
module never changes the user's matplotlib backend or opens a window.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simsplit.numerics.profiles import (
    centreline_u,
    centreline_v,
    compare_profile,
    compare_profile_v,
    midplane,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_DPI = 120


def _new_figure(figsize: tuple[float, float]) -> Figure:
    # imported here so that `import simsplit.io` stays cheap and pyplot is never involved
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=_DPI)
    return path


def plot_cavity(
    velocity: np.ndarray,
    path: Path,
    reynolds: float | None,
    reference: dict | None = None,
    title: str = "",
) -> Path:
    """Two-panel PNG of a lid-driven cavity state; returns ``path``.

    Left: speed |u| (units of the lid speed) over the unit square with streamlines, lid on top.
    Right: u along the vertical centreline x = 0.5 against y, walls included, with
    ``reference`` points (a dict with arrays ``y`` and ``u`` and an optional ``label``, e.g.
    from :func:`simsplit.fluid.reference.ghia_u_centreline`) and their max abs deviation in the
    legend. ``velocity`` has shape ``(ny, nx, 2)``. A field with NaNs is still plotted (without
    streamlines) so that a diverged run can be inspected.
    """
    return _save(_cavity_figure(velocity, reynolds, reference, title), path)


def plot_cavity_midplane(
    velocity: np.ndarray,
    path: Path,
    reynolds: float | None,
    reference: dict | None = None,
    title: str = "",
) -> Path:
    """PNG of the mid-plane y = 0.5 of a 3D cavity (lid at z = 1 moving +x); returns ``path``.

    ``velocity`` has shape ``(nz, ny, nx, 3)``. Left: in-plane speed (u_x, u_z) with streamlines
    in the x-z plane; middle: u_x(z) on the vertical centreline x = y = 0.5; right: u_z(x) on the
    horizontal centreline y = z = 0.5 (between the two middle cells where a count is even). All
    panels name the plane. ``reference`` as in :func:`plot_cavity`, heights under ``"y"``, plus
    optional ``"x"`` and ``"v"`` (u_z) for the horizontal centreline, e.g. from
    :func:`simsplit.fluid.reference.cube_centrelines` (the cube at Re = 1000).
    """
    return _save(_midplane_figure(velocity, reynolds, reference, title), path)


#: how the 3D cavity's plots name the plane they show
MIDPLANE = "mid-plane y = 0.5"


def _midplane_figure(velocity: np.ndarray, reynolds: float | None, reference: dict | None,
                     title: str) -> Figure:
    plane = midplane(velocity)
    return _cavity_figure(plane, reynolds, reference, title, vertical="z", plane=MIDPLANE)


def _cavity_figure(
    velocity: np.ndarray, reynolds: float | None, reference: dict | None, title: str,
    vertical: str = "y", plane: str = "",
) -> Figure:
    vel = np.asarray(velocity, dtype=np.float64)
    if vel.ndim != 3 or vel.shape[2] != 2:
        raise ValueError(f"velocity must have shape (ny, nx, 2), got {vel.shape}")
    if plane:  # 3D: the horizontal centreline too (the cube's reference has both)
        fig = _new_figure((15.5, 5.0))
        ax_map, ax_line, ax_cross = fig.subplots(1, 3, width_ratios=(1.15, 1.0, 1.0))
    else:
        fig = _new_figure((11.0, 5.0))
        ax_map, ax_line = fig.subplots(1, 2, width_ratios=(1.15, 1.0))
    _speed_map(fig, ax_map, vel, vertical, plane)
    _vertical_centreline(ax_line, vel, reference, vertical, plane)
    if plane:
        _horizontal_centreline(ax_cross, vel, reference, vertical)

    heading = f"{title}, {plane}" if title and plane else (title or plane)
    if reynolds is not None:
        heading = f"{heading}  (Re = {reynolds:g})" if heading else f"Re = {reynolds:g}"
    if heading:
        fig.suptitle(heading)
    return fig


def _speed_map(fig: Figure, ax: Axes, vel: np.ndarray, vertical: str, plane: str) -> None:
    """The speed over the cavity with streamlines, the lid drawn in red."""
    ny, nx = vel.shape[:2]
    speed = np.hypot(vel[..., 0], vel[..., 1])
    finite = bool(np.all(np.isfinite(vel)))
    image = ax.imshow(
        speed,
        origin="lower",
        extent=(0.0, 1.0, 0.0, 1.0),
        cmap="viridis",
        interpolation="nearest",
    )
    speed_label = (r"$|(u_x, u_z)|\,/\,U_\mathrm{lid}$ in the plane" if plane
                   else r"$|\mathbf{u}|\,/\,U_\mathrm{lid}$")
    fig.colorbar(image, ax=ax, label=speed_label)
    if finite and np.any(speed > 0) and min(nx, ny) >= 2:
        x = (np.arange(nx) + 0.5) / nx
        y = (np.arange(ny) + 0.5) / ny
        ax.streamplot(
            x,
            y,
            vel[..., 0],
            vel[..., 1],
            color="white",
            linewidth=0.6,
            density=1.2,
            arrowsize=0.7,
        )
    ax.plot([0.0, 1.0], [1.0, 1.0], color="tab:red", linewidth=4, clip_on=False)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="x", ylabel=vertical, aspect="equal")
    status = "" if finite else ", NON-FINITE VALUES"
    where = f" in the {plane} (x-{vertical})" if plane else ""
    sep = "\n" if plane else ", "  # three panels: the map's title takes two lines
    ax.set_title(f"speed{where}{sep}{nx}×{ny} cells{status}; lid (red) moves →")


def _vertical_centreline(ax: Axes, vel: np.ndarray, reference: dict | None, vertical: str,
                         plane: str) -> None:
    """u along the vertical centreline, with the reference's ``y``/``u`` and its deviation."""
    y_line, u_line = centreline_u(vel)
    ax.plot(u_line, y_line, color="tab:blue", label="simulation")
    if reference is not None:
        y_ref = np.asarray(reference["y"], dtype=np.float64)
        u_ref = np.asarray(reference["u"], dtype=np.float64)
        deviation = compare_profile(vel, y_ref, u_ref)["max_abs_error"]
        label = reference.get("label", "reference")
        ax.plot(
            u_ref,
            y_ref,
            linestyle="none",
            marker="o",
            markerfacecolor="none",
            color="black",
            label=f"{label}\nmax |Δu| = {deviation:.4f}",
        )
    ax.axvline(0.0, color="grey", linewidth=0.5)
    xlabel = (r"$u\,/\,U_\mathrm{lid}$ at x = 0.5" if vertical == "y"
              else r"$u_x\,/\,U_\mathrm{lid}$ at x = y = 0.5")
    ax.set(xlabel=xlabel, ylabel=vertical, ylim=(0, 1))
    ax.set_title("vertical centreline x = y = 0.5" if plane else
                 "vertical centreline x = 0.5")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")


def _horizontal_centreline(ax: Axes, vel: np.ndarray, reference: dict | None,
                           vertical: str) -> None:
    """u_z along the horizontal centreline of the plane, with the reference's ``x``/``v``."""
    x_line, v_line = centreline_v(vel)
    ax.plot(x_line, v_line, color="tab:blue", label="simulation")
    if reference is not None and "x" in reference:
        x_ref = np.asarray(reference["x"], dtype=np.float64)
        v_ref = np.asarray(reference["v"], dtype=np.float64)
        deviation = compare_profile_v(vel, x_ref, v_ref)["max_abs_error"]
        ax.plot(x_ref, v_ref, linestyle="none", marker="o", markerfacecolor="none",
                color="black",
                label=f"{reference.get('label', 'reference')}\nmax |Δu| = {deviation:.4f}")
    ax.axhline(0.0, color="grey", linewidth=0.5)
    ax.set(xlabel="x", ylabel=rf"$u_{vertical}\,/\,U_\mathrm{{lid}}$ at y = {vertical} = 0.5",
           xlim=(0, 1))
    ax.set_title(f"horizontal centreline y = {vertical} = 0.5")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")


def plot_channel_profile(
    position: np.ndarray,
    measured: np.ndarray,
    exact: np.ndarray,
    path: Path,
    axes: tuple[str, str] = ("x", "y"),
    title: str = "",
) -> Path:
    """PNG of a channel's velocity profile across the walls against the analytic parabola.

    ``position``: distance of each cell centre from the wall, in cells (drawn upwards);
    ``measured`` and ``exact``: the velocity along the flow there, lattice units; ``axes``:
    the names of the flow and wall axes. The legend gives the relative L2 error.
    """
    s, u, u_exact = (np.asarray(a, dtype=np.float64) for a in (position, measured, exact))
    error = float(np.sqrt(np.sum((u - u_exact) ** 2) / np.sum(u_exact ** 2)))
    flow, across = axes
    fig = _new_figure((6.0, 5.0))
    ax = fig.subplots()
    ax.plot(u, s, color="tab:blue", linewidth=2, label=f"simulation\nL2 error {error:.2e}")
    ax.plot(u_exact, s, linestyle="none", marker="o", markerfacecolor="none", color="black",
            label=r"$g\,/\,(2\nu)\;s\,(H - s)$")
    height = float(s[-1] + s[0]) if s.size else 1.0  # the walls sit half a cell outside
    ax.set(xlabel=f"$u_{flow}$ (lattice units)", ylabel=f"{across}: cells from the wall",
           ylim=(0.0, height))
    if np.isfinite(u).all() and min(u.min(), u_exact.min()) >= 0:
        ax.set_xlim(left=0.0)  # the walls' no-slip at zero, not at the first cell's value
    ax.set_title(title or f"channel profile across {across}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    return _save(fig, path)


def plot_series(
    x: np.ndarray,
    ys: Mapping[str, np.ndarray],
    path: Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
    *,
    logy: bool = False,
) -> Path:
    """Line plot of several series against a common ``x`` (legend from the keys); returns path."""
    x_arr = np.asarray(x)
    if not ys:
        raise ValueError("no series to plot")
    fig = _new_figure((8.0, 4.5))
    ax = fig.subplots()
    for name, values in ys.items():
        y_arr = np.asarray(values)
        if y_arr.shape != x_arr.shape:
            raise ValueError(f"series {name!r} has shape {y_arr.shape}, x has {x_arr.shape}")
        ax.plot(x_arr, y_arr, label=name)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_rdf(r: np.ndarray, curves: Mapping[str, np.ndarray], path: Path,
             title: str = "") -> Path:
    """g(r) of each type pair (legend from the keys, e.g. ``"A-B"``), with g = 1 marked."""
    fig = _new_figure((7.0, 4.5))
    ax = fig.subplots()
    for name, g in curves.items():
        ax.plot(r, g, label=f"g {name}")
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax.set(xlabel="r", ylabel="g(r)", xlim=(0, float(r[-1]) + float(r[1] - r[0]) / 2))
    ax.set_title(f"radial distribution: {title}" if title else "radial distribution")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_msd(lag: np.ndarray, curves: Mapping[str, np.ndarray], path: Path, title: str = "",
             xlabel: str = "lag time") -> Path:
    """Mean-squared displacement against lag on log-log axes, with slopes 2 (ballistic) and
    1 (diffusive) drawn through the first and last points of the first curve."""
    fig = _new_figure((7.0, 4.5))
    ax = fig.subplots()
    keep = np.asarray(lag) > 0
    x = np.asarray(lag)[keep]
    for name, y in curves.items():
        ax.loglog(x, np.asarray(y)[keep], marker=".", label=f"MSD {name}")
    first = np.asarray(next(iter(curves.values())))[keep]
    if x.size > 1 and first[0] > 0 and first[-1] > 0:
        ax.loglog(x, first[0] * (x / x[0]) ** 2, color="0.6", lw=0.8, ls=":", label="~ t^2")
        ax.loglog(x, first[-1] * (x / x[-1]), color="0.6", lw=0.8, ls="--", label="~ t")
        ax.set_ylim(first.min() / 3, first.max() * 3)
    ax.set(xlabel=xlabel, ylabel="MSD")
    ax.set_title(f"mean-squared displacement: {title}" if title else "mean-squared displacement")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return _save(fig, path)


def plot_flow(velocity: np.ndarray, solid: np.ndarray | None, path: Path, title: str = "",
              unit: str = "lattice units") -> Path:
    """Speed of a 2D flow ``(ny, nx, 2)`` on its grid at true aspect, with streamlines and
    solid cells (bodies) in grey; returns ``path``."""
    u = np.asarray(velocity, dtype=np.float64)
    ny, nx = u.shape[:2]
    speed = np.hypot(u[..., 0], u[..., 1])
    width = 11.0
    fig = _new_figure((width, max(2.5, width * ny / nx + 1.2)))
    ax = fig.subplots()
    im = ax.imshow(np.ma.masked_array(speed, solid) if solid is not None else speed,
                   origin="lower", extent=(0, nx, 0, ny), cmap="viridis", interpolation="nearest")
    if solid is not None and solid.any():
        ax.imshow(np.where(solid, 1.0, np.nan), origin="lower", extent=(0, nx, 0, ny),
                  cmap="Greys", vmin=0, vmax=1.5, interpolation="nearest")
    if np.isfinite(u).all() and speed.max() > 0:
        x, y = np.arange(nx) + 0.5, np.arange(ny) + 0.5
        ax.streamplot(x, y, u[..., 0], u[..., 1], color="white", linewidth=0.5, density=1.2,
                      arrowsize=0.6)
    ax.set(xlabel="x (cells)", ylabel="y (cells)", xlim=(0, nx), ylim=(0, ny))
    ax.set_aspect("equal")
    fig.colorbar(im, ax=ax, label=f"|u| ({unit})", shrink=0.8)
    if title:
        ax.set_title(title)
    return _save(fig, path)
