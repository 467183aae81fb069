"""Time the Lennard-Jones MD solver on GPU backends and print atom-steps per second.

    python scripts/bench_md_gpu.py [--backends cupy numba-cuda] [--systems hoomd lammps]
                                   [--subdomains 1] [--seconds 4] [--quick] [--json]

Systems: ``hoomd`` = 64,000 atoms (fcc 20x20x40) at density 1.0, rc 2.5, skin 0.4, T 1.2 (the
HOOMD-blue LJ benchmark); ``lammps`` = 1,000,188 atoms (fcc 63^3) at 0.8442, rc 2.5, skin 0.3,
T 1.44 (LAMMPS ``bench/in.lj`` scaled up); ``one*``, ``ka*``, ``liq*`` at 64k and 1M atoms:
one type and Kob-Andersen 80:20 from fcc sites at density 1.2 (the one type stays a
crystal), and one type melted and held at the Kob-Andersen temperature first (``LIQUID``).
Compilation, set-up and that preparation are excluded (a warm-up of a few steps runs first);
then chunks of steps run until ``--seconds`` of steady stepping have been timed (``--quick``:
one short chunk). The table gives the rate, milliseconds per step, the
rebuild count, steps per displacement-flag read (one slab runs in batches) and the share of
the wall time spent in neighbour-list rebuilds (host wall time from the flag read that asked
for a rebuild to the end of the list build, which waits for the device). Targets: 5e8
(hoomd) and 1e9 (lammps) atom-steps/s on one H100/H200. With the default 4 s per run, both
systems on both backends finish in about 1-2 minutes there (set-up and Numba compilation
included).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: name -> (fcc cells, density, skin, temperature, steps per timed chunk, target atom-steps/s)
SYSTEMS: dict[str, tuple[tuple[int, int, int], float, float, float, int, float]] = {
    "hoomd": ((20, 20, 40), 1.0, 0.4, 1.2, 1000, 5e8),
    "lammps": ((63, 63, 63), 0.8442, 0.3, 1.44, 200, 1e9),
    # Kob-Andersen 80:20 at density 1.2, T 1.0, against one type on the same sites (rc 2.5)
    "ka64k": ((20, 20, 40), 1.2, 0.3, 1.0, 1000, 5e8),
    "one64k": ((20, 20, 40), 1.2, 0.3, 1.0, 1000, 5e8),
    "ka1m": ((63, 63, 63), 1.2, 0.3, 1.0, 200, 1e9),
    "one1m": ((63, 63, 63), 1.2, 0.3, 1.0, 200, 1e9),
    # one type on the same sites, melted and held at the Kob-Andersen runs' temperature
    # before the timed NVE span (see LIQUID): the one-type reference in the same liquid state
    "liq64k": ((20, 20, 40), 1.2, 0.3, 1.0, 1000, 5e8),
    "liq1m": ((63, 63, 63), 1.2, 0.3, 1.0, 200, 1e9),
}
#: the ``liq*`` systems' preparation: (melt temperature, steps, hold temperature, steps),
#: both under Langevin (damping 1), then NVE from there. The one-type fcc crystal at density
#: 1.2 melts near T 2; at 3 it melts within the first few tau. 0.85 is the temperature the
#: Kob-Andersen runs reach from the same start and keep through their timed span (0.852 at
#: 64k and 1M, benchmarks/logs/bench_md_kob_andersen_h200_2026-12-03.log), so both rows
#: move atoms as fast and rebuild about as often.
LIQUID = (3.0, 2000, 0.85, 2000)
#: Kob-Andersen pair coefficients (cutoffs 2.5 sigma_ij) of the ``ka*`` systems
KOB_ANDERSEN = [{"types": [1, 1], "epsilon": 1.0, "sigma": 1.0, "cutoff": 2.5},
                {"types": [1, 2], "epsilon": 1.5, "sigma": 0.8, "cutoff": 2.0},
                {"types": [2, 2], "epsilon": 0.5, "sigma": 0.88, "cutoff": 2.2}]


#: thermo interval of the timed runs (``--thermo-every``; default: none inside the timed span)
THERMO_EVERY = 10 ** 9
#: ``--host-thermo``: thermo sums by fsum over atoms gathered to the host (the path before)
HOST_THERMO = False


def _case(name: str, backend: str, subdomains: int) -> dict[str, Any]:
    from simsplit.md.reference import lj_case

    cells, density, skin, temp, _, _ = SYSTEMS[name]
    case = lj_case(cells=cells, density=density, subdomains=subdomains, temperature=temp,
                   neighbor={"skin": skin}, thermo_every=THERMO_EVERY)
    case["run"]["backend"] = backend
    if name.startswith("ka"):
        case["md"]["pair_coeffs"] = KOB_ANDERSEN
        case["md"]["potential"]["shift"] = True
        case["md"]["lattice"]["fractions"] = [0.8, 0.2]
    return case


def _liquid(name: str, backend: str, subdomains: int, context: Any = None) -> Any:
    """An NVE solver of ``name`` started from the melted and held state of :data:`LIQUID`
    (the same fcc start and seed as the one-type crystal rows)."""
    from simsplit.md import MDSolver

    hot, hot_steps, hold, hold_steps = LIQUID
    state = None
    for temp, steps in ((hot, hot_steps), (hold, hold_steps)):
        case = _case(name, backend, subdomains)
        case["md"].update(ensemble="langevin", langevin={"temperature": temp, "damping": 1.0})
        s = MDSolver(case, context or backend)
        if state is not None:
            s.load_state(state)
        s.step(steps)
        state = s.state()
    s = MDSolver(_case(name, backend, subdomains), context or backend)
    s.load_state(state)
    return s


def _temperature(s: Any) -> float:
    v = s.velocities()
    return s.mass * float(np.sum(v * v)) / (3 * s.n_atoms - 3)


def bench(name: str, backend: str, subdomains: int, chunk: int, seconds: float,
          keep_solver: bool = False, context: Any = None) -> dict[str, Any]:
    """One timed run; under MPI (``context`` an MPI context) every rank runs the same chunks
    (the longest rank's clock decides when to stop). Set-up (and a ``liq*`` system's
    preparation) is not timed."""
    from simsplit.md import MDSolver

    t0 = time.perf_counter()
    if name.startswith("liq"):
        s = _liquid(name, backend, subdomains, context)
    else:
        s = MDSolver(_case(name, backend, subdomains), context or backend)
    comm = getattr(context, "comm", None)
    if comm is not None:
        from mpi4py import MPI

        mpi_max = MPI.MAX
    if HOST_THERMO:  # the path before device sums: gather every atom, fsum on the host
        s._device_sums = lambda: None
    s.step(20)  # warm-up: compiles every kernel, fills memory pools
    s.synchronize()
    start_temp = _temperature(s)
    setup = time.perf_counter() - t0
    before = s.stats()
    waits = getattr(s.kernels, "host_waits", 0)
    steps = 0
    t0 = time.perf_counter()
    while True:  # whole chunks until the timed span is long enough for a steady figure
        s.step(chunk)
        steps += chunk
        s.synchronize()
        elapsed = time.perf_counter() - t0
        if comm is not None:
            elapsed = comm.allreduce(elapsed, op=mpi_max)
        if elapsed >= seconds:
            break
    st = s.stats()
    temp = _temperature(s)  # after the clock: a sanity check that the run stayed physical
    neighbor = st["time_neighbor"] - before["time_neighbor"]
    exchange = st["time_comm"] - before["time_comm"]
    rebuilds = st["rebuilds"] - before["rebuilds"]
    batches = st["batches"] - before["batches"]
    row = {
        "system": name, "backend": backend, "atoms": s.n_atoms, "slabs": subdomains,
        "steps": steps, "seconds": elapsed, "setup_seconds": setup,
        "atom_steps_per_s": s.n_atoms * steps / elapsed, "target": SYSTEMS[name][5],
        "ms_per_step": 1e3 * elapsed / steps, "rebuilds": rebuilds,
        "steps_per_rebuild": steps / max(1, rebuilds),
        "steps_per_read": steps / batches if batches else 1.0,
        "neighbor_fraction": neighbor / elapsed, "exchange_fraction": exchange / elapsed,
        "ms_per_rebuild": 1e3 * neighbor / max(1, rebuilds),
        "capacity": st["neighbor_capacity"], "start_temp": start_temp, "final_temp": temp,
        # this process's host waits for its device per step (rebuilds included)
        "waits_per_step": (getattr(s.kernels, "host_waits", 0) - waits) / steps,
        # message rounds per rebuild of one slab per rank (simsplit.md.rank_rounds)
        "message_rounds": st.get("message_rounds"),
        # per-step ghosts device to device, steps in batches (simsplit.md.rank_links)
        "device_links": st.get("device_links"),
        # one slab per rank: host ms per rebuild by phase (RankSlab.phase_seconds)
        "rebuild_phase_ms": {
            k: 1e3 * (v - before["rebuild_phase_seconds"][k]) / max(1, rebuilds)
            for k, v in st["rebuild_phase_seconds"].items()}
        if "rebuild_phase_seconds" in st else None,
    }
    if keep_solver:
        row["solver"] = s
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", nargs="+", default=["cupy", "numba-cuda"])
    ap.add_argument("--systems", nargs="+", default=["hoomd", "lammps"],
                    choices=list(SYSTEMS))
    ap.add_argument("--subdomains", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=4.0,
                    help="least timed wall time per run (whole chunks of steps)")
    ap.add_argument("--quick", action="store_true", help="one chunk of a tenth of the steps")
    ap.add_argument("--json", action="store_true", help="also print the rows as JSON")
    ap.add_argument("--thermo-every", type=int, default=None,
                    help="thermo rows inside the timed span every N steps (default: none)")
    ap.add_argument("--host-thermo", action="store_true",
                    help="thermo sums on the host (fsum over gathered atoms), as before")
    args = ap.parse_args()
    global THERMO_EVERY, HOST_THERMO
    if args.thermo_every is not None:
        THERMO_EVERY = args.thermo_every
    HOST_THERMO = args.host_thermo

    rows = []
    for backend in args.backends:
        for name in args.systems:
            chunk = SYSTEMS[name][4] // (10 if args.quick else 1)
            try:
                rows.append(bench(name, backend, args.subdomains, chunk,
                                  0.0 if args.quick else args.seconds))
            except Exception as exc:  # report and go on with the other backends
                print(f"{backend} {name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            r = rows[-1]
            print(f"# {backend} {name}: {r['atom_steps_per_s']:.3g} atom-steps/s "
                  f"(setup {r['setup_seconds']:.1f} s)", flush=True)
    head = (f"{'backend':<11} {'system':<7} {'atoms':>9} {'slabs':>5} {'steps':>6} "
            f"{'atom-steps/s':>12} {'target':>7} {'ms/step':>8} {'rebuilds':>8} "
            f"{'steps/rb':>8} {'st/read':>7} {'nbr %':>6} {'ms/rebuild':>10} {'s':>6} "
            f"{'T start':>7} {'T end':>6}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['backend']:<11} {r['system']:<7} {r['atoms']:>9} {r['slabs']:>5} "
              f"{r['steps']:>6} {r['atom_steps_per_s']:>12.3e} {r['target']:>7.0e} "
              f"{r['ms_per_step']:>8.4f} {r['rebuilds']:>8} {r['steps_per_rebuild']:>8.1f} "
              f"{r['steps_per_read']:>7.1f} "
              f"{100 * r['neighbor_fraction']:>6.1f} {r['ms_per_rebuild']:>10.3f} "
              f"{r['seconds']:>6.2f} {r['start_temp']:>7.3f} {r['final_temp']:>6.3f}")
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
