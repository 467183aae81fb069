"""D3Q19 512^3 fp16 storage: the two-cell pull kernel (source.D3Q19_X2_16BIT) against the
one-cell kernel, alternating in one process (issue 25). Prints MLUPS of each, and their ratio.

Whole solver steps as production builds them (FluidSolver, graphs, the store-macro step at
the end of each chunk; launches are counted by kind, so a fall-back to one cell on unaligned
rows shows); the one-cell solver takes the launcher's own one-cell choice (the kernel and
block of D3Q19_X2_16BIT None) from the same module, which saves a second build of the file.
With --kernels also raw launches on the cavity fields of
scripts/tune_d3q19.py, as scripts/tune_d3q19_fp16.py (branch fp16-speed) timed its candidates:
the two-cell kernel built as that tuner built "pairs 64 x 16" (this checkout's d3q19.cu, the
generated header's SIMSPLIT_BLOCK_X set to 64, 64 threads x 2 cells; nvcc 13.0 gives its
unforced kernel the SASS of the tuner's build of fp16-speed's source), production's two-cell
kernel from the solver's own module, and production's one-cell kernel at
source.D3Q19_FP16_BLOCK_X threads. Each kernel's registers and local bytes are printed as
the device's NVRTC built them.

Usage: python scripts/bench_fp16_x2.py [--n 512] [--steps 50] [--rounds 3] [--kernels]
                                       [--kernel-steps 40]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_d2q9 import timed_launches  # noqa: E402
from tune_d3q19 import fields  # noqa: E402

from simsplit.backends.cuda_c import d3q19 as launcher  # noqa: E402
from simsplit.backends.cuda_c import d3q19_modules, kernel_names, source  # noqa: E402
from simsplit.backends.cuda_c.d2q9 import compile_options  # noqa: E402
from simsplit.backends.layout import field_strides  # noqa: E402
from simsplit.case import validate_case  # noqa: E402
from simsplit.fluid.solver import FluidSolver  # noqa: E402
from simsplit.parallel.context import ParallelContext  # noqa: E402

#: threads per block of the tuner's "pairs 64 x 16" build (its header's SIMSPLIT_BLOCK_X)
TUNER_BLOCK = 64


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


def count_launch_kinds(one_cell: list[bool]) -> dict[int, int]:
    """x-cells per thread of every two-lattice launch the solver sets up (graph replays do
    not pass through Python: capture and warm-up launches are what is counted). While
    ``one_cell[0]``, every launch takes the launcher's own one-cell choice (the kernel and
    block it takes with D3Q19_X2_16BIT None or on unaligned rows, from the same module: no
    second NVRTC build of the whole file)."""
    taken: dict[int, int] = {}
    pick = launcher.D3Q19Kernels._pull_launch

    def spy(self, variant, f_src, f_dst):
        got = pick(self, variant, f_src, f_dst)
        if one_cell[0] and got[2] == 2:
            got = (self._collide[variant], d3q19_modules.default_block(variant[1]), 1)
        taken[got[2]] = taken.get(got[2], 0) + 1
        return got

    launcher.D3Q19Kernels._pull_launch = spy
    return taken


def x2_name() -> str:
    return kernel_names.d3q19_x2_name(np.float32, np.float16, False, False, False)


def one_cell_name() -> str:
    return kernel_names.d3q19_stream_collide_name(np.float32, np.float16, False, False, False)


def tuner_build():
    """The two-cell kernel as scripts/tune_d3q19_fp16.py built "pairs 64 x 16": the header's
    SIMSPLIT_BLOCK_X 64, the production options, one name expression."""
    header = source.generated_header()
    line = f"#define SIMSPLIT_BLOCK_X {source.BLOCK_X}"
    assert line in header
    header = header.replace(line, f"#define SIMSPLIT_BLOCK_X {TUNER_BLOCK}")
    code = source.expand_includes("d3q19.cu", {source.GENERATED_HEADER: header})
    mod = cupy.RawModule(code=code, options=compile_options(0), name_expressions=[x2_name()])
    return mod.get_function(x2_name())


def production_kernels():
    """(two-cell, one-cell) kernels of the module the solver loads for float32 on fp16."""
    mod = d3q19_modules._pair_module(0, np.dtype(np.float32), np.dtype(np.float16))
    return mod.get_function(x2_name()), mod.get_function(one_cell_name())


def launch(kern, block: int, cells_x: int, f_src, f_dst, flags, macro, n: int) -> None:
    """One raw launch over the n^3 cavity, as the tuner's launch_one: all planes, TRT rates
    1/0.7 and 1/1.1, lid 0.07, no force, no periodic axis."""
    strides = tuple(np.int64(v) for v in field_strides(f_src, flags, f_dst))
    kern((-(-n // (block * cells_x)), n, n), (block,),
         (f_src, f_dst, flags, *macro, *map(np.int32, (n, n, n)), *strides, np.int32(1),
          np.int32(n + 1), np.float32(1 / 0.7), np.float32(1 / 1.1), np.float32(0.07),
          np.float32(0), np.float32(0), np.float32(0), np.int32(0), np.int32(0)))


def kernel_rows() -> list[tuple[str, object, int, int]]:
    """(label, kernel, threads per block, x-cells per thread) of the raw-launch timings."""
    x2, one = production_kernels()
    return [("tuner-built pairs 64 x 16", tuner_build(), TUNER_BLOCK, 2),
            ("production two cells", x2, source.D3Q19_X2_16BIT[0], 2),  # type: ignore[index]
            ("production one cell", one, source.D3Q19_FP16_BLOCK_X, 1)]


def time_kernels(rows, f, flags, n: int, steps: int) -> dict[str, float]:
    macro = [cupy.zeros((1, 1, 1), cupy.float32) for _ in range(4)]
    got = {}
    for label, kern, block, cells_x in rows:
        def step(k: int, kern=kern, block=block, cells_x=cells_x) -> None:
            launch(kern, block, cells_x, f[k % 2], f[(k + 1) % 2], flags, macro, n)

        got[label] = n ** 3 * steps / timed_launches(step, steps) / 1e6
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--steps", type=int, default=50, help="solver steps per timing")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernels", action="store_true",
                    help="also raw launches: the tuner's pairs build, production's two-cell "
                         "and one-cell kernels")
    ap.add_argument("--kernel-steps", type=int, default=40, help="launches per raw timing")
    a = ap.parse_args()
    t0 = time.perf_counter()
    print(f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"D3Q19_X2_16BIT {source.D3Q19_X2_16BIT}, fp16 one-cell block "
          f"{source.D3Q19_FP16_BLOCK_X}", flush=True)
    rows, f, flags = [], None, None
    if a.kernels:
        rows = kernel_rows()
        for label, kern, block, cells_x in rows:
            local = getattr(kern, "local_size_bytes", "?")
            print(f"  {label}: {kern.num_regs} registers, {local} local bytes, {block} threads "
                  f"x {cells_x} cells", flush=True)
        f, flags = fields(a.n, "float16")
        print(f"built in {time.perf_counter() - t0:.0f} s", flush=True)
    one_cell = [False]
    taken = count_launch_kinds(one_cell)
    for r in range(a.rounds):
        if rows:
            raw = time_kernels(rows, f, flags, a.n, a.kernel_steps)
            print(f"round {r}: raw launches " + ", ".join(f"{k} {v:9.0f}" for k, v in raw.items())
                  + f" MLUPS; ratios to one cell: tuner-built "
                  f"{raw[rows[0][0]] / raw[rows[2][0]]:.4f}, production two cells "
                  f"{raw[rows[1][0]] / raw[rows[2][0]]:.4f}", flush=True)
        got = {}
        order = (("two cells", False), ("one cell", True))
        for label, one in order if r % 2 == 0 else order[::-1]:
            one_cell[0] = one
            taken.clear()
            s = solver(a.n)
            got[label] = mlups(s, a.n, a.steps)
            kinds = ", ".join(f"{c} cell(s) x{m}" for c, m in sorted(taken.items()))
            print(f"  solver {label}: launches set up: {kinds}", flush=True)
            del s
            cupy.get_default_memory_pool().free_all_blocks()
        print(f"round {r}: fp16 {a.n}^3 solver steps: two cells {got['two cells']:9.0f} MLUPS, "
              f"one cell {got['one cell']:9.0f}, ratio {got['two cells'] / got['one cell']:.4f}"
              f" ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
