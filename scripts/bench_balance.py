#!/usr/bin/env python
"""Load-balance demonstration: ``mpiexec -n 2`` CPU ranks, slab 1 throttled 2x, unbalanced vs
balanced (``decomposition.balance``).

For each configuration the ranks first run the balance probe and its measurement window (the
unbalanced run just steps as long), then time ``--steps`` steps with per-slab clocks on and
report:

* MLUPS: cells x steps / wall time (slowest rank);
* ideal: the sum of each rank's own speed (its cells / its mean update time per step), i.e.
  the combined throughput if no rank ever waited for another;
* fraction: MLUPS / ideal (target >= 90 % balanced).

A reference run with no throttle shows the fraction two equal ranks reach on this machine
(halo exchange, and on a loaded machine the ranks' competition for cores).

Each configuration runs ``--repeat`` times; the fastest run is shown, with all runs listed.

    python scripts/bench_balance.py [--shape 1024 1024] [--steps 100] [--factor 2] [--repeat 3]

Timings on a shared machine are noisy: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def make_case(shape: list[int], factor: float, balance: dict[str, int] | None) -> dict[str, Any]:
    case: dict[str, Any] = {
        "physics": "fluid",
        "fluid": {"reynolds": 100, "lid_velocity": 0.1, "collision": "trt"},
        "domain": {"shape": shape},
        "decomposition": {"subdomains": 2},
        "run": {"backend": "cpu", "precision": "float64", "tolerance": 0.0,
                "debug_throttle": {"slab": 1, "factor": factor}},
        "output": {"dir": None},
    }
    if balance:
        case["decomposition"]["balance"] = balance
    return case


def worker(config: dict[str, Any]) -> None:
    """One rank: warm up (and balance), then time ``steps`` steps."""
    from simsplit.run.simulation import Simulation

    sim = Simulation(make_case(config["shape"], config["factor"], config["balance"]))
    solver = sim.solver
    sim.step(config["warm"])
    solver.transport.barrier()
    solver.set_slab_clock(True)
    t0 = time.perf_counter()
    sim.step(config["steps"])
    solver.synchronize()
    wall = solver.reduce_max(time.perf_counter() - t0)
    laps = solver.slab_clock.laps
    mean = {k: sum(laps[k]) / len(laps[k]) for k in solver.blocks}
    cells = solver.layer_cells()
    own = {k: cells * solver.slab_layers()[k] / mean[k] for k in solver.blocks}
    speeds = solver.transport.gather({k: [v] for k, v in own.items()})
    if sim.context.rank == 0:
        total = cells * sum(solver.slab_layers())
        print("RESULT " + json.dumps({
            "layers": solver.slab_layers(), "mlups": total * config["steps"] / wall / 1e6,
            "speeds_mlups": [speeds[k][0] / 1e6 for k in sorted(speeds)],
            "balance": solver.balance_report()}), flush=True)


def find_mpiexec() -> str:
    found = shutil.which("mpiexec")
    cand = Path(sysconfig.get_path("scripts")) / "mpiexec"
    if found is None and not cand.exists():
        sys.exit("bench_balance: no mpiexec found (pip install mpich mpi4py)")
    return found or str(cand)


def launch(ranks: int, config: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "MPI_LOCALNRANKS"):
        env.pop(var, None)
    proc = subprocess.run([find_mpiexec(), "-n", str(ranks), sys.executable, __file__,
                           "--worker", json.dumps(config)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"bench_balance: ranks failed:\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", type=int, nargs=2, default=[1024, 1024], metavar=("NX", "NY"),
                    help="large enough that no slab fits in cache (cost per cell then does "
                         "not depend on slab size)")
    ap.add_argument("--steps", type=int, default=100, help="timed steps per configuration")
    ap.add_argument("--factor", type=float, default=2.0, help="slab 1 is this many times slower")
    ap.add_argument("--probe", type=int, default=20, help="decomposition.balance.probe_steps")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per configuration; the fastest is shown (noisy machines)")
    ap.add_argument("--reference", action=argparse.BooleanOptionalAction, default=True,
                    help="also run both ranks unthrottled: the fraction any split reaches here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    balance = {"probe_steps": args.probe, "skip_steps": 2}
    warm = 2 + 2 * args.probe  # the probe and the window measuring the new split
    print(f"D2Q9 {args.shape[0]}x{args.shape[1]}, 2 CPU ranks (1 thread each), slab 1 throttled "
          f"{args.factor:g}x, {args.steps} timed steps; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"{'split':<12} {'layers':>10} {'own MLUPS':>16} {'MLUPS':>8} {'ideal':>8} "
          f"{'fraction':>9}")
    configs = [("unbalanced", args.factor, None), ("balanced", args.factor, balance)]
    if args.reference:
        configs.insert(0, ("no throttle", 1.0, None))
    for name, factor, bal in configs:
        runs = [launch(2, {"shape": args.shape, "factor": factor, "balance": bal,
                           "warm": warm, "steps": args.steps}) for _ in range(args.repeat)]
        res = max(runs, key=lambda r: r["mlups"])
        ideal = sum(res["speeds_mlups"])
        own = ":".join(f"{v:.1f}" for v in res["speeds_mlups"])
        layers = ":".join(str(n) for n in res["layers"])
        print(f"{name:<12} {layers:>10} {own:>16} {res['mlups']:>8.1f} {ideal:>8.1f} "
              f"{100 * res['mlups'] / ideal:>8.1f}%")
        print(f"{'':<12} all runs: " + ", ".join(
            f"{r['mlups']:.1f} of {sum(r['speeds_mlups']):.1f}" for r in runs) + " MLUPS")
        if res["balance"]:
            b = res["balance"]
            print(f"{'':<12} weights {':'.join(f'{w:.3f}' for w in b['weights'])}, probe speeds "
                  f"{':'.join(f'{v:.1f}' for v in b['speeds_mlups'])} MLUPS, predicted gain "
                  f"x{b['predicted_gain']:.2f}, measured x{b['measured'].get('gain', 0):.2f}")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
