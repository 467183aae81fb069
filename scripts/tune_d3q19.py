"""Compile variants of the D3Q19 stream-collide kernel and time them on one GPU (raw launches).

Variants: threads per block, resident blocks per SM asked of the register allocator
(``__launch_bounds__``), whether every cell reads its sources' flags (the D2Q9 scheme) or
only cells flagged NEAR_WALL do, and cells along x per thread (2: d3q19_stream_collide_x2,
populations moved as 2-element vectors, kernels/d3q19.cu); for float32 and fp16 population
storage, on the solver's
padded layout (512^3 by default: 20.6 GB in float32). Prints MLUPS and the fraction of the
device-to-device copy bandwidth measured in the same run (153 B per float32 cell update, 77 B
in fp16: populations read + written, the flag byte).
Usage: python scripts/tune_d3q19.py [--n 512] [--steps 20] [--storages float16]
                                   [--variants 5 7] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_d2q9 import copy_bandwidth, timed_launches  # noqa: E402

from simsplit.backends import layout  # noqa: E402
from simsplit.backends.cpu import CPUBackend  # noqa: E402
from simsplit.backends.cuda_c import kernel_names, source  # noqa: E402
from simsplit.backends.layout import field_strides, padded_empty  # noqa: E402
from simsplit.fluid.block import D3Q19Block, Face  # noqa: E402
from simsplit.numerics.lbm_params import D3Q19Params  # noqa: E402
from simsplit.numerics.storage import E4M11_DTYPE  # noqa: E402

CTYPE = {"float32": "float", "float16": "lbm::half16", "e4m11": "lbm::e4m11"}
STORAGE_DTYPE = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                 "e4m11": E4M11_DTYPE}
#: (threads per block, resident blocks per SM asked for, extras, cells per thread); extras:
#: "nbflags" (every cell reads its sources' flags), "stcs" / "ldcs" (streaming, evict-first
#: stores / loads). The 2026-12-02 19:35 run (benchmarks/logs/tune_d3q19_h200_2026-12-02.log) found
#: neighbour flags slower and 84 registers (37.5 % occupancy) at one block; the one-cell
#: variants ask the allocator for 50-62.5 %. Two cells per thread take 109 (fp16) to 127
#: (float32) registers at one block (ptxas sm_90: two blocks of 256 resident) and spill from
#: three blocks of 256 on (80 registers): the pair variants span that range
VARIANTS = [(128, 1, "", 1), (128, 8, "", 1), (128, 10, "", 1), (256, 1, "", 1),
            (256, 4, "", 1), (256, 5, "", 1), (512, 2, "", 1), (256, 6, "", 1),
            (256, 1, "", 2), (256, 2, "", 2), (256, 3, "", 2), (256, 4, "", 2),
            (128, 4, "", 2), (128, 6, "", 2), (128, 8, "", 2),
            (256, 5, "stcs", 1), (256, 5, "ldcs,stcs", 1), (256, 1, "stcs", 2),
            (256, 5, "wide", 1), (128, 10, "wide", 1), (64, 20, "", 1), (64, 20, "wide", 1),
            (128, 12, "", 1), (64, 24, "", 1), (256, 6, "", 1),
            (256, 5, "l2f256", 1), (128, 10, "l2f256", 1), (64, 20, "l2f256", 1),
            (256, 5, "l2f128", 1), (64, 20, "l2f128", 1),
            (256, 5, "spec", 1), (64, 20, "nospec", 1), (128, 10, "nospec", 1),
            (64, 20, "nol2f", 1), (128, 10, "nol2f", 1), (64, 20, "nospec,nol2f", 1)]
#: "wide": the kernel with 64-bit element offsets (kernels/d3q19.cu population_at), which the
#: launcher takes for arrays beyond 2^32 elements; the others have 32-bit ones (2026-12-03
#: 02:19 UTC, before they were the production choice, as a build flag: 0.6-2.6 % faster);
#: (the pull offsets from uniform registers, now production, and as a kernel parameter were
#: measured as "upull" / "pparam" builds:
#: benchmarks/logs/tune_d3q19_h200_2026-12-03_offsets.log; the 40-register builds (128/12,
#: 64/24, 256/6) were no faster)
#: "l2f128" / "l2f256": population loads that ask the L2 for 128 / 256 B around a miss
#: (lbm_common.cuh load_l2_fetch; fp16 loads ask for 256 B unless "nol2f"); "spec" / "nospec":
#: every cell's loads issued before its flag is known, or after (d3q19.cu speculative_pull; the
#: production choice speculates for fp16 storage only). A bulk L2 prefetch of the sources one or
#: two planes ahead (cp.async.bulk.prefetch, one per population and block) ran 3-30 % slower in
#: both storages (benchmarks/logs/tune_d3q19_h200_2026-12-03_l2.log) and is gone
EXTRA_DEFINES = {"nbflags": "SIMSPLIT_D3Q19_NEIGHBOUR_FLAGS", "stcs": "SIMSPLIT_STREAMING_STORES",
                 "ldcs": "SIMSPLIT_STREAMING_LOADS", "wide": None,
                 "l2f128": "SIMSPLIT_L2_FETCH_BYTES=128", "l2f256": "SIMSPLIT_L2_FETCH_BYTES=256",
                 "spec": "SIMSPLIT_D3Q19_SPECULATE=1", "nospec": "SIMSPLIT_D3Q19_SPECULATE=0",
                 "nol2f": "SIMSPLIT_FP16_L2_FETCH_BYTES=0"}


def build(block: int, min_blocks: int, extras: str, storage: str,
          cells_x: int = 1, baseline: Path | None = None) -> cupy.RawKernel:
    """The unforced float-arithmetic kernel of one variant; ``baseline``: a folder holding an
    earlier revision's d3q19.cu and lbm_common.cuh (kernels with three template parameters,
    before the body-force one), compiled instead of the current sources."""
    header = source.generated_header().replace(f"#define SIMSPLIT_BLOCK_X {source.BLOCK_X}",
                                               f"#define SIMSPLIT_BLOCK_X {block}")
    if baseline is None:
        code = source.expand_includes("d3q19.cu", {source.GENERATED_HEADER: header})
    else:
        code = source.expand_includes("d3q19.cu", {
            source.GENERATED_HEADER: header,
            **{n: (baseline / n).read_text() for n in ("d3q19.cu", "lbm_common.cuh")}})
    cc = cupy.cuda.Device().compute_capability
    opts = ["--std=c++17", "--fmad=false", f"-arch=sm_{cc}",
            f"-DSIMSPLIT_D3Q19_MIN_BLOCKS={min_blocks}",
            # the two-cell kernel's launch bounds; a baseline before it took the cells per
            # thread as a define of d3q19_stream_collide
            f"-DSIMSPLIT_D3Q19_X2_BLOCK_X={block}", f"-DSIMSPLIT_D3Q19_X2_MIN_BLOCKS={min_blocks}",
            f"-DSIMSPLIT_D3Q19_CELLS_X={cells_x}"]
    opts += [f"-D{EXTRA_DEFINES[e]}" for e in extras.split(",") if e and EXTRA_DEFINES[e]]
    old_sources = baseline is not None and "_x2<" not in (baseline / "d3q19.cu").read_text()
    if baseline is not None and "typename P>" not in (baseline / "d3q19.cu").read_text():
        name = f"d3q19_stream_collide<float, {CTYPE[storage]}, false>"  # before 2026-12-03
    else:
        kernel = (kernel_names.d3q19_x2_name if cells_x == 2 and not old_sources
                  else kernel_names.d3q19_stream_collide_name)
        name = kernel(np.float32, STORAGE_DTYPE[storage], False, False,
                      "wide" in extras.split(","))
    mod = cupy.RawModule(code=code, options=tuple(opts), name_expressions=[name])
    kern = mod.get_function(name)
    _ = kern.num_regs
    return kern


def fields(n: int, storage: str) -> tuple[list, cupy.ndarray]:
    """Two padded population arrays at rest and the cavity's flags, from a CPU block of three
    planes: its middle plane's flags repeated along z, its outer planes at the two ends."""
    params = D3Q19Params(1 / 0.65, 1 / 0.65, 0.1, 0.0, 0.0, 0.0, False, False)
    probe = D3Q19Block(CPUBackend(), n, n, 3, 0, (Face.WALL, Face.LID), params, np.float32,
                       storage)
    rest = probe.f_src[:, 2:3]  # one interior plane at rest, in the storage encoding
    f = []
    for _ in range(2):
        a = padded_empty(cupy, (19, n + 2, n + 2, n + 2), rest.dtype)
        a[...] = cupy.asarray(rest)
        f.append(a)
    flags_host = np.repeat(probe.flags[2:3], n + 2, axis=0)
    flags_host[:2] = probe.flags[:2]
    flags_host[-2:] = probe.flags[-2:]
    flags = padded_empty(cupy, flags_host.shape, np.uint8)
    flags[...] = cupy.asarray(flags_host)
    return f, flags


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--storages", nargs="+", default=["float32", "float16"],
                    choices=["float32", "float16"])
    ap.add_argument("--variants", nargs="+", type=int, default=None,
                    help="indices into VARIANTS (default: all), e.g. for a profiler run")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="folder with an earlier d3q19.cu and lbm_common.cuh: each variant is "
                         "also timed on those sources")
    ap.add_argument("--align", type=int, default=layout.ALIGN,
                    help="row pitch granule in elements (layout.ALIGN) of the arrays timed")
    args = ap.parse_args()
    layout.ALIGN = args.align
    variants = VARIANTS if args.variants is None else [VARIANTS[i] for i in args.variants]
    n, steps = args.n, args.steps
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s; grid {n}^3, {steps} steps, rows padded to "
          f"{args.align} elements")
    print(f"{'storage':>8} {'block':>5} {'minblk':>6} {'extras':>12} {'cells':>5} {'regs':>4} "
          f"{'MLUPS':>8} {'%copy':>6}")
    macro = [cupy.zeros((n, n, n), cupy.float32) for _ in range(4)]
    scal = (np.float32(1 / 0.65), np.float32(1 / 0.65), np.float32(0.1), np.float32(0),
            np.float32(0), np.float32(0), np.int32(0), np.int32(0))
    results = []
    for storage, per_cell in (("float32", 153), ("float16", 77)):
        if storage not in args.storages:
            continue
        f, flags = fields(n, storage)
        strides = tuple(np.int64(v) for v in field_strides(f[0], flags, f[1]))
        runs = [(v, None) for v in variants]
        if args.baseline is not None:
            runs = [r for v in variants for r in ((v, args.baseline), (v, None))]
        for (block, min_blocks, extras, cells_x), base in runs:
            kern = build(block, min_blocks, extras, storage, cells_x, base)
            if base is not None:
                extras = ",".join(e for e in ("base", extras) if e)
            per_block = block * cells_x  # x-cells per block
            grid = ((n + per_block - 1) // per_block, n, n)

            def step(k: int, kern=kern, grid=grid, block=block, f=f, flags=flags,
                     strides=strides) -> None:
                kern(grid, (block,), (f[k % 2], f[(k + 1) % 2], flags, *macro, np.int32(n),
                                      np.int32(n), np.int32(n), *strides, np.int32(1),
                                      np.int32(n + 1), *scal))

            mlups = n ** 3 * steps / timed_launches(step, steps, warmup=2) / 1e6
            frac = mlups * 1e6 * per_cell / bw
            results.append((storage, frac, block, min_blocks, extras, mlups, cells_x))
            print(f"{storage:>8} {block:>5} {min_blocks:>6} {extras or '-':>12} {cells_x:>5} "
                  f"{kern.num_regs:>4} {mlups:>8.0f} {100 * frac:>5.1f}%", flush=True)
        f = flags = None
    for storage in args.storages:
        best = max((r for r in results if r[0] == storage), key=lambda r: r[1])
        print(f"best {storage}: block {best[2]}, min blocks {best[3]}, extras "
              f"{best[4] or '-'}, cells per thread {best[6]}: {best[5]:.0f} MLUPS = "
              f"{100 * best[1]:.1f}% of copy bandwidth")


if __name__ == "__main__":
    main()
