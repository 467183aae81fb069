"""The full case-file schema: common sections here, physics sections from their packages."""

from __future__ import annotations

from typing import Any

from simsplit.backends import BACKEND_CHOICES
from simsplit.fluid.schema import DOMAIN_SCHEMA, FLUID_RUN_PROPERTIES, FLUID_SCHEMA
from simsplit.transport import TRANSPORT_CHOICES

PHYSICS = ("fluid", "md")

#: load balance (fluid): no default, so a case without it validates to the same dict as before
BALANCE_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "description": "Load balance (fluid): time each slab's own update, then move slab "
                   "boundaries so slabs get layers in proportion to their speed. Never changes "
                   "results. Reported in the summary and run.json.",
    "properties": {
        "probe_steps": {"type": "integer", "minimum": 0, "default": 20,
                        "description": "Steps timed per slab before choosing the split (0: off); "
                                       "as many again then measure the new split."},
        "skip_steps": {"type": "integer", "minimum": 0, "default": 2,
                       "description": "Steps run first and not timed (compilation, warm-up)."},
        "every": {"type": "integer", "minimum": 0, "default": 0,
                  "description": "Probe again every this many steps (0: balance once); at "
                                 "least 2 x probe_steps."},
        "min_gain": {"type": "number", "minimum": 0, "default": 0.02,
                     "description": "Re-split only if the predicted step time drops by at least "
                                    "this fraction."},
    },
}

DECOMPOSITION_SCHEMA = {
    "type": "object", "additionalProperties": False, "default": {},
    "description": "How space is cut into slabs along the slowest axis.",
    "properties": {
        "subdomains": {"type": "integer", "minimum": 1, "maximum": 4096, "default": 1,
                       "description": "Number of slabs (under mpiexec: one per rank)."},
        "weights": {
            "type": ["array", "null"], "items": {"type": "number", "exclusiveMinimum": 0},
            "minItems": 1, "default": None,
            "description": "Relative slab sizes, one positive number per slab (optional).",
        },
        "balance": BALANCE_SCHEMA,
    },
}

RUN_SCHEMA = {
    "type": "object", "additionalProperties": False, "default": {},
    "description": "How long and where to run.",
    "properties": {
        "steps": {"type": "integer", "minimum": 0, "default": 100000,
                  "description": "Upper bound on time steps."},
        "tolerance": {
            "type": "number", "minimum": 0, "default": 1.0e-7,
            "description": "Steady-state stop: max|u - u_prev| / max|u| between checks "
                           "(0 runs all steps).",
        },
        "check_every": {"type": "integer", "minimum": 1, "default": 200,
                        "description": "Steps between convergence and health checks."},
        "backend": {"enum": list(BACKEND_CHOICES), "default": "auto",
                    "description": "auto picks cupy when a GPU is present, else cpu."},
        "precision": {"enum": ["float32", "float64"], "default": "float64",
                      "description": "Floating-point type of fields and arithmetic."},
        **FLUID_RUN_PROPERTIES,
        "transport": {
            "enum": list(TRANSPORT_CHOICES), "default": "auto",
            "description": "How halos travel. auto: local (cpu) or peer (GPUs) in one process, "
                           "nccl between GPU ranks (mpi where ranks share a GPU), mpi between "
                           "cpu ranks. peer: device to "
                           "device copies in one process; nccl: NCCL send/recv; mpi: MPI with "
                           "host staging for GPU buffers; mpi-cuda-aware: MPI on device "
                           "buffers (needs a CUDA-aware MPI).",
        },
        "devices": {
            "type": ["array", "null"], "items": {"type": "integer", "minimum": 0},
            "minItems": 1, "uniqueItems": True, "default": None,
            "description": "GPU ids to use (null: all). One process puts slab i on "
                           "devices[i mod len]; under MPI a rank takes "
                           "devices[node-local rank mod len].",
        },
        "overlap": {"type": "boolean", "default": True,
                    "description": "Send halos while the slab interior is computed (false: "
                                   "exchange, then compute; for measurement). Results are "
                                   "bitwise identical either way."},
        "timing": {"enum": [False, True, "device"], "default": False,
                   "description": "Per-phase timing breakdown. true: synchronise the device at "
                                  "each phase (exact, but serialises the overlap); device: CUDA "
                                  "events on the compute stream, nothing synchronised, so the "
                                  "wait phase is the exchange left on the critical path (cupy; "
                                  "other backends fall back to true)."},
        "debug": {"type": "boolean", "default": False,
                  "description": "Synchronise after every kernel launch, so a CUDA error names "
                                 "the kernel that caused it, and check halos for NaN after each "
                                 "exchange; turns CUDA graphs off (slow: for finding faults)."},
        "autotune": {"type": "boolean", "default": False,
                     "description": "Time 64-512 threads per block for the cupy stream-collide "
                                    "kernels of each grid before the run and keep the fastest "
                                    "(cached in "
                                    "$SIMSPLIT_CACHE_DIR or ~/.cache/simsplit/autotune.json); "
                                    "results are bitwise unchanged."},
        "debug_throttle": {
            "type": "object", "additionalProperties": False, "required": ["slab"],
            "description": "Testing aid: make one slab slower, as if on a slower device (after "
                           "each update it waits (factor - 1) x the update's own time).",
            "properties": {
                "slab": {"type": "integer", "minimum": 0,
                         "description": "Slab to slow down (under mpiexec: the rank)."},
                "factor": {"type": "number", "minimum": 1, "default": 2.0,
                           "description": "How many times slower its updates take."},
            },
        },
    },
}

OUTPUT_SCHEMA = {
    "type": "object", "additionalProperties": False, "default": {},
    "description": "What is written where.",
    "properties": {
        "dir": {"type": ["string", "null"], "minLength": 1, "default": None,
                "description": "Output directory (null writes nothing)."},
        "every": {"type": ["integer", "null"], "minimum": 0, "default": None,
                  "description": "Steps between snapshots (fluid) or trajectory frames (md); "
                                 "0: only the final state. null: fluid writes only the final "
                                 "state; md writes about 100 frames over the run (every 1, 2 "
                                 "or 5 x 10^k steps, the smallest giving at most 100 intervals "
                                 "of md.steps or run.steps), fewer where 100 would pass "
                                 "512 MiB."},
        "plots": {"type": "boolean", "default": True,
                  "description": "Write PNG plots at the end."},
        "checkpoint_every": {
            "type": "integer", "minimum": 0, "default": 0,
            "description": "Steps between checkpoints in <dir>/checkpoints (0: only at the end); "
                           "with N > 0 one is also written at the start. SIGINT/SIGTERM "
                           "always write one."},
        "keep_checkpoints": {"type": "integer", "minimum": 1, "default": 3,
                             "description": "How many of the newest checkpoints to keep."},
        "probes": {
            "type": "array",
            "items": {"type": "object", "additionalProperties": False,
                      "required": ["name", "point"],
                      "properties": {"name": {"type": "string", "minLength": 1},
                                     "point": {"type": "array", "items": {"type": "number"},
                                               "minItems": 2, "maxItems": 3}}},
            "description": "Named points [x, y] ([x, y, z] in 3D; in domain.units) whose "
                           "cell's density, pressure and velocity are recorded every "
                           "output.forces_every steps: probes.h5, the summary, run.json "
                           "(lattice units, and physical ones with fluid.physical).",
        },
        "animation": {"type": "integer", "minimum": 0, "default": 0,
                      "description": "2D fluid: steps between the frames of vorticity.gif, an "
                                     "animation of the vorticity (Pillow; the last 150 frames "
                                     "of the run); 0: none."},
        "forces_every": {"type": "integer", "minimum": 1, "default": 50,
                         "description": "Steps between force measurements on domain.bodies "
                                        "and probe readings (and at the end): forces.h5, "
                                        "forces.png, probes.h5, the summary and run.json."},
    },
}


def case_schema() -> dict[str, Any]:
    """The JSON schema (draft 2020-12) every case file is checked against."""
    from simsplit.md.schema import MD_SCHEMA

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "required": ["physics"],
        "properties": {
            "physics": {"enum": list(PHYSICS), "description": "Which solver runs the case."},
            "fluid": FLUID_SCHEMA,
            "md": MD_SCHEMA,
            "domain": DOMAIN_SCHEMA,
            "decomposition": DECOMPOSITION_SCHEMA,
            "run": RUN_SCHEMA,
            "output": OUTPUT_SCHEMA,
        },
    }
