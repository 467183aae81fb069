"""Command line: ``simsplit run | validate | bench | devices``.

Bad input ends with one line on stderr and exit code 2; a diverging run with exit code 3.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from simsplit.backends import BackendUnavailable
from simsplit.case import CaseError
from simsplit.checkpoint import CheckpointError
from simsplit.fluid.solver import DivergenceError
from simsplit.manifest import OutputExists
from simsplit.preflight import InsufficientMemory
from simsplit.simulation import Interrupted

#: errors that mean the input cannot run as given: one line, exit code 2
BAD_INPUT = (CaseError, BackendUnavailable, InsufficientMemory, CheckpointError, OutputExists)
EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3

EXAMPLES = """\
examples:
  simsplit run cases/cavity.yaml
  simsplit run cases/cavity.yaml --set fluid.reynolds=400 --subdomains 4 --output out/re400
  simsplit run cases/cavity.yaml --backend cupy --set run.precision=float32
  simsplit validate cases/cavity.yaml --set decomposition.weights=[1,2]
  simsplit bench --backend cpu --grid 512x512
  mpiexec -n 4 simsplit run cases/cavity.yaml      # one slab per rank
  simsplit devices                                 # GPUs, peer access, NCCL, MPI
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="simsplit", description="Domain-decomposed lattice Boltzmann and molecular "
        "dynamics on CPUs and GPUs.", epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
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
    run.add_argument("--quiet", action="store_true", help="no progress bar, summary only")
    run.add_argument("--restart", nargs="?", const="auto", metavar="FILE|auto",
                     help="resume from a checkpoint file, or the newest intact one in "
                          "<output>/checkpoints (auto)")
    run.add_argument("--overwrite", action="store_true",
                     help="replace the results of an earlier run in the output directory")

    val = sub.add_parser("validate", help="check a case file against the schema only")
    case_args(val)

    bench = sub.add_parser("bench", help="measure throughput against memory bandwidth")
    bench.add_argument("--backend", action="append", help="backend(s) to measure (repeatable)")
    bench.add_argument("--grid", action="append", help="grid NXxNY (repeatable)")
    bench.add_argument("--subdomains", type=int, default=1)
    bench.add_argument("--steps", type=int, default=200)
    bench.add_argument("--precision", default="float32", choices=["float32", "float64"])
    bench.add_argument("--repeats", type=int, default=5)
    bench.add_argument("--overlap", choices=["on", "off"], default="on")
    bench.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph timing")

    sub.add_parser("devices", help="list GPUs, peer access, NVLink, NCCL and MPI")
    return p


def _overrides(args: argparse.Namespace) -> list[str]:
    out = list(args.overrides)
    for flag, key in (("steps", "run.steps"), ("subdomains", "decomposition.subdomains"),
                      ("backend", "run.backend"), ("output", "output.dir"),
                      ("transport", "run.transport")):
        value = getattr(args, flag, None)
        if value is not None:
            out.append(f"{key}={value}")
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
    from simsplit.simulation import Simulation

    case = load_case(args.case, _overrides(args))
    out_dir = case["output"]["dir"]
    if args.restart == "auto" and not out_dir:
        raise CaseError("--restart auto: needs output.dir (or --output) to find checkpoints")
    if out_dir:
        from simsplit.manifest import check_output_dir, clear_output

        check_output_dir(Path(out_dir), args.overwrite, args.restart is not None)
    sim = Simulation(case)
    if args.restart is not None:
        from simsplit.output import CHECKPOINT_DIR

        source = Path(out_dir) / CHECKPOINT_DIR if args.restart == "auto" else args.restart
        path = sim.restart(source)
        if sim.context.rank == 0:
            print(f"restarting from {path} at step {sim.steps_done}", file=sys.stderr)
    elif out_dir and args.overwrite and sim.context.rank == 0:
        clear_output(Path(out_dir))
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
        from simsplit.report import print_summary

        print_summary(sim, summary)
        timing = summary.extra.get("timing")
        if timing is not None and out_dir:
            import json

            path = Path(out_dir) / "timing.json"
            path.write_text(json.dumps(dict(timing), indent=2) + "\n")
    return 0


def _install_stop_handlers(sim: Any) -> None:
    """SIGINT/SIGTERM: finish the current chunk, write a checkpoint, exit 130/143."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda num, frame: sim.request_stop(num))


def _restart_hint(sim: Any) -> str:
    from simsplit.checkpoint import list_checkpoints
    from simsplit.output import CHECKPOINT_DIR

    out_dir = sim.case["output"]["dir"]
    ckpts = list_checkpoints(Path(out_dir) / CHECKPOINT_DIR) if out_dir else []
    fix = ("lower md.timestep" if sim.physics == "md" else
           "lower fluid.lid_velocity or refine domain.shape (smaller cell Reynolds number)")
    if not ckpts:
        return f"; {fix} and run again (no checkpoint was written: set output.checkpoint_every)"
    return (f"; last good checkpoint {ckpts[0]}: {fix}, then resume with "
            f"'simsplit run CASE --restart {ckpts[0]}' (a changed case starts afresh instead)")


def _cmd_devices(args: argparse.Namespace) -> int:
    from simsplit.devices import device_report

    print(device_report())
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from simsplit.bench import main_from_args

    return main_from_args(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    warnings.showwarning = lambda msg, cat, *a, **k: print(f"simsplit: warning: {msg}",
                                                           file=sys.stderr)
    handlers = {"run": _cmd_run, "validate": _cmd_validate, "bench": _cmd_bench,
                "devices": _cmd_devices}
    from simsplit.parallel import launched_world_size

    if args.command == "run" and launched_world_size() > 1:
        return _run_mpi(handlers[args.command], args)
    try:
        return handlers[args.command](args)
    except BAD_INPUT as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except DivergenceError as exc:
        return _fail(str(exc), EXIT_DIVERGED)
    except Interrupted as exc:
        return _fail(f"stopped by signal {exc.signum} at step {exc.steps_done}; a checkpoint "
                     "was written (resume with --restart auto)", 128 + exc.signum)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


def _run_mpi(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run under mpiexec: any rank's failure prints one line naming the rank and aborts the job.

    Without the abort, the other ranks would wait forever in their next halo exchange.
    """
    import time

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()

    def die(exc: BaseException) -> None:
        if isinstance(exc, BAD_INPUT):
            code, text = EXIT_BAD_INPUT, str(exc)
        elif isinstance(exc, DivergenceError):
            code, text = EXIT_DIVERGED, str(exc)
        elif isinstance(exc, Interrupted):
            code, text = 128 + exc.signum, str(exc)
        elif isinstance(exc, KeyboardInterrupt):
            code, text = 130, "interrupted"
        else:
            code, text = 1, f"{type(exc).__name__}: {exc}"
        if isinstance(exc, CaseError) and rank != 0:
            time.sleep(5)  # every rank reads the same case: let rank 0 say it once
        print(f"simsplit: error: rank {rank}: {text}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        comm.Abort(code)

    sys.excepthook = lambda typ, exc, tb: die(exc)
    try:
        return handler(args)
    except BaseException as exc:  # noqa: B036 - any failure must end every rank
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        die(exc)
        return 1
