"""Open faces of a channel (2D or 3D): which x faces are walls, inlets or outlets, the inlet's
profile and ramp-up, and the reference velocity of Reynolds numbers and force coefficients."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from simsplit.errors import CaseError
from simsplit.fluid.params import (
    MAX_CELL_REYNOLDS,
    MAX_LID_VELOCITY,
    WARN_CELL_REYNOLDS,
    UnstableSetup,
)

OPEN = ("inlet", "outlet")


@dataclass(frozen=True)
class Inlet:
    """A velocity inlet: speed ``velocity`` (lattice units; a parabola's maximum), normal to
    its face, ramped up from rest over ``ramp_steps`` steps; or, with ``profile`` "file", the
    speed of every row given (``rows``; ``velocity`` is then their maximum)."""

    profile: str
    velocity: float
    ramp_steps: int = 0
    start: str = "rest"  #: initial state: rest, or the inflow profile everywhere
    #: profile "file": the speed of each row (2D) or line (k, j) along x (3D, nested)
    rows: tuple[Any, ...] | None = None
    #: 3D: whether the parabola also spans z (walls at z = 0 and z = 1): the product profile
    #: 16 U y (H - y) z (H - z) / H^4 of Schäfer & Turek's 3D tests; None in 2D
    across_z: bool | None = None

    @property
    def mean_velocity(self) -> float:
        """Mean over the inlet: U for a uniform inflow, 2 U / 3 for a parabola, 4 U / 9 for
        the 3D product of two (the reference velocities of Schäfer & Turek's coefficients),
        the rows' mean from a file."""
        if self.rows is not None:
            return float(np.mean(self.rows))
        if self.profile != "parabolic":
            return self.velocity
        return self.velocity * (4.0 / 9.0 if self.across_z else 2.0 / 3.0)

    def cell_velocities(self, cross: tuple[int, ...]) -> np.ndarray:
        """Inflow speed at each row (2D, ``cross`` = (ny,)) or each line (k, j) along x (3D,
        ``cross`` = (nz, ny)), at cell centres; walls at 0 and n."""
        if self.rows is not None:
            return np.array(self.rows, dtype=np.float64)
        if len(cross) == 1:
            return self.row_velocities(cross[0])
        nz, ny = cross
        rows = self.row_velocities(ny)
        if self.profile != "parabolic" or not self.across_z:
            return np.tile(rows, (nz, 1))
        z = np.arange(nz, dtype=np.float64) + 0.5
        return rows[None, :] * (4.0 * z * (nz - z) / (nz * nz))[:, None]

    def row_velocities(self, ny: int) -> np.ndarray:
        """Inflow speed at each row's cell centre y = j + 1/2 (float64), walls at 0 and ny."""
        if self.rows is not None:
            return np.array(self.rows, dtype=np.float64)
        if self.profile == "uniform":
            return np.full(ny, self.velocity)
        y = np.arange(ny, dtype=np.float64) + 0.5
        return 4.0 * self.velocity * y * (ny - y) / (ny * ny)

    def scale(self, step: int) -> float:
        """Factor on the inflow during time step ``step`` (1-based): sin^2(pi t / 2T) while
        ramping, then 1."""
        if step >= self.ramp_steps:
            return 1.0
        return math.sin(0.5 * math.pi * step / self.ramp_steps) ** 2


def x_faces(case: dict[str, Any]) -> tuple[str, str]:
    """Kinds of the faces x = 0 and x = 1: wall, periodic, inlet or outlet."""
    bounds = case["domain"]["boundaries"]
    axis = bounds.get("x", "wall")
    low, high = bounds.get("x_low"), bounds.get("x_high")
    if axis == "periodic" and (low or high):
        raise CaseError("domain.boundaries.x_low: a face of its own is not allowed with "
                        "domain.boundaries.x: periodic")
    return low or axis, high or axis


def inlet_of(case: dict[str, Any]) -> Inlet | None:
    """The case's inlet (``domain.inlet``) where a face is one; refuses what cannot run."""
    domain = case["domain"]
    faces = x_faces(case)
    spec = domain.get("inlet")
    if "inlet" not in faces:
        if spec is not None:
            raise CaseError("domain.inlet: no face is an inlet (set domain.boundaries.x_low: "
                            "inlet)")
        return None
    if spec is None:
        raise CaseError("domain.inlet: required where a face is an inlet (give "
                        "domain.inlet.velocity)")
    if faces == ("inlet", "inlet"):
        raise CaseError("domain.boundaries.x_high: inlet on both faces is not allowed: make "
                        "one an outlet")
    profile = spec.get("profile", "parabolic")
    dim = len(domain["shape"])
    if "file" in spec and profile != "file":
        raise CaseError(f"domain.inlet.file: only with profile: file (the profile is "
                        f"{profile})")
    spec = {**spec, **_physical_speed(case, spec, profile)}
    rows = None
    if profile == "file":
        cross = tuple(int(n) for n in reversed(domain["shape"][1:]))  # (ny,) or (nz, ny)
        rows = read_profile(spec, cross)
        spec = {**spec, "velocity": float(rows.max())}
    elif "velocity" not in spec:
        raise CaseError("domain.inlet.velocity: required for a uniform or parabolic inflow")
    if spec["velocity"] > MAX_LID_VELOCITY:
        raise CaseError(f"domain.inlet.velocity: {spec['velocity']!r} is not allowed: expected "
                        f"<= {MAX_LID_VELOCITY} lattice units (Mach number too high)")
    if domain["boundaries"]["lid"]:
        raise CaseError("domain.boundaries.lid: a lid with an inlet is not allowed: set "
                        "domain.boundaries.lid: false")
    across_z = None
    if dim == 3:
        across_z = domain["boundaries"].get("z", "wall") == "wall"
    return Inlet(profile, float(spec["velocity"]), int(spec.get("ramp_steps", 0)),
                 spec.get("start", "rest"), None if rows is None else _nested(rows), across_z)


def _physical_speed(case: dict[str, Any], spec: dict[str, Any], profile: str
                    ) -> dict[str, float]:
    """``{"velocity": lattice speed}`` where ``fluid.physical`` gives the inflow speed (and
    refuses a lattice one beside it), else nothing."""
    from simsplit.fluid.units import physical_units

    units = physical_units(case)
    if units is None:
        return {}
    if profile == "file":
        raise CaseError("domain.inlet.profile: file is not available with fluid.physical "
                        "(the file's speeds are lattice units): uniform or parabolic")
    if "velocity" in spec:
        raise CaseError("domain.inlet.velocity: not with fluid.physical (the inflow speed is "
                        "fluid.physical.velocity)")
    return {"velocity": units.lattice_velocity}


def _nested(rows: np.ndarray) -> tuple[Any, ...]:
    """A profile array as nested tuples (hashable, as a frozen Inlet's fields are)."""
    return tuple(rows.tolist()) if rows.ndim == 1 else tuple(map(_nested, rows))


def read_profile(spec: dict[str, Any], cross: tuple[int, ...]) -> np.ndarray:
    """The inflow speed of each row (2D, ``cross`` = (ny,)) or each line (k, j) along x (3D,
    ``cross`` = (nz, ny)) from ``domain.inlet.file``: a .npy array, an HDF5 file's dataset
    ``profile`` (or its only one) or a text file (2D: ny numbers, one line or column each; 3D:
    nz lines of ny numbers), lattice units, index 0 at y = 0 (z = 0); refused in one line
    unless finite, >= 0 and at most MAX_LID_VELOCITY."""
    from pathlib import Path

    what = ("ny speeds, one per row" if len(cross) == 1
            else "an (nz, ny) array of speeds, [k, j] the line at z = k, y = j")
    if "file" not in spec:
        raise CaseError(f"domain.inlet.file: required with profile: file (a .npy, HDF5 or text "
                        f"file of {what})")
    path = Path(spec["file"])
    if not path.is_file():
        raise CaseError(f"domain.inlet.file: {str(path)!r} does not exist")
    try:
        rows = _load_array(path).astype(np.float64)
    except Exception as exc:
        raise CaseError(f"domain.inlet.file: cannot read {str(path)!r}: {exc}") from None
    if len(cross) == 1:
        rows = rows.ravel()
    if rows.shape != cross:
        raise CaseError(f"domain.inlet.file: {str(path)!r} holds {rows.size} values: "
                        f"expected {math.prod(cross)} finite speeds, {what} (shape "
                        f"{list(cross)} from domain.shape; the file's: {list(rows.shape)})")
    bad = ~np.isfinite(rows) | (rows < 0) | (rows > MAX_LID_VELOCITY)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise CaseError(f"domain.inlet.file: {str(path)!r} holds {float(rows[at])!r} at index "
                        f"{list(at)}: expected finite speeds 0 to {MAX_LID_VELOCITY} lattice "
                        "units (into the domain; Mach number)")
    return rows


def _load_array(path: Any) -> np.ndarray:
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if suffix in (".h5", ".hdf5"):
        import h5py

        with h5py.File(path, "r") as h5:
            names = [k for k in h5 if isinstance(h5[k], h5py.Dataset)]
            name = "profile" if "profile" in names else names[0] if len(names) == 1 else None
            if name is None:
                raise ValueError(f"no dataset 'profile' (datasets: {', '.join(names)})")
            return np.asarray(h5[name][()])
    return np.loadtxt(path, ndmin=2)


#: pressure_relaxation of the open outlet kinds where the case gives neither it nor a
#: pressure_weight, in flow-through times nx / U: the per-step weights U / (T nx) they give are
#: those that held the mean density of Schäfer & Turek's 2D-2 channel at D = 20 cells within
#: 0.1 % of the pressure outlet's (0.01 and 0.001 there; without, it rose 10 % and 1.6 % in
#: 60,000 steps). A weight fixed per step instead would relax within fewer shedding periods
#: as the grid is refined and turn the outlet into the reflecting pressure outlet
#: (docs/bodies.md, "Why the drag maximum was high").
DEFAULT_PRESSURE_RELAXATION = {"zero_gradient": 0.015, "convective": 0.15}


def pressure_weight(relaxation: float, velocity: float, nx: int) -> float:
    """Per-step weight of the pressure outlet's value in an open outlet's links that relaxes
    the density over ``relaxation`` flow-through times ``nx / velocity`` steps (at most 1:
    the pressure outlet itself)."""
    return min(1.0, velocity / (relaxation * nx))


@dataclass(frozen=True)
class Outlet:
    """The outlet of a face set to outlet (``domain.outlet``): its kind, the density the
    pressure outlet holds, a convective outlet's speed (None: the inlet's mean velocity) and
    the per-step weight of the pressure outlet's value mixed into the open kinds' links."""

    kind: str = "pressure"
    density: float = 1.0
    velocity: float | None = None
    pressure_weight: float = 0.0


def outlet_of(case: dict[str, Any], inlet: Inlet | None) -> Outlet:
    """The case's outlet (defaults where no face is one); refuses what cannot run."""
    domain = case["domain"]
    spec = domain.get("outlet")
    if "outlet" not in x_faces(case):
        if spec is not None:
            raise CaseError("domain.outlet: no face is an outlet (set domain.boundaries.x_high: "
                            "outlet)")
        return Outlet()
    spec = spec or {}
    kind = spec.get("kind", "pressure")
    if "velocity" in spec and kind != "convective":
        raise CaseError("domain.outlet.velocity: only with kind: convective (the speed its "
                        f"populations leave at; the kind is {kind})")
    for key in ("pressure_weight", "pressure_relaxation"):
        if spec.get(key, 0) and kind == "pressure":
            raise CaseError(f"domain.outlet.{key}: only with kind: zero_gradient or "
                            "convective (the kind is pressure, which holds the density itself)")
    if "pressure_weight" in spec and "pressure_relaxation" in spec:
        raise CaseError("domain.outlet.pressure_relaxation: give it or "
                        "domain.outlet.pressure_weight, not both")
    if kind != "pressure" and int(domain["shape"][0]) < 2:
        raise CaseError(f"domain.outlet.kind: {kind} needs an interior column beside the "
                        "outlet's (domain.shape's nx >= 2)")
    if kind == "convective" and "velocity" not in spec and inlet is None:
        raise CaseError("domain.outlet.velocity: required for a convective outlet without an "
                        "inlet (no inflow to take the speed from)")
    velocity = float(spec["velocity"]) if "velocity" in spec else None
    if kind == "pressure" or "pressure_weight" in spec:
        weight = float(spec.get("pressure_weight", 0.0))
    else:
        speed = velocity if velocity is not None else inlet.mean_velocity if inlet else None
        if speed is None:
            raise CaseError(f"domain.outlet.pressure_weight: required for a {kind} outlet "
                            "without an inlet (no flow-through time to relax the density over)")
        relaxation = float(spec.get("pressure_relaxation", DEFAULT_PRESSURE_RELAXATION[kind]))
        weight = pressure_weight(relaxation, speed, int(domain["shape"][0]))
    return Outlet(kind, float(spec.get("density", 1.0)), velocity, weight)


def inflow_advisories(velocity: float, viscosity: float) -> list[str]:
    """The inflow's cell Reynolds number U dx / nu: refused beyond MAX_CELL_REYNOLDS
    (:class:`UnstableSetup`), warned about beyond WARN_CELL_REYNOLDS."""
    cell_re = velocity / viscosity
    text = (f"the inflow's cell Reynolds number U / nu = {cell_re:.3g} (U = "
            f"{velocity:g}, nu = {viscosity:.4g} lattice units)")
    if cell_re > MAX_CELL_REYNOLDS:
        raise UnstableSetup(f"{text} is beyond {MAX_CELL_REYNOLDS:g}: refine the grid or "
                            "lower the Reynolds number")
    if cell_re > WARN_CELL_REYNOLDS:
        return [f"{text} is close to the stability limit: refine the grid or lower the "
                "Reynolds number"]
    return []
