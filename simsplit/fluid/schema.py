"""JSON schema of the ``fluid:`` and ``domain:`` sections of a case file."""

from __future__ import annotations

from simsplit.fluid.params import DEFAULT_TRT_MAGIC

_NUMBER = {"type": "number"}

FLUID_SCHEMA = {
    "type": "object",
    "description": "Lattice Boltzmann fluid (D2Q9).",
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
        "body_force": {
            "type": "array", "items": _NUMBER, "minItems": 2, "maxItems": 2,
            "default": [0.0, 0.0],
            "description": "Uniform body force [fx, fy] per unit volume, lattice units (Guo).",
        },
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
            "minItems": 2, "maxItems": 2,
            "description": "Cells [nx, ny]; slabs are cut along y.",
        },
        "boundaries": {
            "type": "object", "additionalProperties": False, "default": {},
            "description": "Boundary of each axis.",
            "properties": {
                "x": {"enum": ["wall", "periodic"], "default": "wall",
                      "description": "Faces x = 0 and x = 1."},
                "y": {"enum": ["wall", "periodic"], "default": "wall",
                      "description": "Faces y = 0 and y = 1."},
                "lid": {"type": "boolean", "default": True,
                        "description": "The wall at y = 1 moves in +x at fluid.lid_velocity."},
            },
        },
    },
}
