"""Time layout and work-per-thread variants of the D2Q9 kernel (scripts/tune/d2q9_variants.cu).

Variants: cells per thread (1, 2, 4; strided by the block), 32/64-bit index arithmetic, the
production layout (first interior column 1, row pitch nx + 2) or a padded one whose interior
rows start on 128-byte boundaries, and threads per block. The production kernel runs first as
the baseline; every variant's output is checked against it. MLUPS and the fraction of the copy
bandwidth measured in the same run (73 B per float32 cell update).
Usage: python scripts/tune_d2q9_layout.py [--n 8192] [--steps 40]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_d2q9 import build, copy_bandwidth, timed_launches  # noqa: E402

from simsplit.backends.cuda_c import source  # noqa: E402
from simsplit.backends.layout import element_strides, padded_empty  # noqa: E402
from simsplit.numerics.lattice import D2Q9_W  # noqa: E402

VARIANTS = Path(__file__).resolve().parent / "tune" / "d2q9_variants.cu"
NAMES = {(c, t): f"d2q9_variant<{c}, {t}>" for c in (1, 2) for t in ("int", "long long")}


def variant_module(block: int) -> cupy.RawModule:
    header = source.generated_header().replace(f"#define SIMSPLIT_BLOCK_X {source.BLOCK_X}",
                                               f"#define SIMSPLIT_BLOCK_X {block}")
    code = source.expand_includes(VARIANTS.name, {VARIANTS.name: VARIANTS.read_text(),
                                                  source.GENERATED_HEADER: header})
    cc = cupy.cuda.Device().compute_capability
    return cupy.RawModule(code=code, options=("--std=c++17", "--fmad=false", f"-arch=sm_{cc}"),
                          name_expressions=list(NAMES.values()))


def fields(n: int, padded: bool) -> tuple[list, cupy.ndarray, int]:
    """Two population arrays, flags and the row pitch, packed or padded (the solver's layouts)."""
    rng = np.random.default_rng(1)
    host = (D2Q9_W[:, None, None] * (1 + 0.01 * rng.standard_normal((9, n + 2, n + 2))))
    fl = np.zeros((n + 2, n + 2), np.uint8)
    fl[:, 0] = fl[:, -1] = fl[0, :] = fl[-1, :] = 1
    fl[1, 1:-1] |= 4
    fl[-2, 1:-1] |= 4
    fl[1:-1, 1] |= 4
    fl[1:-1, -2] |= 4

    def put(a: np.ndarray) -> cupy.ndarray:
        if not padded:
            return cupy.asarray(a)
        out = padded_empty(cupy, a.shape, a.dtype)
        out[...] = cupy.asarray(a)
        return out

    f = [put(host.astype(np.float32)) for _ in range(2)]
    return f, put(fl), element_strides(f[0])[1]


def run_steps(kern, grid: tuple, block: int, f: list, flags, args: tuple, steps: int) -> float:
    """Median seconds of ``steps`` launches ping-ponging between the two arrays of ``f``."""

    def step(k: int) -> None:
        kern(grid, (block,), (f[k % 2], f[(k + 1) % 2], flags, *args))

    return timed_launches(step, steps)


def one_step(kern, grid: tuple, block: int, f: list, flags, args: tuple) -> cupy.ndarray:
    """One launch from f[0] into f[1] (both overwritten later: pass fresh fields)."""
    kern(grid, (block,), (f[0], f[1], flags, *args))
    return f[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    n, steps = args.n, args.steps
    scal = (np.float32(1.1), np.float32(1.3), np.float32(0.1), np.float32(0), np.float32(0))
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s; grid {n}x{n} float32, {steps} steps")

    # production kernel on the packed and the padded layout: the baseline and the reference
    macro = cupy.zeros((n, n), cupy.float32)
    prod = build(source.BLOCK_X, False, False, False, True)
    grid = ((n + source.BLOCK_X - 1) // source.BLOCK_X, n, 1)
    ref = None
    results = []
    for layout in ("packed", "padded"):
        f, flags, pitch = fields(n, layout == "padded")
        pristine = [a.copy() for a in f]  # contiguous copies: assigned back element by element

        def check(kern, grid, block, args, f=f, flags=flags, pristine=pristine) -> str:
            for dst, src in zip(f, pristine, strict=True):
                dst[...] = src
            out = cupy.asnumpy(one_step(kern, grid, block, f, flags, args)[:, 1:-1, 1:-1])
            nonlocal ref
            ref = out if ref is None else ref
            return "bitwise" if np.array_equal(out, ref) else f"DIFF {np.abs(out - ref).max():.2e}"

        pargs = (macro, macro, macro, np.int32(n), np.int32(n), np.int64(pitch),
                 np.int64(pitch * (n + 2)), np.int32(1), np.int32(n + 1), *scal, np.int32(0))
        ok = check(prod, grid, source.BLOCK_X, pargs)
        mlups = n * n * steps / run_steps(prod, grid, source.BLOCK_X, f, flags, pargs, steps) / 1e6
        results.append((mlups * 1e6 * 73 / bw, source.BLOCK_X, "production", "-", layout, mlups))
        print(f"production kernel ({source.BLOCK_X} threads), {layout} rows: {mlups:.0f} MLUPS = "
              f"{100 * mlups * 1e6 * 73 / bw:.1f}% of copy bandwidth, {ok}", flush=True)
        if layout == "packed":
            continue  # the variants on packed rows: benchmarks/logs/tune_d2q9_h200_2026-12-02.log
        print(f"{'block':>5} {'cells':>5} {'index':>9} {'layout':>8} {'MLUPS':>8} {'%copy':>6} "
              "check")
        for block in (128, 256, 512):
            mod = variant_module(block)
            for (cells, idx), name in NAMES.items():
                kern = mod.get_function(name)
                vgrid = ((n + block * cells - 1) // (block * cells), n, 1)
                vargs = (np.int32(n), np.int32(n), np.int32(pitch), np.int32(1), *scal)
                ok = check(kern, vgrid, block, vargs)
                mlups = n * n * steps / run_steps(kern, vgrid, block, f, flags, vargs, steps) / 1e6
                frac = mlups * 1e6 * 73 / bw
                results.append((frac, block, cells, idx, layout, mlups))
                print(f"{block:>5} {cells:>5} {idx:>9} {layout:>8} {mlups:>8.0f} "
                      f"{100 * frac:>5.1f}% {ok}", flush=True)
        f = flags = pristine = None
    for r in sorted(results, reverse=True)[:6]:
        print(f"top: block {r[1]}, cells/thread {r[2]}, index {r[3]}, layout {r[4]}: "
              f"{r[5]:.0f} MLUPS = {100 * r[0]:.1f}% of copy bandwidth")


if __name__ == "__main__":
    main()
