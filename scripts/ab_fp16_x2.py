"""Builds of the fp16 two-cell D3Q19 kernel (d3q19_stream_collide_x2) against production,
raw launches alternating in one process (issue 25).

The builds: production (this tree, source.D3Q19_X2_16BIT, source.D3Q19_X2_SPLIT_PATHS as
set); this tree with its vector and scalar paths as separate code
(SIMSPLIT_D3Q19_X2_SPLIT_PATHS=1) at each of ``--shapes`` (threads x resident blocks asked of
the register allocator); with ``--base DIR`` also another tree's kernel files at the production
shape (``mkdir DIR && git archive REV kernels | tar -x --strip-components=1 -C DIR``). Every
build is first checked bit for bit against this tree's one-cell kernel (small random fields
with obstacles, periodic and not, even and odd nx, as scripts/tune_d3q19_fp16.py checks its
candidates); then each is timed at n^3 (float32 arithmetic, the cavity of
scripts/tune_d3q19.py) in ``--rounds`` rounds, the order reversed every other round. Prints
registers, local bytes, MLUPS per round, the mean against production and the fraction of the
copy bandwidth that 77 B per update would need.

Usage: python scripts/ab_fp16_x2.py [--shapes 64x16,64x12,128x8] [--base DIR] [--n 512]
                                    [--steps 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_d2q9 import copy_bandwidth, timed_launches  # noqa: E402
from tune_d3q19_fp16 import (  # noqa: E402
    BYTES_PER_UPDATE,
    build,
    check_one_step,
    fields,
    launch_one,
    one_step_name,
    production_one_step,
)

from simsplit.backends.cuda_c import source  # noqa: E402

X2_NAME = one_step_name("float16", 2)


def build_x2(block: int, min_blocks: int, defines: tuple[str, ...] = (),
             files: dict[str, str] | None = None):
    """The fp16 two-cell kernel at ``block`` threads x ``min_blocks`` with ``defines``;
    ``files`` replace this tree's kernel files by name."""
    defines = (f"SIMSPLIT_D3Q19_X2_BLOCK_X={block}", f"SIMSPLIT_D3Q19_X2_MIN_BLOCKS={min_blocks}",
               *defines)
    return build([X2_NAME], None, defines, files).get_function(X2_NAME)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path)
    ap.add_argument("--shapes", default="64x16,64x12,128x8")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    block0, blocks0 = source.D3Q19_X2_16BIT or (64, 16)
    builds = [("production", block0, blocks0, (), None)]
    for shape in args.shapes.split(","):
        block, blocks = (int(v) for v in shape.split("x"))
        builds.append((f"split {block}x{blocks}", block, blocks,
                       ("SIMSPLIT_D3Q19_X2_SPLIT_PATHS=1",), None))
    if args.base is not None:
        files = {p.name: p.read_text() for p in args.base.iterdir()
                 if p.suffix in (".cu", ".cuh")}
        if "d3q19.cu" not in files:
            sys.exit(f"{args.base}: no d3q19.cu")
        builds.append((f"base {block0}x{blocks0}", block0, blocks0, (), files))
    t0 = time.time()
    one_cell, _ = production_one_step("float16")
    kernels = {}
    for label, block, blocks, defines, files in builds:
        kern = build_x2(block, blocks, defines, files)
        bits = "yes" if check_one_step(one_cell, kern, block, 2) else "NO"
        kernels[label] = (kern, block)
        print(f"{label:>14}: {kern.num_regs} registers, {kern.local_size_bytes} local bytes, "
              f"bits == one cell: {bits}", flush=True)
    print(f"built and checked in {time.time() - t0:.0f} s", flush=True)
    n, steps = args.n, args.steps
    f, flags = fields(n, "float16")
    macro = [cupy.zeros((1, 1, 1), cupy.float32) for _ in range(4)]
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s; {n}^3, {steps} launches a timing", flush=True)
    rates: dict[str, list[float]] = {label: [] for label in kernels}
    for r in range(args.rounds):
        for label in (kernels if r % 2 == 0 else reversed(list(kernels))):
            kern, block = kernels[label]

            def step(k: int, kern=kern, block=block) -> None:
                launch_one(kern, f[k % 2], f[(k + 1) % 2], flags, macro, (n, n, n), False,
                           block=block, cells_x=2)

            rates[label].append(n ** 3 * steps / timed_launches(step, steps) / 1e6)
        print(f"round {r}: " + ", ".join(f"{lab} {v[-1]:.0f}" for lab, v in rates.items()),
              flush=True)
    base = float(np.mean(rates[builds[0][0]]))
    for label, v in rates.items():
        mean = float(np.mean(v))
        print(f"{label:>14}: {mean:8.0f} MLUPS mean, {mean / base:.4f}x production, "
              f"{100 * mean * 1e6 * BYTES_PER_UPDATE['float16'] / bw:.1f} % of copy")


if __name__ == "__main__":
    main()
