"""SolverSetup: how an MDSolver is built from its case (a mixin of
:class:`simsplit.md.solver.MDSolver`): the pair table and thermostat, the slabs with their
kernel sets and exchange, the integrator's constants and the run's counters.

The order the constructor calls these in matters: the slabs need the list reach of the
potential, the arena needs the slabs' kernel sets.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from simsplit.md import slabs as sl
from simsplit.md.arena import SlabArena
from simsplit.md.box_scaling import cell_grid
from simsplit.md.exchange import InProcessExchange, MPIExchange
from simsplit.md.host_kernels import md_kernels
from simsplit.md.lattice import fcc_lattice, read_positions
from simsplit.md.pair_table import build_pair_table
from simsplit.md.rank_slab import RankSlab
from simsplit.md.rebuilds import JUMP_SKINS
from simsplit.md.systems import atom_types, file_pair_coeffs
from simsplit.md.thermostats import make_thermostat


class SolverSetup:
    """The construction steps of :class:`~simsplit.md.solver.MDSolver`."""

    def _init_potential(self, md: dict[str, Any]) -> None:
        """Pair coefficients and their kernel rows, cutoff, list reach, tail, thermostat."""
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

    def _init_slabs(self, case: dict[str, Any], name: str) -> None:
        """Slab layout, cell grid, exchange, this process's slabs and kernels, one-GPU arena."""
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

    def _init_integration(self, md: dict[str, Any]) -> None:
        """List capacity, masses, time step, Langevin terms, thermo interval, box scaling."""
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

    def _init_run_state(self, out: dict[str, Any]) -> None:
        """Counters, timers and output state of a solver that has not stepped yet."""
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
        self.output_dir = None if out.get("dir") is None else Path(out["dir"])
        self._writer: Any = None
        self._thermo_log: Any = None
        self._last_frame = -1

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
