"""Convergence of Schäfer & Turek's 2D-1 benchmark (cases/cylinder2d.yaml) over resolutions.

    python scripts/cylinder_convergence.py [--ny 41 82 164] [--backend cpu] [--subdomains 2]

Runs the case at each ny (nx = 2.2 / 0.41 ny; the cylinder's diameter is ny / 4.1 cells) to
its steady-state tolerance and prints drag and lift coefficients against the 1996 reference
intervals (Cd 5.57-5.59, Cl 0.0104-0.0110), with the error to the nearer end of each interval.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from simsplit import Simulation
from simsplit.case import load_case

CASE = Path(__file__).resolve().parents[1] / "cases" / "cylinder2d.yaml"
CD_REF, CL_REF = (5.57, 5.59), (0.0104, 0.0110)


def off(value: float, lo_hi: tuple[float, float]) -> float:
    """Distance from the reference interval (0 inside), signed: + above, - below."""
    lo, hi = lo_hi
    return value - hi if value > hi else (value - lo if value < lo else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ny", type=int, nargs="+", default=[41, 82])
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--subdomains", type=int, default=1)
    ap.add_argument("--precision", default="float64")
    ap.add_argument("--set", nargs="*", default=[], help="extra KEY=VALUE overrides")
    args = ap.parse_args()
    print(f"{'ny x nx':>10} {'D/dx':>5} {'tau':>6} {'steps':>7} {'Cd':>8} {'Cd off':>8} "
          f"{'Cl':>8} {'Cl off':>8} {'wall s':>7}")
    for ny in args.ny:
        nx = round(ny * 2.2 / 0.41)
        over = [f"domain.shape=[{nx},{ny}]", f"run.backend={args.backend}",
                f"decomposition.subdomains={args.subdomains}", "output.dir=null",
                f"run.precision={args.precision}", *args.set]
        sim = Simulation(load_case(CASE, over))
        t0 = time.perf_counter()
        summary = sim.run(output=False)
        wall = time.perf_counter() - t0
        body = summary.extra["bodies"]["cylinder"]
        cd, cl = body["drag_coefficient"], body["lift_coefficient"]
        tau = sim.solver.setup.params.tau
        flag = "" if summary.converged else "  (not converged: " + summary.reason + ")"
        print(f"{ny:>4} x {nx:<4} {body['reference_length_cells']:>5.3g} {tau:>6.4f} "
              f"{sim.steps_done:>7} {cd:>8.4f} {off(cd, CD_REF):>+8.4f} {cl:>8.5f} "
              f"{off(cl, CL_REF):>+8.5f} {wall:>7.1f}{flag}", flush=True)


if __name__ == "__main__":
    main()
