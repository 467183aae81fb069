"""Batched stepping of one slab on a GPU: several steps queued per displacement-flag read
(also one slab per MPI rank whose ghosts travel by device links, :mod:`simsplit.md.rank_links`).

A part of :class:`~simsplit.md.solver.MDSolver` (which inherits it): the methods read the
solver's slab, kernel set, timers, thermo and output intervals.
"""

from __future__ import annotations

import time

#: Most steps one slab on a GPU queues before it reads the displacement flags (see
#: :meth:`BatchedSteps._step_batch`): enough to hide the host's launch and wait time between
#: rebuilds, which at 64,000 atoms on an H200 is most of a step.
MAX_BATCH = 64


class BatchedSteps:
    """The batched steps of an MD solver with one slab on a GPU."""

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
        linked = self._comm is not None  # rank slabs: the ghosts travel by device links
        if linked:
            self.arena.begin_batch()
        t0 = time.perf_counter()
        for tick in range(1, size + 1):
            kick, dtf = self._drift_kick(self._kick_pending or tick > 1, tick)
            self._kick_pending = False
            k.advance(s.x, s.v, s.f, s.img, s.n_own, kick, dtf, self.dt, self.box, s.x0,
                      limit2, jump2, tick, **self._ghost_copies(s))
            if linked:
                self._linked_forces(first + tick - 1, tick, tick == size)
                continue
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
        if linked:
            self.exchange.flush()  # the rebuild's sends are done
        self._build_interval, self._built_at = step - self._built_at, step
        t2 = time.perf_counter()
        self._compute_forces(step)
        t3 = time.perf_counter()
        self._end_step(step)
        self._timers["neighbor"] += t2 - t1
        self._timers["force"] += t3 - t2
        self._timers["integrate"] += time.perf_counter() - t3

    def _linked_forces(self, step: int, tick: int, last: bool) -> None:
        """Batch step ``tick``'s ghost exchange and forces on a rank slab with device links:
        packs for the neighbours, the interior rows' forces (their lists hold no ghost), the
        neighbours' packs landed, then the other rows'. The flags are read after the last
        landing, which merges the neighbours' rebuild ticks."""
        rs, s = self.arena, self.slabs[0]
        rs.pack_linked()
        r0, r1 = rs.interior
        self._pair_forces(s, tick, rows=(r0, r1))
        rs.land_linked()
        if last:
            self.kernels.queue_flags()
        self._pair_forces(s, tick, rows=(0, r0))
        self._pair_forces(s, tick, rows=(r1, s.n_own))
        self._langevin_forces(step, tick)

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

    def _linked_batch_size(self, size: int) -> int:
        """A batch of linked rank-slab steps that stops short of the step the last list
        interval expects to rebuild; 0: take that step (and any later one until the rebuild)
        through the host (:meth:`RankSteps._step_rank`). A batch ends in a drained device,
        which leaves the GPU idle while the host plans a rebuild (1 ms of launches and
        messages a rebuild at 1M atoms); the host step starts the rebuild beside its interior
        forces instead (H200, 2 ranks: 3.2 against 3.9 ms a rebuild)."""
        left = self._build_interval - (self.steps_done - self._built_at)
        return 0 if left <= 1 else min(size, left - 1)

    def _steps_to_observation(self) -> int:
        """Steps from now to the next thermo or output step (that step included)."""
        every = [self.thermo_every]
        if self.output_dir is not None and self.output_every > 0:
            every.append(self.output_every)
        return min(e - self.steps_done % e for e in every)
