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
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from simsplit.backends.cpu import md as cpu_md
from simsplit.health import DivergenceError
from simsplit.md import slabs as sl
from simsplit.md.exchange import InProcessExchange, MPIExchange
from simsplit.md.lattice import fcc_lattice, read_positions
from simsplit.md.schema import check_md_case, fill_md_defaults
from simsplit.md.thermo import format_row, header, thermo_record
from simsplit.md.velocities import maxwell_boltzmann

#: a displacement since the last build beyond this many skins means one step jumped a skin
JUMP_SKINS = 1.5
TRAJECTORY_NAME = "trajectory.h5md"
#: neighbour-search cells per cutoff + skin
CELL_DIVISIONS = 2
#: environment variable choosing how ghost rows move between slabs on different GPU kernel
#: sets in one process: ``auto`` (default), ``peer`` or ``staged`` (see :func:`ghost_transfer_mode`)
TRANSFER_ENV = "SIMSPLIT_MD_TRANSFER"


def ghost_transfer_mode(value: str | None = None) -> str:
    """The ghost transfer mode (``value``, else ``$SIMSPLIT_MD_TRANSFER``, else ``auto``).

    ``auto``: slabs sharing a kernel set (a GPU) refresh ghosts with one gather launch, slabs
    on different GPUs with peer copies where the GPUs allow peer access, else through pinned
    host memory. ``peer`` and ``staged`` force that copy between *every* two slabs, even on
    one GPU: a testing aid that runs the cross-device path on a one-GPU machine.
    """
    import os

    mode = (os.environ.get(TRANSFER_ENV, "") if value is None else value).strip() or "auto"
    if mode not in sl.TRANSFER_MODES:
        raise ValueError(f"{TRANSFER_ENV}={mode!r}: expected one of "
                         f"{', '.join(sl.TRANSFER_MODES)}")
    return mode


class HostMDKernels:
    """The CPU MD kernel set: :mod:`simsplit.backends.cpu.md` behind the calls the solver makes
    of every kernel set (the GPU ones are :class:`simsplit.backends.cuda_c.md.DeviceMDKernels`).
    Arrays are NumPy arrays; the neighbour list is ``nl[row, k]``."""

    is_device = False
    #: every step is checked as it ends (nothing is queued on a CPU)
    batches = False

    def __init__(self) -> None:
        self._moved = self._jumped = False
        k = cpu_md
        self.final_integrate = k.final_integrate
        self.kinetic_per_atom = k.kinetic_per_atom

    @staticmethod
    def lj_forces(x, n_own: int, nl, cnt, box: np.ndarray, rcsq: float, eps4: float,
                  eps24: float, sigsq: float, eshift: float, f, pe, vir, tick: int = 0) -> None:
        cpu_md.lj_forces(x, n_own, nl, cnt, box, rcsq, eps4, eps24, sigsq, eshift, f, pe, vir)

    @staticmethod
    def langevin_forces(f, v, ids, n: int, drag: float, noise: float, seed: int, step: int,
                        tick: int = 0) -> None:
        cpu_md.langevin_forces(f, v, ids, n, drag, noise, seed, step)

    def to_device(self, host: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(host)

    def to_host(self, arr: np.ndarray) -> np.ndarray:
        return arr

    def synchronize(self) -> None:
        """CPU kernels are synchronous: nothing to wait for."""

    def advance(self, x, v, f, img, n: int, kick: bool, dtf: float, dt: float,
                box: np.ndarray, x0: np.ndarray, limit2: float, jump2: float,
                tick: int = 1) -> None:
        """The previous step's second half kick (if ``kick``), this step's first half kick
        and drift, and the displacement check (read with :meth:`displacement_flags`)."""
        if kick:
            cpu_md.final_integrate(v, f, n, dtf)
        cpu_md.initial_integrate(x, v, f, img, n, dtf, dt, box)
        m = cpu_md.max_displacement2(x, x0, n, box)
        self._moved |= bool(m > limit2)
        self._jumped |= bool(m > jump2)

    def displacement_flags(self) -> tuple[int, bool]:
        out = (int(self._moved), self._jumped)
        self._moved = self._jumped = False
        return out

    def snapshot(self, x: np.ndarray, n: int, out: Any = None) -> np.ndarray:
        return np.array(x[:n], dtype=np.float64)

    def neighbor_list(self, nl: np.ndarray | None, cnt: np.ndarray | None, n_own: int,
                      capacity: int) -> tuple[np.ndarray, np.ndarray]:
        if nl is not None and cnt is not None and nl.shape[0] >= n_own \
                and nl.shape[1] == capacity:
            return nl, cnt
        rows = max(n_own + n_own // 8 + 16, 0 if nl is None else nl.shape[0])
        return np.empty((rows, capacity), np.int32), np.zeros(rows, np.int32)

    def bin_atoms(self, x: np.ndarray, gid: np.ndarray, n: int, box: np.ndarray,
                  ncell: np.ndarray, cells: Any = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out = (np.empty(n, np.int64), np.empty(int(np.prod(ncell)) + 1, np.int64),
               np.empty(n, np.int64))
        cpu_md.bin_atoms(x, gid, n, box, ncell, *out)
        return out

    def build_neighbors(self, x, n_own: int, box: np.ndarray, ncell: np.ndarray,
                        cells: tuple[np.ndarray, ...], offsets: list[np.ndarray], cutsq: float,
                        nl: np.ndarray, cnt: np.ndarray) -> int:
        return cpu_md.build_neighbors(x, n_own, box, ncell, *cells, *offsets, cutsq, nl, cnt)


def md_kernels(backend_name: str, context: Any = None, slab: int = 0) -> Any:
    """The MD kernel set of a backend for one slab: ``cpu`` (or ``auto``) runs on the host,
    ``cupy`` and ``numba-cuda`` on the GPU of ``context.backend_for(slab)`` (one kernel set per
    device: slabs that share a device share it), or on GPU 0 without a context."""
    if backend_name in ("cpu", "auto"):
        return HostMDKernels()
    if backend_name in ("cupy", "numba-cuda"):
        if context is not None:
            return context.backend_for(slab).md
        from simsplit.backends import get_backend

        return get_backend(backend_name).md
    raise ValueError(f"run.backend: no molecular-dynamics kernels for '{backend_name}' "
                     "(available: cpu, cupy, numba-cuda)")


def _wrap(pos: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    img = np.floor(pos / box).astype(np.int64)
    pos = pos - img * box
    over = pos >= box
    pos[over] -= np.broadcast_to(box, pos.shape)[over]
    img[over] += 1
    return np.maximum(pos, 0.0), img


#: Most steps one slab on a GPU queues before it reads the displacement flags (see
#: :meth:`MDSolver._step_batch`): enough to hide the host's launch and wait time between
#: rebuilds, which at 64,000 atoms on an H200 is most of a step.
MAX_BATCH = 64


class MDSolver:
    """Lennard-Jones molecular dynamics of one case, split into slabs along z."""

    def __init__(self, case: dict[str, Any], backend_name: str | Any = "cpu") -> None:
        case = fill_md_defaults(case)
        check_md_case(case)
        self.case = case
        md = case["md"]
        # a ParallelContext (simsplit.simulation passes one) carries the resolved backend name
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
        self.cutoff = float(pot["cutoff"])
        eps, sig = float(pot["epsilon"]), float(pot["sigma"])
        self._eps4, self._eps24, self._sigsq = 4.0 * eps, 24.0 * eps, sig * sig
        sr6 = (sig / self.cutoff) ** 6
        self._eshift = 4.0 * eps * sr6 * (sr6 - 1.0) if pot["shift"] else 0.0
        self.skin = float(md["neighbor"]["skin"])
        self.reach = self.cutoff + self.skin

        dec = case["decomposition"]
        self.layout = sl.SlabLayout(self.box, int(dec["subdomains"]), dec.get("weights"),
                                    self.reach)
        # cells of at least reach / CELL_DIVISIONS, searched CELL_DIVISIONS cells each way:
        # half-size cells scan ~half the candidates of reach-size ones
        self.ncell = np.maximum((self.box * CELL_DIVISIONS // self.reach).astype(np.int64), 1)
        # an axis with too few cells for the stencil is scanned whole, each cell once
        span = 2 * CELL_DIVISIONS + 1
        self._offsets = [np.arange(-CELL_DIVISIONS, CELL_DIVISIONS + 1, dtype=np.int64)
                         if n >= span else np.arange(n, dtype=np.int64) for n in self.ncell]
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

        cap = md["neighbor"]["capacity"]
        if cap is None:
            rho = self.n_atoms / self.volume
            cap = int(1.3 * rho * 4.0 / 3.0 * math.pi * self.reach ** 3) + 8
        self.capacity = int(cap)

        self.mass = float(md["mass"])
        self.dt = float(md["timestep"])
        self._dtf = 0.5 * self.dt / self.mass
        self.ensemble = md["ensemble"]
        lang = md["langevin"]
        self.target_temperature = float(
            md["temperature"] if lang["temperature"] is None else lang["temperature"])
        self.noise_seed = int(md["seed"] if lang["seed"] is None else lang["seed"])
        damp = float(lang["damping"])
        self._drag = self.mass / damp
        self._noise = math.sqrt(2.0 * self.mass * self.target_temperature / (damp * self.dt))
        self.thermo_every = int(md["thermo_every"])

        self.steps_done = 0
        #: step of the last list build and steps between the last two (batch sizes only)
        self._built_at = self._build_interval = 0
        #: the last step's second half kick is still to be applied (see :meth:`step`)
        self._kick_pending = False
        self._thermo: list[dict[str, Any]] = []
        self._resume_step: int | None = None
        self._frame_pending = False
        #: batches: displacement-flag reads of batched stepping (see :meth:`_step_batch`)
        self._stats = {"rebuilds": 0, "migrations": 0, "capacity_growths": 0, "batches": 0}
        #: wall seconds per phase of step(): force, neighbor (rebuilds), comm, integrate
        self._timers = {"force": 0.0, "neighbor": 0.0, "comm": 0.0, "integrate": 0.0}
        self._echo = False
        self._last_run: dict[str, float] = {}
        out = case["output"]
        self.output_dir = None if out.get("dir") is None else Path(out["dir"])
        self.output_every = int(out.get("every") or 0)
        self._writer: Any = None
        self._last_frame = -1

        if vel is None:
            vel = maxwell_boltzmann(self.n_atoms, self.mass, float(md["temperature"]),
                                    int(md["seed"]))
        x, img = _wrap(pos, self.box)
        self._distribute(x, vel, img)
        self._compute_forces(self.steps_done)
        if self.steps_done % self.thermo_every == 0:
            self._record_thermo()
        # the first frame waits for the first step() call: constructing a solver (which the
        # command line does before it checks the output directory) writes no file
        self._frame_pending = True

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

    def _distribute(self, x: np.ndarray, v: np.ndarray, img: np.ndarray,
                    built: np.ndarray | None = None) -> None:
        """Hand the atoms (global arrays in id order) to the slabs and build the lists: from
        ``x``, or from the positions ``built`` of the last build before a restart, so that
        ownership, ghosts, lists and the displacement reference are those the interrupted run
        had; the atoms are then moved to ``x``."""
        x = x.astype(self.dtype)
        sl.scatter(self.slabs, self.layout, cpu_md, x if built is None else
                   np.asarray(built).astype(self.dtype), np.asarray(v, dtype=self.dtype),
                   img.astype(np.int64))
        self._on_device = False
        self._kick_pending = False
        self._rebuild()
        if built is not None:
            for s in self.slabs:  # ghosts are copies of their owners' positions too
                s.x = s.kernels.to_device(x[self.slab_ids(s)])
        if self._comm is not None:
            self.exchange.flush()  # type: ignore[union-attr]

    # --- neighbour lists --------------------------------------------------------------------
    def _needs_rebuild(self) -> bool:
        """Whether some atom moved more than skin / 2 since the last build, as flagged by this
        step's :meth:`advance` launch (on a GPU: one 8-byte read, which waits for the step's
        queued work)."""
        if self.skin <= 0.0:
            return True
        moved = jumped = False
        for k in self.kernel_sets:  # every set, so that every set's flags are reset
            m, j = k.displacement_flags()
            moved, jumped = moved or m, jumped or j
        if not self._any_rank(moved):
            return False
        # The previous step ended within skin / 2 of the last build (or it would have rebuilt),
        # so a displacement beyond 1.5 skin now means one step carried an atom over a skin.
        if jumped:
            self._raise_jump()  # under MPI the failing rank aborts the job
        return True

    def _any_rank(self, flag: bool) -> bool:
        """``flag`` or'ed over all ranks (an allreduce max under MPI): every rank agrees."""
        if self._comm is None:
            return flag
        return self.exchange.allreduce_max(1.0 if flag else 0.0) > 0.0  # type: ignore[union-attr]

    def _raise_jump(self) -> None:
        limit = JUMP_SKINS * self.skin
        for s in self.slabs:
            index = s.index
            x = np.asarray(s.kernels.to_host(s.x))[: s.n_own]
            x0 = np.asarray(s.kernels.to_host(s.x0))[: s.n_own]
            d = x - x0
            d -= self.box * np.round(d / self.box)
            dist = np.sqrt((d * d).sum(axis=1))
            bad = np.flatnonzero(~(dist <= limit))
            if bad.size:
                i = bad[np.argmax(np.nan_to_num(dist[bad], nan=np.inf))]
                gid = int(np.asarray(s.kernels.to_host(s.gid))[i])
                raise DivergenceError(
                    self.steps_done + 1, index,
                    f"atom id {gid} moved {dist[i]:.3g} in one step, more than the neighbour "
                    f"skin {self.skin:g} (time step {self.dt:g} too large)")

    def check_health(self) -> None:
        """Raise :class:`DivergenceError` for non-finite positions or velocities."""
        for s in self.slabs:
            index = s.index
            x = np.asarray(s.kernels.to_host(s.x))[: s.n_own]
            v = np.asarray(s.kernels.to_host(s.v))[: s.n_own]
            bad = np.flatnonzero(~(np.isfinite(x).all(axis=1) & np.isfinite(v).all(axis=1)))
            if bad.size:
                gid = int(np.asarray(s.kernels.to_host(s.gid))[bad[0]])
                raise DivergenceError(self.steps_done, index,
                                      f"atom id {gid} has a non-finite position or velocity "
                                      f"(time step {self.dt:g} too large?)")

    def _rebuild(self) -> None:
        # On a GPU, migration and ghost selection run on the host (download, NumPy, upload).
        # One slab on a GPU has neither (and row order never matters): its rebuild stays on
        # the device.
        if not (self._on_device and self.layout.parts == 1):
            self._pull()
            self._stats["migrations"] += sl.migrate(self.slabs, self.layout, cpu_md)
            for s in self.slabs:
                sl.sort_owned(s, self.box, self.ncell)
            sl.select_ghosts(self.slabs, self.layout, cpu_md)
            self._push()
        for s in self.slabs:
            self._build_list(s)
        self._stats["rebuilds"] += 1

    def _pull(self) -> None:
        """Bring the arrays migration needs back to the host (device kernel sets only)."""
        if not self._on_device:
            return
        for s in self.slabs:
            k = s.kernels
            s.x, s.v, s.img = k.to_host(s.x), k.to_host(s.v), k.to_host(s.img)
        self._on_device = False

    def _push(self) -> None:
        """Hand each slab's host arrays to its kernel set (uploads them to its GPU) and plan
        the ghost refreshes until the next rebuild."""
        for s in self.slabs:
            k = s.kernels
            if k.is_device:
                s.x, s.v, s.img, s.f, s.pe, s.vir = (
                    k.to_device(a) for a in (s.x, s.v, s.img, s.f, s.pe, s.vir))
                if isinstance(s.nl, np.ndarray):  # the host default: no device list yet
                    s.nl = s.cnt = None
            s.gid = k.to_device(s.ids)
            s.send_dev = {nb: k.to_device(idx) for nb, idx in s.send_idx.items()}
        self._on_device = self.kernels.is_device
        if self._on_device:
            self._links = sl.plan_ghost_links(self.slabs, self.ghost_transfer,
                                              remote=self._comm is not None, old=self._links)

    def slab_ids(self, s: sl.SlabState) -> np.ndarray:
        """Global ids of a slab's rows in their current order (downloaded once after the
        device reordered the rows: observation only, never per step)."""
        if s.ids_stale:
            s.ids = np.asarray(s.kernels.to_host(s.gid))
            s.ids_stale = False
        return s.ids

    def _build_list(self, s: sl.SlabState) -> None:
        k = s.kernels
        s.cells = k.bin_atoms(s.x, s.gid, s.n_local, self.box, self.ncell, s.cells)
        if self._on_device and self.layout.parts == 1 and self.reorder:
            # rows in cell order for locality; the host ids follow lazily (see slab_ids)
            s.x, s.v, s.img, s.gid = k.reorder_by_cell(s.cells, s.n_own, s.x, s.v, s.img,
                                                       s.gid)
            s.ids_stale = True
        while True:
            s.nl, s.cnt = k.neighbor_list(s.nl, s.cnt, s.n_own, self.capacity)
            worst = k.build_neighbors(s.x, s.n_own, self.box, self.ncell, s.cells,
                                      self._offsets, self.reach * self.reach, s.nl, s.cnt)
            if worst <= self.capacity:
                break
            self.capacity = int(worst * 1.2) + 8
            self._stats["capacity_growths"] += 1
        s.x0 = k.snapshot(s.x, s.n_own, s.x0)

    def _update_ghosts(self) -> None:
        if self._on_device:
            sl.update_ghosts_device(self.slabs, self._links)
        else:
            sl.update_ghosts(self.slabs)

    # --- time stepping ----------------------------------------------------------------------
    def _compute_forces(self, step: int, tick: int = 0) -> None:
        """Forces of ``step``; ``tick`` > 0: batch step ``tick`` (see :meth:`_step_batch`)."""
        rcsq = self.cutoff * self.cutoff
        for s in self.slabs:
            s.kernels.lj_forces(s.x, s.n_own, s.nl, s.cnt, self.box, rcsq, self._eps4,
                                self._eps24, self._sigsq, self._eshift, s.f, s.pe, s.vir, tick)
        if self.ensemble == "langevin":
            for s in self.slabs:
                s.kernels.langevin_forces(s.f, s.v, s.gid, s.n_own, self._drag, self._noise,
                                          self.noise_seed, step, tick)

    def step(self, n: int = 1) -> None:
        """Advance ``n`` time steps.

        The second half kick of a step is deferred into the next step's :meth:`advance` launch
        (same arithmetic, same bits, one launch less per step); it is applied on its own before
        thermo, output and at the end of the call, so velocities are complete whenever they are
        observed. One slab on a GPU runs in batches (:meth:`_step_batch`), everything else a
        step at a time; both give the same bits.
        """
        if self._frame_pending:
            self._frame_pending = False
            if (self.output_dir is not None and self.output_every > 0
                    and self.steps_done % self.output_every == 0):
                self._write_frame()
        batched = (self.kernels.batches and len(self.slabs) == 1 and self._comm is None
                   and self.skin > 0)
        end = self.steps_done + int(n)
        try:
            while self.steps_done < end:
                if batched:
                    self._step_batch(self._batch_size(end - self.steps_done))
                else:
                    self._step_one()
        finally:
            self._finish_kick()

    def _limits2(self) -> tuple[float, float]:
        """Squared displacements that ask for a rebuild (skin / 2) and that mean an atom
        jumped a whole skin in one step (a time step too large)."""
        return (0.5 * self.skin) ** 2, (JUMP_SKINS * self.skin) ** 2

    def _step_one(self) -> None:
        """One step, the displacement check read before anything of the next is queued."""
        step = self.steps_done + 1
        limit2, jump2 = self._limits2()
        on_device = self.kernels.is_device
        t0 = time.perf_counter()
        kick, self._kick_pending = self._kick_pending, False
        for s in self.slabs:
            s.kernels.advance(s.x, s.v, s.f, s.img, s.n_own, kick, self._dtf, self.dt,
                              self.box, s.x0, limit2, jump2)
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

    def _step_batch(self, size: int) -> None:
        """Queue ``size`` steps of one slab on a GPU, then read the displacement flags once.

        Every launch carries its step's number within the batch (its tick); the first step
        that moves an atom beyond skin / 2 records its tick, and from there on the batch's
        launches return at once (its own forces included), so the device state is that of
        the end of that step's drift, exactly as if the host had checked after every step.
        The host then rebuilds and computes that step's forces. The flags are read while the
        last step's forces still run, so the device is busy while the host decides.
        """
        s, k = self.slabs[0], self.kernels
        first = self.steps_done + 1
        limit2, jump2 = self._limits2()
        t0 = time.perf_counter()
        for tick in range(1, size + 1):
            kick = self._kick_pending or tick > 1
            self._kick_pending = False
            k.advance(s.x, s.v, s.f, s.img, s.n_own, kick, self._dtf, self.dt, self.box, s.x0,
                      limit2, jump2, tick)
            if tick == size:
                k.queue_flags()
            self._compute_forces(first + tick - 1, tick)
        moved, jumped = k.displacement_flags()
        self._stats["batches"] += 1
        t1 = time.perf_counter()
        # integrate and force time of queued steps are one device queue: counted as force
        self._timers["force"] += t1 - t0
        if not moved:
            self._end_step(first + size - 1)
            self._timers["integrate"] += time.perf_counter() - t1
            return
        step = first + moved - 1
        self.steps_done = step - 1  # the steps before it are complete
        if jumped:
            self._raise_jump()
        self._rebuild()
        self._build_interval, self._built_at = step - self._built_at, step
        t2 = time.perf_counter()
        self._compute_forces(step)
        t3 = time.perf_counter()
        self._end_step(step)
        self._timers["neighbor"] += t2 - t1
        self._timers["force"] += t3 - t2
        self._timers["integrate"] += time.perf_counter() - t3

    def _batch_size(self, remaining: int) -> int:
        """Steps to queue before the next flag read: at most ``remaining``, none past the next
        thermo or output step, and the steps the last list interval suggests are left before
        the next rebuild. A step queued past the rebuild costs two launches that return at
        once; a read before it costs a drained device (64,000 atoms on an H200: about 15 us,
        as much as three such launches), so the guess is not shortened. Past the expected
        rebuild the batches grow again by a quarter of the overdue steps."""
        cap = min(remaining, MAX_BATCH, self._steps_to_observation())
        since = self.steps_done - self._built_at
        left = self._build_interval - since
        return max(1, min(cap, left if left > 0 else since // 4))

    def _steps_to_observation(self) -> int:
        """Steps from now to the next thermo or output step (that step included)."""
        every = [self.thermo_every]
        if self.output_dir is not None and self.output_every > 0:
            every.append(self.output_every)
        return min(e - self.steps_done % e for e in every)

    def _end_step(self, step: int) -> None:
        """Mark ``step`` done (its second half kick deferred) and observe it if due."""
        self.steps_done = step
        self._kick_pending = True
        if self._observed(step):
            self._finish_kick()
            self._after_step()

    def _finish_kick(self) -> None:
        """Apply a deferred second half kick (velocities become those of ``steps_done``)."""
        if self._kick_pending:
            self._kick_pending = False
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
        progress = progress and self.rank == 0
        self._echo = progress
        if progress:
            print(header())
            if self._thermo and self._thermo[-1]["step"] == self.steps_done:
                print(format_row(self._thermo[-1]))
            sys.stdout.flush()
        t0 = time.perf_counter()
        try:
            self.step(steps)
        finally:
            self._echo = False
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

    # --- observation ------------------------------------------------------------------------
    def _gather(self, per_slab: list[np.ndarray], width: int = 0) -> np.ndarray:
        """Global array in atom-id order from per-slab rows (collective under MPI)."""
        shape = (self.n_atoms, width) if width else (self.n_atoms,)
        per_slab = [np.asarray(s.kernels.to_host(a))
                    for s, a in zip(self.slabs, per_slab, strict=True)]
        out = np.empty(shape, dtype=per_slab[0].dtype if per_slab else np.float64)
        if self._comm is not None:
            ids = np.concatenate([self.slab_ids(s)[: s.n_own] for s in self.slabs])
            vals = np.concatenate([a[: s.n_own] for s, a in zip(self.slabs, per_slab,
                                                                 strict=True)])
            all_ids, all_vals = self.exchange.allgather_rows(ids, vals)  # type: ignore[union-attr]
            out[all_ids] = all_vals
            return out
        for s, arr in zip(self.slabs, per_slab, strict=True):
            out[self.slab_ids(s)[: s.n_own]] = arr[: s.n_own]
        return out

    def _record_thermo(self) -> None:
        pe = self._gather([s.pe for s in self.slabs])
        vir = self._gather([s.vir for s in self.slabs])
        mv2 = self._gather([s.kernels.kinetic_per_atom(s.v, s.n_own, self.mass)
                            for s in self.slabs])
        rec = thermo_record(self.steps_done, pe, vir, mv2, self.volume)
        self._thermo.append(rec)
        if self._writer is not None:  # before the file opens, records wait in self._thermo
            self._write_observables(rec)
        if self._echo:
            print(format_row(rec))
            sys.stdout.flush()

    def _write_observables(self, rec: dict[str, Any]) -> None:
        self._writer.write_observables(rec["step"], rec["step"] * self.dt, {
            "temperature": rec["temp"], "potential_energy": rec["pe"],
            "kinetic_energy": rec["ke"], "total_energy": rec["etotal"],
            "pressure": rec["press"]})

    def _open_writer(self) -> Any:
        # opened at the first write of a run, never at construction: a refused run must leave
        # its output directory untouched
        if self._writer is None:
            from simsplit.md.h5md import H5MDWriter

            assert self.output_dir is not None
            self._writer = H5MDWriter(self.output_dir / TRAJECTORY_NAME, self.n_atoms,
                                      self.box, dtype=self.dtype,
                                      resume_step=self._resume_step)
            for rec in self._thermo:  # recorded before the file existed (step 0 at least)
                self._write_observables(rec)
        return self._writer

    def _write_frame(self) -> None:
        if self._last_frame == self.steps_done:
            return
        self._last_frame = self.steps_done
        x, v, img = self.positions(), self.velocities(), self.images()  # collective
        if self.rank != 0:
            return
        self._open_writer().write_frame(self.steps_done, self.steps_done * self.dt, x, v,
                                        img.astype(np.int32))

    def synchronize(self) -> None:
        """Wait for queued device work (CPU kernels are synchronous: nothing to do)."""
        for k in self.kernel_sets:
            k.synchronize()

    def mlups_cells(self) -> int:
        """Work items per step for rate reports: atoms (rates are atom-steps per second)."""
        return self.n_atoms

    def attach_output(self, sim: Any, directory: Path, out: dict[str, Any]) -> None:
        """Hook for :func:`simsplit.output.attach_output`: frames and thermo already go to
        ``<dir>/trajectory.h5md`` from :meth:`step`; add the final frame and close at the end."""
        from simsplit.simulation import Operation

        self.output_dir = Path(directory)
        self.output_every = int(out.get("every") or 0)

        def finish(_: Any) -> None:
            self._write_frame()
            self.close()

        sim.attach(Operation("h5md", 0, finish, at_end=True))

    def close(self) -> None:
        """Close the trajectory file, if one is open (call once, at the very end)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._resume_step = self.steps_done  # a later run continues the same file

    def thermo(self) -> list[dict[str, Any]]:
        """Thermo records so far: dicts with step, temp, pe, ke, etotal, press (per atom)."""
        return [dict(r) for r in self._thermo]

    def positions(self) -> np.ndarray:
        """Wrapped positions ``(N, 3)`` in atom-id order."""
        return self._gather([s.x for s in self.slabs], 3)

    def velocities(self) -> np.ndarray:
        """Velocities ``(N, 3)`` in atom-id order."""
        return self._gather([s.v for s in self.slabs], 3)

    def forces(self) -> np.ndarray:
        """Forces of the current step ``(N, 3)`` in atom-id order (Langevin terms included)."""
        return self._gather([s.f for s in self.slabs], 3)

    def images(self) -> np.ndarray:
        """Periodic image counts ``(N, 3)``: unwrapped = positions + images * box."""
        return self._gather([s.img for s in self.slabs], 3)

    def per_atom_energy(self) -> np.ndarray:
        """Potential energy of each atom (half of each of its pairs), atom-id order."""
        return self._gather([s.pe for s in self.slabs])

    def per_atom_virial(self) -> np.ndarray:
        """Half of ``r . f`` of each of the atom's pairs, atom-id order."""
        return self._gather([s.vir for s in self.slabs])

    def stats(self) -> dict[str, Any]:
        """Counters: neighbour rebuilds, migrated atoms, capacity growths, current layout
        (collective under MPI: migrations, ghosts and atoms per slab are over all ranks;
        messages and phase times are this rank's)."""
        out: dict[str, Any] = dict(self._stats)
        out["neighbor_capacity"] = self.capacity
        out["ghosts"] = sum(s.n_ghost for s in self.slabs)
        out["atoms_per_slab"] = [s.n_own for s in self.slabs]
        if self._comm is not None:
            out["migrations"] = int(self._comm.allreduce(int(out["migrations"])))
            out["ghosts"] = int(self._comm.allreduce(int(out["ghosts"])))
            out["atoms_per_slab"] = [n for part in self._comm.allgather(out["atoms_per_slab"])
                                     for n in part]
        out["slab_edges"] = self.layout.edges.tolist()
        #: how this process refreshes ghosts between rebuilds on GPUs (see GhostLink.mode)
        out["ghost_transfer"] = sorted({link.mode for link in self._links.values()})
        out["messages"] = self.exchange.messages
        out.update(self._last_run)
        out.update({f"time_{k}": v for k, v in self._timers.items()})
        return out

    # --- checkpointing ----------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """Everything needed to continue bit for bit, as NumPy arrays in atom-id order
        (collective under MPI: every rank gets the global arrays)."""
        return {
            "ids": np.arange(self.n_atoms, dtype=np.int64),
            "positions": self.positions(),
            "velocities": self.velocities(),
            "forces": self.forces(),
            "images": self.images(),
            # positions at the last list build: lists are in cell order at that build, so a
            # restart must rebuild from them (and keep the rebuild schedule) to continue bitwise
            "build_positions": self._gather([s.x0 for s in self.slabs], 3),
            "box": self.box.copy(),
            "step": np.array(self.steps_done, dtype=np.int64),
            "time": np.array(self.steps_done * self.dt),
            # the Langevin noise is a pure function of (noise_seed, step, atom id)
            "noise_seed": np.array(self.noise_seed, dtype=np.int64),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Replace the atoms by a :meth:`state` snapshot (any split may have written it)."""
        pos = np.asarray(state["positions"])
        if pos.shape != (self.n_atoms, 3):
            raise ValueError(f"state has positions of shape {pos.shape}, this case has "
                             f"({self.n_atoms}, 3)")
        ids = np.asarray(state.get("ids", np.arange(self.n_atoms)), dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        if not np.array_equal(ids[order], np.arange(self.n_atoms)):
            raise ValueError("state ids must be a permutation of 0 .. N-1")
        if "box" in state and not np.array_equal(np.asarray(state["box"]), self.box):
            raise ValueError(f"state box {np.asarray(state['box']).tolist()} differs from "
                             f"the case box {self.box.tolist()}")
        x = pos[order]
        v = np.asarray(state["velocities"])[order]
        img = np.asarray(state.get("images", np.zeros((self.n_atoms, 3))))[order]
        if "noise_seed" in state:
            self.noise_seed = int(state["noise_seed"])
        self.steps_done = int(state["step"])
        self._built_at = self.steps_done  # lists are rebuilt from the state below
        self._resume_step = self.steps_done  # a trajectory file already there continues
        self._thermo = [r for r in self._thermo if r["step"] < self.steps_done]
        # a no-op on state() output (already wrapped); wraps hand-made snapshots
        x, shift = _wrap(np.asarray(x, dtype=np.float64), self.box)
        built = None
        if "build_positions" in state:
            built = np.asarray(state["build_positions"], dtype=np.float64)[order]
            if built.shape != pos.shape:
                raise ValueError(f"state has build_positions of shape {built.shape}, "
                                 f"expected {pos.shape}")
        self._distribute(x, v, np.asarray(img, np.int64) + shift, built)
        self._compute_forces(self.steps_done)
        if "forces" in state:
            f = np.asarray(state["forces"])[order]
            for s in self.slabs:
                s.f = s.kernels.to_device(f[self.slab_ids(s)[: s.n_own]].astype(self.dtype))
        if self.steps_done % self.thermo_every == 0:
            self._record_thermo()
        self._frame_pending = True  # this step's frame, if due and not in the file already
