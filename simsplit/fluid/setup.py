"""A fluid case turned into what the solver and its kernels run on: grid, kernel parameters,
storage and streaming (:class:`FluidSetup`), the test throttle, and the memory it will take."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from simsplit.decomp.slabs import MIN_SLAB_ROWS, split_extent
from simsplit.errors import CaseError
from simsplit.fluid.geometry import Body, build_bodies, solid_and_ids
from simsplit.fluid.geometry.grid import GridGeometry
from simsplit.fluid.geometry.links import link_weights
from simsplit.fluid.inflow import Inlet, Outlet, inflow_advisories, inlet_of, outlet_of, x_faces
from simsplit.fluid.params import check_stability, relaxation_rates
from simsplit.fluid.schema import check_dimensions
from simsplit.fluid.units import PhysicalUnits, physical_units, unit_report
from simsplit.numerics.lattice import Lattice, lattice_for
from simsplit.numerics.lbm_params import OUTLET_CONVECTIVE, OUTLET_KINDS, D2Q9Params, D3Q19Params
from simsplit.numerics.storage import bytes_per_update, storage_dtype


@dataclass
class FluidSetup:
    shape: tuple[int, ...]  #: cells (nx, ny) or (nx, ny, nz)
    params: D2Q9Params | D3Q19Params
    lid: bool
    periodic_split: bool  #: periodic along the split axis (y in 2D, z in 3D)
    dtype: np.dtype
    #: population storage: run.storage's name (neq16s and neq16 share a numpy type), or a
    #: numpy type (None: dtype)
    storage: str | np.dtype | None = None
    streaming: str = "two-lattice"  #: run.streaming: two-lattice or aa (in place)
    #: what the case checks warn about (accuracy, stability); the solver does not repeat them
    advisories: tuple[str, ...] = ()
    bodies: tuple[Body, ...] = ()  #: solid bodies (domain.bodies), rasterised
    x_kinds: tuple[str, str] = ("wall", "wall")  #: faces x = 0, 1: wall/periodic/inlet/outlet/slip
    inlet: Inlet | None = None
    bounce_back: str = "halfway"  #: bodies' walls: halfway, linear or quadratic (interpolated)
    slip: bool = False  #: the faces of the split axis are free-slip walls
    y_slip: bool = False  #: 3D: the faces y = 0 and y = 1 are free-slip walls
    outlet: Outlet = Outlet()  #: the outlet's kind and settings (domain.outlet)
    #: fluid.physical: dx, dt and the physical values (None: a case in lattice units)
    physical: PhysicalUnits | None = None

    @cached_property
    def geometry(self) -> GridGeometry | None:
        """Bodies and open faces as slabs paint them (None where there are neither: the
        blocks then flag walls and the lid alone, as before bodies existed)."""
        # 3D free-slip walls take the bodies kernels (the box kernels have no slip rule)
        slip_3d = self.dim == 3 and (self.slip or self.y_slip)
        if (not self.bodies and all(k in ("wall", "periodic") for k in self.x_kinds)
                and not slip_3d):
            return None
        solid, _ = solid_and_ids(list(self.bodies), self.grid)
        inflow = np.zeros(self.grid[:-1])
        if self.inlet is not None:
            sign = 1.0 if self.x_kinds[0] == "inlet" else -1.0
            inflow = sign * self.inlet.cell_velocities(self.grid[:-1])
        links = None
        quadratic = self.bounce_back == "quadratic"
        if self.bounce_back != "halfway" and self.bodies:
            periodic = (self.periodic_split, *(bool(p) for p in self.params.periodic))
            links = link_weights(list(self.bodies), solid, self.lattice, periodic, quadratic)
        return GridGeometry(solid, self.x_kinds, inflow, self.periodic_split, links,
                            quadratic=quadratic and links is not None,
                            y_slip=self.dim == 3 and self.y_slip)

    @property
    def halfway_bodies(self) -> tuple[Body, ...]:
        """Bodies whose links stay halfway although ``bounce_back`` interpolates (masks of
        solid cells alone: no wall distances)."""
        if self.bounce_back == "halfway":
            return ()
        return tuple(b for b in self.bodies if b.distance is None)

    def initial_velocity(self) -> np.ndarray | None:
        """Velocity to start from, ``(*grid, dim)`` (inlet.start: inflow: each row's inflow
        speed in every fluid cell), or None: rest."""
        geo = self.geometry
        if self.inlet is None or self.inlet.start != "inflow" or geo is None:
            return None
        u = np.zeros((*self.grid, self.dim))
        u[..., 0] = geo.inflow[..., None] * self.inlet.scale(1)
        u[geo.solid] = 0.0
        return u

    def params_at(self, step: int) -> D2Q9Params | D3Q19Params:
        """Kernel parameters of time step ``step`` (1-based): the inflow ramped up, and with it
        the speed of a convective outlet that takes the inflow's."""
        if self.inlet is None or step >= self.inlet.ramp_steps:
            return self.params
        scale = self.inlet.scale(step)
        if self.params.outlet_kind != OUTLET_CONVECTIVE or self.outlet.velocity is not None:
            return replace(self.params, inlet_scale=scale)
        return replace(self.params, inlet_scale=scale,
                       outlet_courant=self.params.outlet_courant * scale)

    def ramping(self, step: int) -> bool:
        """Whether step ``step`` (1-based) still ramps the inflow up (no CUDA graphs then:
        a graph would replay one step's parameters)."""
        return self.inlet is not None and step < self.inlet.ramp_steps

    @property
    def dim(self) -> int:
        return len(self.shape)

    @property
    def lattice(self) -> Lattice:
        return lattice_for(self.dim)

    @property
    def nx(self) -> int:
        return self.shape[0]

    @property
    def ny(self) -> int:
        return self.shape[1]

    @property
    def nz(self) -> int:
        return self.shape[2] if self.dim == 3 else 1

    @property
    def split_size(self) -> int:
        return self.shape[-1]

    @property
    def grid(self) -> tuple[int, ...]:
        """Grid shape in array order: (ny, nx) or (nz, ny, nx)."""
        return tuple(reversed(self.shape))

    @property
    def in_lid_units(self) -> bool:
        """Results are reported in lid units (a moving lid sets the scales), else in lattice
        units."""
        return self.lid and self.params.lid_velocity > 0

    @property
    def velocity_scale(self) -> float:
        """Velocities are reported in units of the lid speed, in physical units (dx / dt
        with fluid.physical), else in lattice units."""
        if self.physical is not None:
            return 1.0 / self.physical.velocity_factor
        return self.params.lid_velocity if self.in_lid_units else 1.0

    @property
    def time_step(self) -> float:
        """One time step in the reported unit of time: U / L in lid units (L = nx cells, the
        length of the Reynolds number), dt in s with fluid.physical, 1 in lattice units."""
        if self.physical is not None:
            return self.physical.dt
        return self.params.lid_velocity / self.nx if self.in_lid_units else 1.0

    @property
    def spacing(self) -> tuple[float, ...]:
        """Cell size per axis in array order, in the unit of reported positions."""
        if self.physical is not None:
            return (self.physical.dx,) * self.dim
        return tuple(1.0 / n for n in self.grid)

    @property
    def units(self) -> dict[str, str]:
        """What reported times, velocities and positions are measured in, in words."""
        where = "each axis from 0 to 1 (cell centres at (i + 0.5) / n)"
        if self.physical is not None:
            unit, dx = self.physical.length_unit, self.physical.dx
            return {"time": f"s (t = step dt, dt = {self.physical.dt:.6g} s)",
                    "velocity": f"{unit}/s (fluid.physical)",
                    "length": f"{unit} (cell centres at (i + 0.5) dx, dx = {dx:.6g} {unit})"}
        if self.in_lid_units:
            return {"time": "L / U (L: nx cells, U: fluid.lid_velocity; t = step U / nx)",
                    "velocity": "lid speed U", "length": where}
        return {"time": "lattice time steps (t = step)",
                "velocity": "lattice units (cells per time step)", "length": where}


def inflow_report(setup: FluidSetup) -> dict[str, Any] | None:
    """An inflow case's lattice values, Mach and Reynolds numbers and, with fluid.physical,
    dx, dt and the physical values (``run.json``'s ``units``); None without an inlet."""
    if setup.inlet is None:
        return None
    body = setup.bodies[0] if setup.bodies else None
    return unit_report(setup.physical, tau=setup.params.tau,
                       viscosity=setup.params.viscosity, inflow_max=setup.inlet.velocity,
                       inflow_mean=setup.inlet.mean_velocity,
                       length_cells=body.reference_length if body else float(setup.ny),
                       length_name=f"{body.name}'s length" if body else "the channel height")


def setup_from_case(case: dict[str, Any]) -> FluidSetup:
    fluid, domain = case["fluid"], case["domain"]
    check_dimensions(case)
    shape = tuple(int(n) for n in domain["shape"])
    nx = shape[0]
    bounds = domain["boundaries"]
    lid = bool(bounds["lid"])
    u_lid = float(fluid["lid_velocity"]) if lid else 0.0
    inlet = inlet_of(case)
    kinds = x_faces(case)
    bodies = tuple(build_bodies(domain, kinds))
    physical = physical_units(case)
    if fluid.get("viscosity") is not None:
        nu = float(fluid["viscosity"])
    elif physical is not None and physical.lattice_viscosity is not None:
        nu = physical.lattice_viscosity
    elif inlet is not None:  # Re = U L / nu: mean inflow, the first body's length (else ny)
        length = bodies[0].reference_length if bodies else float(shape[1])
        nu = inlet.mean_velocity * length / float(fluid["reynolds"])
    else:
        nu = u_lid * nx / float(fluid["reynolds"])
    if physical is not None and physical.lattice_viscosity is None:  # nu from fluid.reynolds
        physical.check_viscosity(nu)
    om_p, om_m = relaxation_rates(nu, fluid["collision"], float(fluid["trt_magic"]))
    advisories = tuple(check_stability(1.0 / om_p, u_lid))
    if inlet is not None:  # the lid's corner check does not apply: only the cell Reynolds
        advisories += tuple(inflow_advisories(inlet.velocity, nu))
    force = tuple(float(v) for v in fluid["body_force"])
    periodic = {ax: bounds.get(ax, "wall") == "periodic" for ax in "xyz"}
    outlet = outlet_of(case, inlet)
    courant = 0.0
    if outlet.kind == "convective":
        courant = outlet.velocity if outlet.velocity is not None else inlet.mean_velocity
    open_outlet = {"outlet_density": outlet.density,
                   "outlet_kind": OUTLET_KINDS.index(outlet.kind), "outlet_courant": courant,
                   "outlet_pressure_weight": outlet.pressure_weight}
    params: D2Q9Params | D3Q19Params
    if len(shape) == 2:
        params = D2Q9Params(om_p, om_m, u_lid, *force, periodic["x"], **open_outlet)
    else:
        params = D3Q19Params(om_p, om_m, u_lid, *force, periodic["x"], periodic["y"],
                             **open_outlet)
    dtype = np.dtype(case["run"]["precision"])
    storage = case["run"].get("storage") or storage_dtype(dtype)
    return FluidSetup(shape, params, lid, periodic["xyz"[len(shape) - 1]], dtype, storage,
                      case["run"].get("streaming", "two-lattice"), advisories, bodies, kinds,
                      inlet, domain.get("bounce_back", "halfway"),
                      bounds.get("xyz"[len(shape) - 1], "wall") == "slip",
                      len(shape) == 3 and bounds.get("y") == "slip", outlet, physical)


def throttle_from_case(section: Mapping[str, Any] | None, n_slabs: int
                       ) -> tuple[int, float] | None:
    """``run.debug_throttle`` as ``(slab, factor)`` (a testing aid), None when not set."""
    if not section:
        return None
    slab, factor = int(section["slab"]), float(section["factor"])
    if slab >= n_slabs:
        raise CaseError(f"run.debug_throttle.slab: {slab} is not allowed: expected a slab "
                          f"index below {n_slabs} (the number of slabs)")
    return slab, factor


def fluid_bytes(case: dict[str, Any]) -> list[int]:
    """Bytes per slab of a lattice Boltzmann case: two population lattices in run.storage,
    flags, macroscopic fields in run.precision (D2Q9 in 2D, D3Q19 in 3D; slabs along the last
    axis)."""
    shape = case["domain"]["shape"]
    *cross, ny = shape
    q = lattice_for(len(shape)).q
    layer = math.prod(n + 2 for n in cross)  # cells of one layer, ghosts included
    inner = math.prod(cross)
    item = 4 if case["run"]["precision"] == "float32" else 8
    per_cell = bytes_per_update(q, case["run"].get("storage") or case["run"]["precision"])
    dec = case["decomposition"]
    n = int(dec["subdomains"])
    # slabs that cross halo faces two steps per sweep hold a second ghost plane per face
    # (D3Q19 float32 on cupy, D2Q9 on the CPU: SlabBlock.depth), as do slabs of cases with
    # quadratic links (simsplit/fluid/deep_halo.py); counted wherever they might
    quadratic = case["domain"].get("bounce_back") == "quadratic"
    deep = 2 if case["run"].get("temporal_blocking", True) or quadratic else 0
    out = []
    for a, b in split_extent(ny, n, dec.get("weights"), MIN_SLAB_ROWS):
        cells = (b - a + 2 + deep) * layer
        out.append(cells * per_cell
                   + (2 + len(shape)) * (b - a + deep) * inner * item)
    return out
