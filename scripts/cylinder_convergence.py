"""Convergence of Schäfer & Turek's cylinder benchmarks over resolutions: 2D-1
(cases/cylinder2d.yaml) and 3D-1Z (cases/cylinder3d.yaml).

    python scripts/cylinder_convergence.py [--benchmark 2D-1] [--ny 41 82 164] [--backend cpu]
        [--subdomains 2] [--mlups STEPS]

Runs the case at each ny (nx from the channel's length over its height; the cylinder's diameter
is ny / 4.1 cells) to its steady-state tolerance and prints drag and lift coefficients against
the 1996 reference intervals (2D-1: Cd 5.57-5.59, Cl 0.0104-0.0110; 3D-1Z: Cd 6.05-6.25, Cl
0.008-0.010), with the error to the nearer end of each interval. ``--mlups STEPS`` then times
STEPS steps of the case and of the plain box (lid-driven cavity, no body, no open faces) on the
same grid, backend and precision, and prints both rates and their ratio.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from simsplit import Simulation
from simsplit.case import load_case

CASES = Path(__file__).resolve().parents[1] / "cases"
#: benchmark -> (case file, channel length / height, Cd interval, Cl interval)
BENCHMARKS = {
    "2D-1": (CASES / "cylinder2d.yaml", 2.2 / 0.41, (5.57, 5.59), (0.0104, 0.0110)),
    "3D-1Z": (CASES / "cylinder3d.yaml", 2.5 / 0.41, (6.05, 6.25), (0.008, 0.010)),
}


def off(value: float, lo_hi: tuple[float, float]) -> float:
    """Distance from the reference interval (0 inside), signed: + above, - below."""
    lo, hi = lo_hi
    return value - hi if value > hi else (value - lo if value < lo else 0.0)


def shape_of(benchmark: str, ny: int) -> list[int]:
    """Grid of a benchmark at ny cells across the channel (cubic cells in 3D)."""
    nx = round(ny * BENCHMARKS[benchmark][1])
    return [nx, ny] if benchmark.startswith("2D") else [nx, ny, ny]


def mlups(overrides: list[str], case_file: Path, steps: int, plain: bool) -> float:
    """Lattice updates per second (millions, every cell of the grid) over ``steps`` steps after
    a warm-up, of the case or (``plain``) of the lid-driven box on its grid."""
    case = load_case(case_file, overrides)
    if plain:
        dim = len(case["domain"]["shape"])
        case["domain"] = {"shape": case["domain"]["shape"],
                          "boundaries": {"lid": True, **({"z": "wall"} if dim == 3 else {})}}
        case["fluid"] = {**case["fluid"], "reynolds": 1000, "lid_velocity": 0.1}
    case["run"]["tolerance"] = 0.0
    case["output"]["forces_every"] = steps + 100  # no force measurement inside the timing
    sim = Simulation(case)
    sim.step(20)  # compile, tune, first launches
    sim.solver.synchronize()
    t0 = time.perf_counter()
    sim.step(steps)
    sim.solver.synchronize()
    seconds = time.perf_counter() - t0
    cells = 1
    for n in case["domain"]["shape"]:
        cells *= int(n)
    return cells * steps / seconds / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", choices=sorted(BENCHMARKS), default="2D-1")
    ap.add_argument("--ny", type=int, nargs="+", default=[41, 82])
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--subdomains", type=int, default=1)
    ap.add_argument("--precision", default="float64")
    ap.add_argument("--mlups", type=int, default=0, metavar="STEPS",
                    help="also time STEPS steps of the case and of the plain box")
    ap.add_argument("--set", nargs="*", default=[], help="extra KEY=VALUE overrides")
    args = ap.parse_args()
    case_file, _, cd_ref, cl_ref = BENCHMARKS[args.benchmark]
    print(f"{args.benchmark}: Cd {cd_ref[0]}-{cd_ref[1]}, Cl {cl_ref[0]}-{cl_ref[1]} "
          f"(Schäfer & Turek 1996); backend {args.backend}, {args.precision}")
    print(f"{'grid':>14} {'D/dx':>5} {'tau':>6} {'steps':>7} {'Cd':>8} {'Cd off':>8} "
          f"{'Cl':>8} {'Cl off':>8} {'wall s':>7}")
    for ny in args.ny:
        shape = shape_of(args.benchmark, ny)
        over = [f"domain.shape=[{','.join(map(str, shape))}]", f"run.backend={args.backend}",
                f"decomposition.subdomains={args.subdomains}", "output.dir=null",
                f"run.precision={args.precision}", *args.set]
        sim = Simulation(load_case(case_file, over))
        t0 = time.perf_counter()
        summary = sim.run(output=False)
        wall = time.perf_counter() - t0
        body = summary.extra["bodies"]["cylinder"]
        cd, cl = body["drag_coefficient"], body["lift_coefficient"]
        tau = sim.solver.setup.params.tau
        flag = "" if summary.converged else "  (not converged: " + summary.reason + ")"
        grid = "x".join(map(str, shape))
        print(f"{grid:>14} {body['reference_length_cells']:>5.3g} {tau:>6.4f} "
              f"{sim.steps_done:>7} {cd:>8.4f} {off(cd, cd_ref):>+8.4f} {cl:>8.5f} "
              f"{off(cl, cl_ref):>+8.5f} {wall:>7.1f}{flag}", flush=True)
        if args.mlups:
            body_rate = mlups(over, case_file, args.mlups, plain=False)
            box_rate = mlups(over, case_file, args.mlups, plain=True)
            # bodies sweep one step at a time: the box that way too, for the kernels alone
            one_step = mlups([*over, "run.temporal_blocking=false"], case_file, args.mlups,
                             plain=True)
            print(f"{'':>14} MLUPS over {args.mlups} steps: cylinder {body_rate:.1f}, plain box "
                  f"{box_rate:.1f} ({100 * body_rate / box_rate:.1f} %), plain box one step "
                  f"per sweep {one_step:.1f} ({100 * body_rate / one_step:.1f} %)", flush=True)


if __name__ == "__main__":
    main()
