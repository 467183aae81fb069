"""JSON schema of the ``fluid:`` and ``domain:`` sections of a case file, and the checks that
tie their array lengths to the grid's dimension (2 entries in domain.shape: D2Q9, 3: D3Q19)."""

from __future__ import annotations

from typing import Any

from simsplit.fluid.params import DEFAULT_TRT_MAGIC
from simsplit.numerics.lbm_params import OUTLET_KINDS
from simsplit.numerics.storage import STORAGE_CHOICES

_NUMBER = {"type": "number"}

#: the numbers of fluid.physical (all > 0) and what each means
_PHYSICAL_NUMBERS = {
    "velocity": "Inflow speed (e.g. m/s): the uniform speed or the parabola's maximum, as "
                "domain.inlet.velocity in lattice units.",
    "viscosity": "Kinematic viscosity (e.g. m^2/s); or give fluid.reynolds.",
    "density": "Fluid density (e.g. kg/m^3, optional): forces and probe pressures also in "
               "physical units.",
    "lattice_velocity": "Lattice choice: the inflow speed in lattice units (cells per step).",
    "mach": "Lattice choice: the inflow's Mach number lattice_velocity / c_s (c_s = "
            "1/sqrt(3)).",
    "time_step": "Lattice choice: the time step dt (e.g. s).",
}

FLUID_SCHEMA = {
    "type": "object",
    "description": "Lattice Boltzmann fluid (D2Q9 in 2D, D3Q19 in 3D).",
    "additionalProperties": False,
    "properties": {
        "reynolds": {
            "type": ["number", "null"], "exclusiveMinimum": 0, "default": None,
            "description": "Reynolds number U L / nu with U the lid speed and L = nx cells. "
                           "Give this or fluid.viscosity.",
        },
        "viscosity": {
            "type": ["number", "null"], "exclusiveMinimum": 0, "default": None,
            "description": "Kinematic viscosity in lattice units (instead of fluid.reynolds).",
        },
        "lid_velocity": {
            "type": "number", "minimum": 0, "default": 0.1,
            "description": "Lid speed in lattice units (at most 0.2).",
        },
        "collision": {
            "enum": ["bgk", "trt"], "default": "trt",
            "description": "Collision operator: single (bgk) or two relaxation times (trt).",
        },
        "trt_magic": {
            "type": "number", "exclusiveMinimum": 0, "default": DEFAULT_TRT_MAGIC,
            "description": "TRT magic parameter Lambda; 3/16 puts walls exactly halfway.",
        },
        "physical": {
            "type": "object", "additionalProperties": False, "required": ["velocity"],
            "description": "Physical units at the front door (docs/bodies.md): the inflow "
                           "speed and the kinematic viscosity in the length unit of "
                           "domain.size (needed) per second, and one lattice choice "
                           "(lattice_velocity, mach or time_step); dx, dt, the lattice "
                           "velocity and viscosity (tau) are derived and reported, and "
                           "velocities, probes and times come out in physical units too. "
                           "Needs an inlet; domain.inlet.velocity and fluid.viscosity are "
                           "then not given.",
            "properties": {
                **{key: {"type": "number", "exclusiveMinimum": 0, "description": text}
                   for key, text in _PHYSICAL_NUMBERS.items()},
                "length_unit": {"type": "string", "minLength": 1, "default": "m",
                                "description": "Name of domain.size's length unit in reports "
                                               "(time is in s)."},
            },
        },
        "body_force": {
            "type": "array", "items": _NUMBER, "minItems": 2, "maxItems": 3,
            "default": [0.0, 0.0],
            "x-expected": "2 numbers [fx, fy] for a 2D grid or 3 numbers [fx, fy, fz] for a 3D "
                          "grid",
            "description": "Uniform body force [fx, fy] ([fx, fy, fz] in 3D) per unit volume, "
                           "lattice units (Guo).",
        },
    },
}

#: keys of the ``run:`` section that belong to the fluid solver (merged into the run schema)
FLUID_RUN_PROPERTIES = {
    "storage": {
        "enum": ["float16", "e4m11", "neq16", "neq16s", "float32", "float64"],
        "description": "Storage type of the populations (default: run.precision); no wider "
                       "than run.precision. A 16-bit type stores f - w (the deviation from "
                       "rest) and computes in run.precision: float16 (IEEE, scaled by 2^10) or "
                       "e4m11 (one more significand bit, 4 exponent bits, scaled by 2^9: about "
                       "half fp16's error) halve memory and traffic of float32 "
                       "(docs/storage.md). 2D and 3D grids; cpu, cupy and numba-cuda. neq16 "
                       "stores each cell's rho - 1 (fp16), u (float32) and its populations' "
                       "deviations from their equilibrium in 16 bits under one power of two "
                       "a cell: error near float32 storage's at 109 B per D3Q19 update (153 "
                       "float32, 77 float16; D2Q9 61 B); float32 arithmetic, two-lattice "
                       "streaming; every boundary (bodies, inlets, outlets, free-slip walls "
                       "too) on backends cpu and cupy, boxes (walls, the lid, forcing, "
                       "periodic faces) on numba-cuda too. neq16s keeps each cell's stress "
                       "too (3 more 16-bit values in 2D, 6 in 3D) and rounds only what its "
                       "first-order part leaves: float32 storage's error next to walls as well "
                       "(a cylinder's lift), 133 B per D3Q19 update (D2Q9 73 B), at 70 % of "
                       "neq16's speed; every boundary on backends cpu and cupy, boxes on "
                       "numba-cuda.",
    },
    "streaming": {
        "enum": ["two-lattice", "aa"], "default": "two-lattice",
        "description": "D3Q19 streaming: two-lattice (two population arrays) or aa (one array "
                       "updated in place, alternating even and odd steps: half the population "
                       "memory, same results bit for bit; docs/d3q19.md). cpu and cupy.",
    },
    "temporal_blocking": {
        "type": "boolean", "default": True,
        "description": "D3Q19 two-lattice float32 on cupy: take two steps per sweep, the "
                       "intermediate populations kept in shared memory: 55 % of the DRAM "
                       "traffic, the same results bit for bit (docs/d3q19.md). Slabs cross their "
                       "halo faces this way too (two ghost planes a face, filled by the "
                       "neighbours' sweeps on one GPU, through the transport on several GPUs or "
                       "ranks). D2Q9 on cpu: two steps per sweep where every fluid cell "
                       "takes the row kernel (walls, lid, bodies with halfway bounce-back; not a "
                       "periodic x, open faces or curved links), the step t + 1 rows kept in a "
                       "ring per thread: half the memory traffic, the same results bit for bit; "
                       "slabs cross their halo faces this way too (also under mpiexec). false: one "
                       "step per sweep (for measurement).",
    },
}

_POINT = {"type": "array", "items": _NUMBER, "minItems": 2, "maxItems": 3}

BODY_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["name", "shape"],
    "properties": {
        "name": {"type": "string", "minLength": 1,
                 "description": "Name of the body in the summary, run.json and forces.h5."},
        "shape": {"enum": ["circle", "box", "polygon", "mask", "sphere", "cylinder", "stl"],
                  "description": "2D: circle, box, polygon, mask; 3D: sphere, cylinder, box, "
                                 "mask, stl."},
        "centre": {**_POINT, "description": "circle: centre [x, y]; sphere: centre [x, y, z]; "
                                            "cylinder: a point [x, y, z] of its axis (the "
                                            "middle, with length)."},
        "radius": {"type": "number", "exclusiveMinimum": 0},
        "diameter": {"type": "number", "exclusiveMinimum": 0},
        "axis": {"description": "cylinder: its axis, x, y, z or a vector [ax, ay, az] (any "
                                "direction, with length)."},
        "length": {"type": "number", "exclusiveMinimum": 0,
                   "description": "cylinder: its length (flat caps); without, it spans the "
                                  "domain along an axis x, y or z."},
        "lower": {**_POINT, "description": "box: lowest corner [x0, y0] ([x0, y0, z0] in 3D)."},
        "upper": {**_POINT, "description": "box: highest corner [x1, y1] ([x1, y1, z1] in 3D)."},
        "vertices": {"type": "array", "items": _POINT, "minItems": 3,
                     "description": "polygon: corners [[x, y], ...]."},
        "file": {"type": "string", "minLength": 1,
                 "description": "mask: a .npy or HDF5 array (indexed [j, i], in 3D [k, j, i]; "
                                "nonzero = solid) or a PNG image (2D: dark = solid), one pixel "
                                "per cell; stl: a closed binary or ASCII STL mesh; relative "
                                "to the case file."},
        "scale": {"type": "number", "exclusiveMinimum": 0,
                  "description": "stl: factor on the mesh's coordinates (default 1), before "
                                 "offset; the result is in the case's length unit."},
        "offset": {**_POINT, "description": "stl: [x, y, z] added to the scaled vertices."},
        "values": {"enum": ["solid", "sdf", "grey"],
                   "description": "mask: what the file's numbers are: solid (the default: "
                                  "nonzero, in a PNG dark, = solid; no wall distances, so "
                                  "halfway links under interpolated bounce-back), sdf (.npy, "
                                  ".h5: a signed distance field at the cell centres, negative "
                                  "in the solid, zero on the wall, finite) or grey (.png: the "
                                  "grey level as a smooth indicator, wall at half grey, from "
                                  "an anti-aliased image). sdf and grey give linear and "
                                  "quadratic bounce-back the wall where the level, linear "
                                  "along each link, crosses zero (docs/bodies.md)."},
        "dataset": {"type": "string", "minLength": 1,
                    "description": "mask in HDF5: the dataset's name (default mask)."},
        "origin": {"type": "array", "items": {"type": "integer", "minimum": 0},
                   "minItems": 2, "maxItems": 3,
                   "description": "mask: cell [i, j] ([i, j, k] in 3D) of the mask's lowest "
                                  "pixel."},
        "reference_area": {"type": "number", "exclusiveMinimum": 0,
                           "description": "3D: area of the drag and lift coefficients, 2 F / "
                                          "(rho U^2 A) (default: a sphere's pi r^2, a "
                                          "cylinder's diameter x length, else the extent "
                                          "across the flow, y x z)."},
        "reference_length": {"type": "number", "exclusiveMinimum": 0,
                             "description": "Length of the drag and lift coefficients "
                                            "(default: a circle's diameter, else the "
                                            "body's extent along y)."},
    },
}

DOMAIN_SCHEMA = {
    "type": "object",
    "description": "The grid and what bounds it.",
    "additionalProperties": False,
    "required": ["shape"],
    "properties": {
        "shape": {
            "type": "array", "items": {"type": "integer", "minimum": 2, "maximum": 1 << 20},
            "minItems": 2, "maxItems": 3,
            "x-expected": "2 entries [nx, ny] (D2Q9) or 3 entries [nx, ny, nz] (D3Q19), "
                          "cell counts of at least 2",
            "description": "Cells [nx, ny] (D2Q9) or [nx, ny, nz] (D3Q19); slabs are cut along "
                           "the last axis.",
        },
        "boundaries": {
            "type": "object", "additionalProperties": False, "default": {},
            "description": "Boundary of each axis.",
            "properties": {
                "x": {"enum": ["wall", "periodic", "slip"], "default": "wall",
                      "description": "Faces x = 0 and x = 1; slip: free-slip walls (specular "
                                     "reflection, docs/bodies.md)."},
                "y": {"enum": ["wall", "periodic", "slip"], "default": "wall",
                      "description": "Faces y = 0 and y = 1; slip: free-slip walls."},
                "z": {"enum": ["wall", "periodic", "slip"],
                      "description": "Faces z = 0 and z = 1 (3D grids only; wall if not given); "
                                     "slip: free-slip walls."},
                "lid": {"type": "boolean", "default": True,
                        "description": "The wall at y = 1 (z = 1 in 3D) moves in +x at "
                                       "fluid.lid_velocity."},
                "x_low": {"enum": ["wall", "inlet", "outlet", "slip"],
                          "description": "Face x = 0 alone, instead of domain.boundaries.x: "
                                         "inlet (domain.inlet), outlet (domain.outlet) or "
                                         "a free-slip wall; docs/bodies.md."},
                "x_high": {"enum": ["wall", "inlet", "outlet", "slip"],
                           "description": "Face x = 1 alone, instead of domain.boundaries.x."},
            },
        },
        "size": {
            "type": "array", "items": {"type": "number", "exclusiveMinimum": 0},
            "minItems": 2, "maxItems": 3,
            "description": "Physical extent [Lx, Ly] of the grid (optional; cells must come out "
                           "square): with domain.units physical, body positions and sizes are "
                           "in its unit.",
        },
        "units": {
            "enum": ["lattice", "physical"],
            "description": "Unit of body positions and sizes: lattice (cells, the default: the "
                           "grid spans [0, nx] x [0, ny], cell centres at i + 0.5) or physical "
                           "(the unit of domain.size).",
        },
        "bodies": {
            "type": "array", "items": BODY_SCHEMA,
            "description": "Named solid bodies. 2D: circle (centre, radius or diameter), "
                           "box (lower, upper corners), polygon (vertices) or mask (file: "
                           ".npy, .h5 or .png, dark = solid; origin; values: solid, sdf "
                           "or grey); 3D: sphere (centre, "
                           "radius or diameter), cylinder (centre, axis, radius or diameter, "
                           "length), box, mask (.npy, .h5) or stl (file, scale, offset). "
                           "Forces and drag/lift "
                           "coefficients are reported per body (docs/bodies.md).",
        },
        "bounce_back": {
            "enum": ["halfway", "linear", "quadratic"],
            "description": "Walls of bodies: halfway bounce-back (the default: the staircase "
                           "of solid cells), or linear or quadratic interpolated bounce-back "
                           "(Bouzidi et al. 2001) with the exact wall distance of circles, "
                           "boxes, polygons, spheres, cylinders and STL meshes, and the wall "
                           "of a mask's level set (values: sdf or grey; a mask of solid cells "
                           "alone stays halfway, with a warning; quadratic links whose second "
                           "fluid cell is missing take the linear rule; each rule also with "
                           "free-slip walls, docs/bodies.md).",
        },
        "inlet": {
            "type": "object", "additionalProperties": False,
            "description": "The velocity inlet of a face set to inlet: bounce-back with the "
                           "inlet velocity (Ladd), normal to the face.",
            "properties": {
                "profile": {"enum": ["uniform", "parabolic", "file"], "default": "parabolic",
                            "description": "uniform, parabolic between the walls at y = 0 "
                                           "and y = 1 (4 U y (H - y) / H^2; in 3D with z "
                                           "walls the product 16 U y (H - y) z (H - z) / "
                                           "H^4), or file (domain.inlet.file, 2D)."},
                "file": {"type": "string", "minLength": 1,
                         "description": "profile file: a .npy or text file of ny speeds "
                                        "into the domain (lattice units), one per row from "
                                        "y = 0; relative to the case file."},
                "velocity": {"type": "number", "exclusiveMinimum": 0,
                             "description": "Inflow speed U in lattice units: the uniform "
                                            "speed, or the parabola's maximum (at most 0.2; "
                                            "required unless the profile is a file)."},
                "start": {"enum": ["rest", "inflow"], "default": "rest",
                          "description": "Initial state: rest, or the inflow profile in every "
                                         "fluid cell (closer to a steady state: fewer steps)."},
                "ramp_steps": {"type": "integer", "minimum": 0, "default": 0,
                               "description": "Ramp the inflow up from rest over this many "
                                              "steps, as sin^2(pi t / (2 T)) (0: at full "
                                              "speed from the first step)."},
            },
        },
        "outlet": {
            "type": "object", "additionalProperties": False,
            "description": "The outlet of a face set to outlet: a pressure outlet "
                           "(anti-bounce-back at a fixed density), a zero-gradient or a "
                           "convective one (docs/bodies.md).",
            "properties": {
                "kind": {"enum": list(OUTLET_KINDS), "default": "pressure",
                         "description": "pressure (anti-bounce-back at domain.outlet.density), "
                                        "zero_gradient (the incoming populations copied from "
                                        "the interior neighbour's: no x gradient) or "
                                        "convective (df/dt + U df/dx = 0 on them, implicit "
                                        "upwind; U the mean inflow or "
                                        "domain.outlet.velocity)."},
                "density": {"type": "number", "exclusiveMinimum": 0, "default": 1.0,
                            "description": "Density held at the outlet (pressure density / "
                                           "3, lattice units): by the pressure outlet, and "
                                           "the one pressure_weight pulls the others to."},
                "velocity": {"type": "number", "exclusiveMinimum": 0, "maximum": 1,
                             "description": "convective: the speed U the populations leave "
                                            "at, lattice units (default: the inlet's mean "
                                            "velocity, ramped with it)."},
                "pressure_weight": {"type": "number", "minimum": 0, "maximum": 1,
                                    "description": "zero_gradient, convective: weight per "
                                                   "step of the pressure outlet's value "
                                                   "mixed into each outlet link (0: none, 1: "
                                                   "the pressure outlet), so the mean "
                                                   "density does not drift (default: from "
                                                   "domain.outlet.pressure_relaxation)."},
                "pressure_relaxation": {
                    "type": "number", "exclusiveMinimum": 0,
                    "description": "zero_gradient, convective: the time over which the "
                                   "density relaxes to domain.outlet.density, in flow-through "
                                   "times nx / U (U: the convective speed or the inlet's mean "
                                   "velocity): pressure_weight = min(1, U / (T nx)), the same "
                                   "share of a shedding period on every grid; default 0.015 "
                                   "(zero_gradient), 0.15 (convective). Not with "
                                   "pressure_weight."},
            },
        },
    },
}


def split_axis(case: dict[str, Any]) -> str:
    """Name of the axis slabs are cut along: the last of the grid (y in 2D, z in 3D)."""
    return "xyz"[len(case["domain"]["shape"]) - 1]


def check_dimensions(case: dict[str, Any]) -> None:
    """Raise ValueError (one line naming the key) where an array does not fit the grid's
    dimension; a 2-component zero body force (the default) stands for no force in 3D."""
    dim = len(case["domain"]["shape"])
    force = case["fluid"]["body_force"]
    if len(force) != dim:
        if dim == 3 and len(force) == 2 and not any(force):
            case["fluid"]["body_force"] = [0.0, 0.0, 0.0]
        else:
            raise ValueError(f"fluid.body_force: {force!r} is not allowed: expected {dim} "
                             f"components for a {dim}D grid (domain.shape has {dim} entries)")
    check_storage(case)
    if dim == 2 and case.get("run", {}).get("streaming", "two-lattice") != "two-lattice":
        raise ValueError("run.streaming: 'aa' is not allowed for a 2D grid (D2Q9 streams "
                         "between two arrays); allowed: 'two-lattice'")
    if dim == 2 and case["domain"]["boundaries"].get("z", "wall") != "wall":
        raise ValueError("domain.boundaries.z: is not allowed for a 2D grid "
                         "(domain.shape [nx, ny]); give [nx, ny, nz] for 3D")


def check_storage(case: dict[str, Any]) -> None:
    """Raise ValueError (one line naming run.storage) for a storage type wider than
    run.precision."""
    run = case.setdefault("run", {})
    precision = run.get("precision", "float64")
    storage = run.setdefault("storage", precision)  # the default: store what is computed
    if storage == precision:
        return
    allowed = STORAGE_CHOICES.get(precision, (precision,))
    if storage not in allowed:
        raise ValueError(f"run.storage: {storage!r} is not allowed with run.precision "
                         f"{precision!r}: allowed {', '.join(map(repr, allowed))} (no wider "
                         "than run.precision)")
