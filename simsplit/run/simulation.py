"""The library front door: a :class:`Simulation` built from a case, with operations attached.

A Simulation owns one physics solver (fluid or MD) placed by a parallel context, and a list
of operations (snapshot writers, plots, checkpoints) that fire every N steps and at the end.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from simsplit.case import load_case, validate_case
from simsplit.gpu.cuda_errors import TRACKER
from simsplit.parallel.context import ParallelContext, make_context
from simsplit.run.operations import Operation, RunSummary


def _refuse_fluid_only(case: Mapping[str, Any]) -> None:
    """Load balance and its test throttle exist for the fluid solver only."""
    from simsplit.errors import CaseError

    for section, key in (("decomposition", "balance"), ("run", "debug_throttle")):
        if case[section].get(key):
            raise CaseError(f"{section}.{key}: is not allowed for physics "
                            f"'{case['physics']}' (only the fluid solver balances slabs)")


class Interrupted(RuntimeError):
    """A signal asked the run to stop; a checkpoint was written first."""

    def __init__(self, signum: int, steps_done: int) -> None:
        super().__init__(f"stopped by signal {signum} at step {steps_done}")
        self.signum, self.steps_done = signum, steps_done


class Simulation:
    """A validated case, its solver and its operations.

    ``Simulation("cases/cavity.yaml")`` or ``Simulation(load_case(path, overrides))``.
    """

    def __init__(self, case: Mapping[str, Any] | str | Path,
                 context: ParallelContext | None = None) -> None:
        if isinstance(case, (str, Path)):
            case = load_case(case)
        else:
            case = validate_case(dict(case))
        self.context = context or make_context(case)
        prepared = self.context.prepare_case(case)
        if prepared is not case:  # e.g. one slab per MPI rank: the changed case is checked anew
            prepared = validate_case(prepared,
                                     source=f"case under mpiexec -n {self.context.size}")
        self.case: dict[str, Any] = prepared
        case = self.case
        self.physics = case["physics"]
        from simsplit.run.preflight import check_memory

        check_memory(case, self.context)
        if self.physics == "fluid":
            from simsplit.fluid.solver import FluidSolver

            self.solver: Any = FluidSolver(case, self.context)
        else:
            _refuse_fluid_only(case)
            from simsplit.md.solver import MDSolver

            self.solver = MDSolver(case, self.context)
        self.operations: list[Operation] = []
        #: called as ``fn(status, info)`` when a run ends: completed, diverged, interrupted
        self.on_finish: list[Callable[[str, dict[str, Any]], None]] = []
        self.restarted_from: str | None = None
        self._stop_signal = 0
        #: GPU monitor (:meth:`enable_monitor`) and its end-of-run summary
        self.monitor: Any = None
        self.monitor_summary: dict[str, Any] | None = None
        from simsplit.run.forces import attach_forces

        #: forces on the case's bodies (domain.bodies), None without bodies
        self.body_forces = attach_forces(self)
        from simsplit.run.probes import attach_probes

        #: readings of the case's probes (output.probes), None without probes
        self.probes = attach_probes(self)
        from simsplit.gpu.cuda_errors import attach_error_context

        attach_error_context(self)
        #: launch configurations chosen by ``run.autotune`` (see :mod:`simsplit.gpu.autotune`)
        self.autotune_results: list[Any] = []
        if case["run"].get("autotune") and self.context.on_gpu:
            from simsplit.gpu.autotune import tune_solver

            self.autotune_results = tune_solver(self.solver)

    # --- stepping ------------------------------------------------------------------------------
    @property
    def steps_done(self) -> int:
        return self.solver.steps_done

    def step(self, n: int = 1) -> None:
        """Advance ``n`` steps (no operations fire)."""
        self.solver.step(n)

    def attach(self, op: Operation) -> None:
        self.operations.append(op)

    def enable_monitor(self, interval: float = 1.0, sampler: Any = None) -> Any:
        """Sample the used GPUs every ``interval`` s until the run ends (see :mod:`.monitor`).

        Returns the :class:`~simsplit.gpu.monitor.GpuMonitor`, or None on the cpu backend.
        """
        from simsplit.run.monitoring import attach_monitor

        return attach_monitor(self, interval, sampler)

    def run(self, progress: bool = False, output: bool = True) -> RunSummary:
        """Run to ``run.steps`` or, for the fluid, until the steady-state tolerance is met.

        ``progress``: a progress bar on stderr, or, for MD, the thermo table on stdout instead
        (as LAMMPS prints it; a bar redrawn between its rows would garble a log that holds
        both streams).
        """
        if output:
            from simsplit.run.output import attach_output

            attach_output(self)
        from simsplit.run.progress import RunProgress

        run = self.case["run"]
        total, tol = int(run["steps"]), float(run["tolerance"])
        check = int(run["check_every"])
        start_step = self.steps_done
        prints_table = getattr(self.solver, "start_thermo", lambda echo: False)(progress)
        bar = RunProgress(total, start_step,
                          enabled=progress and self.context.rank == 0 and not prints_table,
                          cells=self._cells_per_step(),
                          unit=getattr(self.solver, "rate_unit", "MLUPS"))
        timer = getattr(self.solver, "timer", None)
        if timer is not None:
            timer.reset()
        t0 = time.perf_counter()
        try:
            with bar:
                residual, converged, reason = self._step_until_done(bar, total, check, tol)
                self.solver.synchronize()
        except Interrupted as exc:
            self._finish("interrupted", {"signal": exc.signum})
            raise
        except Exception as exc:
            from simsplit.errors import DivergenceError

            self._finish("diverged" if isinstance(exc, DivergenceError) else "failed",
                         {"error": str(exc)})
            raise
        finally:
            getattr(self.solver, "stop_thermo", lambda: None)()
        wall = time.perf_counter() - t0
        self._fire(final=True)
        steps = self.steps_done - start_step
        rate = steps * self._cells_per_step() / wall if wall > 0 else 0.0
        summary = RunSummary(steps, wall, converged, residual, rate, reason)
        self._finish("completed", self._report(summary, timer))
        return summary

    def _step_until_done(self, bar: Any, total: int, check: int, tol: float
                         ) -> tuple[float | None, bool, str]:
        """Step in chunks to ``total`` steps, or to a residual below ``tol`` (the fluid's
        steady state, checked every ``check`` steps): (last residual, converged, reason)."""
        checks_residual = hasattr(self.solver, "residual")
        residual = None
        while self.steps_done < total:
            n = self._next_chunk(total, check)
            TRACKER.step = self.steps_done + 1  # refined per step where the solver says
            self.solver.step(n)
            if hasattr(self.solver, "check_health"):
                self.solver.check_health()
            if checks_residual and self.steps_done % check == 0:
                residual = self.solver.residual()
            bar.update(self.steps_done, residual)
            self._fire(final=False)
            self._check_stop()
            if checks_residual and tol > 0 and residual is not None and residual < tol:
                return residual, True, f"steady state (residual {residual:.3g} < {tol:g})"
        return residual, False, "step limit reached"

    def _report(self, summary: RunSummary, timer: Any) -> dict[str, Any]:
        """What run.json records of a completed run; the summary gets the same extras (the
        timing breakdown is collective: every rank gets here)."""
        transport = getattr(self.solver, "transport", None)
        if timer is not None and transport is not None:
            summary.extra["timing"] = timer.breakdown(summary.wall_seconds,
                                                      transport.allreduce_max, self.context.size)
        info = {"wall_seconds": summary.wall_seconds, "converged": summary.converged,
                "residual": summary.residual, "reason": summary.reason,
                "timing": summary.extra.get("timing")}
        if self.body_forces is not None:  # measured at the end by its operation
            summary.extra["bodies"] = info["bodies"] = self.body_forces.report()
        if self.probes is not None:
            summary.extra["probes"] = info["probes"] = self.probes.report()
        balance = getattr(self.solver, "balance_report", lambda: None)()
        if balance is not None:  # the chosen split, also in run.json
            summary.extra["balance"] = info["balance"] = balance
        return info

    # --- stopping on request (signals), restart ----------------------------------------------
    def request_stop(self, signum: int) -> None:
        """Ask the run to checkpoint and stop after the current chunk (signal-handler safe)."""
        self._stop_signal = signum

    def _check_stop(self) -> None:
        transport = getattr(self.solver, "transport", None)
        signum = self._stop_signal
        if transport is not None:  # every rank must agree, or the next exchange would hang
            signum = int(transport.allreduce_max(float(signum)))
        if signum:
            raise Interrupted(signum, self.steps_done)

    def _finish(self, status: str, info: dict[str, Any]) -> None:
        info = {"steps_done": self.steps_done, **info}
        for fn in self.on_finish:
            fn(status, info)

    def restart(self, source: str | Path) -> Path:
        """Continue from the newest intact checkpoint at ``source`` (a file or a directory)."""
        from simsplit.run.checkpoint import load_latest
        from simsplit.run.state import restore_state

        path, attrs, arrays = load_latest(Path(source), self.case)
        restore_state(self, arrays, int(attrs["step"]))
        self.restarted_from = str(path)
        return path

    def _next_chunk(self, total: int, check: int) -> int:
        stops = [total, (self.steps_done // check + 1) * check]
        for op in self.operations:
            if op.every > 0:
                stops.append((self.steps_done // op.every + 1) * op.every)
        return min(stops) - self.steps_done

    def _fire(self, final: bool) -> None:
        for op in self.operations:
            due = op.at_end if final else (op.every > 0 and self.steps_done % op.every == 0)
            if due:
                op.action(self)

    def _cells_per_step(self) -> int:
        return int(getattr(self.solver, "mlups_cells", lambda: 0)())

    # --- results (global arrays, identical whatever the split) -----------------------------------
    def velocity(self) -> np.ndarray:
        return self.solver.velocity()

    def density(self) -> np.ndarray:
        return self.solver.density()

    def positions(self) -> np.ndarray:
        return self.solver.positions()

    def velocities(self) -> np.ndarray:
        return self.solver.velocities()

    def thermo(self) -> list[dict[str, float]]:
        return self.solver.thermo()
