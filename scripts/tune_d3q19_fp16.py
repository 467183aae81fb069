"""fp16-storage D3Q19 speed candidates against the production kernels, in one run (issue 25).

At 512^3 (float32 arithmetic, fp16 storage, the cavity of scripts/tune_d3q19.py) this times:

- the production one-step kernels, launched as the solver launches them: two x-cells per
  thread (d3q19_stream_collide_x2, source.D3Q19_X2_16BIT, what fp16 rows aligned for it take)
  and one cell (source.D3Q19_FP16_BLOCK_X threads), and the production two-step kernel
  (source.D3Q19_FUSED16), MLUPS and the fraction of the device-to-device copy bandwidth that
  77 B per update (the one-step kernel's bytes) would need: above 100 % for a two-step sweep
  means it beats what one-step sweeps can reach;
- the two-cell kernel (populations moved as 32-bit fp16 pairs) at other launch shapes
  (SIMSPLIT_D3Q19_X2_BLOCK_X, SIMSPLIT_D3Q19_X2_MIN_BLOCKS);
- the two-step kernel at other column shapes, and with SIMSPLIT_D3Q19_FUSED_PREFETCH (each
  thread's next-plane loads in flight through the collision, the barrier and the second step);
  float32 storage's production two-step kernel and its prefetching build too;
- the access patterns alone (no arithmetic): each thread moves the 19 populations of 1, 2 or 4
  x-cells as 16-, 32- or 64-bit words, straight or pulled as the kernels pull (x-shifted words
  from the two aligned words around them), with and without the L2 fetch hint: the roofline of
  each candidate's memory traffic.

Every candidate is first checked bit for bit against the production kernels on small random
fields (obstacles, walls, the lid, periodic x and y off and on, an even and an odd nx): a
one-step candidate against one production launch, a two-step one against two.
Usage: python scripts/tune_d3q19_fp16.py [--n 512] [--steps 40] [--skip-copies]
                                        [--skip-float32] [--production]
                                        [--two-step-shapes 30x16:2,16x14:4,16x16:3:4:p]
                                        [--float32-rows]
(--production: the production rows only, fp16: its one-step kernels and its two-step kernel)
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stream_copy_d3q19 import KERNEL as COPY_KERNEL  # noqa: E402
from tune_d2q9 import copy_bandwidth, timed_launches  # noqa: E402
from tune_d3q19 import fields  # noqa: E402
from tune_d3q19_two_steps import (  # noqa: E402
    device_copy,
    launch_one,
    launch_two,
    shape_defines,
    small_case,
)

from simsplit.backends.cuda_c import kernel_names, source  # noqa: E402
from simsplit.backends.layout import field_strides  # noqa: E402

#: bytes per one-step update: 19 populations read and written, the flag byte
BYTES_PER_UPDATE = {"float16": 77, "float32": 153}
#: one-step candidates: (label, threads per block, x-cells per thread, defines); the first
#: two are the production builds (one module, launched as the solver launches them); the
#: others are built with ``defines`` (two-cell launch bounds: SIMSPLIT_D3Q19_X2_BLOCK_X and
#: SIMSPLIT_D3Q19_X2_MIN_BLOCKS)
X2_BLOCK, X2_MIN_BLOCKS = source.D3Q19_X2_16BIT or (64, 16)
PRODUCTION = ("production two cells", "production one cell")
ONE_STEP = [
    ("production two cells", X2_BLOCK, 2, ()),
    ("production one cell", source.D3Q19_FP16_BLOCK_X, 1, ()),
    *((f"pairs {b} x {m}", b, 2, (f"SIMSPLIT_D3Q19_X2_BLOCK_X={b}",
                                   f"SIMSPLIT_D3Q19_X2_MIN_BLOCKS={m}"))
      for b, m in ((128, 6), (128, 8), (64, 16), (256, 4)) if (b, m) != (X2_BLOCK, X2_MIN_BLOCKS)),
    ("stcs (evict-first stores)", source.D3Q19_FP16_BLOCK_X, 1, ("SIMSPLIT_STREAMING_STORES",)),
    ("pairs 128 x 8, stcs", 128, 2, ("SIMSPLIT_D3Q19_X2_BLOCK_X=128",
                                     "SIMSPLIT_D3Q19_X2_MIN_BLOCKS=8",
                                     "SIMSPLIT_STREAMING_STORES")),
]
#: two-step candidates: (storage, label, TX, TY, resident blocks asked for, prefetch, ring
#: planes; production: source.D3Q19_FUSED16 for 16-bit storage); float32 storage's production
#: kernel and its prefetching build as well, for the choice of SIMSPLIT_D3Q19_FUSED_PREFETCH 1
#: (every storage) or 2 (16-bit only). A ring of 4 (one barrier per plane instead of two) took
#: 101 KB per float32 block and ran 23 % slower; in fp16 it is half that
TX16, TY16, RING16, MIN_BLOCKS16 = source.D3Q19_FUSED16
TWO_STEP = [
    ("float16", "production", TX16, TY16, MIN_BLOCKS16, source.D3Q19_FUSED_PREFETCH, RING16),
    ("float16", "32 x 8 (float's shape)", 32, 8, 2, 0, 3),
    ("float16", "16 x 16 b2 (no spill)", 16, 16, 2, 0, 3),
    ("float16", "32 x 8, ring 4", 32, 8, 2, 0, 4),
    ("float16", "prefetch 32 x 8", 32, 8, 2, 1, 3),
    ("float16", "prefetch 32 x 8, ring 4", 32, 8, 2, 1, 4),
    ("float16", "prefetch 32 x 6", 32, 6, 3, 1, 3),
    ("float16", "prefetch 32 x 6 b2", 32, 6, 2, 1, 3),
    ("float16", "prefetch 16 x 16", 16, 16, 2, 1, 3),
    ("float16", "prefetch 16 x 16, ring 4", 16, 16, 2, 1, 4),
    ("float16", "prefetch 32 x 16", 32, 16, 1, 1, 3),
    ("float16", "prefetch 64 x 4", 64, 4, 2, 1, 3),
    ("float32", "production", *source.D3Q19_FUSED_TILE, source.D3Q19_FUSED_MIN_BLOCKS,
     source.D3Q19_FUSED_PREFETCH, source.D3Q19_FUSED_RING),
    ("float32", "prefetch 32 x 8", 32, 8, 2, 1, 3),
]
RUNS = (32, 64)

#: (label, word type, pull, L2 hint, threads per block)
COPIES = [("1 cell, 16 bit", "unsigned short", pull, hint, block)
          for pull in (False, True) for hint in (False, True) for block in (128,)]
COPIES += [(f"{w} cells, {16 * w} bit", t, pull, True, block)
           for w, t in ((2, "unsigned int"), (4, "unsigned long long"))
           for pull in (False, True) for block in (64, 128)]


def compile_options(*defines: str) -> tuple[str, ...]:
    cc = cupy.cuda.Device().compute_capability
    return (*source.COMPILE_OPTIONS, f"-arch=sm_{cc}", *(f"-D{d}" for d in defines))


def build(names: list[str], block_x: int | None, defines: tuple[str, ...],
          files: dict[str, str] | None = None) -> cupy.RawModule:
    """d3q19.cu with ``defines``; ``block_x``: the header's SIMSPLIT_BLOCK_X (None: as built
    for production); ``files``: kernel files that replace this tree's, by name."""
    header = source.generated_header()
    if block_x is not None:
        header = header.replace(f"#define SIMSPLIT_BLOCK_X {source.BLOCK_X}",
                                f"#define SIMSPLIT_BLOCK_X {block_x}")
    code = source.expand_includes("d3q19.cu", {**(files or {}), source.GENERATED_HEADER: header})
    return cupy.RawModule(code=code, options=compile_options(*defines), name_expressions=names)


def one_step_name(storage: str, cells_x: int = 1) -> str:
    name = kernel_names.d3q19_stream_collide_name(np.float32, np.dtype(storage), False, False,
                                                  False)
    return name if cells_x == 1 else name.replace("d3q19_stream_collide<",
                                                  "d3q19_stream_collide_x2<")


def two_step_name(storage: str) -> str:
    return one_step_name(storage).replace("d3q19_stream_collide<",
                                          "d3q19_stream_collide_two_steps<")


@functools.cache
def production_module(storage: str) -> cupy.RawModule:
    """The one-step kernels of ``storage`` as production builds them (one cell, and two cells
    for 16-bit storage)."""
    names = [one_step_name(storage)] + ([one_step_name(storage, 2)] if storage == "float16"
                                        else [])
    return build(names, None, ())


def production_one_step(storage: str):
    """(one-cell kernel, threads per block) as the solver launches it."""
    block = source.D3Q19_FP16_BLOCK_X if storage == "float16" else source.BLOCK_X
    return production_module(storage).get_function(one_step_name(storage)), block


def two_step_build(storage: str, tx: int, ty: int, min_blocks: int, prefetch: int, ring: int):
    """(kernel, threads, shared bytes) of a two-step candidate."""
    defines = (*shape_defines(tx, ty, ring, min_blocks),
               f"SIMSPLIT_D3Q19_FUSED_PREFETCH={prefetch}")
    name = two_step_name(storage)
    kern = build([name], None, defines).get_function(name)
    threads = (tx + 2) * (ty + 2)
    shared = ring * 19 * threads * np.dtype(storage).itemsize
    kern.max_dynamic_shared_size_bytes = shared
    return kern, threads, shared


def same_bits(a: cupy.ndarray, b: cupy.ndarray) -> bool:
    return cupy.asnumpy(a).tobytes() == cupy.asnumpy(b).tobytes()


def check_one_step(prod, kern, block: int, cells_x: int) -> bool:
    """One launch of fp16 candidate ``kern`` == one launch of the production kernel ``prod``,
    bit for bit."""
    ok = True
    for periodic in (False, True):
        for nx in (70, 69):
            f0, flags = small_case("float16", periodic, nx=nx)
            nz, ny, _ = (n - 2 for n in flags.shape)
            want, got = device_copy(f0), device_copy(f0)
            macro = [cupy.zeros((nz, ny, nx), cupy.float32) for _ in range(4)]
            launch_one(prod, f0, want, flags, macro, (nx, ny, nz), periodic,
                       block=source.D3Q19_FP16_BLOCK_X)
            launch_one(kern, f0, got, flags, macro, (nx, ny, nz), periodic, block=block,
                       cells_x=cells_x)
            ok &= not same_bits(want, f0) and same_bits(got, want)
    return ok


def check_two_step(storage: str, kern, threads: int, shared: int, tx: int, ty: int) -> bool:
    """One sweep of ``kern`` == two launches of the production one-step kernel."""
    prod, block = production_one_step(storage)
    ok = True
    for periodic in (False, True):
        for nx, run in ((70, 16), (69, 5)):
            f0, flags = small_case(storage, periodic, nx=nx)
            nz, ny, _ = (n - 2 for n in flags.shape)
            f1, want, got = device_copy(f0), device_copy(f0), device_copy(f0)
            macro = [cupy.zeros((nz, ny, nx), cupy.float32) for _ in range(4)]
            nxyz = (nx, ny, nz)
            launch_one(prod, f0, f1, flags, macro, nxyz, periodic, block=block)
            launch_one(prod, f1, want, flags, macro, nxyz, periodic, block=block)
            launch_two(kern, threads, shared, tx, ty, run, f0, got, flags, macro, nxyz, periodic)
            ok &= not same_bits(want, f0) and same_bits(got, want)
    return ok


def report(label: str, regs, bits: str, mlups: float, bw: float, extra: str = "",
           storage: str = "float16") -> None:
    print(f"{label:>44} {regs!s:>4} {bits:>7} {extra:>12} {mlups:>8.0f} "
          f"{100 * mlups * 1e6 * BYTES_PER_UPDATE[storage] / bw:>6.1f}%", flush=True)


def time_one_steps(n: int, steps: int, bw: float,
                   production_only: bool = False) -> tuple[list, cupy.ndarray]:
    """The fp16 one-step production kernels and candidates at n^3; returns the fields."""
    f, flags = fields(n, "float16")
    macro = [cupy.zeros((1, 1, 1), cupy.float32) for _ in range(4)]
    prod, _ = production_one_step("float16")
    for label, block, cells_x, defines in ONE_STEP:
        if production_only and label not in PRODUCTION:
            continue
        try:
            name = one_step_name("float16", cells_x)
            if label in PRODUCTION:
                kern = production_module("float16").get_function(name)
            else:
                kern = build([name], block if cells_x == 1 else None, defines).get_function(name)
            bits = "-" if label == "production one cell" else (
                "yes" if check_one_step(prod, kern, block, cells_x) else "NO")

            def step(k: int, kern=kern, block=block, cells_x=cells_x) -> None:
                launch_one(kern, f[k % 2], f[(k + 1) % 2], flags, macro, (n, n, n), False,
                           block=block, cells_x=cells_x)

            mlups = n ** 3 * steps / timed_launches(step, steps) / 1e6
            report(f"float16 one step: {label}", kern.num_regs, bits, mlups, bw,
                   f"{block} thr")
        except Exception as exc:  # a candidate that does not build or launch: say so, go on
            print(f"float16 one step: {label}: failed: {type(exc).__name__}: {exc}", flush=True)
    return f, flags


def time_two_steps(storage: str, f, flags, n: int, steps: int, bw: float,
                   production_only: bool = False) -> None:
    """The two-step candidates of ``storage`` at n^3, runs of RUNS planes."""
    macro = [cupy.zeros((1, 1, 1), cupy.float32) for _ in range(4)]
    for st, label, tx, ty, min_blocks, prefetch, ring in TWO_STEP:
        if st != storage or (production_only and label != "production"):
            continue
        try:
            kern, threads, shared = two_step_build(storage, tx, ty, min_blocks, prefetch, ring)
            bits = "yes" if check_two_step(storage, kern, threads, shared, tx, ty) else "NO"
            for run in RUNS:
                def sweep(k: int, kern=kern, threads=threads, shared=shared, tx=tx, ty=ty,
                          run=run) -> None:
                    launch_two(kern, threads, shared, tx, ty, run, f[k % 2], f[(k + 1) % 2],
                               flags, macro, (n, n, n), False)

                mlups = n ** 3 * steps / timed_launches(sweep, steps // 2) / 1e6
                report(f"{storage} two steps: {label}", kern.num_regs, bits, mlups, bw,
                       f"run {run}", storage)
        except Exception as exc:
            print(f"{storage} two steps: {label}: failed: {type(exc).__name__}: {exc}",
                  flush=True)


def parse_shapes(text: str) -> list[tuple]:
    """``TXxTY:BLOCKS[:RING][:p],...`` -> fp16 rows of TWO_STEP (ring 3 by default; ``p``:
    with SIMSPLIT_D3Q19_FUSED_PREFETCH)."""
    rows = []
    for item in text.split(","):
        try:
            shape, blocks, *rest = item.split(":")
            prefetch = int(bool(rest) and rest[-1] == "p")
            ring = rest[:-1] if prefetch else rest
            tx, ty = (int(v) for v in shape.split("x"))
            blocks, ring_planes = int(blocks), int(ring[0]) if ring else 3
            if len(ring) > 1 or min(tx, ty, blocks) < 1 or ring_planes not in (3, 4):
                raise ValueError
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected TXxTY:BLOCKS[:RING][:p], positive integers, ring 3 or 4, "
                "p for prefetch (e.g. 16x14:4 or 16x16:3:4:p)") from None
        label = (("prefetch " if prefetch else "") + f"{tx} x {ty} b{blocks}"
                 + (f", ring {ring_planes}" if ring else ""))
        rows.append(("float16", label, tx, ty, blocks, prefetch, ring_planes))
    return rows


def time_copies(f, flags, n: int, steps: int, bw: float) -> None:
    """The fp16 access patterns alone (scripts/stream_copy_d3q19.py's kernel)."""
    names = [f"copy_words<unsigned short, {t}, {str(p).lower()}, {str(h).lower()}>"
             for _, t, p, h, _ in COPIES]
    mod = cupy.RawModule(code=source.generated_header() + COPY_KERNEL,
                         options=compile_options(), name_expressions=sorted(set(names)))
    pitch, layer, plane = (np.uint32(v) for v in field_strides(f[0], flags, f[1]))
    for (label, word, pull, hint, block), name in zip(COPIES, names, strict=True):
        kind = ("pulled" if pull else "straight") + (", L2 256B" if hint else "")
        try:
            kern = mod.get_function(name)
            cells = {"unsigned short": 1, "unsigned int": 2}.get(word, 4)
            grid = (-(-n // (block * cells)), n, n)

            def copy(k: int, kern=kern, grid=grid, block=block) -> None:
                kern(grid, (block,), (f[k % 2], f[(k + 1) % 2], flags, np.int32(n), pitch,
                                      layer, plane))

            mlups = n ** 3 * steps / timed_launches(copy, steps) / 1e6
            report(f"copy {label}, {kind}", kern.num_regs, "-", mlups, bw, f"{block} thr")
        except Exception as exc:
            print(f"copy {label}, {kind}: failed: {type(exc).__name__}: {exc}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40, help="one-step launches per timing "
                    "(two-step: half as many sweeps)")
    ap.add_argument("--skip-copies", action="store_true")
    ap.add_argument("--skip-float32", action="store_true")
    ap.add_argument("--production", action="store_true",
                    help="fp16 production kernels only: one-step (two cells, one cell) and "
                         "two-step; no candidates, copies or float32")
    ap.add_argument("--two-step-shapes", metavar="TXxTY:BLOCKS[:RING][:p],...",
                    type=parse_shapes,
                    help="fp16 two-step shapes to time beside production's kernels instead of "
                         "the list in this file (ring 3 unless given; p: prefetch); implies "
                         "--production for the rest")
    ap.add_argument("--float32-rows", action="store_true",
                    help="also float32 storage's two-step rows (production, prefetch) "
                         "with --production or --two-step-shapes")
    args = ap.parse_args()
    if args.two_step_shapes:
        TWO_STEP[:] = [TWO_STEP[0], *args.two_step_shapes,
                       *(row for row in TWO_STEP if row[0] == "float32")]
        args.production = True
    n, steps = args.n, args.steps
    t_start = time.time()
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s; grid {n}^3, float32 arithmetic; %copy: MLUPS "
          "x the one-step kernel's bytes per update (fp16 77 B, float32 153 B) / copy "
          "bandwidth")
    print(f"{'kernel':>44} {'regs':>4} {'bitwise':>7} {'launch':>12} {'MLUPS':>8} {'%copy':>7}")
    f, flags = time_one_steps(n, steps, bw, args.production)
    time_two_steps("float16", f, flags, n, steps, bw,
                   args.production and not args.two_step_shapes)
    if not (args.skip_copies or args.production):
        time_copies(f, flags, n, steps, bw)
    f = flags = None
    if not args.skip_float32 and (args.float32_rows or not args.production):
        f, flags = fields(n, "float32")
        time_two_steps("float32", f, flags, n, steps, bw)
        f = flags = None
    print(f"copy bandwidth at the end {copy_bandwidth() / 1e12:.3f} TB/s; "
          f"{time.time() - t_start:.0f} s in all")


if __name__ == "__main__":
    main()
