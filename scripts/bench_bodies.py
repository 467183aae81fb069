"""Speed of flows around bodies against the plain box on the same grid (issue 21).

    python scripts/bench_bodies.py [--backend cupy] [--steps 10000] [--only 2D|3D]
        [--d3 10 20 40] [--precision3d float64 float32] [--kernels-only]
        [--links halfway quadratic slip slip-quadratic] [--storage3d neq16 neq16s]
        [--storage2d neq16 neq16s]

For the D2Q9 cylinder (Schäfer-Turek 2D-1 geometry, 8800 x 1640, float32) and the D3Q19 3D-1Z
cylinder (D = 10 cells: 250 x 41 x 41, float64) it prints, beside the plain box (lid-driven
cavity, walls only) on the same grid, backend and precision:
  kernels  MLUPS of Simulation.step(STEPS) alone (CUDA graphs, no operations);
  run      MLUPS of a whole Simulation.run of STEPS steps (forces every output.forces_every,
           residual every run.check_every, health checks), as `simsplit run` reports;
  forces   seconds per force measurement on the device (DeviceForces) and by the host path
           (populations downloaded, measure_forces), and whether both give the same bits.
In 3D the cylinder's kernels are also timed with the bodies kernel launched in blocks of
BODY_BLOCKS threads (the production size is source.D3Q19_BODIES_BLOCK_X) and with the general
bodies kernel (every outlet kind compiled in) instead of the variant the launcher picks.
--d3 times 3D-1Z at D cells per diameter (grid 25 D x 4.1 D x 4.1 D: 20 -> 500 x 82 x 82, 40
-> 1000 x 164 x 164; 250 x 41 x 41 is 0.42 M cells, launch-bound on an H200) in each precision
of --precision3d; grids other than D = 10 float64, and every grid with --kernels-only, time
the kernels only (box with its production sweep, box one step per sweep, cylinder, cylinder
with the general kernel, cylinder in one launch a slab instead of its column spans), STEPS
scaled to the grid's cells (at least MIN_STEPS). --links adds cylinder rows (kernels only)
with other walls than the case's: halfway or quadratic bounce-back on the cylinder, or free-
slip side walls (y, and z in 3D) with the case's links or quadratic ones (slip-quadratic: the
D3Q19 bodies kernel's BODIES_SLIP_QUADRATIC);
--kernels-only times 2D's box and cylinder kernels too (unless --only 3D), the cylinder by
column spans and in one launch a slab. --storage3d times the --d3 grids' kernels with each
run.storage given (float32 arithmetic; default: the precision's own storage), --storage2d the
2D ones.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from simsplit import Simulation
from simsplit.case import load_case
from simsplit.fluid.forces import DeviceForces, body_links, measure_forces
from simsplit.numerics.storage import STORAGE_CHOICES

CASES = Path(__file__).resolve().parents[1] / "cases"
#: threads per block of the D3Q19 bodies kernel timed besides the production size
BODY_BLOCKS = (32, 64, 128, 256)
GRIDS = {"2D": ("cylinder2d.yaml", [8800, 1640], "float32"),
         "3D": ("cylinder3d.yaml", [250, 41, 41], "float64")}
#: fewest steps of a scaled kernel timing (--d3 grids)
MIN_STEPS = 200
#: --links: case overrides of each extra cylinder row (per dimension)
LINKS = {"halfway": {2: ["domain.bounce_back=halfway"], 3: ["domain.bounce_back=halfway"]},
         "linear": {2: ["domain.bounce_back=linear"], 3: ["domain.bounce_back=linear"]},
         "quadratic": {2: ["domain.bounce_back=quadratic"], 3: ["domain.bounce_back=quadratic"]},
         "slip": {2: ["domain.boundaries.y=slip"],
                  3: ["domain.boundaries.y=slip", "domain.boundaries.z=slip"]},
         "slip-quadratic": {2: ["domain.boundaries.y=slip", "domain.bounce_back=quadratic"],
                            3: ["domain.boundaries.y=slip", "domain.boundaries.z=slip",
                                "domain.bounce_back=quadratic"]}}


def grid_3d(d: int) -> list[int]:
    """3D-1Z's grid at ``d`` cells per cylinder diameter (the duct is 25 D x 4.1 D x 4.1 D)."""
    if d % 10:
        raise SystemExit(f"--d3: {d} is not allowed: expected a multiple of 10 (4.1 D cells "
                         "across the duct)")
    ny = 41 * d // 10
    return [25 * d, ny, ny]


def case_of(name: str, backend: str, steps: int, plain: bool, one_step: bool = False,
            shape: list[int] | None = None, precision: str | None = None,
            links: str | None = None, storage: str | None = None) -> dict:
    """The cylinder case ``name`` (or with ``plain`` the box on its grid) for a timing;
    ``links``: a key of LINKS (other walls); ``storage``: run.storage (None: the
    precision's)."""
    case_file, default_shape, default_precision = GRIDS[name]
    shape = shape or default_shape
    precision = precision or default_precision
    over = [f"domain.shape=[{','.join(map(str, shape))}]", f"run.backend={backend}",
            "decomposition.subdomains=1", "output.dir=null", f"run.precision={precision}",
            f"run.steps={steps}", "run.tolerance=0", "run.check_every=500",
            "output.forces_every=500"]
    if one_step:
        over.append("run.temporal_blocking=false")
    if storage is not None:
        over.append(f"run.storage={storage}")
    if links is not None:
        over += LINKS[links][len(shape)]
    case = load_case(CASES / case_file, over)
    if plain:
        dim = len(shape)
        case["domain"] = {"shape": shape,
                          "boundaries": {"lid": True, **({"z": "wall"} if dim == 3 else {})}}
        # viscosity 0.05 (tau 0.65) on every grid: Re = U L / nu with L the x extent (a fixed
        # Re would put the lid corners' density dip past the case check on the long 2D grid)
        case["fluid"] = {**case["fluid"], "reynolds": 2.0 * shape[0], "lid_velocity": 0.1}
    return case


def set_bodies_block(sim: Simulation, threads: int | None, variant: str | None = None) -> None:
    """Launch the D3Q19 bodies kernel of ``sim``'s slabs in blocks of ``threads`` (None: the
    production size), as ``variant`` of source.D3Q19_BODIES_OPEN (None: the launcher's
    choice); the kernel sets are shared per device, so every caller sets both."""
    from simsplit.backends.cuda_c import source

    for blk in sim.solver.blocks.values():
        if hasattr(blk.kernels, "bodies_block_x"):
            blk.kernels.bodies_block_x = threads or source.D3Q19_BODIES_BLOCK_X
            blk.kernels.bodies_open = variant


def kernel_mlups(case: dict | Simulation, steps: int, bodies_block: int | None = None,
                 variant: str | None = None) -> float:
    """Kernel-only MLUPS of ``steps`` steps of ``case`` (or of a Simulation built already: the
    large grids' set-up takes longer than their timing)."""
    sim = case if isinstance(case, Simulation) else Simulation(case)
    set_bodies_block(sim, bodies_block, variant)
    # a CUDA graph replays the launches it captured: a reused simulation recaptures (as the
    # solver's resplit drops them)
    sim.solver.__dict__.pop("_graphs", None)
    sim.step(64)  # compile, first graph
    sim.solver.synchronize()
    t0 = time.perf_counter()
    sim.step(steps)
    sim.solver.synchronize()
    rate = sim.solver.mlups_cells() * steps / (time.perf_counter() - t0) / 1e6
    set_bodies_block(sim, None)
    return rate


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


def print_row(label: str, k: float, box_k: float, r: float | None = None,
              box_r: float | None = None) -> None:
    line = f"{label:>34}: kernels {k:9.1f} MLUPS ({100 * k / box_k:5.1f} %)"
    if r is not None and box_r is not None:
        line += f"   run {r:9.1f} MLUPS ({100 * r / box_r:5.1f} %)"
    print(line, flush=True)


def full_rows(name: str, backend: str, steps: int) -> None:
    """Kernels and whole runs of box and cylinder on the issue's grid; in 3D the block sizes
    and the general bodies kernel; forces on the device against the host path."""
    _, shape, precision = GRIDS[name]
    grid = "x".join(map(str, shape))
    print(f"== {name} {grid} {precision}, {backend}, {steps} steps", flush=True)
    rows = {
        "box": case_of(name, backend, steps, plain=True),
        "box, one step per sweep": case_of(name, backend, steps, plain=True, one_step=True),
        "cylinder": case_of(name, backend, steps, plain=False),
    }
    rates = {}
    for label, case in rows.items():
        rates[label] = (kernel_mlups(case, steps), run_mlups(case, steps))
    box_k, box_r = rates["box"]
    for label, (k, r) in rates.items():
        print_row(label, k, box_k, r, box_r)
    if name == "3D":
        sim = Simulation(rows["cylinder"])
        print_row("cylinder, general bodies kernel",
                  kernel_mlups(sim, steps, variant="any_outlet"), box_k)
        for threads in BODY_BLOCKS:
            print_row(f"cylinder, blocks of {threads}",
                      kernel_mlups(sim, steps, bodies_block=threads), box_k)
    dev, host, same = force_seconds(rows["cylinder"])
    print(f"{'forces':>34}: device {1e3 * dev:.2f} ms, host path {1e3 * host:.1f} ms per "
          f"measurement; same bits: {same}", flush=True)


def kernel_rows_2d(backend: str, steps: int, links: list[str],
                   storage: str | None = None) -> None:
    """Kernel-only MLUPS of the 2D cylinder (and its ``links`` variants) against the box
    (``storage``: run.storage, None: the precision's)."""
    _, shape, precision = GRIDS["2D"]
    stored = f" storage {storage}" if storage else ""
    print(f"== 2D {'x'.join(map(str, shape))} {precision}{stored}, {backend}, {steps} steps, "
          "kernels only", flush=True)
    box_k = kernel_mlups(case_of("2D", backend, steps, plain=True, storage=storage), steps)
    print_row("box", box_k, box_k)
    for label in ("cylinder", *links):
        sim = Simulation(case_of("2D", backend, steps, plain=False, storage=storage,
                                 links=None if label == "cylinder" else label))
        print_row(label if label == "cylinder" else f"cylinder, {label}",
                  kernel_mlups(sim, steps), box_k)
        if label == "cylinder":
            one_launch_row(sim, steps, box_k)
        del sim


def one_launch_row(sim: Simulation, steps: int, box_k: float) -> None:
    """The cylinder's kernels with each slab in one launch of the kernel with the open rules,
    as before column spans (the slabs' spans printed first)."""
    spans = [blk.column_spans for blk in sim.solver.blocks.values()]
    if all(s is None for s in spans):  # this kernel set launches the storage a slab at a time
        print("   the cylinder row above is one launch a slab", flush=True)
        return
    print(f"   column spans (i0, i1, open) of the first slab: {spans[0]}", flush=True)
    for blk in sim.solver.blocks.values():
        blk.column_spans = None
    print_row("cylinder, one launch a slab (no column spans)", kernel_mlups(sim, steps), box_k)


def kernel_rows_3d(d: int, precision: str, backend: str, steps: int,
                   links: tuple[str, ...] = (), storage: str | None = None) -> None:
    """Kernel-only MLUPS of 3D-1Z at ``d`` cells per diameter against the box on its grid
    (``storage``: run.storage, None: the precision's)."""
    shape = grid_3d(d)
    steps = max(MIN_STEPS, round(steps * np.prod(GRIDS["3D"][1]) / np.prod(shape)))
    grid = "x".join(map(str, shape))
    stored = f" storage {storage}" if storage else ""
    print(f"== 3D-1Z D = {d}: {grid} {precision}{stored}, {backend}, {steps} steps, kernels "
          "only", flush=True)
    box_k = None
    for label, plain, one_step in (("box", True, False), ("box, one step per sweep", True, True),
                                   ("cylinder", False, False)):
        sim = Simulation(case_of("3D", backend, steps, plain, one_step, shape, precision,
                                 storage=storage))
        k = kernel_mlups(sim, steps)
        box_k = box_k or k
        print_row(label, k, box_k)
        if not plain:
            print_row("cylinder, general bodies kernel",
                      kernel_mlups(sim, steps, variant="any_outlet"), box_k)
            one_launch_row(sim, steps, box_k)
        del sim
    for label in links:
        sim = Simulation(case_of("3D", backend, steps, False, False, shape, precision, label,
                                 storage))
        print_row(f"cylinder, {label}", kernel_mlups(sim, steps), box_k)
        del sim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cupy")
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--only", choices=sorted(GRIDS))
    ap.add_argument("--d3", type=int, nargs="+", default=[10],
                    help="3D-1Z resolutions, cells per diameter (multiples of 10)")
    ap.add_argument("--precision3d", nargs="+", default=["float64"],
                    choices=["float64", "float32"])
    ap.add_argument("--kernels-only", action="store_true",
                    help="kernel timings only (no whole runs, block sizes or forces)")
    ap.add_argument("--links", nargs="+", default=[], choices=sorted(LINKS),
                    help="extra cylinder rows with these walls (kernels only)")
    ap.add_argument("--storage3d", nargs="+", default=[None],
                    choices=STORAGE_CHOICES["float32"],
                    help="run.storage of the --d3 kernel timings (float32 arithmetic)")
    ap.add_argument("--storage2d", nargs="+", default=[None],
                    choices=STORAGE_CHOICES["float32"],
                    help="run.storage of the 2D kernel timings (with --kernels-only)")
    args = ap.parse_args()
    if args.storage3d != [None] and args.precision3d != ["float32"]:
        ap.error("--storage3d takes --precision3d float32")
    for d in args.d3:
        grid_3d(d)
    if args.only != "3D":
        if args.kernels_only:
            for storage in args.storage2d:
                kernel_rows_2d(args.backend, args.steps, args.links, storage)
        else:
            full_rows("2D", args.backend, args.steps)
    if args.only == "2D":
        return
    for d in args.d3:
        for precision in args.precision3d:
            if d == 10 and precision == "float64" and not args.kernels_only:
                full_rows("3D", args.backend, args.steps)
                continue
            for storage in args.storage3d:
                kernel_rows_3d(d, precision, args.backend, args.steps, tuple(args.links),
                               storage)


if __name__ == "__main__":
    main()
