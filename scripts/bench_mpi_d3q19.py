"""The lattice Boltzmann cavity under mpiexec against one slab in one process, same run (issue 20).

    python scripts/bench_mpi_d3q19.py [--grid 512x512x512] [--ranks 2 4] [--steps 40]
                                      [--backend cupy] [--precision float32] [--mps]

First one slab in this process (two steps per sweep where the kernels have them), then for each
rank count ``mpiexec -n RANKS`` copies of itself (``--worker``), one slab per rank on GPU rank
mod the visible GPUs, twice: two steps per sweep (each halo face's two boundary planes through
MPI after a sweep, the planes next to the faces swept first; simsplit/fluid/pairs.py) and one
step per sweep (``run.temporal_blocking: false``, the path before). Halos travel as MPI
messages staged through pinned host memory where MPI is not CUDA-aware. Each row: MLUPS of the
whole grid (rank 0's wall time of ``solver.step(steps)`` between barriers, median of
``--repeats``), the fraction of the one-slab rate, steps per sweep.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simsplit.cli.bench import _case  # noqa: E402


def _solver(args: argparse.Namespace, ranks: int, pairs: bool, context) -> object:
    from simsplit.fluid.solver import FluidSolver

    nx, ny, *nz = args.grid
    case = _case(args.backend, nx, ny, ranks, args.precision, True, nz[0] if nz else None,
                 temporal_blocking=pairs)
    return FluidSolver(context.prepare_case(case) if ranks > 1 else case, context)


def _time(solver, steps: int, repeats: int, barrier) -> float:
    solver.step(min(steps, 20))  # warm-up: compilation, first touch
    times = []
    for _ in range(repeats):
        solver.synchronize()
        barrier()
        t0 = time.perf_counter()
        solver.step(steps)
        solver.synchronize()
        barrier()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def worker(args: argparse.Namespace) -> int:
    from simsplit.parallel.context import MPIContext

    ctx = MPIContext(args.backend)
    solver = _solver(args, ctx.size, args.pairs == "on", ctx)
    seconds = _time(solver, args.steps, args.repeats, ctx.comm.Barrier)
    if ctx.rank == 0:
        cells = 1
        for n in args.grid:
            cells *= n
        Path(args.out).write_text(json.dumps({
            "mlups": cells * args.steps / seconds / 1e6,
            "steps_per_sweep": solver.steps_per_sweep,
            "transport": solver.transport.describe()}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", default="512x512x512")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="cupy")
    ap.add_argument("--precision", default="float32")
    ap.add_argument("--mps", action="store_true",
                    help="the mpiexec rows under an MPS daemon (started by the caller)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--pairs", choices=("on", "off"), default="on", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.grid = tuple(int(v) for v in args.grid.split("x"))
    if args.worker:
        return worker(args)
    from simsplit.parallel.context import ParallelContext

    one = _solver(args, 1, True, ParallelContext(args.backend))
    cells = 1
    for n in args.grid:
        cells *= n
    base = cells * args.steps / _time(one, args.steps, args.repeats, lambda: None) / 1e6
    print(f"{'run':<34} {'MLUPS':>9} {'of 1 slab':>9} {'sweep':>5}  transport", flush=True)
    print(f"{'1 process, 1 slab':<34} {base:>9.0f} {100.0:>8.1f}% "
          f"{one.steps_per_sweep:>5}  -", flush=True)
    del one
    grid = "x".join(map(str, args.grid))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    for ranks in args.ranks:
        for pairs in ("on", "off"):
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                cmd = ["mpiexec", "-n", str(ranks), sys.executable, __file__, "--worker",
                       "--grid", grid, "--steps", str(args.steps), "--repeats",
                       str(args.repeats), "--backend", args.backend, "--precision",
                       args.precision, "--pairs", pairs, "--out", out.name]
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
                label = f"mpiexec -n {ranks}, pairs {pairs}" + (", MPS" if args.mps else "")
                if proc.returncode != 0:
                    print(f"{label}: failed ({proc.returncode})\n{proc.stderr[-2000:]}")
                    continue
                row = json.loads(Path(out.name).read_text())
            print(f"{label:<34} {row['mlups']:>9.0f} {100 * row['mlups'] / base:>8.1f}% "
                  f"{row['steps_per_sweep']:>5}  {row['transport']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
