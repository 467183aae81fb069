"""Command line: ``simsplit run | validate | bench | devices``.

Bad input ends with one line on stderr and exit code 2; a diverging run with exit code 3.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Sequence

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
    run.add_argument("--quiet", action="store_true", help="no progress bar, summary only")

    val = sub.add_parser("validate", help="check a case file against the schema only")
    case_args(val)

    bench = sub.add_parser("bench", help="measure throughput against memory bandwidth")
    bench.add_argument("--backend", action="append", help="backend(s) to measure (repeatable)")
    bench.add_argument("--grid", action="append", help="grid NXxNY (repeatable)")
    bench.add_argument("--subdomains", type=int, default=1)
    bench.add_argument("--steps", type=int, default=200)
    bench.add_argument("--precision", default="float32", choices=["float32", "float64"])
    return p


def _overrides(args: argparse.Namespace) -> list[str]:
    out = list(args.overrides)
    for flag, key in (("steps", "run.steps"), ("subdomains", "decomposition.subdomains"),
                      ("backend", "run.backend"), ("output", "output.dir")):
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
    sim = Simulation(case)
    summary = sim.run(progress=not args.quiet)
    if sim.context.rank == 0:
        from simsplit.report import print_summary

        print_summary(sim, summary)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from simsplit.bench import main_from_args

    return main_from_args(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    warnings.showwarning = lambda msg, cat, *a, **k: print(f"simsplit: warning: {msg}",
                                                           file=sys.stderr)
    from simsplit.backends import BackendUnavailable
    from simsplit.case import CaseError
    from simsplit.fluid.solver import DivergenceError

    handlers = {"run": _cmd_run, "validate": _cmd_validate, "bench": _cmd_bench}
    try:
        return handlers[args.command](args)
    except (CaseError, BackendUnavailable) as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except DivergenceError as exc:
        return _fail(str(exc), EXIT_DIVERGED)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
