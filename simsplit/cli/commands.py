"""Command line: ``simsplit run | validate | analyze | bench | devices | warmup``.

Bad input ends with one line on stderr and exit code 2; a diverging run with exit code 3; a
CUDA failure (illegal address, launch failure, out of memory) with exit code 4.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from simsplit.cli.notices import announce_kernel_compiles, print_warnings_once
from simsplit.errors import BackendUnavailable, CaseError, DivergenceError, InputFileError
from simsplit.gpu.cuda_errors import EXIT_CUDA, CudaKernelError, as_cuda_error
from simsplit.run.checkpoint import CheckpointError
from simsplit.run.manifest import OutputExists
from simsplit.run.preflight import InsufficientMemory
from simsplit.run.simulation import Interrupted
from simsplit.version import __version__

#: errors that mean the input cannot run as given: one line, exit code 2
BAD_INPUT = (CaseError, BackendUnavailable, InsufficientMemory, CheckpointError, OutputExists,
             InputFileError)
EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3

EXAMPLES = """\
examples:
  simsplit run cases/cavity.yaml
  simsplit run cases/cavity.yaml --set fluid.reynolds=400 --subdomains 4 --output out/re400
  simsplit run cases/cavity.yaml --backend cupy --set run.precision=float32
  simsplit run cases/cavity.yaml --devices 0,1 --subdomains 2 --monitor
  simsplit bench --backend cupy --grid 8192x8192 --autotune
  simsplit validate cases/cavity.yaml --set decomposition.weights=[1,2]
  simsplit bench --backend cpu --grid 512x512
  mpiexec -n 4 simsplit run cases/cavity.yaml      # one slab per rank
  simsplit devices                                 # GPUs, peer access, NCCL, MPI
  simsplit analyze out/lj/trajectory.gsd --frames 50:   # RDF + MSD -> out/lj/analysis/
  simsplit warmup                                  # compile the CPU kernels ahead of a run
"""


class _OneLineErrors(argparse.ArgumentParser):
    """Command-line mistakes end like case-file mistakes: one line on stderr, exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number of seconds")
    return value


def _parser() -> argparse.ArgumentParser:
    p = _OneLineErrors(
        prog="simsplit", description="Domain-decomposed lattice Boltzmann and molecular "
        "dynamics on CPUs and GPUs.", epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"simsplit {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def case_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("case", help="YAML case file")
        sp.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a case value by dotted key, e.g. fluid.reynolds=400")

    run = sub.add_parser("run", help="run a case", epilog=EXAMPLES,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    case_args(run)
    run.add_argument("--steps", type=int, help="upper bound on steps (run.steps)")
    run.add_argument("--subdomains", type=int, help="number of slabs (decomposition.subdomains)")
    run.add_argument("--backend", help="cpu, cupy, numba-cuda or auto (run.backend)")
    run.add_argument("--output", help="output directory (output.dir)")
    run.add_argument("--transport", help="auto, local, peer, nccl, mpi or mpi-cuda-aware "
                     "(run.transport)")
    run.add_argument("--quiet", action="store_true",
                     help="no progress bar, compile notice or (MD) thermo table: warnings "
                          "and the summary only (thermo.csv is still written)")
    run.add_argument("--restart", nargs="?", const="auto", metavar="FILE|auto",
                     help="resume from a checkpoint file, or the newest intact one in "
                          "<output>/checkpoints (auto)")
    run.add_argument("--overwrite", action="store_true",
                     help="replace the results of an earlier run in the output directory")
    run.add_argument("--devices", type=_device_list, metavar="I,J,...",
                     help="GPU ids to use, counted among CUDA_VISIBLE_DEVICES (run.devices)")
    run.add_argument("--monitor", nargs="?", type=_positive_seconds, const=1.0, metavar="SECONDS",
                     help="sample GPU utilisation, memory, temperature, power and clocks "
                          "every SECONDS (default 1) via NVML; summary + <output>/monitor.h5")

    warm = sub.add_parser("warmup", help="compile and cache the CPU kernels now, so that the "
                          "first run starts at once")
    warm.add_argument("--precision", action="append", choices=["float64", "float32"],
                      help="precision(s) to compile for (repeatable; default: both)")

    val = sub.add_parser("validate", help="check a case file against the schema only")
    case_args(val)

    bench = sub.add_parser("bench", help="measure throughput against memory bandwidth")
    bench.add_argument("--backend", action="append", help="backend(s) to measure (repeatable)")
    bench.add_argument("--grid", action="append", help="grid NXxNY or NXxNYxNZ (repeatable)")
    bench.add_argument("--subdomains", type=int, default=1)
    bench.add_argument("--steps", type=int, default=200)
    bench.add_argument("--precision", default="float32", choices=["float32", "float64"])
    from simsplit.cli.bench import add_storage_argument

    add_storage_argument(bench)
    bench.add_argument("--repeats", type=int, default=5)
    bench.add_argument("--devices", type=_device_list, metavar="I,J,...",
                       help="GPUs the slabs go to (run.devices; default all)")
    bench.add_argument("--overlap", choices=["on", "off"], default="on")
    bench.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph timing")
    bench.add_argument("--autotune", action="store_true",
                       help="tune threads per block first and show default against tuned")

    sub.add_parser("devices", help="list GPUs, peer access, NVLink, NCCL and MPI")

    ana = sub.add_parser("analyze", help="RDF per type pair and MSD of an MD trajectory "
                         "(H5MD or GSD) -> analysis.h5, rdf.png, msd.png")
    ana.add_argument("trajectory", help="trajectory.h5md or trajectory.gsd (or any H5MD/GSD)")
    ana.add_argument("--output", help="directory for analysis.h5 and the plots (default: "
                     "'analysis' beside the trajectory; files there are replaced)")
    ana.add_argument("--frames", metavar="START:STOP[:STEP]",
                     help="frames to use, Python slice syntax (default: all; e.g. 50: for the "
                          "second half of 100)")
    ana.add_argument("--rmax", type=_positive_length, metavar="R",
                     help="RDF range (default: 5 or half the shortest box edge if less)")
    ana.add_argument("--bins", type=int, default=200, help="RDF bins (default 200)")
    ana.add_argument("--no-plots", action="store_true", help="write analysis.h5 only")
    return p


def _positive_length(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number")
    return value


def _device_list(text: str) -> list[int]:
    try:
        ids = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected GPU ids like 0,1") from None
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected GPU ids like 0,1")
    return ids


def _overrides(args: argparse.Namespace) -> list[str]:
    out = list(args.overrides)
    for flag, key in (("steps", "run.steps"), ("subdomains", "decomposition.subdomains"),
                      ("backend", "run.backend"), ("output", "output.dir"),
                      ("transport", "run.transport")):
        value = getattr(args, flag, None)
        if value is not None:
            out.append(f"{key}={value}")
    if getattr(args, "devices", None):
        out.append(f"run.devices=[{','.join(str(d) for d in args.devices)}]")
    return out


def _fail(message: str, code: int) -> int:
    print(f"simsplit: error: {message}", file=sys.stderr)
    return code


def _cmd_validate(args: argparse.Namespace) -> int:
    from simsplit.case import load_case

    case = load_case(args.case, _overrides(args))
    print(f"{args.case}: valid {case['physics']} case")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from simsplit.case import load_case
    from simsplit.run.simulation import Simulation

    case = load_case(args.case, _overrides(args))
    out_dir = case["output"]["dir"]
    if args.restart == "auto" and not out_dir:
        raise CaseError("--restart auto: needs output.dir (or --output) to find checkpoints")
    sim = Simulation(case)  # validates placement too; writes nothing yet
    from simsplit.run.manifest import check_output_dir, clear_output

    if out_dir and sim.context.rank == 0:  # one rank decides, or others would see its files
        check_output_dir(Path(out_dir), args.overwrite, args.restart is not None)
    if args.restart is not None:
        from simsplit.run.output import CHECKPOINT_DIR

        source = Path(out_dir) / CHECKPOINT_DIR if args.restart == "auto" else args.restart
        path = sim.restart(source)
        if sim.context.rank == 0:
            print(f"restarting from {path} at step {sim.steps_done}", file=sys.stderr)
    elif out_dir and args.overwrite and sim.context.rank == 0:
        clear_output(Path(out_dir))
    _print_devices(sim)
    if args.monitor is not None:
        sim.enable_monitor(args.monitor)
    _install_stop_handlers(sim)
    try:
        summary = sim.run(progress=not args.quiet)
    except DivergenceError as exc:
        raise DivergenceError(exc.step, exc.slab, exc.detail + _restart_hint(sim)) from None
    if sim.context.size > 1 and sim.physics == "fluid":
        # the summary reads global fields: gather them on every rank (collective), then let
        # rank 0 report from the copies while the others are done
        u, rho = sim.velocity(), sim.density()
        sim.velocity, sim.density = (lambda: u), (lambda: rho)  # type: ignore[method-assign]
    if sim.context.rank == 0:
        from simsplit.run.report import print_summary

        print_summary(sim, summary)
        if sim.monitor_summary is not None:
            from simsplit.gpu.monitor import summary_lines

            print("\n".join(summary_lines(sim.monitor_summary)))
        timing = summary.extra.get("timing")
        if timing is not None and out_dir:
            import json

            path = Path(out_dir) / "timing.json"
            path.write_text(json.dumps(dict(timing), indent=2) + "\n")
    return 0


def _print_devices(sim: Any) -> None:
    """Each GPU the run uses, with model and memory (all ranks' GPUs, printed by rank 0)."""
    ctx = sim.context
    if not ctx.on_gpu:
        return
    import socket

    from simsplit.gpu.monitor import device_lines

    n = int(sim.case["decomposition"]["subdomains"])
    backends = {ctx.device_of(k): ctx.backend_for(k) for k in ctx.local_slabs(n)}
    lines = device_lines(sorted(backends), lambda d: backends[d].device_properties())
    comm = getattr(ctx, "comm", None)
    if comm is not None:
        host = socket.gethostname()
        parts = comm.gather([f"rank {ctx.rank} on {host}: {line}" for line in lines], root=0)
        lines = [line for part in (parts or []) for line in part]
    if ctx.rank == 0:
        print("\n".join(lines), flush=True)


def _install_stop_handlers(sim: Any) -> None:
    """SIGINT/SIGTERM: finish the current chunk, write a checkpoint, exit 130/143."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda num, frame: sim.request_stop(num))


def _restart_hint(sim: Any) -> str:
    from simsplit.run.checkpoint import list_checkpoints
    from simsplit.run.output import CHECKPOINT_DIR

    out_dir = sim.case["output"]["dir"]
    ckpts = list_checkpoints(Path(out_dir) / CHECKPOINT_DIR) if out_dir else []
    if sim.physics == "md":
        dt = sim.case["md"]["timestep"]
        if not ckpts:
            return f"; lower md.timestep (now {dt:g}) and run again"
        return (f"; last good checkpoint {ckpts[0]}: resume it with a smaller time step, e.g. "
                f"'simsplit run CASE --restart {ckpts[0]} --set md.timestep={dt / 2:g}'")
    where = f" (last good checkpoint {ckpts[0]})" if ckpts else ""
    return (f"; lower fluid.lid_velocity or refine domain.shape (smaller cell Reynolds number) "
            f"and start afresh{where}; '--restart' continues only an unchanged case")


def _cmd_warmup(args: argparse.Namespace) -> int:
    from simsplit.run.warmup import PRECISIONS, WarmupResult, cache_directories, warm_cpu_kernels

    def show(r: WarmupResult) -> None:
        print(f"{r.label:<12} {r.precision:<8} {r.compiled:3d} compiled, {r.loaded:3d} from the "
              f"cache  {r.seconds:6.1f} s", flush=True)

    print("simsplit warmup: compiling the CPU kernels of the shipped cases (2D and 3D fluid, "
          "LJ MD)", flush=True)
    results = warm_cpu_kernels(args.precision or PRECISIONS, on_result=show)
    compiled = sum(r.compiled for r in results)
    seconds = sum(r.seconds for r in results)
    where = ", ".join(cache_directories())
    if compiled:
        print(f"{compiled} kernel variants compiled in {seconds:.1f} s and cached in {where}")
    else:
        print(f"nothing to compile: every kernel variant was already cached in {where}")
    return 0


def _cmd_devices(args: argparse.Namespace) -> int:
    from simsplit.gpu.devices import device_report

    print(device_report())
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    from simsplit.analysis.report import analyze

    result = analyze(args.trajectory, args.output, args.frames, args.rmax, args.bins,
                     plots=not args.no_plots)
    rdf, msd = result.rdf, result.msd
    print(f"{args.trajectory}: {rdf.frames} frames, {int(rdf.counts.sum())} atoms, "
          f"density {rdf.density:.6g}")
    for a, b in rdf.pairs():
        peak = int(rdf.g[a, b].argmax())
        print(f"  g {rdf.type_names[a]}-{rdf.type_names[b]}: first peak {rdf.g[a, b][peak]:.4g} "
              f"at r = {rdf.r[peak]:.4g}")
    if msd is not None:
        unit = "time" if msd.lag_time is not None else "steps"
        lag = msd.lag_time[-1] if msd.lag_time is not None else msd.lag_steps[-1]
        print(f"  MSD at the longest lag ({unit} {lag:.6g}): {msd.msd_all[-1]:.6g}")
    for path in result.files:
        print(f"wrote {path}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from simsplit.cli.bench import main_from_args

    return main_from_args(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import simsplit.gpu.cuda_errors

    simsplit.gpu.cuda_errors.COMMAND_ARGS = list(sys.argv[1:] if argv is None else argv)
    print_warnings_once()
    announce_kernel_compiles(args.command in ("run", "bench") and not getattr(args, "quiet", False))
    handlers = {"run": _cmd_run, "validate": _cmd_validate, "bench": _cmd_bench,
                "devices": _cmd_devices, "analyze": _cmd_analyze, "warmup": _cmd_warmup}
    from simsplit.parallel.context import launched_world_size

    if args.command == "run" and launched_world_size() > 1:
        return _run_mpi(handlers[args.command], args)
    try:
        return handlers[args.command](args)
    except BAD_INPUT as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except DivergenceError as exc:
        return _fail(str(exc), EXIT_DIVERGED)
    except CudaKernelError as exc:
        return _fail(str(exc), EXIT_CUDA)
    except Interrupted as exc:
        return _fail(_interrupted_text(exc), 128 + exc.signum)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # a CUDA failure outside a launch (allocation, set-up): exit 4
        cuda = as_cuda_error(exc)
        if cuda is None:
            raise
        return _fail(str(cuda), EXIT_CUDA)


def _interrupted_text(exc: Interrupted) -> str:
    return (f"stopped by signal {exc.signum} at step {exc.steps_done}; a checkpoint was "
            "written (resume with --restart auto)")


def entry() -> None:
    """Console entry point: ``main`` with the process exit status."""
    code = main()
    if code == EXIT_CUDA:
        # The CUDA context is unusable after a sticky error: skip interpreter teardown, whose
        # device frees would fail again and print tracebacks under the one-line report.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _run_mpi(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run under mpiexec: any rank's failure prints one line naming the rank and aborts the job.

    Without the abort, the other ranks would wait forever in their next halo exchange.
    """
    import time

    from mpi4py import MPI

    from simsplit.parallel.context import abort_job, failure_exit

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    print_warnings_once(rank)
    if rank != 0:
        announce_kernel_compiles(False)

    def die(exc: BaseException) -> None:
        if isinstance(exc, BAD_INPUT):
            code, text = EXIT_BAD_INPUT, str(exc)
        elif isinstance(exc, DivergenceError):
            code, text = EXIT_DIVERGED, str(exc)
        elif isinstance(exc, Interrupted):
            code, text = 128 + exc.signum, str(exc)
        else:  # CUDA errors, Ctrl-C, anything else: as any program under mpiexec
            code, text = failure_exit(exc)
        if isinstance(exc, CaseError) and rank != 0:
            time.sleep(5)  # every rank reads the same case: let rank 0 say it once
        abort_job(comm, code, text)

    sys.excepthook = lambda typ, exc, tb: die(exc)
    try:
        return handler(args)
    except Interrupted as exc:
        # Every rank agreed on this stop (an allreduce) and wrote the checkpoint together:
        # end in step, as an abort would kill rank 0 while it is still writing the file.
        comm.Barrier()
        if rank == 0:
            print(f"simsplit: error: {_interrupted_text(exc)}", file=sys.stderr, flush=True)
        return 128 + exc.signum
    except BaseException as exc:  # noqa: B036 - any failure must end every rank
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        die(exc)
        return 1
