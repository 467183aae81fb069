"""Time the Lennard-Jones MD solver on GPU backends and print atom-steps per second.

    python scripts/bench_md_gpu.py [--backends cupy numba-cuda] [--systems hoomd lammps]
                                   [--subdomains 1] [--quick]

Systems: ``hoomd`` = 64,000 atoms (fcc 20x20x40) at density 1.0, rc 2.5, skin 0.4, T 1.2 (the
HOOMD-blue LJ benchmark); ``lammps`` = 1,000,188 atoms (fcc 63^3) at 0.8442, rc 2.5, skin 0.3,
T 1.44 (LAMMPS ``bench/in.lj`` scaled up). Compilation and set-up are excluded (a warm-up of a
few steps runs first); the table gives the rate, the rebuild count and the share of the wall
time spent in neighbour-list rebuilds (timed between device synchronisations). Targets: 5e8
(hoomd) and 1e9 (lammps) atom-steps/s on one H200. Runs in well under 3 minutes there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: name -> (fcc cells, density, skin, temperature, timed steps, target atom-steps/s)
SYSTEMS: dict[str, tuple[tuple[int, int, int], float, float, float, int, float]] = {
    "hoomd": ((20, 20, 40), 1.0, 0.4, 1.2, 1000, 5e8),
    "lammps": ((63, 63, 63), 0.8442, 0.3, 1.44, 200, 1e9),
}


def _case(name: str, backend: str, subdomains: int, steps: int) -> dict[str, Any]:
    from simsplit.md.reference import lj_case

    cells, density, skin, temp, _, _ = SYSTEMS[name]
    case = lj_case(cells=cells, density=density, subdomains=subdomains, temperature=temp,
                   neighbor={"skin": skin}, thermo_every=10 * steps)
    case["run"]["backend"] = backend
    return case


def bench(name: str, backend: str, subdomains: int, steps: int) -> dict[str, Any]:
    from simsplit.md import MDSolver

    t0 = time.perf_counter()
    s = MDSolver(_case(name, backend, subdomains, steps), backend)
    s.step(10)  # warm-up: compiles every kernel, fills memory pools
    s.synchronize()
    setup = time.perf_counter() - t0
    before = s.stats()
    t0 = time.perf_counter()
    s.step(steps)
    s.synchronize()
    seconds = time.perf_counter() - t0
    st = s.stats()
    neighbor = st["time_neighbor"] - before["time_neighbor"]
    return {
        "system": name, "backend": backend, "atoms": s.n_atoms, "slabs": subdomains,
        "steps": steps, "seconds": seconds, "setup_seconds": setup,
        "atom_steps_per_s": s.n_atoms * steps / seconds, "target": SYSTEMS[name][5],
        "rebuilds": st["rebuilds"] - before["rebuilds"],
        "neighbor_fraction": neighbor / seconds,
        "ms_per_rebuild": 1e3 * neighbor / max(1, st["rebuilds"] - before["rebuilds"]),
        "capacity": st["neighbor_capacity"], "final_temp": s.thermo()[-1]["temp"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", nargs="+", default=["cupy", "numba-cuda"])
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--subdomains", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="a tenth of the steps")
    ap.add_argument("--json", action="store_true", help="also print the rows as JSON")
    args = ap.parse_args()

    rows = []
    for backend in args.backends:
        for name in args.systems:
            steps = SYSTEMS[name][4] // (10 if args.quick else 1)
            try:
                rows.append(bench(name, backend, args.subdomains, steps))
            except Exception as exc:  # report and go on with the other backends
                print(f"{backend} {name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            r = rows[-1]
            print(f"# {backend} {name}: {r['atom_steps_per_s']:.3g} atom-steps/s "
                  f"(setup {r['setup_seconds']:.1f} s)", flush=True)
    head = (f"{'backend':<11} {'system':<7} {'atoms':>9} {'slabs':>5} {'steps':>5} "
            f"{'atom-steps/s':>12} {'target':>7} {'rebuilds':>8} {'nbr %':>6} "
            f"{'ms/rebuild':>10} {'s':>6}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['backend']:<11} {r['system']:<7} {r['atoms']:>9} {r['slabs']:>5} "
              f"{r['steps']:>5} {r['atom_steps_per_s']:>12.3e} {r['target']:>7.0e} "
              f"{r['rebuilds']:>8} {100 * r['neighbor_fraction']:>6.1f} "
              f"{r['ms_per_rebuild']:>10.2f} {r['seconds']:>6.2f}")
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
