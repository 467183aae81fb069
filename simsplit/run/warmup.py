"""Compile the CPU kernels before the first real run (``simsplit warmup``).

The CPU kernels are Numba functions compiled on their first call and kept in Numba's on-disk
cache (``cache=True``). pip runs nothing at install time, and compiling at import would make
every import slow, so the cache is filled by this command instead: it runs the shipped cases
(2D and 3D fluid, Lennard-Jones MD) on tiny grids for a few steps on the CPU, in each
precision asked for, which compiles exactly the kernel variants those runs call. A container
image runs it at build time (Dockerfile).

Where the cache lives is Numba's choice: ``$NUMBA_CACHE_DIR`` when set, else the package's own
``__pycache__`` folders when they are writable, else the user's cache directory
(``~/.cache/numba``, ``$XDG_CACHE_HOME/numba``) for a read-only install. A run finds the
kernels only where the warmup put them: same user (or the same ``NUMBA_CACHE_DIR``), same
Numba, same CPU model.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

#: fluid and MD cases shaped like cases/cavity.yaml, cases/channel.yaml, cases/cavity3d.yaml and
#: cases/lj_tiny.yaml (two slabs, so the halo kernels compile too), small enough to run in a
#: fraction of a second; the channel's body force takes the forced variant of the D2Q9 row
#: kernel, the cavity the one without. The cavity goes two steps per sweep: 7 steps checked
#: every 4 run the two-step kernel with and without storing rho/u and a last single step; the
#: second cavity, one step per sweep, runs the one-step kernels as a case with bodies does
WARMUP_CASES: dict[str, dict[str, Any]] = {
    "D2Q9 fluid": {
        "physics": "fluid",
        "fluid": {"reynolds": 100, "lid_velocity": 0.1, "collision": "trt"},
        "domain": {"shape": [16, 16], "boundaries": {"x": "wall", "y": "wall", "lid": True}},
        "decomposition": {"subdomains": 2},
        "run": {"steps": 7, "check_every": 4},
    },
    "D2Q9 fluid, one step per sweep": {
        "physics": "fluid",
        "fluid": {"reynolds": 100, "lid_velocity": 0.1, "collision": "trt"},
        "domain": {"shape": [16, 16], "boundaries": {"x": "wall", "y": "wall", "lid": True}},
        "decomposition": {"subdomains": 2},
        "run": {"steps": 4, "check_every": 2, "temporal_blocking": False},
    },
    "D2Q9 forced channel": {
        "physics": "fluid",
        "fluid": {"viscosity": 0.1, "collision": "trt", "body_force": [1e-5, 0.0]},
        "domain": {"shape": [16, 16], "boundaries": {"x": "periodic", "y": "wall", "lid": False}},
        "decomposition": {"subdomains": 2},
        "run": {"steps": 4, "check_every": 2},
    },
    "D3Q19 fluid": {
        "physics": "fluid",
        "fluid": {"reynolds": 100, "lid_velocity": 0.1, "collision": "trt"},
        "domain": {"shape": [8, 8, 8],
                   "boundaries": {"x": "wall", "y": "wall", "z": "wall", "lid": True}},
        "decomposition": {"subdomains": 2},
        "run": {"steps": 4, "check_every": 2},
    },
    "LJ MD": {
        "physics": "md",
        "md": {"lattice": {"type": "fcc", "density": 0.8442, "cells": [6, 6, 6]},
               "temperature": 1.44, "potential": {"style": "lj/cut", "cutoff": 2.5},
               "neighbor": {"skin": 0.3}, "timestep": 0.005, "thermo_every": 20},
        "decomposition": {"subdomains": 2},
        "run": {"steps": 40},  # long enough for neighbour-list rebuilds and migration
    },
}

PRECISIONS = ("float64", "float32")


@dataclass(frozen=True)
class WarmupResult:
    """One case in one precision: kernel variants compiled now, variants found in the cache,
    and the seconds it took."""

    label: str
    precision: str
    compiled: int
    loaded: int
    seconds: float


def warmup_case(label: str, precision: str) -> dict[str, Any]:
    """The case :func:`warm_cpu_kernels` runs for ``label`` in ``precision``: CPU, no output."""
    case = copy.deepcopy(WARMUP_CASES[label])
    case["run"].update(backend="cpu", precision=precision, tolerance=0.0)
    case["output"] = {"dir": None}
    return case


def warm_cpu_kernels(precisions: Iterable[str] = PRECISIONS,
                     on_result: Callable[[WarmupResult], None] | None = None
                     ) -> list[WarmupResult]:
    """Run every :data:`WARMUP_CASES` case in each of ``precisions`` on the CPU, so that Numba
    compiles and caches the kernels a run of the shipped cases calls. Returns one result per
    case and precision (``on_result`` sees each as it comes)."""
    from simsplit.backends.cpu.jit_cache import cache_counts
    from simsplit.run.simulation import Simulation

    results = []
    for precision in precisions:
        for label in WARMUP_CASES:
            before, start = cache_counts(), time.perf_counter()
            Simulation(warmup_case(label, precision)).run(progress=False, output=False)
            done = cache_counts() - before
            result = WarmupResult(label, precision, done.compiled, done.loaded,
                                  time.perf_counter() - start)
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def cache_directories() -> tuple[str, ...]:
    """Where this process's CPU kernels are cached (one folder per kernel source folder)."""
    from simsplit.backends.cpu.jit_cache import cache_counts

    return cache_counts().directories
