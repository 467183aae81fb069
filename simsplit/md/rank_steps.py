"""Stepping of one slab per MPI rank on a GPU (:class:`~simsplit.md.rank_slab.RankSlab`): the
ghost exchange of a step overlapped with the interior rows' forces.

A part of :class:`~simsplit.md.solver.MDSolver` (which inherits it): the method reads the
solver's slab, its rank slab, timers and force launches.
"""

from __future__ import annotations

import functools
import time

from simsplit.md.rank_slab import RankSlab


class RankSteps:
    """The step of an MD solver whose slab is a :class:`RankSlab`."""

    def _step_rank(self) -> None:
        """One step of this rank's slab on a GPU (:class:`RankSlab`): the ghost positions and
        the displacement flags download while the interior rows' forces run, then travel;
        the boundary rows' forces follow the ghosts (or a rebuild, agreed over the ranks,
        recomputes every force)."""
        rs, s = self.arena, self.slabs[0]
        assert isinstance(rs, RankSlab)
        step = self.steps_done + 1
        t0 = time.perf_counter()
        self._advance(step)
        rs.start_step()
        r0, r1 = rs.interior
        # skipped on the device if this rank's own check asks for a rebuild, which recomputes
        # them: the GPU is then free for the rebuild's first kernels
        self._pair_forces(s, rows=(r0, r1), unless_moved=True)
        rs.interior_queued()
        t1 = time.perf_counter()
        moved, jumped = rs.trade_step(self._any_rank)
        t2 = time.perf_counter()
        self._timers["comm"] += t2 - t1
        if moved or self.skin <= 0.0:
            if jumped:
                self._raise_jump()  # the failing rank aborts the job
            # every row's forces queued behind the new lists before the host waits for them
            self._rebuild(then=functools.partial(self._pair_forces, s))
            self._build_interval, self._built_at = step - self._built_at, step
            t3 = time.perf_counter()
            self._timers["neighbor"] += t3 - t2
        else:
            rs.land_ghosts()
            t3 = time.perf_counter()
            self._timers["comm"] += t3 - t2
            self._pair_forces(s, rows=(0, r0))
            self._pair_forces(s, rows=(r1, s.n_own))
        self._langevin_forces(step)
        self.exchange.flush()  # type: ignore[union-attr]  # this step's sends are done
        t4 = time.perf_counter()
        self._timers["force"] += (t4 - t3) + (t1 - t0)
        self._end_step(step)
        self._timers["integrate"] += time.perf_counter() - t4
