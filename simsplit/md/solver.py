"""MDSolver: Lennard-Jones MD (NVE velocity Verlet or Langevin NVT) over z slabs.

One time step (velocity Verlet, as LAMMPS ``fix nve`` + ``fix langevin``)::

    v += dt/2m f;  x += dt v;  wrap x into the box           (every slab)
    if max over slabs of |x - x_build| > skin/2:  migrate, pick ghosts, rebuild lists
    else:                                          refresh ghost positions
    f = F_lj(x) [+ Langevin drag and noise keyed by (seed, step, atom id)]
    v += dt/2m f

Each owned atom's force is summed over its neighbour list in canonical cell order (stencil
cells of the global cell grid in a fixed order, ascending global id within a cell), positions
are wrapped every step per atom, the rebuild decision is global and exact, and thermo sums are
exact (``math.fsum``) over values gathered by id. Hence the trajectory does not depend on the
number of slabs, their weights, the thread count or the row order in memory; 1, 2 or 3 slabs
agree bit for bit. It does depend on when lists are rebuilt (the cells are those of the build),
so :meth:`MDSolver.state` carries the positions of the last build and a restart rebuilds from
them.

Each slab runs on the kernel set of its device (``context.backend_for(slab)``; slabs on one
GPU share one). Between rebuilds ghosts are refreshed on the devices: a gather launch on one
GPU, peer or pinned-host copies between GPUs (:func:`simsplit.md.slabs.update_ghosts_device`).

Under MPI (a context with a ``comm``, one slab per rank, on the CPU or one GPU per rank) each
rank holds its own slab, messages go through :class:`~simsplit.md.exchange.MPIExchange` (GPU
ghost rows staged through pinned host memory), the rebuild decision is an allreduce (max), and
gathers (thermo, positions, state) are collective: every rank gets the global arrays in atom-id
order. Only rank 0 prints and writes files.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from simsplit.md import slabs as sl
from simsplit.md.batches import BatchedSteps
from simsplit.md.box_scaling import BoxScaling
from simsplit.md.host_kernels import ghost_transfer_mode
from simsplit.md.lattice import wrap_into_box
from simsplit.md.masses import TypeMasses
from simsplit.md.observables import Observables
from simsplit.md.rank_slab import RankSlab
from simsplit.md.rank_steps import RankSteps
from simsplit.md.rebuilds import JUMP_SKINS, NeighbourRebuilds
from simsplit.md.schema import check_md_case, fill_md_defaults
from simsplit.md.solver_setup import SolverSetup
from simsplit.md.velocities import maxwell_boltzmann


class MDSolver(SolverSetup, BatchedSteps, RankSteps, BoxScaling, TypeMasses,
               NeighbourRebuilds, Observables):
    """Lennard-Jones molecular dynamics of one case, split into slabs along z."""

    #: what a progress display calls the throughput (work items per step: atoms)
    rate_unit = "Matom-steps/s"

    def __init__(self, case: dict[str, Any], backend_name: str | Any = "cpu") -> None:
        case = fill_md_defaults(case)
        check_md_case(case)
        self.case = case
        md = case["md"]
        # a ParallelContext (simsplit.run.simulation passes one) carries the resolved backend name
        self.context = None if isinstance(backend_name, str) else backend_name
        name = backend_name if isinstance(backend_name, str) else backend_name.backend_name
        #: the MPI communicator when slabs live on ranks (one slab per rank), else None
        self._comm = getattr(self.context, "comm", None)
        self.rank = 0 if self._comm is None else int(self._comm.Get_rank())
        #: how ghost rows travel between slabs on different kernel sets (devices) each step
        self.ghost_transfer = ghost_transfer_mode()
        #: one slab on a GPU: put rows in cell order at each rebuild (never changes results)
        self.reorder = True
        #: whether the slabs' per-atom arrays are device arrays right now (between rebuilds)
        self._on_device = False
        self.backend_name = "cpu" if name == "auto" else name
        self.dtype = np.float32 if case["run"]["precision"] == "float32" else np.float64

        pos, box, vel = self._initial_configuration(md)
        self.box = np.asarray(box, dtype=np.float64)
        self.n_atoms = int(pos.shape[0])
        self.volume = float(np.prod(self.box))

        self._init_potential(md)
        self._init_slabs(case, name)
        self._init_integration(md)
        self._init_run_state(case["output"])

        if vel is None:
            vel = maxwell_boltzmann(self.n_atoms,
                                    self.atom_mass if self.multi_mass else self.mass,
                                    float(md["temperature"]),
                                    int(md["seed"]))
        x, img = wrap_into_box(pos, self.box)
        self._distribute(x, vel, img)
        self._compute_forces(self.steps_done)
        self.output_every = self._frame_interval(case["output"].get("every"))
        if self.steps_done % self.thermo_every == 0:
            self._record_thermo()
        # the files wait for the first step() call: constructing a solver (which the
        # command line does before it checks the output directory) writes no file
        self._outputs_pending = True

    # --- time stepping ----------------------------------------------------------------------
    def _compute_forces(self, step: int, tick: int = 0) -> None:
        """Forces of ``step``; ``tick`` > 0: batch step ``tick`` (see :meth:`_step_batch`)."""
        for s in self.slabs:
            self._pair_forces(s, tick)
        self._langevin_forces(step, tick)

    def _pair_forces(self, s: sl.SlabState, tick: int = 0,
                     rows: tuple[int, int] | None = None, unless_moved: bool = False) -> None:
        """Pair forces of slab ``s``'s owned rows (``rows``: only rows [r0, r1); a first row
        above 0 needs a device kernel set; ``unless_moved``: skipped on the device when this
        step asked for a rebuild, see ``DeviceMDKernels.lj_forces``)."""
        r0, r1 = (0, s.n_own) if rows is None else rows
        if r1 <= r0:
            return
        span: dict[str, Any] = {"row0": r0} if r0 else {}
        if unless_moved:
            span["unless_moved"] = True
        if self.typed:
            table = self._on_kernels(s.kernels, "pair_rows", self._pair_rows)
            typed = (s.kernels.lj_forces_fshift if self.force_shift
                     else s.kernels.lj_forces_typed)
            typed(s.x, s.typ, r1, s.nl, s.cnt, self.box, table, self.pairs.ntypes, s.f, s.pe,
                  s.vir, tick, type_shift=s.type_shift, **span)
            return
        s.kernels.lj_forces(s.x, r1, s.nl, s.cnt, self.box, self.cutoff * self.cutoff,
                            self._eps4, self._eps24, self._sigsq, self._eshift, s.f, s.pe,
                            s.vir, tick, **span)

    def _langevin_forces(self, step: int, tick: int = 0) -> None:
        if self.ensemble != "langevin":
            return
        for s in self.slabs:
            if self.multi_mass:
                drag, noise = self._langevin_tables(s.kernels)
                s.kernels.langevin_forces_typed(s.f, s.v, s.gid, s.typ, s.n_own, drag, noise,
                                                self.noise_seed, step, tick)
            else:
                s.kernels.langevin_forces(s.f, s.v, s.gid, s.n_own, self._drag, self._noise,
                                          self.noise_seed, step, tick)

    def _on_kernels(self, kernels: Any, name: str, host: np.ndarray) -> Any:
        """``host`` copied once to the device of ``kernels`` (cached per kernel set)."""
        cache = self.__dict__.setdefault("_device_copies", {})
        key = (id(kernels), name)
        if key not in cache:
            cache[key] = kernels.to_device(np.ascontiguousarray(host))
        return cache[key]

    def _update_row_types(self) -> None:
        """Each local row's atom type, from its global id, and the neighbours' types into
        the new lists where the kernel set packs them (once after every arena list build)."""
        for s in self.slabs:
            if self._row_types(s):
                s.type_shift = s.kernels.pack_types(s.nl, s.cnt, s.n_own, s.typ,
                                                    self.pairs.ntypes, s.n_local)

    def _row_types(self, s: sl.SlabState) -> int:
        """Set ``s.typ`` (the local rows' types, from their global ids) and ``s.type_shift``
        for a list built next; return that shift (0: plain rows, or an untyped run)."""
        s.type_shift = 0
        if self.typed:
            types = self._on_kernels(s.kernels, "types", self.atom_type)
            s.typ = s.kernels.row_types(s.gid, s.n_local, types, s.typ)
            s.type_shift = s.kernels.type_bits(self.pairs.ntypes, s.n_local)
        return s.type_shift

    def step(self, n: int = 1) -> None:
        """Advance ``n`` time steps.

        The second half kick of a step is deferred into the next step's :meth:`advance` launch
        (same arithmetic, same bits, one launch less per step); it is applied on its own before
        thermo, output and at the end of the call, so velocities are complete whenever they are
        observed. One slab on a GPU runs in batches (:meth:`_step_batch`), everything else a
        step at a time; both give the same bits.
        """
        if self._rate_mark is None:
            self._rate_mark = (self.steps_done, time.perf_counter())
        if self._outputs_pending:
            self._outputs_pending = False
            self._open_outputs()
        by_rank = isinstance(self.arena, RankSlab)
        # rank slabs batch their steps where device links carry the ghosts
        linked = by_rank and self.arena.device_links is not None  # type: ignore[union-attr]
        batched = (self.kernels.batches and len(self.slabs) == 1
                   and (self._comm is None or linked) and self._steps_may_batch())
        end = self.steps_done + int(n)
        # test mode of a parallel context (a rank fails on purpose); a bare device context
        # (a backend per slab, as tests build them) has none
        fault = getattr(self.context, "check_fault", None)
        try:
            while self.steps_done < end:
                size = self._batch_size(end - self.steps_done) if batched else 1
                if linked:
                    size = self._linked_batch_size(size)
                if fault is not None:
                    for k in range(1, max(size, 1) + 1):
                        fault(self.steps_done + k)
                if batched and size:
                    self._step_batch(size)
                elif by_rank:
                    self._step_rank()
                else:
                    self._step_one()
        finally:
            self._finish_kick()

    def _limits2(self) -> tuple[float, float]:
        """Squared displacements that ask for a rebuild (skin / 2) and that mean an atom
        jumped a whole skin in one step (a time step too large)."""
        if self.barostat is not None:  # the box moved since the build: tighter limits
            return self._npt_limits2()
        return (0.5 * self.skin) ** 2, (JUMP_SKINS * self.skin) ** 2

    @staticmethod
    def _ghost_copies(s: sl.SlabState) -> dict[str, Any]:
        """The drift's extra argument in an arena: each owned row's ghost copies."""
        ghost_of = getattr(s, "ghost_of", None)
        return {} if ghost_of is None else {"ghost_of": ghost_of}

    def _advance(self, step: int) -> None:
        """The first half of ``step`` on every slab: thermostat (and barostat) half steps,
        the deferred and the new half kick, the drift and the displacement check."""
        if self.thermostat is not None:
            self.thermostat.begin_step(step, self._kinetic_total, self._scale_velocities)
        limit2, jump2 = self._limits2()  # after a barostat scaled the box
        kick, self._kick_pending = self._kick_pending, False
        kick, dtf = self._drift_kick(kick)
        for s in self.slabs:
            s.kernels.advance(s.x, s.v, s.f, s.img, s.n_own, kick, dtf, self._drift_dt,
                              self.box, s.x0, limit2, jump2, **self._ghost_copies(s))

    def _step_one(self) -> None:
        """One step, the displacement check read before anything of the next is queued."""
        step = self.steps_done + 1
        on_device = self.kernels.is_device
        t0 = time.perf_counter()
        self._advance(step)
        t1 = time.perf_counter()
        rebuild = self._needs_rebuild()
        t_check = time.perf_counter() if on_device else t1  # a GPU check waits for the step
        if rebuild:
            self._rebuild()
            t2 = time.perf_counter()
            self._timers["neighbor"] += t2 - t_check
        else:
            self._update_ghosts()
            t2 = time.perf_counter()
            self._timers["comm"] += t2 - t_check
        if self._comm is not None:
            self.exchange.flush()  # type: ignore[union-attr]  # this step's sends are done
        self._compute_forces(step)
        t3 = time.perf_counter()
        self._end_step(step)
        t4 = time.perf_counter()
        self._timers["integrate"] += (t1 - t0) + (t4 - t3) + (t_check - t1)
        self._timers["force"] += t3 - t2

    def _end_step(self, step: int) -> None:
        """Mark ``step`` done (its second half kick deferred, or applied and the velocities
        rescaled under the Bussi thermostat) and observe it if due."""
        self.steps_done = step
        self._kick_pending = True
        if self.thermostat is not None:
            self._finish_kick()
            self.thermostat.end_step(step, self._kinetic_total, self._scale_velocities)
        if self._observed(step):
            self._finish_kick()
            self._after_step()

    def _scale_velocities(self, alpha: float) -> None:
        """Every velocity times ``alpha`` (a rescaling thermostat's step)."""
        for s in self.slabs:
            s.kernels.scale_rows(s.v, s.n_own, alpha)

    def _finish_kick(self) -> None:
        """Apply a deferred second half kick (velocities become those of ``steps_done``)."""
        if self._kick_pending:
            self._kick_pending = False
            if self.multi_mass:
                self._typed_kicks(1)
                return
            for s in self.slabs:
                s.kernels.final_integrate(s.v, s.f, s.n_own, self._dtf)

    def _observed(self, step: int) -> bool:
        """Whether :meth:`_after_step` has anything to do after ``step``."""
        return step % self.thermo_every == 0 or (
            self.output_dir is not None and self.output_every > 0
            and step % self.output_every == 0)

    def _after_step(self) -> None:
        step = self.steps_done
        if step % self.thermo_every == 0:
            self._record_thermo()
        if self.output_dir is not None and self.output_every > 0 and \
                step % self.output_every == 0:
            self._write_frame()

    def run(self, progress: bool = False) -> list[dict[str, Any]]:
        """Run ``md.steps`` (or ``run.steps``) steps; with ``progress`` print LAMMPS-style
        thermo lines and the loop time. Returns the thermo records."""
        md = self.case["md"]
        steps = int(md["steps"] if md.get("steps") is not None else self.case["run"]["steps"])
        progress = self.start_thermo(progress)
        t0 = time.perf_counter()
        try:
            self.step(steps)
        finally:
            self.stop_thermo()
        seconds = time.perf_counter() - t0
        rate = steps * self.n_atoms / seconds if seconds > 0 else float("nan")
        self._last_run = {"steps": steps, "seconds": seconds, "atom_steps_per_s": rate}
        if self.output_dir is not None:
            self._write_frame()  # the final state, unless a frame of this step exists
            if self._writer is not None:
                self._writer.flush()
        if progress:
            print(f"Loop time of {seconds:.4g} on {self.layout.parts} slab(s) for {steps} steps "
                  f"with {self.n_atoms} atoms ({rate:.4g} atom-steps/s)")
        return self.thermo()

    def synchronize(self) -> None:
        """Wait for queued device work (CPU kernels are synchronous: nothing to do)."""
        for k in self.kernel_sets:
            k.synchronize()

    def mlups_cells(self) -> int:
        """Work items per step for rate reports: atoms (rates are atom-steps per second)."""
        return self.n_atoms
