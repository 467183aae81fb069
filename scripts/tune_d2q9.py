"""Compile variants of the D2Q9 stream-collide kernel and time them on one GPU (raw launches).

Variants: threads per block, fused multiply-add on/off, evict-first loads and stores. Prints
MLUPS and the fraction of the device-to-device copy bandwidth measured in the same run
(73 B per cell update in float32: 9 populations read + 9 written + 1 flag byte).
Usage: python scripts/tune_d2q9.py [--n 8192] [--steps 40]
"""

from __future__ import annotations

import argparse
import itertools
from typing import Callable

import cupy
import numpy as np

from simsplit.backends.cuda_c import kernel_names, source
from simsplit.numerics.lattice import D2Q9_W


def copy_bandwidth(n_bytes: int = 1 << 31) -> float:
    a = cupy.ones(n_bytes // 4, cupy.float32)
    b = cupy.empty_like(a)
    b[...] = a
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(10):
        start.record()
        b[...] = a
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return 2 * n_bytes / float(np.median(times))


def timed_launches(step: Callable[[int], None], steps: int, warmup: int = 4,
                   repeats: int = 3) -> float:
    """Median seconds of ``steps`` calls ``step(k)`` (k = 0, 1, ...) between CUDA events, after
    ``warmup`` untimed calls. The tuning scripts of every lattice time their launches so."""
    for k in range(warmup):
        step(k)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        for k in range(steps):
            step(k)
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return float(np.median(times))


def build(block: int, fmad: bool, loads: bool, stores: bool, nbflags: bool) -> cupy.RawKernel:
    header = source.generated_header().replace(f"#define SIMSPLIT_BLOCK_X {source.BLOCK_X}",
                                               f"#define SIMSPLIT_BLOCK_X {block}")
    if not nbflags:  # the generated header turns the neighbour-flag scheme on by default
        header = "\n".join(ln for ln in header.splitlines()
                           if not ln.startswith("#define SIMSPLIT_NEIGHBOUR_FLAGS"))
    code = source.expand_includes("d2q9.cu", {source.GENERATED_HEADER: header})
    cc = cupy.cuda.Device().compute_capability
    opts = ["--std=c++17", f"--fmad={'true' if fmad else 'false'}", f"-arch=sm_{cc}"]
    opts += ["-DSIMSPLIT_STREAMING_LOADS"] * loads + ["-DSIMSPLIT_STREAMING_STORES"] * stores
    name = kernel_names.stream_collide_name(np.float32, np.float32, False)
    mod = cupy.RawModule(code=code, options=tuple(opts), name_expressions=[name])
    return mod.get_function(name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    n, steps = args.n, args.steps
    shape = (9, n + 2, n + 2)
    rng = np.random.default_rng(1)
    host = (D2Q9_W[:, None, None] * (1 + 0.01 * rng.standard_normal(shape))).astype(np.float32)
    f = [cupy.asarray(host), cupy.asarray(host)]
    flags = cupy.zeros((n + 2, n + 2), cupy.uint8)
    flags[:, 0] = flags[:, -1] = flags[0, :] = flags[-1, :] = 1
    flags[1, 1:-1] |= 4
    flags[-2, 1:-1] |= 4
    flags[1:-1, 1] |= 4
    flags[1:-1, -2] |= 4
    macro = cupy.zeros((n, n), cupy.float32)
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s; grid {n}x{n} float32, {steps} steps")
    print(f"{'block':>5} {'fmad':>5} {'ldcs':>5} {'stcs':>5} {'nbfl':>5} {'MLUPS':>8} "
          f"{'%copy':>6}")
    results = []
    for block, fmad, loads, stores, nbflags in itertools.product(
            (128, 256, 512), (False, True), (False, True), (False, True), (False, True)):
        kern = build(block, fmad, loads, stores, nbflags)
        grid = ((n + block - 1) // block, n, 1)
        scal = (np.float32(1.1), np.float32(1.3), np.float32(0.1), np.float32(0),
                np.float32(0), np.int32(0))

        def step(k: int, kern=kern, grid=grid, block=block, scal=scal) -> None:
            kern(grid, (block,), (f[k % 2], f[(k + 1) % 2], flags, macro, macro, macro,
                                  np.int32(n), np.int32(n), np.int64(n + 2),
                                  np.int64((n + 2) ** 2), np.int32(1), np.int32(n + 1),
                                  np.int32(1), np.int32(n + 1), *scal))

        mlups = n * n * steps / timed_launches(step, steps) / 1e6
        frac = mlups * 1e6 * 73 / bw
        results.append((frac, block, fmad, loads, stores, nbflags, mlups))
        print(f"{block:>5} {fmad!s:>5} {loads!s:>5} {stores!s:>5} {nbflags!s:>5} {mlups:>8.0f} "
              f"{100 * frac:>5.1f}%", flush=True)
    for r in sorted(results, reverse=True)[:5]:
        print(f"top: block {r[1]}, fmad {r[2]}, ldcs {r[3]}, stcs {r[4]}, neighbour flags {r[5]}: "
              f"{r[6]:.0f} MLUPS = {100 * r[0]:.1f}% of copy bandwidth")


if __name__ == "__main__":
    main()
