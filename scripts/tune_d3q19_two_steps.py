"""Check and time the temporally blocked D3Q19 kernel (two steps per sweep) on one GPU.

``d3q19_stream_collide_two_steps`` (kernels/d3q19.cu) is built for each variant of its column
size (TX x TY cells), shared-memory ring (3 or 4 planes) and resident blocks per SM asked of the
register allocator. For each: first a bitwise check against two launches of the one-step kernel
from the same build (a 70 x 45 x 37 grid with random populations, obstacles, walls and the lid;
periodic x and y both off and on; runs of 16 planes), then its speed at n^3 against the one-step
kernel's, both in MLUPS (cell updates: two per cell per sweep) and as the fraction of the
device-to-device copy bandwidth the one-step kernel's 153 B per float32 update would need.
Usage: python scripts/tune_d3q19_two_steps.py [--n 512] [--storages float32 float16]
                                              [--variants 0 3] [--runs 512 128]
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_d2q9 import copy_bandwidth, timed_launches  # noqa: E402
from tune_d3q19 import fields  # noqa: E402

from simsplit.backends.cpu import CPUBackend  # noqa: E402
from simsplit.backends.cuda_c import kernel_names, source  # noqa: E402
from simsplit.backends.layout import field_strides, padded_empty  # noqa: E402
from simsplit.fluid.block import D3Q19Block, Face  # noqa: E402
from simsplit.numerics import flags as fl  # noqa: E402
from simsplit.numerics.lattice import D3Q19  # noqa: E402
from simsplit.numerics.lbm_params import D3Q19Params  # noqa: E402
from simsplit.numerics.storage import E4M11_DTYPE  # noqa: E402

STORAGE_DTYPE = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                 "e4m11": E4M11_DTYPE}
#: (TX, TY, ring planes, resident blocks per SM asked for, shared-memory carveout in percent
#: of the maximum, -1: the driver's choice). 0-11: the first round (2026-12-03 09:03 UTC,
#: benchmarks/logs/tune_d3q19_two_steps_h200_2026-12-03.log): a ring of 3 ran faster than 4
#: (less shared memory, more L1 left), runs of 64 planes faster than 128 or 512. 12-23: the second
#: (09:32 UTC, `..._round2.log`): 32 x 8 with a ring of 3 and runs of 32 fastest (30,608
#: MLUPS); a forced carveout (72, 86, 100 %) slower than the driver's choice
VARIANTS = [(32, 8, 4, 2, -1), (32, 8, 3, 2, -1), (32, 4, 4, 3, -1), (16, 16, 4, 2, -1),
            (32, 6, 4, 2, -1), (64, 4, 4, 1, -1), (30, 8, 4, 2, -1), (32, 8, 4, 1, -1),
            (64, 8, 4, 1, -1), (32, 16, 4, 1, -1), (32, 8, 4, 3, -1), (32, 4, 4, 4, -1),
            (32, 8, 3, 2, 72), (32, 8, 3, 2, 100), (32, 4, 3, 3, -1), (32, 4, 3, 4, -1),
            (32, 4, 3, 4, 86), (32, 6, 3, 3, -1), (16, 16, 3, 3, -1), (32, 16, 3, 1, -1),
            (32, 16, 3, 1, 72), (64, 8, 3, 1, -1), (32, 12, 3, 2, -1), (16, 8, 3, 4, -1)]


def shape_defines(tx: int, ty: int, ring: int, min_blocks: int) -> tuple[str, ...]:
    """The two-step kernel's shape for every storage type (16-bit storage has its own
    SIMSPLIT_D3Q19_FUSED16_* values, the others SIMSPLIT_D3Q19_FUSED_*)."""
    values = {"TX": tx, "TY": ty, "RING": ring, "MIN_BLOCKS": min_blocks}
    return tuple(f"SIMSPLIT_D3Q19_{kind}_{key}={v}" for kind in ("FUSED", "FUSED16")
                 for key, v in values.items())


@functools.cache
def build(tx: int, ty: int, ring: int, min_blocks: int, storage: str, carveout: int = -1):
    """(two-step kernel, one-step kernel, threads, shared bytes) of one variant, unforced,
    float arithmetic, 32-bit offsets, rho/u not stored."""
    st = STORAGE_DTYPE[storage]
    one = kernel_names.d3q19_stream_collide_name(np.float32, st, False, False, False)
    two = one.replace("d3q19_stream_collide<", "d3q19_stream_collide_two_steps<")
    cc = cupy.cuda.Device().compute_capability
    opts = ("--std=c++17", "--fmad=false", f"-arch=sm_{cc}",
            *(f"-D{d}" for d in shape_defines(tx, ty, ring, min_blocks)))
    mod = cupy.RawModule(code=source.kernel_source("d3q19.cu"), options=opts,
                         name_expressions=[one, two])
    k1, k2 = mod.get_function(one), mod.get_function(two)
    threads = (tx + 2) * (ty + 2)
    shared = ring * 19 * threads * np.dtype(st).itemsize
    k2.max_dynamic_shared_size_bytes = shared
    if carveout >= 0:  # the rest of the 256 KB per SM is L1
        k2.preferred_shared_memory_carveout = carveout
    _ = k1.num_regs, k2.num_regs
    return k2, k1, threads, shared


def scalars(periodic: bool) -> tuple:
    return (np.float32(1 / 0.7), np.float32(1 / 1.1), np.float32(0.07), np.float32(0),
            np.float32(0), np.float32(0), np.int32(periodic), np.int32(periodic))


def launch_two(kern, threads, shared, tx, ty, run, f_src, f_dst, flags, macro, nxyz,
               periodic) -> None:
    nx, ny, nz = nxyz
    grid = (-(-nx // tx), -(-ny // ty), -(-nz // run))
    strides = tuple(np.int64(v) for v in field_strides(f_src, flags, f_dst))
    kern(grid, (threads,), (f_src, f_dst, flags, *macro, *map(np.int32, nxyz), *strides,
                            np.int32(1), np.int32(nz + 1), np.int32(run), *scalars(periodic)),
         shared_mem=shared)


def launch_one(kern, f_src, f_dst, flags, macro, nxyz, periodic, block: int = 256,
               cells_x: int = 1) -> None:
    """One launch of the one-step kernel, ``block`` threads of ``cells_x`` x-cells each."""
    nx, ny, nz = nxyz
    strides = tuple(np.int64(v) for v in field_strides(f_src, flags, f_dst))
    kern((-(-nx // (block * cells_x)), ny, nz), (block,),
         (f_src, f_dst, flags, *macro, *map(np.int32, nxyz), *strides, np.int32(1),
          np.int32(nz + 1), *scalars(periodic)))


def small_case(storage: str, periodic: bool, nx: int = 70, ny: int = 45,
               nz: int = 37) -> tuple[cupy.ndarray, cupy.ndarray]:
    """Random populations (step t) and flags of a small cavity with 3 % solid interior cells,
    walls and the lid, on the device in the padded layout: (f, flags)."""
    f, flags = _small_case_host(storage, periodic, nx, ny, nz)
    return device_copy(f), device_copy(flags)


@functools.cache
def _small_case_host(storage: str, periodic: bool, nx: int, ny: int,
                     nz: int) -> tuple[np.ndarray, np.ndarray]:
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.07, 0.0, 0.0, 0.0, periodic, periodic)
    block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, (Face.WALL, Face.LID), params, np.float32,
                       storage)
    rng = np.random.default_rng(5)
    block.set_populations(D3Q19.w[:, None, None, None]
                          * (1 + 0.05 * rng.standard_normal((19, nz, ny, nx))))
    flags = block.flags.copy()
    solid = rng.random((nz, ny, nx)) < 0.03
    inner = (slice(1, -1),) * 3
    flags[inner][solid] = fl.WALL
    flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)
    return block.f_src, flags


def device_copy(a) -> cupy.ndarray:
    """``a`` (host or device) as a new padded device array."""
    out = padded_empty(cupy, a.shape, a.dtype)
    out[...] = cupy.asarray(a)
    return out


def check(variant, storage: str, periodic: bool) -> bool:
    """Two-step sweep == two one-step launches, bit for bit, on a small random field."""
    tx, ty, ring, mb, carve = variant
    k2, k1, threads, shared = build(tx, ty, ring, mb, storage, carve)
    f0, g_flags = small_case(storage, periodic)
    nz, ny, nx = (n - 2 for n in g_flags.shape)
    f1, f2, fz = device_copy(f0), device_copy(f0), device_copy(f0)
    macro = [cupy.zeros((nz, ny, nx), cupy.float32) for _ in range(4)]
    launch_one(k1, f0, f1, g_flags, macro, (nx, ny, nz), periodic)
    launch_one(k1, f1, f2, g_flags, macro, (nx, ny, nz), periodic)
    launch_two(k2, threads, shared, tx, ty, 16, f0, fz, g_flags, macro, (nx, ny, nz), periodic)
    cupy.cuda.Device().synchronize()
    want = cupy.asnumpy(f2).tobytes()
    return want != cupy.asnumpy(f0).tobytes() and cupy.asnumpy(fz).tobytes() == want


def profile_once(n: int, variant: tuple[int, ...], storage: str, run: int) -> None:
    """One launch of each kernel on the n^3 cavity."""
    tx, ty, ring, mb, carve = variant
    k2, k1, threads, shared = build(tx, ty, ring, mb, storage, carve)
    f, flags = fields(n, storage)
    macro = [cupy.zeros((n, n, n), cupy.float32) for _ in range(4)]
    launch_one(k1, f[0], f[1], flags, macro, (n, n, n), False)
    launch_two(k2, threads, shared, tx, ty, run, f[1], f[0], flags, macro, (n, n, n), False)
    cupy.cuda.Device().synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10, help="sweeps (of two steps) per timing")
    ap.add_argument("--storages", nargs="+", default=["float32"], choices=list(STORAGE_DTYPE))
    ap.add_argument("--variants", nargs="+", type=int, default=None)
    ap.add_argument("--runs", nargs="+", type=int, default=[512, 128, 64],
                    help="planes per block's run (blockIdx.z cuts z into runs)")
    ap.add_argument("--once", action="store_true",
                    help="launch the one-step kernel and the first variant's two-step kernel once "
                         "each, nothing else (for a profiler)")
    args = ap.parse_args()
    variants = VARIANTS if args.variants is None else [VARIANTS[i] for i in args.variants]
    n = args.n
    if args.once:
        profile_once(n, variants[0], args.storages[0], args.runs[0])
        return
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s; grid {n}^3; {args.steps} sweeps per timing")
    print(f"{'storage':>8} {'TX':>3} {'TY':>3} {'ring':>4} {'minb':>4} {'carve':>5} {'regs':>4} "
          f"{'smem KB':>7} {'bitwise':>7} {'run':>4} {'MLUPS':>7} {'%copy@153B':>10}")
    macro = [cupy.zeros((n, n, n), cupy.float32) for _ in range(4)]
    for storage in args.storages:
        per_cell = 153 if storage == "float32" else 77
        f, flags = fields(n, storage)
        nxyz = (n, n, n)
        one = None
        for variant in variants:
            tx, ty, ring, mb, carve = variant
            try:
                k2, k1, threads, shared = build(tx, ty, ring, mb, storage, carve)
                ok = all(check(variant, storage, p) for p in (False, True))
            except Exception as exc:  # a variant that does not build or launch: say so, go on
                print(f"{storage:>8} {tx:>3} {ty:>3} {ring:>4} {mb:>4} {carve:>5}  failed: "
                      f"{type(exc).__name__}: {exc}", flush=True)
                continue
            if one is None:
                def step1(k: int, k1=k1, f=f, flags=flags, nxyz=nxyz) -> None:
                    launch_one(k1, f[k % 2], f[(k + 1) % 2], flags, macro, nxyz, False)

                one = n ** 3 * 2 * args.steps / timed_launches(step1, 2 * args.steps) / 1e6
                print(f"{storage:>8} one-step kernel, {k1.num_regs} registers: {one:.0f} MLUPS "
                      f"= {100 * one * 1e6 * per_cell / bw:.1f}% of copy", flush=True)
            for run in args.runs:
                def step2(k: int, k2=k2, threads=threads, shared=shared, tx=tx, ty=ty,
                          run=run, f=f, flags=flags, nxyz=nxyz) -> None:
                    launch_two(k2, threads, shared, tx, ty, run, f[k % 2], f[(k + 1) % 2],
                               flags, macro, nxyz, False)

                mlups = n ** 3 * 2 * args.steps / timed_launches(step2, args.steps) / 1e6
                print(f"{storage:>8} {tx:>3} {ty:>3} {ring:>4} {mb:>4} {carve:>5} {k2.num_regs:>4} "
                      f"{shared / 1024:>7.1f} {'yes' if ok else 'NO':>7} {run:>4} {mlups:>7.0f} "
                      f"{100 * mlups * 1e6 * per_cell / bw:>9.1f}%", flush=True)
        f = flags = None


if __name__ == "__main__":
    main()
