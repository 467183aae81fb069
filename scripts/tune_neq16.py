"""run.storage neq16: the tiled candidates of the D3Q19 box kernel against the production one.

The production kernel (kernels/d3q19_neq.cuh d3q19_stream_collide_neq, one cell a thread,
source.BLOCK_X threads, as the launcher takes it) rebuilds population q of cell x from the
record of x - c_q: 19 record reads and equilibria per cell. The candidates
(kernels/d3q19_neq_tile.cuh, source.D3Q19_NEQ_TILES) rebuild each record once into shared
memory. At each size (512^3 and 256^3 by default; the cavity's flags, random significands, as
scripts/tune_d3q19.py lays out its fields) this prints registers, shared memory per block,
whether the candidate wrote the production kernel's bits (small random fields with solid cells
inside, walls, the lid, a body force, periodic x and y off and on, partial columns, two plane
ranges), MLUPS and the fraction of the device-to-device copy bandwidth that 109 B per update
(27 two-byte slots read and written, the flag byte) would need.

Make the fastest the default by naming it in simsplit/backends/cuda_c/d3q19_neq.py (the
launcher takes source.NEQ_TILE_ENV's; a run can name one: SIMSPLIT_NEQ16_TILE=tile32x8).
Usage: python scripts/tune_neq16.py [--sizes 512 256] [--steps 20] [--tiles tile32x8 ...]
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

from simsplit.backends.cpu import CPUBackend  # noqa: E402
from simsplit.backends.cuda_c import source  # noqa: E402
from simsplit.backends.layout import field_strides, padded_empty  # noqa: E402
from simsplit.fluid.block import D3Q19Block, Face  # noqa: E402
from simsplit.numerics import flags as fl  # noqa: E402
from simsplit.numerics.lattice import D3Q19  # noqa: E402
from simsplit.numerics.lbm_params import D3Q19Params  # noqa: E402

#: bytes per update: 27 record slots of 2 bytes read and written, the flag byte
BYTES_PER_UPDATE = 109
SLOTS = 27


def compile_options() -> tuple[str, ...]:
    cc = cupy.cuda.Device().compute_capability
    return (*source.COMPILE_OPTIONS, f"-arch=sm_{cc}")


def names(store: bool, forced: bool) -> dict[str, str]:
    """Label -> kernel name: production first, then every candidate."""
    out = {"production": source.d3q19_neq_name(store, forced, False)}
    out.update({t: source.d3q19_neq_tile_name(t, store, forced) for t in source.D3Q19_NEQ_TILES})
    return out


def build(tiles: list[str]) -> dict[tuple[str, bool], object]:
    """(label, checking) -> kernel: the unforced kernels without rho/u (timed) and the forced
    ones with (checked), in one module."""
    want = {(label, check): name for check in (False, True)
            for label, name in names(check, check).items()
            if label == "production" or label in tiles}
    mod = cupy.RawModule(code=source.kernel_source("d3q19.cu"), options=compile_options(),
                         name_expressions=sorted(set(want.values())))
    kernels = {key: mod.get_function(name) for key, name in want.items()}
    for (label, _), kern in kernels.items():
        if label != "production":
            kern.max_dynamic_shared_size_bytes = source.d3q19_neq_tile_launch(label, 1, 1, 1)[2]
    return kernels


def launch(label: str, kern, src, dst, flags, macro, planes, p: D3Q19Params) -> int:
    """One launch of kernel ``label`` on planes ``planes``; its shared bytes."""
    nz, ny, nx = (n - 2 for n in flags.shape)
    k0, k1 = planes
    args = [src, dst, flags, *macro, np.int32(nx), np.int32(ny), np.int32(nz),
            *map(np.int64, field_strides(src, flags, dst)), np.int32(k0), np.int32(k1),
            *map(np.float32, (p.omega_plus, p.omega_minus, p.lid_velocity, p.force_x,
                              p.force_y, p.force_z)),
            np.int32(p.periodic_x), np.int32(p.periodic_y)]
    if label == "production":
        kern((-(-nx // source.BLOCK_X), ny, k1 - k0), (source.BLOCK_X,), tuple(args))
        return 0
    grid, threads, shared = source.d3q19_neq_tile_launch(label, nx, ny, k1 - k0)
    kern(grid, (threads,), (*args, np.int32(source.D3Q19_NEQ_TILE_RUN)), shared_mem=shared)
    return shared


def small_case(nx: int, periodic: bool):
    """Random records of a small cavity with solid cells inside (CPU-encoded), on the GPU in
    the padded layout; (records, flags, params)."""
    ny, nz = 19, 9
    params = D3Q19Params(1 / 0.7, 1 / 1.1, 0.07, 3e-5, -2e-5, 1e-5, periodic, periodic)
    block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, (Face.WALL, Face.LID), params, "float32",
                       "neq16")
    rng = np.random.default_rng(nx)
    dev = 0.02 * rng.standard_normal((19, nz, ny, nx)) * 10.0 ** rng.uniform(-5, 0, (1, nz, ny, nx))
    block.set_populations(D3Q19.w[:, None, None, None] * (1 + dev))
    flags = block.flags.copy()
    for cell in ((2, 2, 4), (3, 9, 33), (4, 8, 32), (5, 1, 1), (6, ny, nx), (nz, 10, 34)):
        flags[cell] = fl.WALL
    inner = (slice(1, -1),) * 3
    flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)

    def on_device(a: np.ndarray):
        out = padded_empty(cupy, a.shape, a.dtype)
        out[...] = cupy.asarray(a)
        return out

    return on_device(block.f_src), on_device(flags), params


def same_bits(kernels, label: str) -> bool:
    """Candidate ``label`` == production, bit for bit (records and rho/u): two plane ranges,
    periodic off and on, an odd and an even nx."""
    ok = True
    for periodic in (False, True):
        for nx in (70, 69):
            f0, flags, p = small_case(nx, periodic)
            nz, ny = flags.shape[0] - 2, flags.shape[1] - 2
            out = {}
            for who in ("production", label):
                dst = padded_empty(cupy, f0.shape, f0.dtype)
                dst[...] = f0
                macro = [cupy.zeros((nz, ny, nx), cupy.float32) for _ in range(4)]
                for planes in ((1, 4), (4, nz + 1)):
                    launch(who, kernels[(who, True)], f0, dst, flags, macro, planes, p)
                out[who] = [cupy.asnumpy(a).tobytes() for a in (dst, *macro)]
            ok &= out["production"] == out[label]
            ok &= cupy.asnumpy(f0).tobytes() != out[label][0]
    return ok


def fields(n: int):
    """Two padded record arrays of the n^3 cavity: rest moments, random significands (about
    1e-2 of the populations), and its flags (scripts/tune_d3q19.py's layout)."""
    params = D3Q19Params(1 / 0.65, 1 / 0.65, 0.1, 0.0, 0.0, 0.0, False, False)
    probe = D3Q19Block(CPUBackend(), n, n, 3, 0, (Face.WALL, Face.LID), params, np.float32,
                       "neq16")
    rest = cupy.asarray(probe.f_src[:, 2:3])
    cupy.random.seed(7)
    f = []
    for _ in range(2):
        a = padded_empty(cupy, (SLOTS, n + 2, n + 2, n + 2), np.uint16)
        a[...] = rest
        for q in range(D3Q19.q):
            a[q] = cupy.random.randint(-8192, 8192, a.shape[1:], dtype=np.int32).astype(
                np.int16).view(np.uint16)
        a[D3Q19.q] = np.int16(-20).view(np.uint16)  # the power of two k: 2^-20
        f.append(a)
    flags_host = np.repeat(probe.flags[2:3], n + 2, axis=0)
    flags_host[:2] = probe.flags[:2]
    flags_host[-2:] = probe.flags[-2:]
    flags = padded_empty(cupy, flags_host.shape, np.uint8)
    flags[...] = cupy.asarray(flags_host)
    return f, flags, params


def time_size(kernels, tiles: list[str], bits: dict[str, str], n: int, steps: int,
              bw: float) -> dict[str, float]:
    """MLUPS of production and each candidate at n^3 (the table's rows as they come)."""
    out = {}
    f, flags, p = fields(n)
    macro = [cupy.zeros((1, 1, 1), cupy.float32) for _ in range(4)]
    for label in ("production", *tiles):
        kern = kernels[(label, False)]
        try:
            shared = launch(label, kern, f[0], f[1], flags, macro, (1, n + 1), p)

            def step(k: int, label=label, kern=kern) -> None:
                launch(label, kern, f[k % 2], f[(k + 1) % 2], flags, macro, (1, n + 1), p)

            mlups = n ** 3 * steps / timed_launches(step, steps) / 1e6
            out[label] = mlups
            frac = mlups * 1e6 * BYTES_PER_UPDATE / bw
            print(f"{n:>5}^3 {label:>12} {kern.num_regs:>4} {shared / 1024:>8.1f} "
                  f"{bits[label]:>7} {mlups:>9.0f} {100 * frac:>6.1f}%", flush=True)
        except Exception as exc:  # a candidate that does not launch: say so, go on
            print(f"{n}^3 {label}: failed: {type(exc).__name__}: {exc}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="+", type=int, default=[512, 256])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tiles", nargs="+", default=sorted(source.D3Q19_NEQ_TILES),
                    choices=sorted(source.D3Q19_NEQ_TILES))
    args = ap.parse_args()
    t_start = time.time()
    bw = copy_bandwidth()
    kernels = build(args.tiles)
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    print(f"{name.decode() if isinstance(name, bytes) else name}; copy bandwidth "
          f"{bw / 1e12:.3f} TB/s; compiled in {time.time() - t_start:.0f} s; %copy: MLUPS x "
          f"{BYTES_PER_UPDATE} B / copy bandwidth; bitwise: against production")
    bits = {"production": "-"}
    for label in args.tiles:
        try:
            bits[label] = "yes" if same_bits(kernels, label) else "NO"
        except Exception as exc:
            bits[label] = "error"
            print(f"{label}: check failed: {type(exc).__name__}: {exc}", flush=True)
    print(f"{'grid':>8} {'kernel':>12} {'regs':>4} {'shared KB':>8} {'bitwise':>7} "
          f"{'MLUPS':>9} {'%copy':>7}")
    best = {}
    for n in args.sizes:
        speed = time_size(kernels, args.tiles, bits, n, args.steps, bw)
        cupy.get_default_memory_pool().free_all_blocks()
        fair = {k: v for k, v in speed.items() if bits.get(k) in ("-", "yes")}
        if fair:
            best[n] = max(fair, key=fair.get)
    for n, label in best.items():  # scripts/gpu-session.sh reads the first
        print(f"best at {n}^3: {label}")
    print(f"copy bandwidth at the end {copy_bandwidth() / 1e12:.3f} TB/s; "
          f"{time.time() - t_start:.0f} s in all")


if __name__ == "__main__":
    main()
