"""The cost of splitting MD on one GPU, each row against one slab in the same run (issue 20).

    python scripts/bench_split_md.py [--systems hoomd lammps fcc8m] [--subdomains 1 2 4]
                                     [--backends cupy] [--seconds 4] [--json]

Systems are those of ``scripts/bench_md_gpu.py`` plus ``fcc8m``: 8,001,504 atoms (fcc 126^3)
at density 0.8442, rc 2.5, skin 0.3, T 1.44. Several slabs on one GPU share one arena
(:mod:`simsplit.md.arena`): migration, ghost selection and list builds stay on the device, and
every step refreshes the ghost rows with one gather launch. Columns: atom-steps/s, its fraction
of the one-slab rate of the same system and backend in this run, ms per step, ghosts (all
slabs), ms per rebuild (host wall time from the flag read that asked for it to the end of the
list build) and the share of the run in rebuilds, and the ghost refresh: microseconds per step
(200 refreshes timed on their own after the run) and its share of a step.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_md_gpu  # noqa: E402

bench_md_gpu.SYSTEMS["fcc8m"] = ((126, 126, 126), 0.8442, 0.3, 1.44, 40, 1e9)


def _refresh_us(solver: Any, repeats: int = 200) -> float:
    """Device time of one ghost refresh (all slabs), from ``repeats`` back-to-back launches."""
    arena = getattr(solver, "arena", None)
    if arena is None:
        return 0.0
    solver.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        arena.refresh_ghosts()
    solver.synchronize()
    return 1e6 * (time.perf_counter() - t0) / repeats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", nargs="+", default=["hoomd", "lammps", "fcc8m"])
    ap.add_argument("--subdomains", nargs="+", type=int, default=[1, 2, 4])
    ap.add_argument("--backends", nargs="+", default=["cupy"])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    head = (f"{'backend':<10} {'system':<7} {'atoms':>9} {'slabs':>5} {'atom-steps/s':>12} "
            f"{'of 1 slab':>9} {'ms/step':>8} {'ghosts':>8} {'ms/rebuild':>10} {'rebuild %':>9} "
            f"{'refresh us':>10} {'refresh %':>9}")
    print(head)
    print("-" * len(head), flush=True)
    rows = []
    for backend in args.backends:
        for name in args.systems:
            base = None
            for n in args.subdomains:
                chunk = bench_md_gpu.SYSTEMS[name][4]
                try:
                    r = bench_md_gpu.bench(name, backend, n, chunk, args.seconds,
                                           keep_solver=True)
                except Exception as exc:  # report and go on
                    print(f"{backend} {name} {n} slabs: failed: {type(exc).__name__}: {exc}",
                          flush=True)
                    continue
                solver = r.pop("solver")
                r["ghosts"] = int(solver.stats()["ghosts"])
                r["refresh_us"] = _refresh_us(solver)
                del solver
                if n == 1:
                    base = r["atom_steps_per_s"]
                r["of_one_slab"] = r["atom_steps_per_s"] / base if base else float("nan")
                rows.append(r)
                print(f"{backend:<10} {name:<7} {r['atoms']:>9} {n:>5} "
                      f"{r['atom_steps_per_s']:>12.4e} {100 * r['of_one_slab']:>8.1f}% "
                      f"{r['ms_per_step']:>8.4f} {r['ghosts']:>8} {r['ms_per_rebuild']:>10.3f} "
                      f"{100 * r['neighbor_fraction']:>8.1f}% {r['refresh_us']:>10.1f} "
                      f"{0.1 * r['refresh_us'] / r['ms_per_step']:>8.1f}%", flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
