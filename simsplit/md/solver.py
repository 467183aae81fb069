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

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from simsplit.md import slabs as sl
from simsplit.md.arena import SlabArena
from simsplit.md.batches import BatchedSteps
from simsplit.md.box_scaling import BoxScaling, cell_grid
from simsplit.md.exchange import InProcessExchange, MPIExchange
from simsplit.md.host_kernels import ghost_transfer_mode, md_kernels
from simsplit.md.lattice import fcc_lattice, read_positions, wrap_into_box
from simsplit.md.masses import TypeMasses
from simsplit.md.observables import Observables
from simsplit.md.pair_table import build_pair_table
from simsplit.md.rank_slab import RankSlab
from simsplit.md.rank_steps import RankSteps
from simsplit.md.rebuilds import JUMP_SKINS, NeighbourRebuilds
from simsplit.md.schema import check_md_case, fill_md_defaults
from simsplit.md.systems import atom_types, file_pair_coeffs
from simsplit.md.thermostats import make_thermostat
from simsplit.md.velocities import maxwell_boltzmann


class MDSolver(BatchedSteps, RankSteps, BoxScaling, TypeMasses, NeighbourRebuilds,
               Observables):
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

        pot = md["potential"]
        #: type (0-based) of each atom in id order, and the coefficients of each type pair
        self.atom_type, names = atom_types(md, self.n_atoms)
        self.pairs = build_pair_table(md, names, file_pair_coeffs(md))
        #: forces shifted to zero at the cutoff (``md.potential.shift: force``): the
        #: force-shift kernel, which reads every pair from the table, one type or several
        self.force_shift = pot["shift"] == "force"
        self._pair_rows = (self.pairs.force_shift_table() if self.force_shift else
                           self.pairs.kernel_table(bool(pot["shift"]) or pot["style"] == "wca"))
        #: several types whose pairs differ: the typed force kernel (else the one-pair one)
        self.typed = self.force_shift or bool(np.any(self._pair_rows != self._pair_rows[0]))
        self.cutoff = self.pairs.max_cutoff
        _, self._eps4, self._eps24, self._sigsq, self._eshift = self._pair_rows[0][:5]
        #: long-range energy and virial added to thermo (``md.potential.tail``)
        counts = np.bincount(self.atom_type, minlength=self.pairs.ntypes)
        self.tail = self.pairs.tail(counts, self.volume) if pot["tail"] else (0.0, 0.0)
        self.skin = float(md["neighbor"]["skin"])
        self.reach = self.cutoff + self.skin
        #: Bussi or Nose-Hoover: rescales every velocity around each step (None otherwise)
        self.thermostat = make_thermostat(md, self.n_atoms, self.volume)

        dec = case["decomposition"]
        self.layout = sl.SlabLayout(self.box, int(dec["subdomains"]), dec.get("weights"),
                                    self.reach)
        # cells of at least reach / CELL_DIVISIONS, searched CELL_DIVISIONS cells each way:
        # half-size cells scan ~half the candidates of reach-size ones
        # (an axis with too few cells for the stencil is scanned whole, each cell once)
        self.ncell, self._offsets = cell_grid(self.box, self.reach)
        self.exchange: InProcessExchange | MPIExchange
        if self._comm is None:
            self.exchange = InProcessExchange(self.layout.parts)
            local = list(range(self.layout.parts))
        else:
            self.exchange = MPIExchange(self._comm)
            local = self.context.local_slabs(self.layout.parts)
            #: Simulation agrees on stop requests through ``transport.allreduce_max``
            self.transport = self.exchange
        slabs = sl.make_slabs(
            self.layout, [self.exchange.endpoint(k) for k in range(self.layout.parts)],
            self.dtype)
        #: the slabs this process holds (all of them in one process, its own under MPI)
        self.slabs = [s for s in slabs if s.index in local]
        self._assign_kernels(name)
        #: ghost refresh plan between rebuilds, keyed (owner slab, receiving slab)
        self._links: dict[tuple[int, int], sl.GhostLink] = {}
        #: several slabs on one GPU of this process: one arena, rebuilt on the device
        self.arena = self._make_arena()
        if self.arena is not None:
            self.slabs = [self.arena.state]

        cap = md["neighbor"]["capacity"]
        if cap is None:
            rho = self.n_atoms / self.volume
            cap = int(1.3 * rho * 4.0 / 3.0 * math.pi * self.reach ** 3) + 8
        self.capacity = int(cap)

        self.mass = float(md["mass"])
        self.dt = float(md["timestep"])
        self._dtf = 0.5 * self.dt / self.mass
        self._init_masses(md)
        self.ensemble = md["ensemble"]
        lang = md["langevin"]
        self.target_temperature = float(
            md["temperature"] if lang["temperature"] is None else lang["temperature"])
        self.noise_seed = int(md["seed"] if lang["seed"] is None else lang["seed"])
        damp = float(lang["damping"])
        self._drag = self.mass / damp
        self._noise = math.sqrt(2.0 * self.mass * self.target_temperature / (damp * self.dt))
        self._init_langevin_masses(damp)
        self.thermo_every = int(md["thermo_every"])
        self._init_box_scaling()

        self.steps_done = 0
        #: step of the last list build and steps between the last two (batch sizes only)
        self._built_at = self._build_interval = 0
        #: the last step's second half kick is still to be applied (see :meth:`step`)
        self._kick_pending = False
        self._thermo: list[dict[str, Any]] = []
        self._resume_step: int | None = None
        self._outputs_pending = False
        #: batches: displacement-flag reads of batched stepping (see :meth:`_step_batch`)
        self._stats = {"rebuilds": 0, "migrations": 0, "capacity_growths": 0, "batches": 0}
        #: wall seconds per phase of step(): force, neighbor (rebuilds), comm, integrate
        self._timers = {"force": 0.0, "neighbor": 0.0, "comm": 0.0, "integrate": 0.0}
        #: print thermo rows as they come (see :meth:`start_thermo`)
        self._echo = False
        #: (step, wall clock) of the previous thermo row of the running run
        self._rate_mark: tuple[int, float] | None = None
        self._last_run: dict[str, float] = {}
        out = case["output"]
        self.output_dir = None if out.get("dir") is None else Path(out["dir"])
        self._writer: Any = None
        self._thermo_log: Any = None
        self._last_frame = -1

        if vel is None:
            vel = maxwell_boltzmann(self.n_atoms,
                                    self.atom_mass if self.multi_mass else self.mass,
                                    float(md["temperature"]),
                                    int(md["seed"]))
        x, img = wrap_into_box(pos, self.box)
        self._distribute(x, vel, img)
        self._compute_forces(self.steps_done)
        self.output_every = self._frame_interval(out.get("every"))
        if self.steps_done % self.thermo_every == 0:
            self._record_thermo()
        # the files wait for the first step() call: constructing a solver (which the
        # command line does before it checks the output directory) writes no file
        self._outputs_pending = True

    # --- setup ------------------------------------------------------------------------------
    def _assign_kernels(self, name: str) -> None:
        """Give each local slab the kernel set of its device (``context.backend_for(slab)``):
        slabs on one device share one set (its flags, its stream), as one process always did."""
        if name in ("cpu", "auto") or self.context is None:
            shared = md_kernels(name, self.context)
            for s in self.slabs:
                s.kernels = shared
        else:
            for s in self.slabs:
                s.kernels = md_kernels(name, self.context, s.index)
        #: the first local slab's kernel set (the only one unless slabs sit on several GPUs)
        self.kernels = self.slabs[0].kernels
        sets: dict[int, Any] = {}
        for s in self.slabs:
            sets.setdefault(id(s.kernels), s.kernels)
        #: distinct kernel sets in slab order: every one's flags are read at each step
        self.kernel_sets = list(sets.values())

    def _make_arena(self) -> SlabArena | RankSlab | None:
        """Rebuilds on the device: a :class:`SlabArena` when every slab sits on the one GPU
        this process drives, a :class:`RankSlab` for this rank's slab under MPI on a GPU (in
        both cases unless a forced transfer mode asks to exercise the path between devices)."""
        k = self.kernels
        if self.layout.parts == 1 or not k.is_device or self.ghost_transfer != "auto":
            return None
        if self.case["md"]["ensemble"] == "npt":  # the box changes: the host path follows it
            return None
        if self._comm is None and len(self.kernel_sets) == 1 and getattr(k, "arenas", False):
            return SlabArena(self.layout, k, self.ncell, self._offsets)
        if self._comm is not None and getattr(k, "rank_slabs", False):
            s = self.slabs[0]
            # device links serve batches only
            return RankSlab(self.layout, k, self.ncell, self._offsets, s.index, s.comm,
                            max_move=JUMP_SKINS * self.skin if self.skin > 0.0 else None,
                            device_links=self._steps_may_batch())
        return None

    def _steps_may_batch(self) -> bool:
        """Whether steps may run in batches with no host look between them: a list with a skin
        (the displacement check decides when to rebuild) and no rescaling thermostat (it needs
        every step's kinetic energy on the host)."""
        return self.skin > 0.0 and self.thermostat is None

    @staticmethod
    def _initial_configuration(md: dict[str, Any]
                               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        if md.get("lattice") is not None:
            lat = md["lattice"]
            pos, box = fcc_lattice(lat["density"], lat["cells"])
            return pos, box, None
        pos, box, vel = read_positions(md["init_file"])
        if box is None:
            if md.get("box") is None:
                raise ValueError(f"md.box: {md['init_file']} has no box; give md.box")
            box = np.asarray(md["box"], dtype=np.float64)
        return pos, box, vel

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
