"""Speed of flows around bodies against the plain box on the same grid (issue 21).

    python scripts/bench_bodies.py [--backend cupy] [--steps 10000] [--only 2D|3D]

For the D2Q9 cylinder (Schäfer-Turek 2D-1 geometry, 8800 x 1640, float32) and the D3Q19 3D-1Z
cylinder (250 x 41 x 41, float64) it prints, beside the plain box (lid-driven cavity, walls
only) on the same grid, backend and precision:
  kernels  MLUPS of Simulation.step(STEPS) alone (CUDA graphs, no operations);
  run      MLUPS of a whole Simulation.run of STEPS steps (forces every output.forces_every,
           residual every run.check_every, health checks), as `simsplit run` reports;
  forces   seconds per force measurement on the device (DeviceForces) and by the host path
           (populations downloaded, measure_forces), and whether both give the same bits.
In 3D the cylinder's kernels are also timed with the bodies kernel launched in blocks of
BODY_BLOCKS threads (the production size is source.D3Q19_BODIES_BLOCK_X).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from simsplit import Simulation
from simsplit.case import load_case
from simsplit.fluid.forces import DeviceForces, body_links, measure_forces

CASES = Path(__file__).resolve().parents[1] / "cases"
#: threads per block of the D3Q19 bodies kernel timed besides the production size
BODY_BLOCKS = (32, 64, 128, 256)
GRIDS = {"2D": ("cylinder2d.yaml", [8800, 1640], "float32"),
         "3D": ("cylinder3d.yaml", [250, 41, 41], "float64")}


def case_of(name: str, backend: str, steps: int, plain: bool, one_step: bool = False) -> dict:
    case_file, shape, precision = GRIDS[name]
    over = [f"domain.shape=[{','.join(map(str, shape))}]", f"run.backend={backend}",
            "decomposition.subdomains=1", "output.dir=null", f"run.precision={precision}",
            f"run.steps={steps}", "run.tolerance=0", "run.check_every=500",
            "output.forces_every=500"]
    if one_step:
        over.append("run.temporal_blocking=false")
    case = load_case(CASES / case_file, over)
    if plain:
        dim = len(shape)
        case["domain"] = {"shape": shape,
                          "boundaries": {"lid": True, **({"z": "wall"} if dim == 3 else {})}}
        # viscosity 0.05 (tau 0.65) on every grid: Re = U L / nu with L the x extent (a fixed
        # Re would put the lid corners' density dip past the case check on the long 2D grid)
        case["fluid"] = {**case["fluid"], "reynolds": 2.0 * shape[0], "lid_velocity": 0.1}
    return case


def set_bodies_block(sim: Simulation, threads: int | None) -> None:
    """Launch the D3Q19 bodies kernel of ``sim``'s slabs in blocks of ``threads`` (None: the
    production size); the kernel sets are shared per device, so every caller sets it."""
    from simsplit.backends.cuda_c import source

    for blk in sim.solver.blocks.values():
        if hasattr(blk.kernels, "bodies_block_x"):
            blk.kernels.bodies_block_x = threads or source.D3Q19_BODIES_BLOCK_X


def kernel_mlups(case: dict, steps: int, bodies_block: int | None = None) -> float:
    sim = Simulation(case)
    set_bodies_block(sim, bodies_block)
    sim.step(64)  # compile, first graph
    sim.solver.synchronize()
    t0 = time.perf_counter()
    sim.step(steps)
    sim.solver.synchronize()
    return sim.solver.mlups_cells() * steps / (time.perf_counter() - t0) / 1e6


def run_mlups(case: dict, steps: int) -> float:
    """A whole run of ``steps`` steps after 500 warm-up ones (compiles, graphs, tables)."""
    sim = Simulation({**case, "run": {**case["run"], "steps": 500 + steps}})
    set_bodies_block(sim, None)
    sim.step(500)
    if sim.body_forces is not None:  # compile the force kernel, upload the link tables
        sim.body_forces.reducer.measure(sim.solver)
    return sim.run(output=False).mlups


def force_seconds(case: dict, repeats: int = 5) -> tuple[float, float, bool]:
    sim = Simulation(case)
    set_bodies_block(sim, None)
    sim.step(200)
    links = body_links(sim.solver.setup)
    device = DeviceForces(links)
    device.measure(sim.solver)  # compile, table upload
    out = []
    for fn in (lambda: device.measure(sim.solver), lambda: measure_forces(sim.solver, links)):
        sim.solver.synchronize()
        t0 = time.perf_counter()
        for _ in range(repeats):
            got = fn()
        out.append(((time.perf_counter() - t0) / repeats, got))
    return out[0][0], out[1][0], bool(np.array_equal(out[0][1], out[1][1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cupy")
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--only", choices=sorted(GRIDS))
    args = ap.parse_args()
    for name in [args.only] if args.only else sorted(GRIDS):
        _, shape, precision = GRIDS[name]
        grid = "x".join(map(str, shape))
        print(f"== {name} {grid} {precision}, {args.backend}, {args.steps} steps", flush=True)
        rows = {
            "box": case_of(name, args.backend, args.steps, plain=True),
            "box, one step per sweep": case_of(name, args.backend, args.steps, plain=True,
                                               one_step=True),
            "cylinder": case_of(name, args.backend, args.steps, plain=False),
        }
        rates = {}
        for label, case in rows.items():
            rates[label] = (kernel_mlups(case, args.steps), run_mlups(case, args.steps))
        box_k, box_r = rates["box"]
        for label, (k, r) in rates.items():
            print(f"{label:>24}: kernels {k:9.1f} MLUPS ({100 * k / box_k:5.1f} %)   "
                  f"run {r:9.1f} MLUPS ({100 * r / box_r:5.1f} %)", flush=True)
        if name == "3D":
            for threads in BODY_BLOCKS:
                k = kernel_mlups(rows["cylinder"], args.steps, bodies_block=threads)
                print(f"{f'cylinder, blocks of {threads}':>24}: kernels {k:9.1f} MLUPS "
                      f"({100 * k / box_k:5.1f} %)", flush=True)
        dev, host, same = force_seconds(rows["cylinder"])
        print(f"{'forces':>24}: device {1e3 * dev:.2f} ms, host path {1e3 * host:.1f} ms per "
              f"measurement; same bits: {same}", flush=True)


if __name__ == "__main__":
    main()
