"""JSON schema (draft 2020-12) of the ``md:`` section of a case file, and its extra checks."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from simsplit.md.lattice import read_positions
from simsplit.md.pair_table import build_pair_table
from simsplit.md.systems import (
    atom_types,
    check_typed_file,
    file_mass,
    file_pair_coeffs,
    typed_file_box,
)

_POS = {"type": "number", "exclusiveMinimum": 0}

MD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Lennard-Jones molecular dynamics in a periodic orthorhombic box (LJ units).",
    "additionalProperties": False,
    "properties": {
        "lattice": {
            "type": "object",
            "description": "Start from an fcc crystal (give this or md.init_file).",
            "additionalProperties": False,
            "required": ["density", "cells"],
            "properties": {
                "type": {"enum": ["fcc"], "default": "fcc",
                         "description": "Lattice type (LAMMPS 'lattice fcc <density>')."},
                "density": {**_POS, "description": "Reduced number density rho*; the lattice "
                            "constant is (4 / rho)^(1/3)."},
                "cells": {"type": "array", "items": {"type": "integer", "minimum": 1},
                          "minItems": 3, "maxItems": 3,
                          "description": "Unit cells [nx, ny, nz]; 4 atoms per cell."},
                "fractions": {"type": ["array", "null"], "items": _POS, "minItems": 1,
                              "default": None,
                              "description": "Share of each atom type (types named 1, 2, ...; "
                                             "e.g. [0.8, 0.2] for Kob-Andersen), assigned to "
                                             "lattice sites by a permutation seeded by md.seed "
                                             "(null: one type)."},
            },
        },
        "init_file": {
            "type": ["string", "null"], "minLength": 1, "default": None,
            "description": "Initial positions instead of a lattice: .xyz (extended-XYZ "
                           "Lattice= gives the box), HDF5 (.h5/.hdf5: dataset 'positions', "
                           "optional 'box' and 'velocities'), a LAMMPS data file (atom_style "
                           "atomic; .data, .lmp or data.*: box, types, Masses, image flags, "
                           "Velocities) or the last frame of a GSD (.gsd) or H5MD (.h5md) "
                           "trajectory. Atom types may differ in mass (a data file's "
                           "Masses, md.masses) and pair coefficients; atoms of one type "
                           "share one mass.",
        },
        "box": {
            "type": ["array", "null"], "items": _POS, "minItems": 3, "maxItems": 3,
            "default": None,
            "description": "Box edges [Lx, Ly, Lz] for an init_file that has none.",
        },
        "mass": {"type": ["number", "null"], "exclusiveMinimum": 0, "default": None,
                 "description": "Mass of every atom (null: the mass a LAMMPS data or GSD "
                                "md.init_file gives, else 1.0)."},
        "masses": {"type": ["array", "null"], "items": _POS, "minItems": 1, "default": None,
                   "description": "Mass of each atom type, in type order (LAMMPS types 1, "
                                  "2, ... or a file's type labels in order; lattice "
                                  "fractions' types 1, 2, ...), overriding md.mass and a "
                                  "data file's Masses (null: those)."},
        "temperature": {"type": "number", "minimum": 0, "default": 1.0,
                        "description": "Initial temperature (k_B = 1, over 3N - 3 degrees of "
                                       "freedom)."},
        "seed": {"type": "integer", "minimum": 0, "default": 87287,
                 "description": "Seed of the initial velocities (NumPy PCG64) and of the "
                                "Langevin noise stream."},
        "potential": {
            "type": "object", "additionalProperties": False, "default": {},
            "description": "Pair potential.",
            "properties": {
                "style": {"enum": ["lj/cut", "wca"], "default": "lj/cut",
                          "description": "lj/cut: truncated 12-6 Lennard-Jones. wca: the "
                                         "purely repulsive Weeks-Chandler-Andersen potential, "
                                         "lj/cut with every pair's cutoff at 2^(1/6) sigma and "
                                         "the energy shifted to zero there (cutoff and shift "
                                         "are set by the style)."},
                "epsilon": {**_POS, "default": 1.0, "description": "Well depth."},
                "sigma": {**_POS, "default": 1.0, "description": "Zero-crossing distance."},
                "cutoff": {**_POS, "default": 2.5,
                           "description": "Cutoff radius (plain truncation, like LAMMPS "
                                          "bench/in.lj)."},
                "shift": {"enum": [False, True, "energy", "force"], "default": False,
                          "description": "true or energy: shift the energy to zero at the "
                                         "cutoff (LAMMPS pair_modify shift yes; forces are "
                                         "unchanged). force: shift the force to zero there "
                                         "and the energy with it, e(r) - e(rc) + (r - rc) "
                                         "f(rc) (LAMMPS pair lj/smooth/linear; no tail "
                                         "correction)."},
                "mixing": {"enum": ["geometric", "arithmetic"], "default": "geometric",
                           "description": "Coefficients of unlike type pairs not given in "
                                          "md.pair_coeffs: geometric means (LAMMPS' default "
                                          "for lj/cut) or arithmetic sigma and cutoff "
                                          "(Lorentz-Berthelot)."},
                "tail": {"type": "boolean", "default": False,
                         "description": "Add the analytic long-range corrections for energy "
                                        "and pressure (LAMMPS pair_modify tail yes: g(r) = 1 "
                                        "beyond the cutoff); forces are unchanged."},
            },
        },
        "pair_coeffs": {
            "type": ["array", "null"], "default": None,
            "description": "Lennard-Jones coefficients per pair of atom types (LAMMPS "
                           "pair_coeff), overriding md.potential and a data file's Pair Coeffs; "
                           "like pairs not given take md.potential, unlike pairs "
                           "md.potential.mixing.",
            "items": {
                "type": "object", "additionalProperties": False,
                "required": ["types", "epsilon", "sigma"],
                "properties": {
                    "types": {"type": "array", "minItems": 2, "maxItems": 2,
                              "items": {"type": ["string", "integer"]},
                              "description": "The two type names (LAMMPS type numbers or "
                                             "labels)."},
                    "epsilon": {"type": "number", "minimum": 0},
                    "sigma": _POS,
                    "cutoff": {"type": ["number", "null"], "exclusiveMinimum": 0,
                               "default": None,
                               "description": "null: md.potential.cutoff."},
                },
            },
        },
        "neighbor": {
            "type": "object", "additionalProperties": False, "default": {},
            "description": "Verlet neighbour lists.",
            "properties": {
                "skin": {"type": "number", "minimum": 0, "default": 0.3,
                         "description": "Extra distance beyond the cutoff; lists are rebuilt "
                                        "when any atom moved more than skin / 2."},
                "capacity": {"type": ["integer", "null"], "minimum": 1, "default": None,
                             "description": "Initial neighbours per atom (null: estimated "
                                            "from the density); grows on overflow."},
            },
        },
        "timestep": {**_POS, "default": 0.005, "description": "Time step (LJ time units)."},
        "ensemble": {"enum": ["nve", "langevin", "bussi", "nose-hoover", "npt"],
                     "default": "nve",
                     "description": "nve: velocity Verlet. langevin: velocity Verlet plus "
                                    "Langevin drag and noise forces (NVT). bussi: velocity "
                                    "Verlet plus stochastic velocity rescaling (NVT; LAMMPS "
                                    "fix temp/csvr). nose-hoover: a Nose-Hoover chain (NVT; "
                                    "LAMMPS fix nvt). npt: isotropic Martyna-Tobias-Klein "
                                    "barostat (md.barostat) with the Nose-Hoover chain "
                                    "(md.nose_hoover) on the atoms (LAMMPS fix npt iso)."},
        "langevin": {
            "type": "object", "additionalProperties": False, "default": {},
            "description": "Langevin thermostat (used when md.ensemble is langevin).",
            "properties": {
                "temperature": {"type": ["number", "null"], "minimum": 0, "default": None,
                                "description": "Target temperature (null: md.temperature)."},
                "damping": {**_POS, "default": 1.0,
                            "description": "Damping time (friction = mass / damping)."},
                "seed": {"type": ["integer", "null"], "minimum": 0, "default": None,
                         "description": "Noise seed (null: md.seed)."},
            },
        },
        "bussi": {
            "type": "object", "additionalProperties": False, "default": {},
            "description": "Stochastic velocity rescaling (Bussi, Donadio and Parrinello "
                           "2007; used when md.ensemble is bussi).",
            "properties": {
                "temperature": {"type": ["number", "null"], "minimum": 0, "default": None,
                                "description": "Target temperature (null: md.temperature)."},
                "damping": {**_POS, "default": 0.5,
                            "description": "Relaxation time of the kinetic energy."},
                "seed": {"type": ["integer", "null"], "minimum": 0, "default": None,
                         "description": "Random seed (null: md.seed)."},
            },
        },
        "nose_hoover": {
            "type": "object", "additionalProperties": False, "default": {},
            "description": "Nose-Hoover chain (used when md.ensemble is nose-hoover or npt).",
            "properties": {
                "temperature": {"type": ["number", "null"], "minimum": 0, "default": None,
                                "description": "Target temperature (null: md.temperature)."},
                "damping": {**_POS, "default": 0.5,
                            "description": "Period of the thermostat's oscillation (LAMMPS "
                                           "Tdamp; about 100 time steps is usual)."},
                "chain": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3,
                          "description": "Thermostats in the chain (LAMMPS tchain)."},
            },
        },
        "barostat": {
            "type": "object", "additionalProperties": False, "default": {},
            "description": "Isotropic Martyna-Tobias-Klein barostat (used when md.ensemble is "
                           "npt; LAMMPS fix npt ... iso P P damping pchain n). The box and "
                           "every position scale by one factor each step; slab edges, cells "
                           "and the tail correction follow the box at each list rebuild.",
            "properties": {
                "pressure": {"type": ["number", "null"], "default": None,
                             "description": "Target pressure (LJ units; required for npt)."},
                "damping": {**_POS, "default": 5.0,
                            "description": "Period of the box's oscillation (LAMMPS Pdamp; "
                                           "about 1000 time steps is usual)."},
                "chain": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3,
                          "description": "Thermostats on the barostat (LAMMPS pchain; 0: "
                                         "none)."},
            },
        },
        "steps": {"type": ["integer", "null"], "minimum": 0, "default": None,
                  "description": "Steps for MDSolver.run (null: run.steps)."},
        "thermo_every": {"type": "integer", "minimum": 1, "default": 50,
                         "description": "Steps between thermo lines (step 0 always)."},
    },
}

_CASE_DEFAULTS: dict[str, Any] = {
    "physics": "md",
    "run": {"steps": 100, "backend": "cpu", "precision": "float64"},
    "decomposition": {"subdomains": 1, "weights": None},
    "output": {"dir": None, "every": None},
}


def _fill(node: Any, schema: dict[str, Any]) -> None:
    if not isinstance(node, dict):
        return
    for key, sub in schema.get("properties", {}).items():
        if key not in node and "default" in sub:
            node[key] = copy.deepcopy(sub["default"])
        if key in node:
            _fill(node[key], sub)


def fill_md_defaults(case: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``case`` with every missing MD and common default filled in."""
    case = copy.deepcopy(case)
    for key, value in _CASE_DEFAULTS.items():
        if isinstance(value, dict):
            section = case.setdefault(key, {})
            for k, v in value.items():
                section.setdefault(k, copy.deepcopy(v))
        else:
            case.setdefault(key, value)
    md = case.setdefault("md", {})
    _fill(md, MD_SCHEMA)
    if md.get("lattice") is not None:
        md["lattice"].setdefault("type", "fcc")
    if md.get("mass") is None:
        mass = file_mass(md) if md.get("init_file") is not None else None
        md["mass"] = 1.0 if mass is None else mass
    return case


def check_md_case(case: dict[str, Any]) -> None:
    """Checks the schema cannot express; raises ``ValueError`` naming the offending key."""
    md = case["md"]
    has_lattice = md.get("lattice") is not None
    has_file = md.get("init_file") is not None
    if has_lattice == has_file:
        raise ValueError("md.lattice: give exactly one of md.lattice and md.init_file")
    pot = md.get("potential", {})
    if pot.get("sigma", 1.0) > pot.get("cutoff", 2.5):
        raise ValueError(f"md.potential.cutoff: {pot.get('cutoff')!r} is below sigma")
    cutoff = _pair_cutoff(md, has_file)
    _check_masses(md, has_file)
    if pot.get("shift") == "force" and pot.get("tail"):
        raise ValueError("md.potential.tail: no tail correction for shift: force (the "
                         "force-shifted potential is not LJ beyond any distance)")
    if md.get("ensemble") == "npt" and (md.get("barostat") or {}).get("pressure") is None:
        raise ValueError("md.barostat.pressure: md.ensemble npt needs a target pressure")
    if has_file:
        check_typed_file(md)
        _, box, _ = read_positions(md["init_file"])  # a bad file: one line now, not a traceback
        if typed_file_box(md) is not None:
            _check_file_box(case, box)
    if has_lattice:
        lat = md["lattice"]
        a = (4.0 / lat["density"]) ** (1.0 / 3.0)
        reach = cutoff + md.get("neighbor", {}).get("skin", 0.3)
        for n, name in zip(lat["cells"], "xyz", strict=True):
            if n * a < 2.0 * reach:
                raise ValueError(
                    f"md.lattice.cells: {n} cells along {name} give a box of {n * a:.4g}, "
                    f"shorter than 2 * (cutoff + skin) = {2 * reach:.4g}")
        _check_slabs(case, lat["cells"][2] * a, reach)


def _pair_cutoff(md: dict[str, Any], has_file: bool) -> float:
    """The largest cutoff of any type pair (the list's reach); ``ValueError`` naming the key
    for pair coefficients the types cannot take (an unknown type, a cutoff below sigma)."""
    pot = {"epsilon": 1.0, "sigma": 1.0, "cutoff": 2.5, **md.get("potential", {})}
    full = {**md, "potential": pot}
    names = _type_names(full, has_file)
    return build_pair_table(full, names, file_pair_coeffs(full) if has_file else None
                            ).max_cutoff


def _check_masses(md: dict[str, Any], has_file: bool) -> None:
    """md.masses: one per atom type."""
    names = _type_names(md, has_file)
    masses = md.get("masses")
    if masses is not None and len(masses) != len(names):
        raise ValueError(f"md.masses: {len(masses)} masses for {len(names)} atom type(s) "
                         f"({', '.join(names)})")


def _type_names(md: dict[str, Any], has_file: bool) -> list[str]:
    if has_file or (md.get("lattice") or {}).get("fractions"):
        return atom_types(md, 1)[1]
    return ["1"]


def _check_file_box(case: dict[str, Any], box: np.ndarray) -> None:
    """A file's box: every edge at least 2 (cutoff + skin), every slab cutoff + skin thick."""
    md = case["md"]
    reach = _pair_cutoff(md, True) + md.get("neighbor", {}).get("skin", 0.3)
    for edge, name in zip(box, "xyz", strict=True):
        if edge < 2.0 * reach:
            raise ValueError(f"md.init_file: {md['init_file']} has a box of {edge:.4g} along "
                             f"{name}, shorter than 2 * (cutoff + skin) = {2 * reach:.4g}")
    _check_slabs(case, float(box[2]), reach)


def _check_slabs(case: dict[str, Any], lz: float, reach: float) -> None:
    parts = case.get("decomposition", {}).get("subdomains", 1)
    weights = case.get("decomposition", {}).get("weights") or [1.0] * parts
    if len(weights) == parts:
        thinnest = lz * min(weights) / sum(weights)
        if thinnest < reach:
            raise ValueError(
                f"decomposition.subdomains: {parts} slabs make a slab {thinnest:.4g} thick, "
                f"less than cutoff + skin = {reach:.4g}")
