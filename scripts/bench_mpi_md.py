"""MD under mpiexec on GPUs against one slab in one process, in the same run (issue 20).

    python scripts/bench_mpi_md.py [--ranks 2] [--systems lammps] [--seconds 4]
                                   [--backend cupy]

The script first times one slab in this process (``scripts/bench_md_gpu.py``'s systems and
timing), then starts ``mpiexec -n RANKS`` copies of itself (``--worker``): one slab per rank,
each on GPU rank mod the visible GPUs (all on one GPU of a one-GPU machine), ghosts and migrants
as MPI messages staged through pinned host memory, rebuilds on the device
(:mod:`simsplit.md.rank_slab`). Each rank row gives the rate, its fraction of the one-slab
rate, ms per step, ms per rebuild and the shares of the run in rebuilds and in the per-step
ghost exchange (host wall time: pack, messages, upload), from rank 0, and rank 0's host waits
for its GPU per step (reads, downloads; a rebuild adds its waits over its steps).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_md_gpu  # noqa: E402

_FIELDS = ("atom_steps_per_s", "ms_per_step", "ms_per_rebuild", "neighbor_fraction",
           "exchange_fraction", "steps_per_rebuild", "waits_per_step")


def worker(args: argparse.Namespace) -> int:
    from simsplit.parallel import context as parallel

    ctx = parallel.MPIContext(args.backend)
    chunk = bench_md_gpu.SYSTEMS[args.systems[0]][4]
    profile = cProfile.Profile() if args.profile and ctx.rank == 0 else None
    timer = _call_timer(args, ctx, chunk) if args.time_calls else None
    if profile is not None:
        profile.enable()
    row = bench_md_gpu.bench(args.systems[0], args.backend, ctx.size, chunk, args.seconds,
                             context=ctx)
    if timer is not None and ctx.rank == 0:
        Path(args.time_calls).write_text(
            f"rank 0 of {ctx.size}, {row['steps']} steps, {timer.calls['RankSlab.rebuild']} "
            f"rebuilds (with the set-up's)\n"
            + timer.table(per=("rebuild", timer.calls["RankSlab.rebuild"])) + "\n")
    if profile is not None:
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(30)
        pstats.Stats(profile, stream=text).sort_stats("cumtime").print_stats("rank_|exchange",
                                                                              30)
        Path(args.profile).write_text(text.getvalue())
    if ctx.rank == 0:
        keep = (*_FIELDS, "atoms", "steps", "message_rounds", "device_links",
                "rebuild_phase_ms")
        Path(args.out).write_text(json.dumps({k: row[k] for k in keep}))
    return 0


def _call_timer(args: argparse.Namespace, ctx, chunk: int):
    """Every rank wraps the rank slab's, the solver's, the exchange's and the device kernels'
    methods in timers (:mod:`call_timer`) after a first short run (compiles, pools), so the
    timed run's table holds no compilation."""
    from call_timer import CallTimer

    from simsplit.md import MDSolver, exchange
    from simsplit.md.rank_slab import RankSlab

    bench_md_gpu.bench(args.systems[0], args.backend, ctx.size, chunk, 1.0, context=ctx)
    classes = [RankSlab, MDSolver, exchange.MPIExchange, exchange.Endpoint]
    if args.backend == "cupy":
        from simsplit.backends.cuda_c.md_cupy import CupyMDKernels

        classes.append(CupyMDKernels)
    return CallTimer.wrap(classes)


def _line(label: str, r: dict, base: float) -> str:
    return (f"{label:<34} {r['atoms']:>9} {r['atom_steps_per_s']:>12.4e} "
            f"{100 * r['atom_steps_per_s'] / base:>8.1f}% {r['ms_per_step']:>8.4f} "
            f"{r['ms_per_rebuild']:>10.3f} {100 * r['neighbor_fraction']:>9.1f}% "
            f"{100 * r['exchange_fraction']:>9.1f}% {r['steps_per_rebuild']:>8.1f} "
            f"{r.get('waits_per_step', 0.0):>8.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", nargs="+", default=["lammps"])
    ap.add_argument("--ranks", nargs="+", type=int, default=[2])
    ap.add_argument("--backend", default="cupy")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--mps", action="store_true", help="run the mpiexec rows under an MPS "
                    "daemon (started before them and stopped after), so that the ranks share "
                    "one GPU context instead of time slicing")
    ap.add_argument("--node-memory", choices=("on", "off"), default="on",
                    help="ghost positions between the ranks of a node through shared pinned "
                    "memory read in place (on), or as MPI messages (off)")
    ap.add_argument("--device-links", nargs="+", choices=("on", "off"), default=["off"],
                    help="per-step ghosts device to device in batches of steps "
                    "(simsplit.md.rank_links; up to three ranks), or through the host; "
                    "both: a row each")
    ap.add_argument("--profile", help="rank 0 of each mpiexec run writes a host profile "
                    "(cProfile, by own time) to PROFILE.RANKS.txt")
    ap.add_argument("--time-calls", help="every rank times its methods (scripts/call_timer.py; "
                    "after a first short run); rank 0 writes the table, per rebuild, to "
                    "TIME_CALLS.RANKS.txt")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    head = (f"{'run':<34} {'atoms':>9} {'atom-steps/s':>12} {'of 1 slab':>9} {'ms/step':>8} "
            f"{'ms/rebuild':>10} {'rebuild %':>10} {'exchange %':>10} {'steps/rb':>8} "
            f"{'waits/st':>8}")
    print(head)
    print("-" * len(head), flush=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               SIMSPLIT_NODE_MEMORY="1" if args.node_memory == "on" else "0")
    with _mps_daemon(args.mps, env):
        _rows(args, env)
    return 0


@contextlib.contextmanager
def _mps_daemon(on: bool, env: dict) -> Iterator[None]:
    """An MPS control daemon for the block when ``on``, its pipe and log folders in a temporary
    folder named in ``env`` and in this process's environment (set before this process first
    touches the GPU, so the one-slab row is an MPS client too)."""
    if not on:
        yield
        return
    tmp = tempfile.mkdtemp(prefix="mps-")  # kept: the daemon may outlive this process
    for key in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
        env[key] = os.environ[key] = tmp
    subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True)
    print("(MPS daemon started)", flush=True)
    try:
        yield
    finally:
        # this process is still a client, so 'quit' may wait for it to exit: do not wait
        quit_ = subprocess.Popen(["nvidia-cuda-mps-control"], stdin=subprocess.PIPE,
                                 text=True, env=env)
        quit_.stdin.write("quit\n")
        quit_.stdin.close()


def _rows(args: argparse.Namespace, env: dict) -> None:
    """One slab in this process, then each mpiexec row, per system."""
    for name in args.systems:
        chunk = bench_md_gpu.SYSTEMS[name][4]
        one = bench_md_gpu.bench(name, args.backend, 1, chunk, args.seconds)
        base = one["atom_steps_per_s"]
        print(_line(f"{name}, 1 process, 1 slab", one, base), flush=True)
        for ranks, links in ((r, li) for r in args.ranks for li in args.device_links):
            env["SIMSPLIT_DEVICE_LINKS"] = "1" if links == "on" else "0"
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "row.json"
                cmd = ["mpiexec", "-n", str(ranks), sys.executable, __file__, "--worker",
                       "--systems", name, "--backend", args.backend, "--seconds",
                       str(args.seconds), "--out", str(out)]
                if args.profile:
                    cmd += ["--profile", f"{args.profile}.{ranks}.txt"]
                if args.time_calls:
                    cmd += ["--time-calls", f"{args.time_calls}.{ranks}.txt"]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                      timeout=600)
                if proc.returncode or not out.exists():
                    print(f"{name}, mpiexec -n {ranks}: failed ({proc.returncode})\n"
                          f"{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}", flush=True)
                    continue
                row = json.loads(out.read_text())
            label = f"{name}, mpiexec -n {ranks}" + (", MPS" if args.mps else "") + \
                (", messages" if args.node_memory == "off" else "") + \
                (", device links" if links == "on" else "") + \
                (f", {row['message_rounds']} rnd" if row.get("message_rounds") else "")
            print(_line(label, row, base), flush=True)
            if row.get("rebuild_phase_ms"):
                print("    rank 0 ms per rebuild: " + ", ".join(
                    f"{k} {v:.3f}" for k, v in row["rebuild_phase_ms"].items()), flush=True)


if __name__ == "__main__":
    sys.exit(main())
