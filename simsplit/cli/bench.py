"""Throughput of the fluid solver per backend and grid, against the memory system's copy rate.

Grids ``NXxNY`` run D2Q9, ``NXxNYxNZ`` D3Q19. A cell update moves at least
``2 * Q * storage itemsize + 1`` bytes through DRAM (each population read and written once in
its storage type, ``--storage``: 2 B in fp16; one flag byte), whether the populations stream
between two arrays or in place in one (``--streaming aa``, half the memory). MLUPS times
that, divided by the bandwidth of a large device-to-device copy (bytes read plus written per
second), is the fraction of the memory system the kernels use. Device backends are also timed
replaying CUDA graphs of several steps (``backend.capture``), which removes Python's launch
overhead on small grids.

``python -m simsplit.cli.bench --backend cupy --grid 8192x8192`` (or ``simsplit bench``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from simsplit.backends import Backend, get_backend, resolve_backend_name
from simsplit.backends.base import DirectReplay
from simsplit.numerics.lattice import D3Q19, Q
from simsplit.numerics.storage import STORAGE_DTYPES, bytes_per_update

#: steps recorded in one graph: even (buffers end where they began), long enough to amortise
#: the replay call, short enough to capture quickly
GRAPH_STEPS = 32


def bytes_per_cell_update(precision: str | np.dtype, q: int = Q,
                          storage: str | np.dtype | None = None, steps_per_sweep: int = 1) -> int:
    """DRAM bytes of one cell update of a ``q``-population lattice: populations read and
    written once per sweep in their storage type (default: ``precision``), plus one flag byte.
    A sweep of two steps (D3Q19 run.temporal_blocking) moves them once per two updates; the
    first step's extra reads for the ring around each column are left out (Nsight Compute: 85 B
    per float32 update at 512^3 on an H200, against the 77 counted here)."""
    return (bytes_per_update(q, storage or precision) - 1) // steps_per_sweep + 1


def _lattice_q(grid: Sequence[int]) -> int:
    return D3Q19.q if len(grid) == 3 else Q


def _median_seconds(fn: Callable[[], None], sync: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_copy_bandwidth(backend: Backend | str, nbytes: int | None = None,
                           repeats: int = 5) -> float:
    """Bytes read plus written per second by a large copy on ``backend`` (median of repeats).

    Device backends copy 1 GiB device to device; the cpu backend 256 MiB with NumPy.
    """
    be = get_backend(backend) if isinstance(backend, str) else backend
    n = (nbytes or (1 << 30 if be.is_device else 1 << 28)) // 4
    with be.activate():
        src, dst = be.zeros((n,), np.float32), be.zeros((n,), np.float32)
    inner = 10 if be.is_device else 3
    be.copy(dst, src)  # warm-up: first touch, lazy initialisation

    def copies() -> None:
        for _ in range(inner):
            be.copy(dst, src)

    seconds = _median_seconds(copies, be.synchronize, repeats) / inner
    return 2 * 4 * n / seconds


def _case(backend: str, nx: int, ny: int, subdomains: int, precision: str,
          overlap: bool = True, nz: int | None = None,
          storage: str | None = None, streaming: str | None = None,
          devices: list[int] | None = None, temporal_blocking: bool = True) -> dict[str, Any]:
    """The benchmark cavity: ``nx`` x ``ny`` (D2Q9) or ``nx`` x ``ny`` x ``nz`` (D3Q19)."""
    from simsplit.case import validate_case

    shape = [nx, ny] if nz is None else [nx, ny, nz]
    run: dict[str, Any] = {"backend": backend, "precision": precision, "overlap": overlap,
                           "devices": devices, "temporal_blocking": temporal_blocking}
    if storage is not None:
        run["storage"] = storage
    if streaming is not None:
        run["streaming"] = streaming
    return validate_case({
        "physics": "fluid",
        # a fixed viscosity (tau 0.65) keeps every grid size a valid cavity; the speed of a
        # step does not depend on it
        "fluid": {"viscosity": 0.05, "lid_velocity": 0.1, "collision": "trt"},
        "domain": {"shape": shape, "boundaries": {"x": "wall", "y": "wall", "lid": True}},
        "decomposition": {"subdomains": subdomains},
        "run": run,
        "output": {"dir": None},
    }, source="benchmark case")


def _bench_grid(name: str, nx: int, ny: int, subdomains: int, steps: int, precision: str,
                repeats: int, graph: bool, overlap: bool = True,
                tuner: Any = None, nz: int | None = None,
                storage: str | None = None, streaming: str | None = None,
                devices: list[int] | None = None,
                temporal_blocking: bool = True) -> dict[str, Any]:
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    case = _case(name, nx, ny, subdomains, precision, overlap, nz, storage, streaming, devices,
                 temporal_blocking)
    cells = nx * ny * (nz or 1)
    run = case["run"]
    solver = FluidSolver(case, ParallelContext(name, run["devices"], run["transport"]))
    if tuner is not None:  # time block sizes first; the rows below then use the tuned ones
        from simsplit.gpu.autotune import tune_solver

        tune_solver(solver, tuner)
    solver.step(min(steps, 20))  # warm-up: compilation, first touch
    seconds = _median_seconds(lambda: solver.step(steps), solver.synchronize, repeats)
    row: dict[str, Any] = {"steps_per_s": steps / seconds, "mlups": cells * steps / seconds / 1e6,
                           "population_bytes": sum(_population_bytes(b)
                                                   for b in solver.blocks.values()),
                           "steps_per_sweep": solver.steps_per_sweep}
    backend = solver.blocks[min(solver.blocks)].backend
    if graph and backend.is_device and hasattr(backend, "capture"):
        # a multiple of four steps: an even number of buffer swaps also when steps go two
        # per sweep (one swap each), so each replay leaves the buffers as it found them
        chunk = min(GRAPH_STEPS, max(4, steps - steps % 4))
        try:
            replay = backend.capture(lambda: solver.step(chunk))
        except Exception as exc:  # e.g. slabs on several GPUs: keep the direct timing
            row["graph_error"] = f"{type(exc).__name__}: {exc}"
        else:
            if isinstance(replay, DirectReplay):  # no graphs on this backend: nothing to add
                return row
            n_replays = max(1, steps // chunk)
            replay.replay()

            def replays() -> None:
                for _ in range(n_replays):
                    replay.replay()

            gsec = _median_seconds(replays, solver.synchronize, repeats)
            done = n_replays * chunk
            row.update(graph_steps_per_s=done / gsec, graph_mlups=cells * done / gsec / 1e6)
    return row


def run_bench(backends: list[str], grids: list[tuple[int, ...]], subdomains: int, steps: int,
              precision: str, *, repeats: int = 5, graph: bool = True,
              overlap: bool = True, tuner: Any = None,
              storage: str | None = None, streaming: str | None = None,
              devices: list[int] | None = None,
              temporal_blocking: bool = True) -> list[dict[str, Any]]:
    """Time ``steps`` solver steps per backend and grid (median of ``repeats`` after a warm-up).

    One row per (backend, grid) with ``mlups``, ``steps_per_s``, ``copy_bandwidth`` (B/s),
    ``bytes_per_cell_update``, ``bandwidth_fraction`` and, for device backends, the same for
    CUDA-graph replay (``graph_*``). A failing backend or grid gives a row with ``error``.
    With a :class:`simsplit.gpu.autotune.Autotuner` the kernels are tuned first. ``storage`` is the
    population storage type (``run.storage``; default ``precision``), ``streaming`` the
    streaming scheme of 3D grids (``run.streaming``: two-lattice or aa); ``devices`` the GPUs slabs
    go to (``run.devices``; default all); ``temporal_blocking`` as ``run.temporal_blocking``.
    """
    rows = []
    for requested in backends:
        name = resolve_backend_name(requested)
        try:
            bandwidth = measure_copy_bandwidth(get_backend(name, 0))
        except Exception as exc:  # report and go on with the next backend
            rows.append({"backend": name, "grid": None, "error": f"{type(exc).__name__}: {exc}"})
            continue
        for grid in grids:
            nx, ny = grid[0], grid[1]
            nz = grid[2] if len(grid) == 3 else None
            st = storage
            sm = streaming if nz is not None else None
            per_cell = bytes_per_cell_update(precision, _lattice_q(grid), st)
            row: dict[str, Any] = {"backend": name, "grid": tuple(grid), "subdomains": subdomains,
                                   "precision": precision, "storage": st or precision,
                                   "streaming": sm or "two-lattice",
                                   "steps": steps, "overlap": overlap,
                                   "bytes_per_cell_update": per_cell,
                                   "copy_bandwidth": bandwidth}
            try:
                row.update(_bench_grid(name, nx, ny, subdomains, steps, precision, repeats,
                                       graph, overlap, tuner, nz, st, sm, devices,
                                       temporal_blocking))
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"
            if row.get("steps_per_sweep", 1) > 1:
                per_cell = bytes_per_cell_update(precision, _lattice_q(grid), st,
                                                 row["steps_per_sweep"])
                row["bytes_per_cell_update"] = per_cell
            for key in ("", "graph_"):
                if f"{key}mlups" in row:
                    moved = row[f"{key}mlups"] * 1e6 * per_cell
                    row[f"{key}bandwidth_fraction"] = moved / bandwidth
            rows.append(row)
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = (f"{'backend':<11} {'grid':>11} {'sub':>3} {'precision':<9} {'storage':<8} "
            f"{'stream':<11} {'B/cell':>6} {'pop GB':>7} {'steps/s':>9} "
            f"{'MLUPS':>9} {'%copy':>6} {'graph st/s':>10} {'graph MLUPS':>11} {'%copy':>6}")
    lines = [head, "-" * len(head)]
    bandwidths = {}
    for r in rows:
        if r.get("grid") is None:
            lines.append(f"{r['backend']:<11} error: {r['error']}")
            continue
        bandwidths[r["backend"]] = r["copy_bandwidth"]
        grid = "x".join(str(n) for n in r["grid"])
        ov = "" if r.get("overlap", True) else " (no overlap)"
        start = (f"{r['backend']:<11} {grid:>11} {r['subdomains']:>3}{ov} {r['precision']:<9} "
                 f"{r.get('storage', r['precision']):<8} {r.get('streaming', ''):<11} "
                 f"{r['bytes_per_cell_update']:>6} {r.get('population_bytes', 0) / 1e9:>7.3f}")
        if "mlups" not in r:
            lines.append(f"{start} error: {r['error']}")
            continue
        line = (f"{start} {r['steps_per_s']:>9.0f} {r['mlups']:>9.0f} "
                f"{100 * r['bandwidth_fraction']:>5.1f}%")
        if "graph_mlups" in r:
            line += (f" {r['graph_steps_per_s']:>10.0f} {r['graph_mlups']:>11.0f} "
                     f"{100 * r['graph_bandwidth_fraction']:>5.1f}%")
        elif "graph_error" in r:
            line += f"  graph: {r['graph_error']}"
        lines.append(line)
    if any("bytes_per_cell_update" in r for r in rows):
        lines.append("%copy: MLUPS x B/cell (bytes per cell update: populations read + written "
                     "in their storage type, flag byte) / copy bandwidth (read + write) of the "
                     "same backend")
    if any(r.get("steps_per_sweep", 1) > 1 for r in rows):
        lines.append("B/cell of D3Q19 two steps per sweep (run.temporal_blocking; slabs on one "
                     "GPU too): populations read and written once per two updates, ghost planes "
                     "and their copies left out")
    for name, bw in bandwidths.items():
        lines.append(f"copy bandwidth {name}: {bw / 1e12:.3f} TB/s")
    return "\n".join(lines)


def _parse_grid(text: str) -> tuple[int, ...]:
    """``NXxNY`` (D2Q9) or ``NXxNYxNZ`` (D3Q19)."""
    try:
        grid = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        grid = ()
    if len(grid) not in (2, 3) or min(grid) < 2:
        raise argparse.ArgumentTypeError(
            f"grid {text!r}: expected NXxNY or NXxNYxNZ, e.g. 512x512 or 256x256x256")
    return grid


def add_storage_argument(parser: argparse.ArgumentParser) -> None:
    """``--storage`` and ``--streaming``: how grids hold their populations."""
    parser.add_argument("--storage", default=None,
                        choices=list(STORAGE_DTYPES),
                        help="population storage of 2D and 3D grids (run.storage; default: "
                             "--precision)")
    parser.add_argument("--streaming", default=None, choices=["two-lattice", "aa"],
                        help="D3Q19 streaming (run.streaming; aa: one array, in place)")
    parser.add_argument("--temporal-blocking", default="on", choices=["on", "off"],
                        help="D3Q19 two steps per sweep, also across the halo faces of slabs "
                             "on one GPU (run.temporal_blocking)")


def _population_bytes(block: Any) -> int:
    """Bytes of a block's population arrays (ghosts included): one array under AA, else two."""
    return int(block.f_src.nbytes) * (1 if getattr(block, "aa", False) else 2)


def main_from_args(args: argparse.Namespace) -> int:
    """Run the benchmark for parsed ``simsplit bench`` arguments; 1 if any row failed."""
    grids = [g if isinstance(g, tuple) else _parse_grid(g) for g in (args.grid or ["1024x1024"])]
    tuner = None
    if getattr(args, "autotune", False):
        from simsplit.gpu.autotune import Autotuner

        tuner = Autotuner()
    rows = run_bench(list(args.backend or ["auto"]), grids, args.subdomains, args.steps,
                     args.precision, repeats=getattr(args, "repeats", 5),
                     graph=not getattr(args, "no_graph", False),
                     overlap=getattr(args, "overlap", "on") == "on", tuner=tuner,
                     storage=getattr(args, "storage", None),
                     streaming=getattr(args, "streaming", None),
                     devices=getattr(args, "devices", None),
                     temporal_blocking=getattr(args, "temporal_blocking", "on") == "on")
    print(format_table(rows))
    if tuner is not None:
        from simsplit.gpu.autotune import format_table as autotune_table

        print(f"\nautotune (cache {tuner.cache.path}):")
        print(autotune_table(tuner.results))
    return 1 if any("error" in r for r in rows) else 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m simsplit.cli.bench",
                                description=__doc__.split("\n")[0])
    p.add_argument("--backend", action="append", help="backend(s) to measure (repeatable)")
    p.add_argument("--grid", action="append", type=_parse_grid, help="NXxNY (repeatable)")
    p.add_argument("--subdomains", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--precision", default="float32", choices=["float32", "float64"])
    add_storage_argument(p)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--devices", type=lambda t: [int(v) for v in t.split(",")], default=None,
                   metavar="I,J,...", help="GPUs the slabs go to (run.devices; default all)")
    p.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph timing")
    p.add_argument("--autotune", action="store_true",
                   help="tune threads per block first and show default against tuned")
    p.add_argument("--overlap", choices=["on", "off"], default="on",
                   help="exchange halos while the interior is computed (run.overlap)")
    return main_from_args(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
