"""Lattice Boltzmann (D2Q9 in 2D, D3Q19 in 3D) on a slab decomposition: set-up, time loop,
global fields. Slabs are cut along the last grid axis (y in 2D, z in 3D).

The solver owns the blocks of this process and drives them through a transport; it does not
know which device or transport it runs on, and the blocks do not know there are others.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import Any

import numpy as np

from simsplit.backends.base import USABLE_MEMORY_FRACTION
from simsplit.decomp.balance import BalanceError, BalanceSettings
from simsplit.decomp.balancer import LoadBalancer
from simsplit.decomp.placement import Placement
from simsplit.decomp.slabs import (
    HIGH,
    LOW,
    MIN_SLAB_ROWS,
    DecompositionError,
    SlabDecomposition,
)
from simsplit.errors import CaseError
from simsplit.fluid.block import Face, SlabBlock, make_block
from simsplit.fluid.deep_halo import edge_ranges
from simsplit.fluid.health import check_blocks
from simsplit.fluid.pairs import PairSweeps
from simsplit.fluid.setup import fluid_bytes, setup_from_case, throttle_from_case
from simsplit.fluid.state import load_state, save_state
from simsplit.gpu.timing import PhaseTimer, SlabClock
from simsplit.transport.base import finish_exchange, start_exchange

#: steps recorded in one CUDA graph; a multiple of four, so that every buffer swap is undone by
#: the next also when steps go two per sweep (one swap per two steps)
GRAPH_STEPS = 32


class FluidSolver:
    """All slabs of one lattice Boltzmann run that live in this process, and their time loop."""

    def __init__(self, case: dict[str, Any], context: Placement) -> None:
        self.case, self.context = case, context
        self.setup = setup_from_case(case)
        dec = case["decomposition"]
        self.decomposition = self._decompose(dec.get("weights"))
        n = len(self.decomposition)
        self.transport = context.transport(self.decomposition.links(), n)
        self.blocks: dict[int, SlabBlock] = {}
        self.steps_done = 0
        self._build_blocks()
        _ = self._blocks_pair  # collective: decided while every rank is here
        #: f_src arrays whose ghost planes hold the neighbours' current planes: the inner one
        #: (after an overlapped step or a pair), both (after a pair, depth-2 blocks)
        self._fresh_src: list[Any] | None = None
        self._fresh_deep: list[Any] | None = None
        self._u_prev: dict[int, tuple[Any, Any]] | None = None
        #: per-slab update seconds for load balancing; also applies the test throttle
        self.slab_clock = SlabClock(throttle_from_case(case["run"].get("debug_throttle"), n))
        try:
            settings = BalanceSettings.from_case(dec.get("balance"))
        except BalanceError as exc:
            raise CaseError(str(exc)) from None
        self.balancer = LoadBalancer(settings) if settings is not None else None
        if (u0 := self.setup.initial_velocity()) is not None:
            self.set_fields(np.ones(self.setup.grid), u0)

    def _decompose(self, weights: list[float] | None) -> SlabDecomposition:
        s = self.setup
        try:
            return SlabDecomposition(s.split_size, int(self.case["decomposition"]["subdomains"]),
                                     weights, s.periodic_split, MIN_SLAB_ROWS)
        except DecompositionError as exc:
            raise DecompositionError(f"decomposition.subdomains: {exc}") from None

    def _build_blocks(self) -> None:
        s = self.setup
        # two ghost planes a halo face where steps may go two per sweep (the blocks whose
        # kernels cannot keep one)
        depth = 2 if self.case["run"].get("temporal_blocking", True) else 1
        for k in self.context.local_slabs(len(self.decomposition)):
            slab = self.decomposition.slabs[k]
            faces = tuple(self._face_kind(slab.neighbours[f], f) for f in (LOW, HIGH))
            self.blocks[k] = make_block(self.context.backend_for(k), s.lattice, s.grid[1:],
                                        slab.size, slab.start, faces,
                                        s.params_at(self.steps_done + 1), s.dtype, s.storage,
                                        s.streaming, ghost_depth=depth, geometry=s.geometry)

    def _halos_stay_on_one_device(self) -> bool:
        """Every slab lives in this process on one device: the pair sweeps then fill each
        other's ghost planes directly (else through the transport, :mod:`.pairs`)."""
        n = len(self.decomposition)
        local = self.context.local_slabs(n)
        return (self.context.size == 1 and len(local) == n
                and len({self.context.device_of(k) for k in local}) == 1)

    @cached_property
    def _pairs(self) -> PairSweeps:
        return PairSweeps(self.blocks, self._halo_keys, self.decomposition.links(),
                          self.transport, self.timer, self._halos_stay_on_one_device())

    def _face_kind(self, neighbour: int | None, face: int) -> Face:
        if neighbour is not None:
            return Face.HALO
        if face == HIGH and self.setup.lid:
            return Face.LID
        return Face.SLIP if self.setup.slip else Face.WALL

    # --- time loop ------------------------------------------------------------------------------
    @cached_property
    def timer(self) -> PhaseTimer:
        """Seconds spent per phase of the time loop (see :mod:`simsplit.gpu.timing`)."""
        on_device = any(b.backend.is_device for b in self.blocks.values())
        mode = self.case["run"].get("timing")
        if mode == "device":
            backends = {b.backend.device: b.backend for b in self.blocks.values()}
            clocks = [c for c in (b.clock() for b in backends.values()) if c is not None]
            if clocks:
                return PhaseTimer(None, on_device, clocks)
        return PhaseTimer(self.synchronize if mode else None, on_device)

    @cached_property
    def _halo_keys(self) -> list[tuple[int, int]]:
        return [(k, f) for k, blk in self.blocks.items() for f in blk.halo_faces()]

    @cached_property
    def _row_plan(self) -> dict[int, tuple[list[tuple[int, int]], tuple[int, int] | None]]:
        return {k: self._row_ranges(blk) for k, blk in self.blocks.items()}

    def _start_exchange(self) -> Any:
        keys = self._halo_keys
        send = {key: self.blocks[key[0]].send[key[1]] for key in keys}
        recv = {key: self.blocks[key[0]].recv[key[1]] for key in keys}
        with self.timer.phase("exchange"):
            return start_exchange(self.transport, send, recv)

    def _finish_exchange(self, handle: Any) -> None:
        with self.timer.phase("wait"):
            finish_exchange(self.transport, handle)
        with self.timer.phase("pack"):
            for k, face in self._halo_keys:
                self.blocks[k].unpack(face)

    def exchange_halos(self) -> None:
        """Fill every ghost layer of ``f_src`` from the neighbouring slabs' ``f_src``."""
        with self.timer.phase("pack"):
            for k, face in self._halo_keys:
                self.blocks[k].pack(face)
        self._finish_exchange(self._start_exchange())

    def step(self, n: int = 1) -> None:
        """Advance ``n`` time steps; macroscopic fields are stored on the last one.

        With ``decomposition.balance`` the steps are cut at the balancer's probe boundaries,
        where it may move slab boundaries (which never changes the results).
        """
        bal = self.balancer
        while n > 0:
            m = n
            if bal is not None:
                bal.update(self.steps_done, self)
                m = bal.chunk(self.steps_done, n)
            self._step_chunk(m)
            n -= m
        if bal is not None:
            bal.update(self.steps_done, self)

    def _set_step_params(self) -> None:
        """Kernel parameters of the next step: the inflow's ramp-up (else the same params)."""
        for blk in self.blocks.values():
            blk.params = self.setup.params_at(self.steps_done + 1)

    def _step_chunk(self, n: int) -> None:
        overlap = bool(self.case["run"].get("overlap", True))
        self._set_step_params()
        pairs = self._pairs_allowed()
        if pairs and n >= 2 and self._halo_keys:
            if not self._ghosts_current(self._fresh_deep):
                self._pairs.fill()
        elif overlap and not self._ghosts_current(self._fresh_src):
            self.exchange_halos()
        graph = self._graph(overlap) if n > GRAPH_STEPS else None
        paired = False
        while graph is not None and n > GRAPH_STEPS:  # the last step stays out: it stores macros
            graph.replay()
            n -= GRAPH_STEPS
            self.steps_done += GRAPH_STEPS
            paired = pairs
        done = 0
        while done < n:
            k = 2 if pairs and n - done >= 2 else 1
            self.context.check_fault(self.steps_done + 1)
            self._set_step_params()
            self._advance(overlap, last=done + k == n, steps=k)
            self.slab_clock.lap()
            self.steps_done += k
            done += k
            paired = k == 2
        # after an overlapped step the ghosts of f_src already hold the neighbours' new rows;
        # after a pair, both ghost planes of depth-2 blocks do
        fresh = [b.f_src for b in self.blocks.values()]
        self._fresh_src = fresh if overlap or paired else None
        self._fresh_deep = fresh if paired else None

    def refresh_ghosts(self) -> None:
        """Make the ghost planes of every ``f_src`` hold the neighbours' current planes (as
        they do already after an overlapped step) for readers of post-collision populations."""
        if self._halo_keys and not self._ghosts_current(self._fresh_src):
            self.exchange_halos()
            self._fresh_src = [b.f_src for b in self.blocks.values()]

    def _pairs_allowed(self) -> bool:
        """Whether steps go two per sweep (run.temporal_blocking): every block of every rank
        can (:attr:`_blocks_pair`) and nothing has to see each step (per-slab clocks, the
        throttle)."""
        return (self._blocks_pair and not self.slab_clock.running
                and self.slab_clock.throttle is None)

    @cached_property
    def _blocks_pair(self) -> bool:
        """Every block of every rank takes two steps per sweep (SlabBlock.fuses_two_steps: no
        halo face, or two ghost planes at each) and no rank injects a fault. Collective (the
        ranks must agree: their halo exchanges pair up), so evaluated where every rank is: at
        set-up and after a resplit."""
        ok = (bool(self.case["run"].get("temporal_blocking", True))
              and not self.context.has_fault
              and all(b.fuses_two_steps() for b in self.blocks.values()))
        return self.transport.allreduce_max(0.0 if ok else 1.0) == 0.0

    @property
    def steps_per_sweep(self) -> int:
        """Time steps each kernel sweep takes now: 2 where :meth:`_pairs_allowed`, else 1."""
        return 2 if self._pairs_allowed() else 1

    def _advance(self, overlap: bool, last: bool, steps: int = 1) -> None:
        """``steps`` (1, or 2 where :meth:`_pairs_allowed`) time steps of every block."""
        if steps == 2:
            self._pairs.advance(last, overlap)
            return
        if overlap:
            self._step_overlapped(last)
            return
        self.exchange_halos()
        with self.timer.phase("compute"):
            for k, blk in self.blocks.items():
                self._compute(k, blk, None, last)
        for blk in self.blocks.values():
            blk.swap()

    def _compute(self, k: int, blk: SlabBlock, rows: tuple[int, int] | None,
                 last: bool) -> None:
        """One stream-collide launch of slab ``k``, through the slab clock when it times it."""
        if not self.slab_clock.times(k):
            blk.stream_collide(rows, store_macro=last)
            return
        sync = blk.backend.synchronize if blk.backend.is_device else None
        with self.slab_clock.update(k, sync):
            blk.stream_collide(rows, store_macro=last)

    def _graph(self, overlap: bool) -> Any:
        """A CUDA graph of GRAPH_STEPS steps for the current buffers, or None where not usable.

        Graphs need every block on one graph-capable device in this process, and are skipped
        when per-phase timing, per-slab clocks or fault injection must see each step from
        Python.
        """
        backends = {id(b.backend): b.backend for b in self.blocks.values()}
        if (len(backends) != 1 or self.context.size != 1 or self.case["run"].get("timing")
                or self.setup.ramping(self.steps_done + 1) or self.context.has_fault
                or self.slab_clock.running or self.slab_clock.throttle is not None):
            return None
        backend = next(iter(backends.values()))
        if not backend.has_graphs:
            return None
        backend.reserve_lanes(len(self.blocks))  # streams are made outside the capture
        key = (overlap, tuple(id(b.f_src) for b in self.blocks.values()))
        graphs = self.__dict__.setdefault("_graphs", {})
        if key not in graphs:
            def record() -> None:
                k = 2 if self._pairs_allowed() else 1  # GRAPH_STEPS / 2 even: swaps undone
                for _ in range(GRAPH_STEPS // k):
                    self._advance(overlap, last=False, steps=k)

            buffers = [(b.f_src, b.f_dst) for b in self.blocks.values()]
            try:
                graphs[key] = backend.capture(record)
            except Exception as exc:  # e.g. a transport that cannot be captured: step directly
                for b, (src, dst) in zip(self.blocks.values(), buffers, strict=True):
                    b.f_src, b.f_dst = src, dst  # capture ran no kernel: undo its swaps
                warnings.warn(f"CUDA graph capture failed ({exc}); stepping without graphs",
                              stacklevel=3)
                graphs[key] = None
        return graphs[key]

    def _ghosts_current(self, fresh: list[Any] | None) -> bool:
        return fresh is not None and len(fresh) == len(self.blocks) and all(
            a is b.f_src for a, b in zip(fresh, self.blocks.values(), strict=True))

    @staticmethod
    def _row_ranges(blk: SlabBlock) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
        """(layers next to halo faces, the other layers or None) of a block, 1-based ``[a, b)``
        (deep halos send two planes a face)."""
        return edge_ranges(blk.layers, blk.halo_faces(), 2 if blk.deep_halo else 1)

    def _step_overlapped(self, last: bool) -> None:
        # Pull streaming reads the ghosts of f_src, so the halo that step n+1 needs is this
        # step's f_dst face rows: compute those first, send them while the interior is computed,
        # and unpack into f_dst's ghost rows, which become f_src's after the swap.
        plan = self._row_plan
        with self.timer.phase("compute"):
            for k, blk in self.blocks.items():
                for rows in plan[k][0]:
                    self._compute(k, blk, rows, last)
        with self.timer.phase("pack"):
            for k, face in self._halo_keys:
                blk = self.blocks[k]
                blk.swap()  # pack() reads f_src: point it at the rows just computed
                blk.pack(face)
                blk.swap()
        handle = self._start_exchange()
        with self.timer.phase("compute"):
            for k, blk in self.blocks.items():
                if plan[k][1] is not None:
                    self._compute(k, blk, plan[k][1], last)
        for blk in self.blocks.values():
            blk.swap()
        self._finish_exchange(handle)

    def synchronize(self) -> None:
        for blk in self.blocks.values():
            blk.backend.synchronize()

    # --- convergence and health ----------------------------------------------------------
    def residual(self) -> float:
        """Relative change of velocity since the previous call: max|u - u_prev| / max|u|.

        Max-norms are exact under any reduction order, so every split stops on the same step.
        """
        diff = umax = 0.0
        prev = self._u_prev or {}
        new_prev = {}
        for k, blk in self.blocks.items():
            be = blk.backend
            umax = max(umax, *(be.max_abs(u) for u in blk.u))
            if k in prev:
                diff = max(diff, *(be.max_abs_diff(u, p) for u, p in zip(blk.u, prev[k],
                                                                          strict=True)))
            new_prev[k] = tuple(be.clone(u) for u in blk.u)
        first = self._u_prev is None
        self._u_prev = new_prev
        diff = self.transport.allreduce_max(diff)
        umax = self.transport.allreduce_max(umax)
        if first:
            return float("inf")
        return diff / umax if umax > 0 else (0.0 if diff == 0 else float("inf"))

    def check_health(self) -> None:
        """Raise :class:`DivergenceError` naming the step, slab and cell of the first bad value."""
        check_blocks(self.blocks, self.steps_done)

    # --- load balance (the interface of simsplit.decomp.balancer.LoadBalancer) ---------------
    def slab_layers(self) -> list[int]:
        return self.decomposition.sizes()

    def layer_cells(self) -> int:
        return int(np.prod(self.setup.grid[1:]))

    def balance_limits(self) -> tuple[int, int, bool]:
        """(layers to split, fewest layers per slab, whether slabs update concurrently)."""
        n = len(self.decomposition)
        own_devices = self.context.on_gpu and len({self.context.device_of(k)
                                                    for k in range(n)}) == n
        concurrent = self.context.size > 1 or (own_devices and self.slab_clock.throttle is None)
        return self.setup.split_size, MIN_SLAB_ROWS, concurrent

    def set_slab_clock(self, on: bool) -> None:
        if on:
            self.slab_clock.start()
        else:
            self.slab_clock.stop()

    def slab_step_seconds(self) -> list[float]:
        """Median update seconds per step of every slab (collective under MPI)."""
        clock = self.slab_clock
        got = self.transport.gather({k: np.array([clock.step_seconds(k)]) for k in self.blocks})
        return [float(got[k][0]) for k in range(len(self.decomposition))]

    def reduce_max(self, value: float) -> float:
        return self.transport.allreduce_max(value)

    def barrier(self) -> None:
        self.synchronize()
        self.transport.barrier()

    def split_fits(self, weights: list[float]) -> bool:
        """Whether each GPU has room for what its slabs would grow by (collective: every rank
        gets the same answer). Host memory is not checked: in one process the total is the
        same, and ranks' slabs change by at most what the faster ones can take."""
        short = 0.0
        if self.context.on_gpu:

            def slab_bytes(w: list[float]) -> list[int]:
                dec = {**self.case["decomposition"], "weights": w}
                return fluid_bytes({**self.case, "decomposition": dec})

            new, old = slab_bytes(weights), slab_bytes([float(n) for n in self.slab_layers()])
            grow: dict[int, int] = {}
            free: dict[int, int] = {}
            for k in self.blocks:
                dev = self.context.device_of(k)
                grow[dev] = grow.get(dev, 0) + new[k] - old[k]
                free[dev] = self.context.backend_for(k).memory_free()
            short = float(any(g > USABLE_MEMORY_FRACTION * free[d] for d, g in grow.items()))
        return self.transport.allreduce_max(short) == 0.0

    def resplit(self, weights: list[float]) -> None:
        """Move slab boundaries to ``weights``: gather the global state, rebuild this process's
        blocks and scatter it back (collective). Results stay bitwise the same."""
        state = save_state(self)
        self.blocks, self._fresh_src, self._fresh_deep = {}, None, None  # free before allocating
        for name in ("_halo_keys", "_row_plan", "_graphs", "_pairs", "_blocks_pair"):
            self.__dict__.pop(name, None)
        self.decomposition = self._decompose(weights)
        self._build_blocks()
        _ = self._blocks_pair  # collective: decided while every rank is here
        load_state(self, state, self.steps_done)

    def balance_report(self) -> dict[str, Any] | None:
        """The chosen split and what was measured (None without ``decomposition.balance``)."""
        return self.balancer.report() if self.balancer is not None else None

    # --- global fields ---------------------------------------------------------------------
    def _gather(self, pick) -> np.ndarray:
        pieces = {k: pick(blk) for k, blk in self.blocks.items()}
        allp = self.transport.gather(pieces)
        return np.concatenate([allp[k] for k in range(len(self.decomposition))], axis=0)

    def density(self) -> np.ndarray:
        return self._gather(lambda b: b.backend.to_host(b.rho))

    def velocity(self) -> np.ndarray:
        """Global velocity ``(ny, nx, 2)`` or ``(nz, ny, nx, 3)`` in units of the lid speed."""
        scale = self.setup.velocity_scale
        return self._gather(
            lambda b: np.stack([b.backend.to_host(u) for u in b.u], axis=-1) / scale
        )

    def populations(self) -> np.ndarray:
        """Global post-collision populations ``(q, *grid)`` (for checkpoints)."""
        return np.moveaxis(np.concatenate(
            [p for _, p in sorted(self.transport.gather(
                {k: np.moveaxis(b.populations(), 0, 1) for k, b in self.blocks.items()}
            ).items())], axis=0), 1, 0)

    def set_fields(self, rho: np.ndarray, u: np.ndarray) -> None:
        """Start from the equilibrium of global ``rho`` (grid) and ``u`` (grid + (dim,)), given
        in lattice units; every slab takes its layers."""
        f = self.setup.lattice.equilibrium(rho, *np.moveaxis(np.asarray(u, np.float64), -1, 0))
        for blk in self.blocks.values():
            blk.set_populations(f[:, blk.layer0:blk.layer0 + blk.layers])
        self._fresh_src = self._fresh_deep = None

    def mlups_cells(self) -> int:
        return int(np.prod(self.setup.shape))
