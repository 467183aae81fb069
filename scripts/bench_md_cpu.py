"""Time the Lennard-Jones MD solver on the CPU and print atom-steps per second.

    python scripts/bench_md_cpu.py [--case cases/lj_liquid.yaml] [--steps 100]
                                   [--subdomains 1] [--threads N] [--repeat 3]

Compilation is excluded: a short warm-up run fills Numba's cache first. The best of
``--repeat`` runs is reported (the median too), with the time split by phase.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default=str(ROOT / "cases" / "lj_liquid.yaml"))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--subdomains", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import numba
    import yaml

    from simsplit.md import MDSolver

    if args.threads:
        numba.set_num_threads(args.threads)
    case = yaml.safe_load(Path(args.case).read_text())
    case["md"]["steps"] = args.steps
    case.setdefault("decomposition", {})["subdomains"] = args.subdomains
    case.setdefault("output", {})["dir"] = None

    warm = MDSolver(case)
    warm.step(5)
    rates, best = [], None
    for _ in range(args.repeat):
        s = MDSolver(case)
        s.run()
        st = s.stats()
        rates.append(st["atom_steps_per_s"])
        if best is None or st["atom_steps_per_s"] > best["atom_steps_per_s"]:
            best = st
    assert best is not None
    th = s.thermo()[-1]
    result = {
        "case": Path(args.case).name, "atoms": s.n_atoms, "steps": args.steps,
        "subdomains": args.subdomains, "threads": numba.get_num_threads(),
        "threading_layer": numba.threading_layer(), "cpus": os.cpu_count(),
        "atom_steps_per_s_best": best["atom_steps_per_s"],
        "atom_steps_per_s_median": statistics.median(rates),
        "seconds_best": best["seconds"], "rebuilds": best["rebuilds"],
        "phase_seconds": {k[5:]: round(v, 4) for k, v in best.items() if k.startswith("time_")},
        "final_thermo": th,
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
