"""run.storage neq16: the tiled candidates of the box kernels against the production ones.

The production kernels (kernels/d3q19_neq.cuh d3q19_stream_collide_neq, kernels/d2q9.cu
d2q9_stream_collide_neq: one cell a thread, source.BLOCK_X threads, as the launchers take them)
rebuild population q of cell x from the record of x - c_q: Q record reads and equilibria per
cell. The candidates (kernels/d3q19_neq_tile.cuh, d2q9_neq_tile.cuh; neq_tiles.D3Q19_NEQ_TILES,
D2Q9_NEQ_TILES) rebuild each record once into shared memory. For each lattice and size
(D3Q19 512^3 and 256^3, D2Q9 8192^2 and 4096^2 by default; the cavity's flags, random
significands) this prints registers, shared memory per block, whether the candidate wrote the
production kernel's bits (small random fields with solid cells inside, walls, the lid, a body
force, periodic x (and y) off and on, partial columns, two plane or row ranges), MLUPS and the
fraction of the device-to-device copy bandwidth that the bytes of an update (all record slots
read and written, the flag byte: D3Q19 109 B, D2Q9 61 B) would need, and the fastest.

Make the fastest the default by naming it in simsplit/backends/cuda_c/neq_tiles.py
(D3Q19_NEQ_TILE_DEFAULT, D2Q9_NEQ_TILE_DEFAULT); a run can name one, or production:
SIMSPLIT_NEQ16_TILE=tile32x8f (neq_tiles.NEQ_TILE_ENV).
Candidates are timed with runs of source's D3Q19_NEQ_TILE_RUN / D2Q9_NEQ_TILE_RUN planes or rows
and of --runs3d / --runs2d others (the best line names a default-run kernel).
Usage: python scripts/tune_neq16.py [--lattices d3q19 d2q9] [--sizes3d 512 256]
                                    [--sizes2d 8192 4096] [--steps 20] [--tiles NAME ...]
                                    [--runs3d 32 64] [--runs2d 64 256]
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
from simsplit.backends.cuda_c import kernel_names, neq_tiles, source  # noqa: E402
from simsplit.backends.layout import field_strides, padded_empty  # noqa: E402
from simsplit.fluid.block import D2Q9Block, D3Q19Block, Face  # noqa: E402
from simsplit.numerics import flags as fl  # noqa: E402
from simsplit.numerics.lattice import D2Q9_W, D3Q19  # noqa: E402
from simsplit.numerics.lbm_params import D2Q9Params, D3Q19Params  # noqa: E402


def on_device(a: np.ndarray):
    out = padded_empty(cupy, a.shape, a.dtype)
    out[...] = cupy.asarray(a)
    return out


def with_solids(block, cells) -> np.ndarray:
    """The block's flags with walls at ``cells`` (1-based) and NEAR_WALL updated."""
    flags = block.flags.copy()
    for cell in cells:
        flags[cell] = fl.WALL
    inner = (slice(1, -1),) * flags.ndim
    flags[inner] = (flags[inner] & ~np.uint8(fl.NEAR_WALL)) | block._near_wall(flags)
    return flags


#: cells along each axis of the CPU cavity whose flags and rest record a large grid copies
PROBE = 6


def grown(flags: np.ndarray, n: int) -> np.ndarray:
    """The flags of a PROBE-cell cavity grown to n cells along each axis: the ghost layers
    and the cells beside them as they are, every other cell the middle one's."""
    index = np.full(n + 2, 2)
    index[[0, 1, n, n + 1]] = [0, 1, PROBE, PROBE + 1]
    return np.ascontiguousarray(flags[np.ix_(*(index,) * flags.ndim)])


def random_records(rest, q: int, shape: tuple[int, ...]) -> list:
    """Two padded record arrays: ``rest``'s moments, random significands (about 1e-2 of the
    populations: k = -20)."""
    f = []
    for _ in range(2):
        a = padded_empty(cupy, (rest.shape[0], *shape), np.uint16)
        a[...] = rest
        for s in range(q):
            a[s] = cupy.random.randint(-8192, 8192, shape, dtype=np.int32).astype(
                np.int16).view(np.uint16)
        a[q] = np.int16(-20).view(np.uint16)  # the power of two k
        f.append(a)
    return f


class Lattice3D:
    name, file, q, bytes_per_update = "D3Q19", "d3q19.cu", D3Q19.q, 109
    tiles = neq_tiles.D3Q19_NEQ_TILES

    @staticmethod
    def names(store: bool) -> dict[str, str]:
        """Label -> kernel (forced with rho/u when checking, neither when timing)."""
        out = {"production": kernel_names.d3q19_neq_name(store, store)}
        out.update({t: neq_tiles.d3q19_neq_tile_name(t, store, store) for t in Lattice3D.tiles})
        return out

    @staticmethod
    def shared(label: str) -> int:
        return neq_tiles.d3q19_neq_tile_launch(label, 1, 1, 1)[2]

    run = neq_tiles.D3Q19_NEQ_TILE_RUN  #: planes per block's run (the tuner sets others)

    @staticmethod
    def launch(label: str, kern, src, dst, flags, macro, planes, p) -> None:
        nz, ny, nx = (n - 2 for n in flags.shape)
        k0, k1 = planes
        args = [src, dst, flags, *macro, np.int32(nx), np.int32(ny), np.int32(nz),
                *map(np.int64, field_strides(src, flags, dst)), np.int32(k0), np.int32(k1),
                *map(np.float32, (p.omega_plus, p.omega_minus, p.lid_velocity, p.force_x,
                                  p.force_y, p.force_z)),
                np.int32(p.periodic_x), np.int32(p.periodic_y)]
        if label == "production":
            kern((-(-nx // source.BLOCK_X), ny, k1 - k0), (source.BLOCK_X,),
                 (*args, np.int32(1), np.int32(nx + 1), *(a[source.NEQ_HALVES_SPLIT]
                                                          for a in (src, dst))))  # every column
            return
        run = Lattice3D.run
        grid, threads, shared = neq_tiles.d3q19_neq_tile_launch(label, nx, ny, k1 - k0, run)
        kern(grid, (threads,), (*args, np.int32(run)), shared_mem=shared)

    @staticmethod
    def small_case(nx: int, periodic: bool):
        """Random CPU-encoded records of a small cavity with solid cells inside, on the GPU:
        (records, flags, params, planes)."""
        ny, nz = 19, 9
        p = D3Q19Params(1 / 0.7, 1 / 1.1, 0.07, 3e-5, -2e-5, 1e-5, periodic, periodic)
        block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, (Face.WALL, Face.LID), p, "float32",
                           "neq16")
        rng = np.random.default_rng(nx)
        dev = 0.02 * rng.standard_normal((19, nz, ny, nx)) * 10.0 ** rng.uniform(
            -5, 0, (1, nz, ny, nx))
        block.set_populations(D3Q19.w[:, None, None, None] * (1 + dev))
        flags = with_solids(block, ((2, 2, 4), (3, 9, 33), (4, 8, 32), (5, 1, 1), (6, ny, nx),
                                    (nz, 10, 34)))
        return on_device(block.f_src), on_device(flags), p, ((1, 4), (4, nz + 1))

    @staticmethod
    def macro(flags) -> list:
        return [cupy.zeros(tuple(n - 2 for n in flags.shape), cupy.float32) for _ in range(4)]

    @staticmethod
    def fields(n: int):
        """Records of the n^3 cavity (rest moments, random significands), its flags and
        params, the planes of a step and its cells."""
        p = D3Q19Params(1 / 0.65, 1 / 0.65, 0.1, 0.0, 0.0, 0.0, False, False)
        probe = D3Q19Block(CPUBackend(), PROBE, PROBE, PROBE, 0, (Face.WALL, Face.LID), p,
                           np.float32, "neq16")
        f = random_records(cupy.asarray(probe.f_src[:, 2:3, 2:3, 2:3]), D3Q19.q, (n + 2,) * 3)
        return f, on_device(grown(probe.flags, n)), p, (1, n + 1), n ** 3


class Lattice2D:
    name, file, q, bytes_per_update = "D2Q9", "d2q9.cu", 9, 61
    tiles = neq_tiles.D2Q9_NEQ_TILES

    @staticmethod
    def names(store: bool) -> dict[str, str]:
        out = {"production": kernel_names.d2q9_neq_name(store)}
        out.update({t: neq_tiles.d2q9_neq_tile_name(t, store) for t in Lattice2D.tiles})
        return out

    @staticmethod
    def shared(label: str) -> int:
        return neq_tiles.d2q9_neq_tile_launch(label, 1, 1)[2]

    run = neq_tiles.D2Q9_NEQ_TILE_RUN  #: rows per block's run (the tuner sets others)

    @staticmethod
    def launch(label: str, kern, src, dst, flags, macro, rows, p) -> None:
        ny, nx = (n - 2 for n in flags.shape)
        j0, j1 = rows
        args = [src, dst, flags, *macro, np.int32(nx), np.int32(ny),
                *map(np.int64, field_strides(src, flags, dst)), np.int32(j0), np.int32(j1),
                *map(np.float32, (p.omega_plus, p.omega_minus, p.lid_velocity, p.force_x,
                                  p.force_y)),
                np.int32(p.periodic_x)]
        if label == "production":
            gy = min(j1 - j0, source.MAX_GRID_Y)
            kern((-(-nx // source.BLOCK_X), gy, -(-(j1 - j0) // gy)), (source.BLOCK_X,),
                 (*args, np.int32(1), np.int32(nx + 1)))  # every column
            return
        run = Lattice2D.run
        grid, threads, shared = neq_tiles.d2q9_neq_tile_launch(label, nx, j1 - j0, run)
        kern(grid, (threads,), (*args, np.int32(run)), shared_mem=shared)

    @staticmethod
    def small_case(nx: int, periodic: bool):
        ny = 150
        p = D2Q9Params(1 / 0.7, 1 / 1.1, 0.06, 2e-5, -1e-5, periodic)
        block = D2Q9Block(CPUBackend(), nx, ny, 0, (Face.WALL, Face.LID), p, "float32",
                          storage="neq16")
        rng = np.random.default_rng(nx)
        dev = 0.02 * rng.standard_normal((9, ny, nx)) * 10.0 ** rng.uniform(-5, 0, (1, ny, nx))
        block.set_populations(D2Q9_W[:, None, None] * (1 + dev))
        flags = with_solids(block, ((3, 4), (5, 129), (7, nx), (2, 1), (70, 256), (71, 257)))
        return on_device(block.f_src), on_device(flags), p, ((1, 67), (67, ny + 1))

    @staticmethod
    def macro(flags) -> list:
        return [cupy.zeros(tuple(n - 2 for n in flags.shape), cupy.float32) for _ in range(3)]

    @staticmethod
    def fields(n: int):
        p = D2Q9Params(1 / 0.65, 1 / 0.65, 0.1, 0.0, 0.0, False)
        probe = D2Q9Block(CPUBackend(), PROBE, PROBE, 0, (Face.WALL, Face.LID), p, np.float32,
                          storage="neq16")
        f = random_records(cupy.asarray(probe.f_src[:, 2:3, 2:3]), 9, (n + 2, n + 2))
        return f, on_device(grown(probe.flags, n)), p, (1, n + 1), n ** 2


def compile_options() -> tuple[str, ...]:
    cc = cupy.cuda.Device().compute_capability
    return (*source.COMPILE_OPTIONS, f"-arch=sm_{cc}")


def build(lat, tiles: list[str]) -> dict[tuple[str, bool], object]:
    """(label, checking) -> kernel, in one module of the lattice's file."""
    want = {(label, check): name for check in (False, True)
            for label, name in lat.names(check).items()
            if label == "production" or label in tiles}
    mod = cupy.RawModule(code=source.kernel_source(lat.file), options=compile_options(),
                         name_expressions=sorted(set(want.values())))
    kernels = {key: mod.get_function(name) for key, name in want.items()}
    for (label, _), kern in kernels.items():
        if label != "production":
            kern.max_dynamic_shared_size_bytes = lat.shared(label)
    return kernels


def same_bits(lat, kernels, label: str) -> bool:
    """Candidate ``label`` == production, bit for bit (records and rho/u)."""
    ok = True
    for periodic in (False, True):
        for nx in (270, 269):
            f0, flags, p, ranges = lat.small_case(nx, periodic)
            out = {}
            for who in ("production", label):
                dst = padded_empty(cupy, f0.shape, f0.dtype)
                dst[...] = f0
                macro = lat.macro(flags)
                for r in ranges:
                    lat.launch(who, kernels[(who, True)], f0, dst, flags, macro, r, p)
                out[who] = [cupy.asnumpy(a).tobytes() for a in (dst, *macro)]
            ok &= out["production"] == out[label]
            ok &= cupy.asnumpy(f0).tobytes() != out[label][0]
    return ok


def time_size(lat, kernels, tiles: list[str], bits: dict[str, str], n: int, steps: int,
              bw: float, runs: list[int]) -> dict[str, float]:
    """MLUPS of production and each candidate at size n, the candidates with runs of each of
    ``runs`` planes or rows (the table's rows as they come); label (and run) -> MLUPS."""
    out = {}
    f, flags, p, rng, cells = lat.fields(n)
    macro = [cupy.zeros((1,), cupy.float32) for _ in range(4 if lat is Lattice3D else 3)]
    grid = f"{n}^{3 if lat is Lattice3D else 2}"
    default = lat.run
    for label, run in (("production", 0), *((t, r) for t in tiles for r in runs)):
        kern = kernels[(label, False)]
        lat.run = run or default
        try:
            def step(k: int, label=label, kern=kern) -> None:
                lat.launch(label, kern, f[k % 2], f[(k + 1) % 2], flags, macro, rng, p)

            mlups = cells * steps / timed_launches(step, steps) / 1e6
            out[label if run in (0, default) else f"{label} run {run}"] = mlups
            frac = mlups * 1e6 * lat.bytes_per_update / bw
            shared = 0 if label == "production" else lat.shared(label)
            print(f"{lat.name:>5} {grid:>7} {label:>12} {run or '-':>4} {kern.num_regs:>4} "
                  f"{shared / 1024:>8.1f} {bits[label]:>7} {mlups:>9.0f} {100 * frac:>6.1f}%",
                  flush=True)
        except Exception as exc:  # a candidate that does not launch: say so, go on
            print(f"{lat.name} {grid} {label} run {run}: failed: {type(exc).__name__}: {exc}",
                  flush=True)
    lat.run = default
    return out


def run_lattice(lat, tiles: list[str], sizes: list[int], steps: int, bw: float,
                runs: list[int]) -> None:
    t0 = time.time()
    kernels = build(lat, tiles)
    print(f"{lat.name}: {len(kernels)} kernels compiled in {time.time() - t0:.0f} s", flush=True)
    bits = {"production": "-"}
    for label in tiles:
        try:
            bits[label] = "yes" if same_bits(lat, kernels, label) else "NO"
        except Exception as exc:
            bits[label] = "error"
            print(f"{label}: check failed: {type(exc).__name__}: {exc}", flush=True)
    print(f"{'':>5} {'grid':>7} {'kernel':>12} {'run':>4} {'regs':>4} {'shared KB':>8} "
          f"{'bitwise':>7} {'MLUPS':>9} {'%copy':>7}")
    best = {}
    for n in sizes:
        speed = time_size(lat, kernels, tiles, bits, n, steps, bw, runs)
        cupy.get_default_memory_pool().free_all_blocks()
        fair = {k: v for k, v in speed.items() if bits.get(k) in ("-", "yes")}  # default runs
        if fair:
            best[n] = max(fair, key=fair.get)
    for n, label in best.items():  # scripts/gpu-session.sh reads these lines
        print(f"best {lat.name} at {n}: {label}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lattices", nargs="+", default=["d3q19", "d2q9"],
                    choices=["d3q19", "d2q9"])
    ap.add_argument("--sizes3d", nargs="+", type=int, default=[512, 256])
    ap.add_argument("--sizes2d", nargs="+", type=int, default=[8192, 4096])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--runs3d", nargs="+", type=int, default=[neq_tiles.D3Q19_NEQ_TILE_RUN, 64],
                    help="planes per block's run the D3Q19 candidates are timed with")
    ap.add_argument("--runs2d", nargs="+", type=int, default=[neq_tiles.D2Q9_NEQ_TILE_RUN, 256],
                    help="rows per block's run the D2Q9 candidates are timed with")
    ap.add_argument("--tiles", nargs="+", default=None,
                    choices=sorted([*neq_tiles.D3Q19_NEQ_TILES, *neq_tiles.D2Q9_NEQ_TILES]),
                    help="candidates to time (default: every one of each lattice)")
    args = ap.parse_args()
    t_start = time.time()
    cupy.random.seed(7)
    bw = copy_bandwidth()
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    print(f"{name.decode() if isinstance(name, bytes) else name}; copy bandwidth "
          f"{bw / 1e12:.3f} TB/s; %copy: MLUPS x bytes per update (D3Q19 109, D2Q9 61) / copy "
          "bandwidth; bitwise: against production")
    for key in args.lattices:
        lat = Lattice3D if key == "d3q19" else Lattice2D
        tiles = [t for t in (args.tiles or lat.tiles) if t in lat.tiles]
        three = key == "d3q19"
        run_lattice(lat, tiles, args.sizes3d if three else args.sizes2d, args.steps, bw,
                    args.runs3d if three else args.runs2d)
    print(f"copy bandwidth at the end {copy_bandwidth() / 1e12:.3f} TB/s; "
          f"{time.time() - t_start:.0f} s in all")


if __name__ == "__main__":
    main()
