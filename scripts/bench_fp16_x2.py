"""D3Q19 512^3 fp16 storage: the two-cell pull kernel (source.D3Q19_X2_16BIT) against the
one-cell kernel, alternating in one process (issue 25). Prints MLUPS of each, and their ratio.

Usage: python scripts/bench_fp16_x2.py [--n 512] [--steps 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

import cupy

from simsplit.backends.cuda_c import source
from simsplit.case import validate_case
from simsplit.fluid.solver import FluidSolver
from simsplit.parallel.context import ParallelContext


def solver(n: int) -> FluidSolver:
    case = validate_case({
        "physics": "fluid", "fluid": {"reynolds": 1000, "lid_velocity": 0.05},
        "domain": {"shape": [n, n, n]},
        "run": {"backend": "cupy", "precision": "float32", "storage": "float16",
                "temporal_blocking": False, "devices": [0]},
        "output": {"dir": None}})
    return FluidSolver(case, ParallelContext("cupy", [0], "auto"))


def mlups(s: FluidSolver, n: int, steps: int) -> float:
    s.step(steps)  # warm-up, graph capture
    cupy.cuda.Device().synchronize()
    t = time.perf_counter()
    s.step(steps)
    cupy.cuda.Device().synchronize()
    return n ** 3 * steps / (time.perf_counter() - t) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    kept = source.D3Q19_X2_16BIT
    for r in range(a.rounds):
        got = {}
        for label, x2 in (("two cells", kept), ("one cell", None)):
            source.D3Q19_X2_16BIT = x2
            s = solver(a.n)
            got[label] = mlups(s, a.n, a.steps)
            del s
            cupy.get_default_memory_pool().free_all_blocks()
        print(f"round {r}: fp16 {a.n}^3 two cells {got['two cells']:9.0f} MLUPS, one cell "
              f"{got['one cell']:9.0f}, ratio {got['two cells'] / got['one cell']:.4f}",
              flush=True)
    source.D3Q19_X2_16BIT = kept


if __name__ == "__main__":
    main()
