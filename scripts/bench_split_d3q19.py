"""The cost of splitting on one GPU, each row against one slab in the same run (issue 20).

    python scripts/bench_split_d3q19.py [--grid 512x512x512] [--steps 50] [--repeats 3]
                                        [--only fp16]

D3Q19 float32 on 1, 2 and 4 slabs with two steps per sweep (slabs on one GPU cross their halo
faces in pairs, copying into each other's ghost planes), 2 and 4 slabs pairing as slabs on
several GPUs or ranks do ("buf": each halo face's two planes packed, moved by the transport,
unpacked), and for comparison 2 and 4 slabs one step per sweep (the path before); fp16 storage
on 1, 2 and 4 slabs (two steps per sweep where this GPU pairs fp16, see
``source.d3q19_fused_pairs``) and on 2 and 4 slabs one step per sweep; D2Q9 float32 4096 x 8192
on 1 and 2 slabs. Each figure is the simsplit bench rate (CUDA graphs where the backend has
them), and the last column its fraction of the one-slab rate of the same storage in this run.
``--only`` keeps the rows whose case names hold the word (``fp16``, ``D2Q9``, ``float32``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simsplit.cli.bench import run_bench  # noqa: E402


def _rate(row: dict) -> float:
    return float(row.get("graph_mlups") or row.get("mlups") or float("nan"))


@contextlib.contextmanager
def _buffered(on: bool) -> Iterator[None]:
    """Slabs on one GPU crossing their halo faces in pairs the way slabs on several GPUs or
    ranks do (each face's planes packed, moved by the transport, unpacked; simsplit/fluid/
    pairs.py's buffered path) instead of copying into each other's ghost planes."""
    from simsplit.fluid.solver import FluidSolver

    if not on:
        yield
        return
    direct = FluidSolver._halos_stay_on_one_device
    FluidSolver._halos_stay_on_one_device = lambda self: False  # type: ignore[method-assign]
    try:
        yield
    finally:
        FluidSolver._halos_stay_on_one_device = direct  # type: ignore[method-assign]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", default="512x512x512")
    ap.add_argument("--grid2d", default="4096x8192")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", help="run only the cases whose names hold this word")
    args = ap.parse_args()
    grid3 = tuple(int(v) for v in args.grid.split("x"))
    grid2 = tuple(int(v) for v in args.grid2d.split("x"))
    plan = [("D3Q19 float32", grid3, "float32", n, True) for n in (1, 2, 4)]
    plan += [("D3Q19 float32", grid3, "float32", n, "buffered") for n in (2, 4)]
    plan += [("D3Q19 float32", grid3, "float32", n, False) for n in (2, 4)]
    plan += [("D3Q19 fp16", grid3, "float16", n, True) for n in (1, 2, 4)]
    plan += [("D3Q19 fp16", grid3, "float16", n, False) for n in (2, 4)]
    plan += [("D2Q9 float32", grid2, None, n, True) for n in (1, 2)]
    if args.only:
        plan = [row for row in plan if args.only in row[0]]
    print(f"{'case':<14} {'grid':<14} {'slabs':>5} {'sweep':>6} {'MLUPS':>9} {'of 1 slab':>9}")
    base: dict[str, float] = {}
    for label, grid, storage, n, pairs in plan:
        with _buffered(pairs == "buffered"):
            rows = run_bench(["cupy"], [grid], n, args.steps, "float32", repeats=args.repeats,
                             storage=storage, temporal_blocking=bool(pairs))
        row = rows[0]
        if "error" in row:
            print(f"{label:<14} {'x'.join(map(str, grid)):<14} {n:>5} error: {row['error']}")
            continue
        rate = _rate(row)
        if n == 1:
            base[label] = rate
        frac = rate / base[label] if label in base else float("nan")
        sweep = f"{row.get('steps_per_sweep', 1)}/sw"
        if pairs == "buffered":
            sweep += " buf"
        print(f"{label:<14} {'x'.join(map(str, grid)):<14} {n:>5} {sweep:>6} {rate:>9.0f} "
              f"{100 * frac:>8.1f}%", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
